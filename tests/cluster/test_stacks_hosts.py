"""`ascendctl stacks` of a real torchrun job (gloo) over real SSH on three test hosts, 2 ranks each (issue #27).

Rank 4 sleeps in Python before its 5th all-reduce (tests/jobs/hang_torch.py); the other five block in it. `stacks`
names rank 4 on h03 with its sleeping line, the others in all_reduce; the job runs on (one pause per rank, no
restart); `stop` then leaves nothing behind. Hosts share this machine's filesystem and pid namespace.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.cluster.harness import Cluster
from tests.cluster.test_launch_hosts import ASCENDCTL, JOBS, hosts, inventory, job_processes, last_job
from tests.json_schemas import assert_valid

SLEEP_LINE = next(i for i, line in enumerate((JOBS / "hang_torch.py").read_text().splitlines(), 1) if "time.sleep(600)" in line)


def wait_for_the_hang(logs: Path, timeout: float = 90) -> None:
    """Until rank 4 says it is stuck and every other rank has done its 4th all-reduce (so it is in its 5th)."""
    deadline = time.monotonic() + timeout
    while True:
        text = "".join(p.read_text() for p in logs.glob("h0*/launcher.log"))
        done = set(re.findall(r"rank (\d): step 4 done", text))
        if "rank 4: stuck before all-reduce #5" in text and done == {"0", "1", "2", "3", "4", "5"}:
            return
        assert time.monotonic() < deadline, text[-3000:]
        time.sleep(0.2)


def test_stacks_names_the_rank_that_sleeps_while_the_others_wait_in_all_reduce(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    logs = tmp_path / "logs"
    launch = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(logs),
                             "--grace", "3", "--no-preflight", "--detach", "--env=PYTHONUNBUFFERED=1", "--env=JOB_TIMEOUT=120",
                             "--flight-recorder", "--", str(JOBS / "hang_torch.py")], capture_output=True, text=True,
                            timeout=120)
    assert launch.returncode == 0, launch.stderr
    job = last_job()
    try:
        wait_for_the_hang(logs)
        time.sleep(0.5)  # the others are in their 5th all-reduce
        before = job_processes(cluster, "hang_torch.py")
        taken = time.monotonic()
        text = subprocess.run([*ASCENDCTL, "stacks"], capture_output=True, text=True, timeout=60)
        took = time.monotonic() - taken
        assert text.returncode == 0, text.stdout + text.stderr
        first = text.stdout.splitlines()[0]
        assert first.startswith("suspect: rank 4 on h03 is not in a collective, barrier or store wait: "
                                f"{JOBS / 'hang_torch.py'}:{SLEEP_LINE} in train_step"), text.stdout
        assert first.endswith("(the other 5 ranks wait in all_reduce)"), text.stdout
        assert took < 15, took
        result = subprocess.run([*ASCENDCTL, "stacks", job["id"], "--json"], capture_output=True, text=True, timeout=60)
        document = json.loads(result.stdout)
        assert result.returncode == 0 and document["exit_code"] == 0, result.stderr
        assert_valid("stacks", document)
        assert document["verdict"]["kind"] == "suspect" and document["verdict"]["suspects"] == [4]
        # --flight-recorder: torch's own record of the collectives, lined up across the six ranks, says the same
        flight = document["flight_recorder"]
        assert flight is not None and flight["ranks"] == [0, 1, 2, 3, 4, 5] and flight["culprits"] == [4], flight
        assert any("rank 4 never joined collective #5 of process group 0" in m for m in flight["messages"]), flight["messages"]
        suspect, waiting = document["classes"]
        assert (suspect["ranks"], suspect["nodes"], suspect["suspect"]) == ([4], ["h03"], True)
        assert suspect["innermost"] == {"file": str(JOBS / "hang_torch.py"), "line": SLEEP_LINE, "function": "train_step",
                                        "native": False}
        assert waiting["ranks"] == [0, 1, 2, 3, 5] and waiting["nodes"] == ["h01", "h02", "h03"] and waiting["waiting"]
        assert waiting["wait_frame"]["function"] == "all_reduce" and waiting["wait_frame"]["file"].endswith(
            "torch/distributed/distributed_c10d.py")
        ranks = {r["rank"]: r for r in document["ranks"]}
        assert [(ranks[r]["node"], ranks[r]["local_rank"], ranks[r]["status"]) for r in range(6)] == [
            ("h01", 0, "dumped"), ("h01", 1, "dumped"), ("h02", 0, "dumped"), ("h02", 1, "dumped"),
            ("h03", 0, "dumped"), ("h03", 1, "dumped")]
        for rank in ranks.values():  # every file of both captures kept in the node's job directory
            assert rank["files"] and all(Path(f).is_file() and f.startswith(str(logs / rank["node"] / "stacks")) for f in rank["files"])
        # the nodes signal their ranks about together (one fan-out), not one after another's whole capture; the bound
        # leaves room for a loaded machine (the suite's three lanes on 2 cores: 1.14 s once)
        assert document["spread"] is not None and document["spread"] < 3.0
        assert len(list((logs / "h03" / "stacks").glob("2*"))) == 2  # one folder per capture
        # the job runs on: the same processes, each paused once per capture, none restarted
        assert job_processes(cluster, "hang_torch.py") == before
        status = subprocess.run([*ASCENDCTL, "status", job["id"]], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and status.stdout.startswith(f"job {job['id']}: running"), status.stdout
    finally:
        stop = subprocess.run([*ASCENDCTL, "stop", job["id"], "--grace", "3"], capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert job_processes(cluster, "hang_torch.py") == []
    # issue #30: `stop` took every rank's stack first, so the hang stopped by hand has its culprit on record
    assert "stacks of 6 ranks taken before the stop" in stop.stderr, stop.stderr
    record = last_job()
    failure = record["first_failure"]
    assert record["status"] == "stopped" and failure["category"] == "HANG" and failure["rule"] == "stacks", failure
    assert (failure["node"], failure["rank"], failure["line"]) == ("h03", 4, SLEEP_LINE)
    assert "verdict: HANG on node h03, rank 4" in stop.stdout
    assert len(list((logs / "h03" / "stacks").glob("2*"))) == 3  # the stop's own capture, kept beside the others
    # collect takes the captures with the job's logs
    bundle = tmp_path / "bundle"
    collected = subprocess.run([*ASCENDCTL, "collect", record["id"], "-o", str(bundle)], capture_output=True, text=True,
                               timeout=120)
    assert collected.returncode == 0, collected.stderr
    assert [p for p in bundle.rglob("rank-4.*.txt") if "stacks" in p.parts], sorted(map(str, bundle.rglob("*")))[:50]
    # and triage of the bundle gives the verdict the record got: the stop's capture, judged by the same engine
    triaged = subprocess.run([*ASCENDCTL, "triage", str(bundle), "--json"], capture_output=True, text=True, timeout=120)
    verdict = json.loads(triaged.stdout)
    assert verdict["category"] == "HANG" and verdict["culprit_reason"] == "stacks", verdict
    assert (verdict["first_failure"]["node"], verdict["first_failure"]["rank"], verdict["first_failure"]["line"]) == \
        ("h03", 4, SLEEP_LINE)


def test_ctrl_c_of_a_hanging_job_takes_every_ranks_stack_and_names_the_stuck_rank(cluster_factory: Any, tmp_path: Path) -> None:
    """Issue #30: a hang stopped with Ctrl-C got `UNKNOWN` and the first node; now its culprit, from every rank's stack."""
    import signal

    from tests.cluster.test_launch_hosts import finish

    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    logs = tmp_path / "logs"
    proc = subprocess.Popen([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(logs),
                             "--grace", "3", "--no-preflight", "--env=JOB_TIMEOUT=120", "--", str(JOBS / "hang_torch.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_the_hang(logs)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc, 90)
    assert code == 130, err
    assert "stacks of 6 ranks taken before the stop" in err and "rank 4 on h03" in err, err
    record = last_job()
    failure = record["first_failure"]
    assert record["status"] == "interrupted" and failure["category"] == "HANG", record
    assert (failure["node"], failure["rank"], failure["line"]) == ("h03", 4, SLEEP_LINE)
    assert job_processes(cluster, "hang_torch.py") == []


def test_launch_notices_the_hang_takes_every_ranks_stack_and_stops_the_job_with_its_verdict(cluster_factory: Any,
                                                                                             tmp_path: Path) -> None:
    """`launch --hang-timeout auto` (issue #27): the job steps every 0.5 s; the allowance is learned from those steps
    (5x their p99, at least the 2 s floor given); rank 4 falls asleep before step 14, and when no rank printed a step for
    that long, launch says so, takes every rank's stack, stops the job and records the stacks' verdict: HANG on rank 4
    at its sleeping line (exit 5). The steady steps before it never counted as a hang."""
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    logs = tmp_path / "logs"
    started = time.monotonic()
    run = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(logs),
                          "--grace", "3", "--no-preflight", "--hang-timeout", "auto:2", "--env=PYTHONUNBUFFERED=1",
                          "--env=JOB_TIMEOUT=300", "--env=JOB_STEP_SLEEP=0.5", "--env=JOB_STUCK_STEP=14", "--", str(JOBS / "hang_torch.py")],
                         capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    assert run.returncode == 5, run.stdout[-2000:] + run.stderr[-3000:]
    noticed = [line for line in run.stderr.splitlines() if "a hang; taking every rank's stack" in line]
    assert len(noticed) == 1, run.stderr[-3000:]  # once: not during the steady steps before
    assert "since step 13 (allowed: " in noticed[0] and "--hang-timeout auto: 5 x the p99 step interval" in noticed[0], noticed
    assert re.search(r"over (9|10) steps, floor 2 s\)", noticed[0]), noticed  # 13 steps: 12 intervals, 2 of warm-up
    record = last_job()
    failure = record["first_failure"]
    assert record["status"] == "failed" and failure["category"] == "HANG" and failure["rule"] == "stacks", failure
    assert (failure["node"], failure["rank"], failure["line"]) == ("h03", 4, SLEEP_LINE), failure
    assert "HANG" in run.stdout + run.stderr and "rank 4" in run.stdout + run.stderr
    assert any((logs / node / "stacks").is_dir() for node in ("h01", "h02", "h03")), "the incident's stacks stay on the nodes"
    assert job_processes(cluster, "hang_torch.py") == []
    assert took < 200, took  # long before gloo's own 300 s timeout would have ended it


def test_a_detached_job_with_on_hang_report_runs_on_and_its_supervisor_says_which_rank_hangs(cluster_factory: Any,
                                                                                              tmp_path: Path) -> None:
    """`launch --detach --hang-timeout auto:2 --on-hang report` (issue #27): the job's supervisor notices the hang,
    takes every rank's stack and says what they show; the job is left running (report, not stop). `stop` then ends it
    with that verdict on record, and triage of the job's logs directory agrees."""
    from ascendctl.jobs.detached import supervisor_log

    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    logs = tmp_path / "logs"
    launched = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(logs),
                               "--grace", "3", "--no-preflight", "--detach", "--hang-timeout", "auto:2", "--on-hang", "report",
                               "--env=PYTHONUNBUFFERED=1", "--env=JOB_TIMEOUT=300", "--env=JOB_STEP_SLEEP=0.3",
                               "--env=JOB_STUCK_STEP=12", "--json", "--", str(JOBS / "hang_torch.py")],
                              capture_output=True, text=True, timeout=120)
    assert launched.returncode == 0, launched.stderr[-3000:]
    job = json.loads(launched.stdout)["job"]
    log = supervisor_log(job["id"])
    try:
        deadline = time.monotonic() + 120
        while "taken before" not in (text := log.read_text() if log.exists() else "") and "stacks of" not in text:
            assert time.monotonic() < deadline, text[-3000:]
            time.sleep(0.5)
        time.sleep(2)  # its last words about the capture
        text = log.read_text()
        assert "a hang; taking every rank's stack" in text and "since step 11" in text, text[-3000:]
        assert "rank 4 on h03 is not in a collective" in text, text[-3000:]
        status = subprocess.run([*ASCENDCTL, "status", job["id"]], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and status.stdout.startswith(f"job {job['id']}: running"), status.stdout
        assert len(list((logs / "h03" / "stacks").glob("2*"))) == 1  # the supervisor's capture, kept on the node
    finally:
        stop = subprocess.run([*ASCENDCTL, "stop", job["id"], "--grace", "3"], capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    failure = last_job()["first_failure"]
    assert failure["category"] == "HANG" and (failure["node"], failure["rank"], failure["line"]) == ("h03", 4, SLEEP_LINE)
    triaged = subprocess.run([*ASCENDCTL, "triage", str(logs), "--json"], capture_output=True, text=True, timeout=120)
    verdict = json.loads(triaged.stdout)
    assert verdict["culprit_reason"] == "stacks" and verdict["first_failure"]["rank"] == 4, verdict["reason"]
    assert job_processes(cluster, "hang_torch.py") == []


def test_stacks_of_an_msrun_job_name_the_worker_that_stalls(cluster_factory: Any, tmp_path: Path) -> None:
    """MindSpore (msrun, CPU collectives) on three hosts: worker 3 sleeps in Python before the all-reduce the other five
    wait in; `stacks` names it with its line (issue #27: msrun where a worker stalls)."""
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    logs = tmp_path / "logs"
    script = JOBS / "allreduce_ms.py"
    stall_line = next(i for i, line in enumerate(script.read_text().splitlines(), 1) if "time.sleep(600)" in line)
    launched = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "msrun", "--log-dir", str(logs),
                               "--grace", "3", "--no-preflight", "--detach", "--env=JOB_STALL_RANK=3", "--env=GLOG_v=3",
                               "--json", "--", str(script)], capture_output=True, text=True, timeout=120)
    assert launched.returncode == 0, launched.stderr[-3000:]
    job = json.loads(launched.stdout)["job"]
    try:
        deadline = time.monotonic() + 120
        while True:
            text = "".join(p.read_text(errors="replace") for p in logs.glob("h0*/workers/worker_*.log"))
            if "rank 3: stalling before the all-reduce" in text and len(set(re.findall(r"rank (\d)/6 started", text))) == 6:
                break
            assert time.monotonic() < deadline, text[-3000:]
            time.sleep(0.5)
        time.sleep(3)  # the five others are in the all-reduce by now
        taken = subprocess.run([*ASCENDCTL, "stacks", job["id"], "--json"], capture_output=True, text=True, timeout=120)
        document = json.loads(taken.stdout)
        assert document["verdict"]["kind"] == "suspect" and document["verdict"]["suspects"] == [3], \
            (document["verdict"], [(c["ranks"], [(f["file"][-60:], f["line"], f["function"]) for f in c["frames"]]) for c in document["classes"]])
        suspect = next(c for c in document["classes"] if c["suspect"])
        assert suspect["nodes"] == ["h02"] and suspect["innermost"]["line"] == stall_line, suspect["innermost"]
        assert suspect["innermost"]["function"] == "stall"
        waiting = [c for c in document["classes"] if not c["suspect"]]
        assert sorted(r for c in waiting for r in c["ranks"]) == [0, 1, 2, 4, 5] and all(c["waiting"] for c in waiting)
    finally:
        stop = subprocess.run([*ASCENDCTL, "stop", job["id"], "--grace", "3"], capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert job_processes(cluster, "allreduce_ms.py") == []
