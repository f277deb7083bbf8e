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
                             "--", str(JOBS / "hang_torch.py")], capture_output=True, text=True, timeout=120)
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
        assert document["spread"] is not None and document["spread"] < 1.0
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
    assert "verdict: HANG: rank 4 not in a collective on node h03" in stop.stdout
    assert len(list((logs / "h03" / "stacks").glob("2*"))) == 3  # the stop's own capture, kept beside the others
    # collect takes the captures with the job's logs
    bundle = tmp_path / "bundle"
    collected = subprocess.run([*ASCENDCTL, "collect", record["id"], "-o", str(bundle)], capture_output=True, text=True,
                               timeout=120)
    assert collected.returncode == 0, collected.stderr
    assert [p for p in bundle.rglob("rank-4.*.txt") if "stacks" in p.parts], sorted(map(str, bundle.rglob("*")))[:50]


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
    """`launch --hang-timeout` (issue #27): no rank prints a step for 8 s after rank 4 falls asleep; launch says so, takes
    every rank's stack, stops the job and records the stacks' verdict: HANG on rank 4 at its sleeping line (exit 5)."""
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    logs = tmp_path / "logs"
    started = time.monotonic()
    run = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(logs),
                          "--grace", "3", "--no-preflight", "--hang-timeout", "8", "--env=PYTHONUNBUFFERED=1",
                          "--env=JOB_TIMEOUT=300", "--", str(JOBS / "hang_torch.py")],
                         capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    assert run.returncode == 5, run.stdout[-2000:] + run.stderr[-3000:]
    assert "(--hang-timeout 8): a hang; taking every rank's stack" in run.stderr, run.stderr[-3000:]
    record = last_job()
    failure = record["first_failure"]
    assert record["status"] == "failed" and failure["category"] == "HANG" and failure["rule"] == "stacks", failure
    assert (failure["node"], failure["rank"], failure["line"]) == ("h03", 4, SLEEP_LINE), failure
    assert "HANG" in run.stdout + run.stderr and "rank 4" in run.stdout + run.stderr
    assert any((logs / node / "stacks").is_dir() for node in ("h01", "h02", "h03")), "the incident's stacks stay on the nodes"
    assert job_processes(cluster, "hang_torch.py") == []
    assert took < 200, took  # long before gloo's own 300 s timeout would have ended it
