"""Restarts by policy (jobs/restart.py, `launch --restarts N`): the decision table, one row per case, and the loop over
attempts with a stand-in launch (the attempts' records are what a real launch records; the real thing on test hosts is
tests/adversarial/test_restarts_hosts.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
import time
from typing import Any

import pytest

from ascendctl.errors import ExitCode, UsageError
from ascendctl.inventory.load import load_inventory
from ascendctl.jobs.checkpoints import RESUME_ENV, ResumePoint
from ascendctl.jobs.plan import LaunchOptions
from ascendctl.jobs.record import FirstFailure, JobRecord, JobState, NodeJob
from ascendctl.jobs.restart import ATTEMPT_ENV, Decision, RestartPolicy, decide, run_with_restarts, spare_names
from ascendctl.jobs.service import LaunchOutcome
from ascendctl.triage.model import RankSummary, TriageReport

INVENTORY = ("defaults: {transport: local, slots: 1}\ngroups: {spares: 'n[05-06]'}\n"
             "nodes:\n  - {name: 'n[01-06]', host: '127.0.0.[1-6]'}\n")


def record(status: JobState, category: str | None = None, *, node: str | None = None, headline: str | None = None,
           confidence: str = "medium", lost: str | None = None, nodes: tuple[str, ...] = ("n01", "n02"),
           stopped_by: str | None = None, job: str = "j1") -> JobRecord:
    oom_kind = "host" if headline and "host memory" in headline else "device" if headline and "device memory" in headline else None
    failure = FirstFailure("why", node=node, category=category, headline=headline or category,
                           confidence=confidence, oom_kind=oom_kind) if category else None
    entries = tuple(NodeJob(n, n, i, "cmd", exit_code=None if n == lost else (0 if status == JobState.SUCCEEDED else 1),
                            error="unreachable: lost: nothing received for 10 s" if n == lost else None)
                    for i, n in enumerate(nodes))
    return JobRecord(job, "torchrun", "inv", ["t.py"], "10.0.0.1", 29500, "/tmp/l", entries, 0.0, status=status,
                     first_failure=failure, stopped_by=stopped_by)


@pytest.mark.parametrize("rec, decision, node", [
    (record(JobState.SUCCEEDED), Decision.DONE, None),
    (record(JobState.INTERRUPTED, stopped_by="SIGINT"), Decision.DONE, None),
    (record(JobState.STOPPED), Decision.DONE, None),
    (record(JobState.FAILED, lost="n02"), Decision.REPLACE, "n02"),
    (record(JobState.FAILED, "HARDWARE", node="n02"), Decision.REPLACE, "n02"),
    (record(JobState.FAILED, "HARDWARE"), Decision.RESTART, None),  # no node named: nothing to replace
    (record(JobState.FAILED, "OOM", node="n01", headline="OOM (host memory) on node n01, rank 0"), Decision.REPLACE, "n01"),
    (record(JobState.FAILED, "OOM", node="n01", headline="OOM (host memory) on node n01, rank 0", confidence="low"),
     Decision.RESTART, None),  # a bare SIGKILL: maybe transient
    (record(JobState.FAILED, "OOM", node="n01", headline="OOM (device memory) on node n01, rank 0"), Decision.NO_RESTART, None),
    (record(JobState.FAILED, "EXCEPTION", node="n01"), Decision.NO_RESTART, None),
    (record(JobState.FAILED, "LAUNCH", node="n01"), Decision.NO_RESTART, None),
    (record(JobState.FAILED, "NAN"), Decision.NO_RESTART, None),
    (record(JobState.FAILED, "COMM_TIMEOUT", node="n02"), Decision.RESTART, None),
    (record(JobState.FAILED, "HANG", node="n02"), Decision.RESTART, None),
    (record(JobState.FAILED, "UNKNOWN"), Decision.RESTART, None),
    (record(JobState.FAILED), Decision.RESTART, None),  # no verdict at all
])
def test_the_decision_table(rec: JobRecord, decision: Decision, node: str | None) -> None:
    choice = decide(rec)
    assert (choice.decision, choice.node) == (decision, node), choice.why


class Attempts:
    """A stand-in launch: each call ends as the next of `ends` says; remembers the nodes and env of each call."""

    def __init__(self, *ends: tuple[JobState, str | None, dict[str, Any]]) -> None:
        self.ends = list(ends)
        self.calls: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        self.saved: list[JobRecord] = []
        self.quarantined: list[tuple[str, str]] = []
        self.slept: list[float] = []
        self.said: list[str] = []

    def launch(self, nodes: Any, options: LaunchOptions) -> LaunchOutcome:
        status, category, extra = self.ends[len(self.calls)]
        self.calls.append((tuple(nodes.names), options.env))
        step = extra.pop("step", None)
        rec = record(status, category, nodes=tuple(nodes.names), job=f"j{len(self.calls)}", **extra)
        verdict = None
        if step is not None:
            verdict = TriageReport(None, None, (), (), "", 0, 0, ranks=(RankSummary("n01", 0, "ok", last_step=step),))
        return LaunchOutcome(rec, verdict=verdict)

    def run(self, inv_path: Path, policy: RestartPolicy, checkpoints: list[str | None] | None = None) -> Any:
        """`checkpoints`: what each scan of the checkpoint directory finds, in turn (the last one from then on)."""
        scans: list[ResumePoint] = []

        def find_resume(_nodes: Any) -> ResumePoint:
            assert checkpoints is not None
            scans.append(ResumePoint(checkpoints[min(len(scans), len(checkpoints) - 1)]))
            return scans[-1]
        return run_with_restarts(load_inventory(str(inv_path)), LaunchOptions("torchrun", ("t.py",), env=("A=1",)), policy,
                                 launch=self.launch, quarantine=lambda n, r, e: self.quarantined.append((n, r)),
                                 save=self.saved.append, notice=self.said.append, sleep=self.slept.append,
                                 find_resume=find_resume if checkpoints is not None else None)


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


def test_a_transient_failure_is_restarted_in_place_with_the_attempt_number_and_a_growing_backoff(inv: Path) -> None:
    runs = Attempts((JobState.FAILED, "COMM_TIMEOUT", {}), (JobState.FAILED, None, {}), (JobState.SUCCEEDED, None, {}))
    outcome = runs.run(inv, RestartPolicy(3, backoff=5))
    assert [c[0] for c in runs.calls] == [("n01", "n02", "n03", "n04")] * 3  # the spares wait
    assert [c[1] for c in runs.calls] == [("A=1", f"{ATTEMPT_ENV}={k}") for k in (1, 2, 3)]
    assert runs.slept == [5, 10] and outcome.exit_code == ExitCode.OK
    assert [(a.number, a.choice.decision) for a in outcome.attempts] == [(1, Decision.RESTART), (2, Decision.RESTART),
                                                                         (3, Decision.DONE)]
    assert [(r.attempt, r.restart_of) for r in runs.saved] == [(1, None), (2, "j1"), (3, "j1")]
    assert runs.saved[0].decision is not None and runs.saved[0].decision.startswith("restart: COMM_TIMEOUT")


def test_a_faulty_node_is_quarantined_and_replaced_by_a_spare_so_the_world_size_stays(inv: Path) -> None:
    runs = Attempts((JobState.FAILED, "HARDWARE", {"node": "n02"}), (JobState.FAILED, None, {"lost": "n03"}),
                    (JobState.SUCCEEDED, None, {}))
    outcome = runs.run(inv, RestartPolicy(3))
    assert [c[0] for c in runs.calls] == [("n01", "n02", "n03", "n04"), ("n01", "n03", "n04", "n05"),
                                          ("n01", "n04", "n05", "n06")]
    assert runs.quarantined == [("n02", "HARDWARE in job j1"), ("n03", "LOST in job j2")]
    assert "replaced by spare n05" in outcome.attempts[0].choice.why and outcome.exit_code == ExitCode.OK


def test_without_a_spare_the_job_stops_unless_it_may_shrink(inv: Path) -> None:
    runs = Attempts((JobState.FAILED, "HARDWARE", {"node": "n02"}), (JobState.SUCCEEDED, None, {}))
    outcome = runs.run(inv, RestartPolicy(3, spares="n06", allow_shrink=False))
    assert outcome.attempts[0].choice.decision == Decision.REPLACE  # n06 (--spares) takes n02's place; n05 is used
    assert runs.calls == [(("n01", "n02", "n03", "n04", "n05"), ("A=1", "ASCENDCTL_ATTEMPT=1")),
                          (("n01", "n03", "n04", "n05", "n06"), ("A=1", "ASCENDCTL_ATTEMPT=2"))]
    runs = Attempts((JobState.FAILED, "HARDWARE", {"node": "n02"}), (JobState.SUCCEEDED, None, {}))
    inv.write_text(INVENTORY.replace("groups: {spares: 'n[05-06]'}\n", ""))
    outcome = runs.run(inv, RestartPolicy(3))
    assert outcome.attempts[-1].choice.decision == Decision.GIVE_UP and "no spare left" in outcome.attempts[-1].choice.why
    assert outcome.exit_code == ExitCode.JOB_FAILED and len(runs.calls) == 1
    runs = Attempts((JobState.FAILED, "HARDWARE", {"node": "n02"}), (JobState.SUCCEEDED, None, {}))
    outcome = runs.run(inv, RestartPolicy(3, allow_shrink=True))
    assert runs.calls[1][0] == ("n01", "n03", "n04", "n05", "n06") and outcome.exit_code == ExitCode.OK


def test_the_jobs_own_error_is_not_restarted_and_says_do_not_requeue(inv: Path) -> None:
    runs = Attempts((JobState.FAILED, "EXCEPTION", {"node": "n01"}))
    outcome = runs.run(inv, RestartPolicy(3))
    assert len(runs.calls) == 1 and outcome.exit_code == ExitCode.DO_NOT_REQUEUE == 6
    assert runs.saved[0].decision is not None and runs.saved[0].decision.startswith("no_restart: EXCEPTION")


def test_the_budget_is_the_jobs_and_no_progress_stops_before_it(inv: Path) -> None:
    runs = Attempts(*[(JobState.FAILED, "COMM_TIMEOUT", {}) for _ in range(5)])
    outcome = runs.run(inv, RestartPolicy(2))
    assert len(runs.calls) == 3 and outcome.attempts[-1].choice.decision == Decision.GIVE_UP
    assert "restart(s) allowed are spent" in outcome.attempts[-1].choice.why and outcome.exit_code == ExitCode.JOB_FAILED
    # dies at step 40 every time: the first attempt sets the mark, the next 3 do not pass it: stop after 4, not 10
    runs = Attempts(*[(JobState.FAILED, "COMM_TIMEOUT", {"step": 40}) for _ in range(10)])
    outcome = runs.run(inv, RestartPolicy(9, no_progress=3))
    assert len(runs.calls) == 4 and "no progress beyond step 40 in 3 attempts" in outcome.attempts[-1].choice.why
    # progress each time: it goes on
    runs = Attempts(*[(JobState.FAILED, "COMM_TIMEOUT", {"step": 10 * k}) for k in range(1, 5)], (JobState.SUCCEEDED, None, {}))
    assert runs.run(inv, RestartPolicy(9, no_progress=2)).exit_code == ExitCode.OK and len(runs.calls) == 5


def test_an_attempt_that_resumes_and_dies_before_its_first_step_is_no_progress_unless_it_saved_a_checkpoint(inv: Path) -> None:
    """With --checkpoint-dir an attempt resumes after the checkpoint's step, and one that dies before its next step logs
    no step at all: the checkpoint directory judges it. Attempt 1 logs step 1 and saves ckpt-1; every later attempt
    resumes from ckpt-1 and dies before step 2 saves: stop after K attempts without progress, not after N."""
    runs = Attempts((JobState.FAILED, "COMM_TIMEOUT", {"step": 1}), *[(JobState.FAILED, "COMM_TIMEOUT", {}) for _ in range(9)])
    outcome = runs.run(inv, RestartPolicy(9, no_progress=2, checkpoint_dir="/ckpt"), checkpoints=[None, "/ckpt/ckpt-1"])
    assert len(runs.calls) == 3 and outcome.attempts[-1].choice.decision == Decision.GIVE_UP, outcome.attempts
    assert "no progress beyond step 1 or checkpoint /ckpt/ckpt-1 in 2 attempts" in outcome.attempts[-1].choice.why
    assert [c[1][-1] for c in runs.calls] == [f"{ATTEMPT_ENV}=1", f"{RESUME_ENV}=/ckpt/ckpt-1", f"{RESUME_ENV}=/ckpt/ckpt-1"]
    # a newer checkpoint after each attempt is progress, logged steps or not: it goes on
    runs = Attempts(*[(JobState.FAILED, "COMM_TIMEOUT", {}) for _ in range(4)], (JobState.SUCCEEDED, None, {}))
    outcome = runs.run(inv, RestartPolicy(9, no_progress=2, checkpoint_dir="/ckpt"),
                       checkpoints=[None, "/ckpt/ckpt-1", "/ckpt/ckpt-2", "/ckpt/ckpt-3", "/ckpt/ckpt-4"])
    assert len(runs.calls) == 5 and outcome.exit_code == ExitCode.OK
    # without --checkpoint-dir, no step and no checkpoint: progress cannot be judged, the budget bounds it
    runs = Attempts(*[(JobState.FAILED, "COMM_TIMEOUT", {}) for _ in range(5)])
    outcome = runs.run(inv, RestartPolicy(3, no_progress=2))
    assert len(runs.calls) == 4 and "restart(s) allowed are spent" in outcome.attempts[-1].choice.why


def test_ctrl_c_between_attempts_stops_with_nothing_running(inv: Path) -> None:
    runs = Attempts((JobState.FAILED, "COMM_TIMEOUT", {}))

    def interrupted(_seconds: float) -> None:
        raise KeyboardInterrupt

    outcome = run_with_restarts(load_inventory(str(inv)), LaunchOptions("torchrun", ("t.py",)), RestartPolicy(3),
                                launch=runs.launch, quarantine=lambda *a: None, save=runs.saved.append,
                                notice=runs.said.append, sleep=interrupted)
    assert outcome.last.interrupted and outcome.exit_code == ExitCode.INTERRUPTED and len(runs.calls) == 1


def test_spares_come_from_the_option_or_the_group_and_must_exist(inv: Path) -> None:
    loaded = load_inventory(str(inv))
    assert spare_names(loaded, RestartPolicy(1)) == ("n05", "n06")
    assert spare_names(loaded, RestartPolicy(1, spares="n04")) == ("n04",)
    with pytest.raises(UsageError):
        spare_names(loaded, RestartPolicy(1, spares="n99"))
    with pytest.raises(UsageError, match="every node is a spare"):
        Attempts().run(inv, RestartPolicy(1, spares="n[01-06]"))
    assert replace(RestartPolicy(1), restarts=2).restarts == 2


# -- which checkpoint a relaunch resumes from (jobs/checkpoints.py, sh/checkpoint_scan.sh on a real directory) --------
def scan(directory: Path, wait: int = 0) -> str:
    import subprocess

    from ascendctl.remote.scripts import script

    done = subprocess.run(["sh", "-s", "--", str(directory), str(wait)], input=script("checkpoint_scan.sh"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_newest_complete_checkpoint_is_chosen_and_newer_broken_ones_are_named(tmp_path: Path) -> None:
    import os
    import time

    from ascendctl.jobs.checkpoints import resume_point

    d = tmp_path / "ck"
    for n, marker in ((1, True), (2, True), (3, False)):
        (d / f"ckpt-{n}").mkdir(parents=True)
        (d / f"ckpt-{n}" / "shard.distcp").write_text("x" * 5000)
        if marker:
            (d / f"ckpt-{n}" / ".metadata").write_text("m")
        os.utime(d / f"ckpt-{n}", (time.time() - 100 + n, time.time() - 100 + n))
    (d / "ckpt-4.tmp").mkdir()
    (d / "ckpt-4.tmp" / "shard.distcp").write_text("y" * 5000)
    point = resume_point(str(d), scan(d))
    assert point.path == f"{d}/ckpt-2", point
    assert dict(point.skipped)["ckpt-3"].startswith("no .metadata in it") and "temporary" in dict(point.skipped)["ckpt-4.tmp"]
    # Megatron's pointer names the newest complete iteration, whatever the times say
    m = tmp_path / "megatron"
    for it in ("iter_0000100", "iter_0000200"):
        (m / it).mkdir(parents=True)
        (m / it / "model_optim_rng.pt").write_text("w" * 3000)
    (m / "latest_checkpointed_iteration.txt").write_text("100\n")
    assert resume_point(str(m), scan(m)).path == f"{m}/iter_0000100"
    # single files (MindSpore .ckpt): an empty one was cut short
    f = tmp_path / "ms"
    f.mkdir()
    (f / "net-1_10.ckpt").write_text("z" * 4000)
    os.utime(f / "net-1_10.ckpt", (time.time() - 50, time.time() - 50))
    (f / "net-1_20.ckpt").write_text("")
    point = resume_point(str(f), scan(f))
    assert point.path == f"{f}/net-1_10.ckpt" and dict(point.skipped) == {"net-1_20.ckpt": "empty: cut short"}
    assert resume_point(str(tmp_path / "none"), scan(tmp_path / "none")).problem is not None
    assert resume_point(str(d), "entry\t1\td\t1\t8\t\tx\n").problem is not None  # a scan cut off: no choice


def test_a_checkpoint_still_growing_during_the_scan_is_skipped(tmp_path: Path) -> None:
    import subprocess
    import sys

    from ascendctl.jobs.checkpoints import resume_point

    d = tmp_path / "ck"
    (d / "step-1").mkdir(parents=True)
    (d / "step-1" / "weights.bin").write_text("a" * 8192)
    (d / "step-2").mkdir()
    writer = subprocess.Popen([sys.executable, "-c", "import time, sys\nf = open(sys.argv[1], 'w')\nfor _ in range(60):\n"
                               "    f.write('b' * 65536); f.flush(); time.sleep(0.05)", str(d / "step-2" / "weights.bin")])
    try:
        time.sleep(0.3)
        point = resume_point(str(d), scan(d, wait=1))
    finally:
        writer.kill()
        writer.wait()
    assert point.path == f"{d}/step-1" and dict(point.skipped)["step-2"].startswith("still being written"), point


# --- a HANG whose suspect is stuck in a device call: the node's fault (DEVICE_CALLS) --------------------------------
SITE = "/venv/lib/python3.11/site-packages"
C10D_WAIT = (f"{SITE}/torch/distributed/distributed_c10d.py", 2501, "all_reduce")


def hang_record(*stuck: tuple[str, int, str], nodes: tuple[str, ...] = ("n01", "n01", "n02", "n02"),
                suspects: tuple[int, ...] = (2,)) -> JobRecord:
    """A job torn down on a hang, its verdict the blame engine's from a stacks capture (jobs/hang.hang_failure): the
    ranks in `suspects` are at `stuck` (outermost first), the others wait in all_reduce."""
    from ascendctl.jobs.hang import hang_failure
    from ascendctl.stacks.merge import build_classes, build_tree, judge
    from ascendctl.stacks.model import NodeCapture, StacksReport
    from tests.test_stacks import rank_at

    ranks = tuple(rank_at(r, node, ("train.py", 10, "<module>"), *(stuck if r in suspects else (C10D_WAIT,)))
                  for r, node in enumerate(nodes))
    classes, verdict = judge(build_classes(ranks))
    captured = tuple(NodeCapture(n, None, True, False, tuple(r for r in ranks if r.node == n)) for n in dict.fromkeys(nodes))
    failure = hang_failure(StacksReport("j1", "20261126-230000Z", captured, build_tree(ranks), classes, verdict))
    assert failure is not None and failure.category == "HANG" and failure.rule == "stacks"
    return replace(record(JobState.FAILED, nodes=tuple(dict.fromkeys(nodes))), first_failure=failure)


@pytest.mark.parametrize("stuck, decision, node", [
    ((("train.py", 40, "step"), (f"{SITE}/torch/cuda/__init__.py", 954, "synchronize")), Decision.REPLACE, "n02"),
    ((("train.py", 40, "step"), (f"{SITE}/torch_npu/npu/utils.py", 61, "synchronize")), Decision.REPLACE, "n02"),
    ((("train.py", 40, "step"), (f"{SITE}/torch/cuda/streams.py", 90, "wait_event")), Decision.REPLACE, "n02"),
    ((("train.py", 40, "step"), (f"{SITE}/mindspore/hal/stream.py", 120, "query")), Decision.REPLACE, "n02"),
    ((("train.py", 40, "step"), ("/usr/local/Ascend/lib64/libascendcl.so", 0, "aclrtSynchronizeStream")),
     Decision.REPLACE, "n02"),  # py-spy --native: AscendCL
    ((("train.py", 40, "step"), ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0, "cuStreamSynchronize")), Decision.REPLACE, "n02"),
    ((("train.py", 40, "step"), ("/app/loader.py", 77, "next_batch")), Decision.RESTART, None),  # the dataloader: not a device
    ((("train.py", 40, "step"), (f"{SITE}/torch/cuda/memory.py", 30, "memory_allocated")), Decision.RESTART, None),
    ((("train.py", 40, "save"),), Decision.RESTART, None),
])
def test_a_hang_replaces_the_node_only_when_its_suspect_is_stuck_in_a_device_call(
        stuck: tuple[tuple[str, int, str], ...], decision: Decision, node: str | None) -> None:
    choice = decide(hang_record(*stuck))
    assert (choice.decision, choice.node) == (decision, node), choice.why
    if decision == Decision.REPLACE:
        assert f"stuck in a device call ({stuck[-1][0]}:{stuck[-1][2]})" in choice.why


def test_a_hang_stuck_in_a_device_call_on_ranks_of_two_nodes_names_no_node_and_restarts_in_place() -> None:
    cuda = (f"{SITE}/torch/cuda/__init__.py", 954, "synchronize")
    choice = decide(hang_record(("train.py", 40, "step"), cuda, suspects=(1, 2)))
    assert choice.decision == Decision.RESTART and choice.node is None, choice.why


def test_device_calls_and_the_suspect_frame_read_from_a_recorded_verdict() -> None:
    from ascendctl.jobs.restart import device_call, suspect_frame

    assert device_call("/x/libascendcl.so:aclrtSynchronizeDevice") and device_call("/x/libruntime.so:rtStreamSynchronize")
    assert device_call("/x/app.so:cudaDeviceSynchronize") and not device_call("/app/train.py:cuda_ready")
    assert not device_call(f"{C10D_WAIT[0]}:all_reduce") and not device_call("/app/train.py:synchronize")
    assert device_call("/usr/local/Ascend/lib64/libhccl.so:TransportP2p::WaitDone")  # HCCL's own API calls are waits
    failure = FirstFailure("why", node="n02", rank=2, category="HANG", rule="stacks", file="/a b/t.py", line=0,
                           text="rank 2 at /a b/t.py in f, g, not in a collective (the others wait in all_reduce)")
    assert suspect_frame(failure) == "/a b/t.py:f, g"
    assert suspect_frame(replace(failure, rule="hang_progress")) is None  # a HANG from the logs: no frame to read
    assert suspect_frame(replace(failure, text="something else")) is None


def test_a_replaced_nodes_evidence_is_the_why_and_the_verdicts_own_line_on_one_plain_line() -> None:
    from ascendctl.jobs.restart import EVIDENCE_CUT, Choice, evidence_of
    from ascendctl.paths import hidden_char

    failure = FirstFailure("why", node="n02", category="HARDWARE", headline="HARDWARE on node n02", file="/l/rank1.log",
                           line=42, text="\x1b[31mRuntimeError: uncorrectable ECC error\x1b[0m\r" + "x" * 600)
    rec = replace(record(JobState.FAILED), first_failure=failure)
    choice = decide(rec)
    evidence = evidence_of(choice, rec)
    assert evidence.startswith("HARDWARE on node n02: a fault of the node; /l/rank1.log:42: ")
    assert "RuntimeError: uncorrectable ECC error" in evidence and hidden_char(evidence) is None
    assert evidence.endswith(" [...]") and len(evidence) < EVIDENCE_CUT + 120
    lost = Choice(Decision.REPLACE, "node n01 was lost while the job ran", "n01")  # the verdict names another node
    assert evidence_of(lost, rec) == lost.why


def test_a_detached_first_attempt_hands_the_loop_over_and_its_supervisor_follows_it_then_stops_on_a_stop(inv: Path) -> None:
    """launch --detach --restarts: the launch's loop ends once attempt 1 runs detached (nothing decided, nothing saved);
    the supervisor's loop follows that attempt instead of launching it, and a stop asked while it waits ends the loop."""
    runs = Attempts((JobState.RUNNING, None, {}))
    started = runs.launch
    runs.launch = lambda nodes, options: replace(started(nodes, options), detached=True)  # type: ignore[method-assign]
    handed = runs.run(inv, RestartPolicy(3))
    assert handed.attempts == () and handed.last.detached and runs.saved == [] and runs.slept == []
    assert runs.calls == [(("n01", "n02", "n03", "n04"), ("A=1", f"{ATTEMPT_ENV}=1"))]
    runs = Attempts((JobState.FAILED, "COMM_TIMEOUT", {}))
    asked: list[str] = []
    outcome = run_with_restarts(load_inventory(str(inv)), LaunchOptions("torchrun", ("t.py",)), RestartPolicy(3, backoff=7),
                                launch=runs.launch, quarantine=lambda *a: None, save=runs.saved.append,
                                notice=runs.said.append, sleep=runs.slept.append,
                                follow=lambda: runs.launch(load_inventory(str(inv)), LaunchOptions("torchrun", ("t.py",))),
                                stopped=lambda first: (asked.append(first), "stopped by the user (`ascendctl stop`)"
                                                       if runs.slept else None)[1])  # asked during the backoff
    assert len(runs.calls) == 1 and runs.calls[0][1] == () and asked == ["j1", "j1"] and runs.slept == [7]  # followed
    assert [r.restart_at is not None for r in runs.saved] == [True, False]  # due, then not due any more
    assert runs.saved[-1].decision is not None and runs.saved[-1].decision.startswith(
        "done: stopped by the user (`ascendctl stop`) while it waited to start attempt 2: not restarted (it had decided: "
        "restart: COMM_TIMEOUT")
    assert [a.choice.decision for a in outcome.attempts] == [Decision.DONE] and not outcome.last.interrupted


def test_the_loop_spec_goes_to_the_supervisor_whole() -> None:
    from ascendctl.jobs.restart import LoopSpec
    from ascendctl.jobs.supervise import hang_policy

    options = LaunchOptions("torchrun", ("t.py", "--x"), env=("A=1", "SECRET"), grace=2.0, hang=hang_policy("auto:20", "report"))
    spec = LoopSpec("inv.yaml", ("n01", "n05"), {"connect_timeout": 3.0}, options, RestartPolicy(2, 1.5, "n05", True, 4, "/ckpt"),
                    preflight=False, stacks=False)
    assert LoopSpec.from_json(spec.to_json()) == spec
    with pytest.raises(ValueError):
        LoopSpec.from_json(b'{"inventory": "x"}')


def test_the_policy_takes_each_flag_given_then_the_inventorys_key_then_the_default() -> None:
    from ascendctl.inventory.load import RestartSettings
    from ascendctl.jobs.restart import DEFAULT_BACKOFF, DEFAULT_NO_PROGRESS, policy_for

    assert policy_for(None) is None and policy_for(RestartSettings(backoff=3.0)) is None  # no restarts asked
    section = RestartSettings(restarts=4, backoff=2.0, allow_shrink=True, no_progress_attempts=5, checkpoint_dir="/ck")
    assert policy_for(section) == RestartPolicy(4, 2.0, None, True, 5, "/ck")
    assert policy_for(section, restarts=1, backoff=0.0, spares="n9", allow_shrink=False, no_progress=2,
                      checkpoint_dir="/other") == RestartPolicy(1, 0.0, "n9", False, 2, "/other")
    assert policy_for(section, restarts=0) is None  # --restarts 0 turns the file's restarts off
    assert policy_for(None, restarts=2) == RestartPolicy(2, DEFAULT_BACKOFF, None, False, DEFAULT_NO_PROGRESS, None)
    with pytest.raises(UsageError, match=r"--spares, --checkpoint-dir need --restarts N$"):
        policy_for(None, spares="n9", checkpoint_dir="/ck")
    with pytest.raises(UsageError, match=r"--allow-shrink needs --restarts N \(--restarts 0 turns off"):
        policy_for(section, restarts=0, allow_shrink=True)
