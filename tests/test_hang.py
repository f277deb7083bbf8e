"""The hang policy of `launch --hang-timeout` (jobs/supervise.py): what the command line may say, and how a detached
job's supervisor is given the same policy. The policy at work on a real job: tests/cluster/test_stacks_hosts.py."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import UsageError
from ascendctl.jobs.supervise import HangPolicy, hang_policy
from ascendctl.triage.extract import PROGRESS_RX


def test_no_hang_timeout_is_no_policy_and_its_companions_need_it() -> None:
    assert hang_policy(None) is None
    with pytest.raises(UsageError, match="need --hang-timeout"):
        hang_policy(None, "report")
    with pytest.raises(UsageError, match="need --hang-timeout"):
        hang_policy(None, progress=r"it (\d+)")
    with pytest.raises(UsageError, match="expected stop or report"):
        hang_policy(5, "pause")
    with pytest.raises(UsageError, match="not a regular expression"):
        hang_policy(5, progress="step (")


def test_the_policy_reads_progress_as_triage_does_unless_told_otherwise() -> None:
    policy = hang_policy(30.0)
    assert policy == HangPolicy(30.0, stop=True, progress=None) and policy.matcher() is PROGRESS_RX
    assert policy.matcher().search("rank 3: step 41 done") and not policy.matcher().search("loading shard 3 of 8")
    custom = hang_policy(30.0, "report", r"it=(\d+)")
    assert custom is not None and not custom.stop and custom.matcher().search("epoch 1 it=200 loss 1.2")


def test_a_detached_jobs_supervisor_is_given_the_same_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """launch --detach passes the policy as options of `ascendctl supervise`; they parse back to the same policy."""
    seen: dict[str, Any] = {}

    def fake_supervise_detached(job_id: str, **kwargs: Any) -> int:
        seen.update(kwargs, job=job_id)
        return 0

    monkeypatch.setattr("ascendctl.jobs.service.supervise_detached", fake_supervise_detached)
    policy = HangPolicy(12.5, stop=False, progress=r"iter (\d+)")
    result = CliRunner().invoke(app, ["supervise", "j1", *policy.to_argv()])
    assert result.exit_code == 0, result.output
    assert seen["job"] == "j1" and seen["hang"] == policy
