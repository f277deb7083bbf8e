"""The hang policy of `launch --hang-timeout` (jobs/supervise.py): what the command line may say, and how a detached
job's supervisor is given the same policy. The policy at work on a real job: tests/cluster/test_stacks_hosts.py."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import UsageError
from ascendctl.jobs.pace import (AUTO_FIRST_STEP, AUTO_FLOOR, CHECKPOINT_FACTOR, CHECKPOINT_RX, HangTimeout, Pace,
                                 parse_hang_timeout, percentile)
from ascendctl.jobs.supervise import HangPolicy, hang_policy
from ascendctl.triage.extract import PROGRESS_RX


def test_no_hang_timeout_is_no_policy_and_its_companions_need_it() -> None:
    assert hang_policy(None) is None
    with pytest.raises(UsageError, match="need --hang-timeout"):
        hang_policy(None, "report")
    with pytest.raises(UsageError, match="need --hang-timeout"):
        hang_policy(None, progress=r"it (\d+)")
    with pytest.raises(UsageError, match="expected stop or report"):
        hang_policy("5", "pause")
    with pytest.raises(UsageError, match="not a regular expression"):
        hang_policy("5", progress="step (")
    for bad in ("soon", "auto:x", "0.5", "auto:0", "5:3", "nan", "inf", ""):
        with pytest.raises(UsageError, match="--hang-timeout"):
            hang_policy(bad)


def test_the_policy_reads_progress_as_triage_does_unless_told_otherwise() -> None:
    policy = hang_policy("30")
    assert policy == HangPolicy(HangTimeout(30.0), stop=True, progress=None) and policy.matcher() is PROGRESS_RX
    assert policy.matcher().search("rank 3: step 41 done") and not policy.matcher().search("loading shard 3 of 8")
    custom = hang_policy("30", "report", r"it=(\d+)")
    assert custom is not None and not custom.stop and custom.matcher().search("epoch 1 it=200 loss 1.2")


def test_a_detached_jobs_supervisor_is_given_the_same_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """launch --detach passes the policy as options of `ascendctl supervise`; they parse back to the same policy."""
    seen: dict[str, Any] = {}

    def fake_supervise_detached(job_id: str, **kwargs: Any) -> int:
        seen.update(kwargs, job=job_id)
        return 0

    monkeypatch.setattr("ascendctl.jobs.service.supervise_detached", fake_supervise_detached)
    for policy in (HangPolicy(HangTimeout(12.5), stop=False, progress=r"iter (\d+)"), HangPolicy(HangTimeout(7, auto=True))):
        result = CliRunner().invoke(app, ["supervise", "j1", *policy.to_argv()])
        assert result.exit_code == 0, result.output
        assert seen["job"] == "j1" and seen["hang"] == policy


# -- the pace: fixed and learned allowances (times are given, not waited for) ------------------------------------------
def steps(pace: Pace, start: float, interval: float, first: int, count: int, ranks: int = 3) -> float:
    """`count` steps from number `first`, `interval` apart, each printed by every rank a little apart; the last time."""
    now = start
    for number in range(first, first + count):
        now += interval
        for rank in range(ranks):
            pace.progress(now + 0.01 * rank, number)
    return now


def test_hang_timeout_forms() -> None:
    assert parse_hang_timeout("600") == HangTimeout(600.0)
    assert parse_hang_timeout("auto") == HangTimeout(AUTO_FLOOR, auto=True)
    assert parse_hang_timeout(" auto:20 ") == HangTimeout(20.0, auto=True) and str(HangTimeout(20.0, True)) == "auto:20"
    assert str(HangTimeout(12.5)) == "12.5"


def test_a_fixed_timeout_is_longer_before_the_first_step() -> None:
    pace = Pace(HangTimeout(10), started=0.0)
    assert pace.allowance()[0] == 30.0 and pace.idle(25.0) == 25.0
    pace.progress(40.0, 1)
    assert pace.allowance()[0] == 10.0 and pace.idle(45.0) == 5.0


def test_auto_learns_the_step_interval_after_warm_up_and_ignores_ranks_repeating_a_step() -> None:
    pace = Pace(HangTimeout(2, auto=True), started=0.0)
    assert pace.allowance()[0] == AUTO_FIRST_STEP  # before the first step: its length is unknown
    pace.progress(90.0, 1)  # a slow first step (loading, compiling) never counted
    now = steps(pace, 90.0, 30.0, 2, 2)  # two slow warm-up steps: not learned
    assert len(pace.intervals) == 0 and pace.allowance()[0] == 2 * 5 * 30.0  # still learning: from the longest yet
    now = steps(pace, now, 1.0, 4, 20)
    seconds, how = pace.allowance()
    assert len(pace.intervals) == 20 and abs(seconds - 5.0) < 1e-6, (seconds, pace.intervals)
    assert "5 x the p99 step interval 1 s over 20 steps, floor 2 s" in how
    assert pace.step == 23 and pace.idle(now + 4.0) < seconds  # a steady job is never hung
    pace.progress(now + 0.5, 5)  # an old step number (a slow rank's line): no progress
    assert pace.idle(now + 4.0) == 4.0


def test_auto_has_a_floor_and_lines_without_a_number_are_merged_per_step() -> None:
    pace = Pace(HangTimeout(30, auto=True), started=0.0)
    now = 0.0
    for _ in range(12):
        now += 1.0
        pace.progress(now, None)
        pace.progress(now + 0.1, None)  # the same step printed by another rank
    assert len(pace.intervals) == 9 and all(abs(i - 1.0) < 1e-9 for i in pace.intervals)
    assert pace.allowance()[0] == 30.0  # 5 x 1 s is less than the floor


def test_a_checkpoint_save_stretches_the_allowance_until_the_next_step() -> None:
    pace = Pace(HangTimeout(2, auto=True), started=0.0)
    now = steps(pace, 0.0, 1.0, 1, 12)
    normal = pace.allowance()[0]
    assert CHECKPOINT_RX.search("[INFO] Saving checkpoint to /ckpt/step_12") and CHECKPOINT_RX.search("save_checkpoint(...)")
    assert not CHECKPOINT_RX.search("step 12 loss 1.2") and not CHECKPOINT_RX.search("loaded checkpoint from /ckpt")
    pace.checkpoint()
    seconds, how = pace.allowance()
    assert seconds == normal * CHECKPOINT_FACTOR and "while a checkpoint is saved" in how
    pace.progress(now + 30.0, 13)
    assert pace.allowance()[0] < seconds


def test_percentile_is_a_value_that_was_seen() -> None:
    assert percentile([1.0, 2.0, 3.0, 100.0], 99) == 100.0 and percentile([float(i) for i in range(1, 201)], 99) == 198.0


def test_auto_with_no_progress_line_at_all_says_it_cannot_judge_and_never_stops_the_job() -> None:
    """A job whose steps print nothing the watch reads (a progress bar on \\r): auto must not take its silence for a
    hang; a fixed timeout, which the user chose, still fires (x3 before the first step)."""
    import time

    from ascendctl.jobs.supervise import _Loop

    said: list[str] = []
    called: list[bool] = []
    for timeout, fires in ((HangTimeout(30, auto=True), False), (HangTimeout(30), True)):
        said.clear()
        called.clear()
        loop = _Loop(object(), object(), None, said.append, 3.0, ["n1"], hang=HangPolicy(timeout, stop=False),  # type: ignore[arg-type]
                     on_hang=lambda record, stopping: called.append(stopping) or record)
        assert loop.pace is not None
        loop.pace.started = time.monotonic() - 700  # past auto's 600 s before a first step, and 3 x 30 s
        loop.check_hang()
        loop.check_hang()  # once
        if fires:
            assert called == [False] and "a hang; taking every rank's stack" in said[0], said
        else:
            assert called == [] and len(said) == 1 and "cannot judge this job" in said[0], said
        loop.close()
