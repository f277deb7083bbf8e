"""Issue #30 (faults round 2): a job's output never slows or blocks the job, and stays bounded on the nodes and here.

Node side, on real test hosts (tests/cluster): a real `ascendctl launch` whose launcher is a stand-in `torchrun` that
execs the worker, so the worker writes straight into the FIFO that the node's stamper (ascendctl/sh/stamp_lines.sh)
reads. Controller side, on the local transport: the follow stream and `logs JOB` of logs that hold a 100 MB line or
300 MB in all, in a subprocess whose peak memory is measured (VmHWM, or ru_maxrss from a small parent).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ascendctl.models import MAX_LINE
from tests.cluster.harness import Cluster
from tests.cluster.test_launch_hosts import ASCENDCTL, hosts, last_job, job_processes

STAMP = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6} \| ")
DROPPED = re.compile(rb"^ascendctl: (\d+) lines \((\d+) bytes\) dropped: output faster than the stamper$")

WORKER = r'''
import os, sys, time
start = time.time()
lines, size = int(os.environ.get("OUT_LINES", "0")), int(os.environ.get("OUT_LONG_LINE", "0"))
for i in range(lines):  # as fast as it can: block-buffered print
    print(f"step {i} loss 0.12345 lr 0.0001 some more text to pad the line out")
if size:
    sys.stdout.flush()
    sys.stdout.buffer.write(b"x" * size + b"\n")
    print("after the long line")
sys.stdout.flush()
end = time.time()
with open(os.environ["OUT_TIMES"], "w") as times:
    times.write(f"{start} {end}\n")
if os.environ.get("OUT_FAIL"):
    raise RuntimeError("boom after the burst")
sys.exit(int(os.environ.get("OUT_EXIT", "0")))
'''
LAUNCHER = "#!/bin/sh\n# a stand-in torchrun: runs the script (the last word) itself\nfor a; do s=$a; done\nexec {python} \"$s\"\n"


def job_files(tmp_path: Path) -> tuple[Path, Path]:
    """(inventory's bin dir holding the stand-in torchrun, the worker script)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "torchrun").write_text(LAUNCHER.format(python=sys.executable))
    (bin_dir / "torchrun").chmod(0o755)
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    return bin_dir, worker


def worker_seconds(times: Path) -> tuple[float, float]:
    start, end = map(float, times.read_text().split())
    return end - start, end


def baseline(worker: Path, env: dict[str, str], times: Path) -> float:
    """The worker's own time with its output going to /dev/null (on this machine: the hosts share its CPUs)."""
    subprocess.run([sys.executable, str(worker)], env={**os.environ, **env, "OUT_TIMES": str(times), "OUT_FAIL": "",
                                                       "OUT_EXIT": "0"}, stdout=subprocess.DEVNULL, check=True, timeout=300)
    return worker_seconds(times)[0]


# Runs a command and writes its peak memory (KiB) into a file. The peak is read from here, a small process: the rusage
# of a child forked from the test process itself starts at that process's own high-water mark (Linux keeps the
# pre-exec mm's peak in ru_maxrss), which after hundreds of tests in one pytest is already hundreds of MiB.
PEAK = r'''
import resource, signal, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda number, _frame: child.send_signal(number))
code = child.wait()
with open(sys.argv[1], "w") as peak:
    peak.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
'''


def peak_of(argv: list[str], peak: Path) -> list[str]:
    """`argv` run so that its peak memory (KiB) is written into `peak` when it ends."""
    return [sys.executable, "-c", PEAK, str(peak), *argv]


def launch(inv: Path, tmp_path: Path, worker: Path, env: dict[str, str], out: Path,
           peak: Path | None = None) -> subprocess.Popen[bytes]:
    """`ascendctl launch` attached, its stdout (every line of the job) into `out`, its stderr into `out`.err; with
    `peak`, its peak memory (KiB) is written there when it ends."""
    argv = [*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(tmp_path / "logs"),
            "--grace", "3", "--no-preflight", *[f"--env={k}={v}" for k, v in env.items()], "--", str(worker)]
    with open(out, "wb") as stdout, open(f"{out}.err", "wb") as stderr:
        return subprocess.Popen(peak_of(argv, peak) if peak else argv, stdout=stdout, stderr=stderr)


def stderr_of(out: Path) -> str:
    return Path(f"{out}.err").read_text(errors="replace")


def wait_for(path: Path, seconds: float, why: str) -> float:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} not written within {seconds:.0f} s: {why}"
        time.sleep(0.2)
    return path.stat().st_mtime


def stamped_lines(log: Path) -> Iterator[bytes]:
    """The launcher log's lines, each checked to carry the stamp and to fit MAX_LINE; the stamp taken off."""
    with open(log, "rb") as handle:
        for line in handle:
            assert line.endswith(b"\n") and len(line) - 1 <= MAX_LINE, line[:200]
            assert STAMP.match(line), line[:200]
            yield line[29:-1]


def step_line(number: int) -> bytes:
    return f"step {number} loss 0.12345 lr 0.0001 some more text to pad the line out".encode()


def check_every_line_is_there(log: Path, count: int) -> None:
    """The worker's `count` numbered lines, in order and whole, then what it printed after them; where the stamper had to
    drop lines (it may, when its writing falls behind by 16 MiB), a note says so before the next line that made it."""
    expected, noted = 0, False
    for body in stamped_lines(log):
        words = body.split(maxsplit=2)
        if len(words) > 2 and words[0] == b"step" and words[1].isdigit() and body == step_line(int(words[1])):
            number = int(words[1])
            assert number == expected or (noted and number > expected), (expected, body)
            expected, noted = number + 1, False
        elif DROPPED.search(body) is not None:
            noted = True
        else:  # the rest of a line whose start was dropped, or what the worker printed after its numbered lines
            assert noted or expected == count, body[:200]
    assert expected == count or noted, expected


def stop_launch(proc: subprocess.Popen[bytes]) -> None:
    """The job ended on the node; the launch may still be printing its lines: stop it (nothing is left to tear down)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_a_worker_flooding_its_output_is_not_slowed_and_its_exit_is_recorded_at_once(cluster_factory: Any,
                                                                                    tmp_path: Path) -> None:
    """Before: the node's bash stamper took 10-19k lines/s and the job blocked behind it (a 10 s flood kept a job
    running ~35 min). Now 2,000,000 lines printed as fast as Python can take about as long as into /dev/null."""
    cluster: Cluster = cluster_factory(hosts(1))
    bin_dir, worker = job_files(tmp_path)
    env = {"OUT_LINES": "2000000", "OUT_TIMES": str(tmp_path / "times")}
    alone = baseline(worker, env, tmp_path / "times-alone")
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 1, "python": str(bin_dir / "python")})
    proc = launch(inv, tmp_path, worker, env, tmp_path / "out")
    node = tmp_path / "logs" / "h01"
    try:
        recorded = wait_for(node / "exit_code", 3 * alone + 60, "the job is slowed or blocked by its output")
        took, ended = worker_seconds(tmp_path / "times")
    finally:
        stop_launch(proc)
    assert took <= 3 * alone + 5, f"2,000,000 lines took the worker {took:.1f} s, {alone:.1f} s into /dev/null"
    assert recorded - ended < 10, f"exit recorded {recorded - ended:.1f} s after the worker's last line"
    assert (node / "exit_code").read_text() == "0\n"
    check_every_line_is_there(node / "launcher.log", 2_000_000)
    assert job_processes(cluster, str(worker)) == []


def test_a_crash_after_a_burst_of_output_is_reported_with_its_last_words(cluster_factory: Any, tmp_path: Path) -> None:
    """Before: a 2 s burst then a crash gave no failure report after 400 s. Now the burst does not slow the worker, the
    crash ends the launch with exit 5 and the traceback (its last words) is in the log and in the report."""
    cluster: Cluster = cluster_factory(hosts(1))
    bin_dir, worker = job_files(tmp_path)
    env = {"OUT_LINES": "200000", "OUT_TIMES": str(tmp_path / "times"), "OUT_FAIL": "1"}
    alone = baseline(worker, env, tmp_path / "times-alone")
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 1, "python": str(bin_dir / "python")})
    started = time.monotonic()
    proc = launch(inv, tmp_path, worker, env, tmp_path / "out")
    try:
        code = proc.wait(timeout=240)
    finally:
        stop_launch(proc)
    err = stderr_of(tmp_path / "out")
    took, _ = worker_seconds(tmp_path / "times")
    assert code == 5, err[-3000:]  # the job ran and failed
    assert took <= 3 * alone + 3, f"the burst took the worker {took:.1f} s, {alone:.1f} s into /dev/null"
    assert "RuntimeError: boom after the burst" in err + (tmp_path / "out").read_text(errors="replace")[-100_000:], err[-3000:]
    job = last_job()
    assert job["status"] == "failed" and job["nodes"][0]["exit_code"] == 1, job
    node = tmp_path / "logs" / "h01"
    check_every_line_is_there(node / "launcher.log", 200_000)
    last = list(stamped_lines(node / "launcher.log"))[-1]
    assert last == b"RuntimeError: boom after the burst", last
    assert time.monotonic() - started < 240
    assert job_processes(cluster, str(worker)) == []


def test_a_64_mib_line_is_stamped_in_pieces_before_the_exit_is_recorded_and_launch_stays_small(
        cluster_factory: Any, tmp_path: Path) -> None:
    """Before: a 300 MB line never streamed, yet the launch reported success (the wrapper waited 5 s for the stamper,
    then recorded the exit). Now the line is written as stamped pieces within MAX_LINE, every byte of it, the exit is
    recorded once the log holds them and the line after, and the launch that streams them stays small."""
    cluster: Cluster = cluster_factory(hosts(1))
    bin_dir, worker = job_files(tmp_path)
    size = 64 << 20
    env = {"OUT_LONG_LINE": str(size), "OUT_TIMES": str(tmp_path / "times"), "OUT_EXIT": "3"}
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 1, "python": str(bin_dir / "python")})
    proc = launch(inv, tmp_path, worker, env, tmp_path / "out", peak=tmp_path / "peak")
    try:
        code = proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        stop_launch(proc)
        pytest.fail(f"launch still running after 300 s: {stderr_of(tmp_path / 'out')[-3000:]}")
    peak_kib = int((tmp_path / "peak").read_text())
    err = stderr_of(tmp_path / "out")
    assert code == 5, err[-3000:]
    node = tmp_path / "logs" / "h01"
    assert (node / "exit_code").read_text() == "3\n"
    bodies = list(stamped_lines(node / "launcher.log"))
    assert bodies[-1] == b"after the long line"  # in the log before the exit was recorded
    assert (node / "launcher.log").stat().st_mtime <= (node / "exit_code").stat().st_mtime
    # every byte of the line: in pieces, or (where the log's writing fell 16 MiB behind) counted by a note
    pieces = [body for body in bodies[:-1] if DROPPED.match(body) is None]
    notes = [DROPPED.match(body) for body in bodies[:-1] if DROPPED.match(body) is not None]
    assert set(b"".join(pieces)) == {ord("x")}, [p[:80] for p in pieces if set(p) != {ord("x")}]
    kept = sum(map(len, pieces))
    assert kept + sum(int(m.group(2)) - int(m.group(1)) for m in notes if m) == size
    shown = (tmp_path / "out").read_bytes()
    assert shown.count(b"x") >= kept and b"after the long line" in shown  # streamed as the log holds it, nothing cut here
    assert peak_kib < 300 * 1024, f"launch peaked at {peak_kib // 1024} MiB streaming a {size >> 20} MiB line"
    assert job_processes(cluster, str(worker)) == []


# -- the controller: bounded whatever the node's log holds (local transport, no hosts needed) ---------------------------

FOLLOW = r'''
import json, select, sys
from ascendctl.inventory.load import load_inventory
from ascendctl.jobs.ssh_runner import SSHNodeStream
from ascendctl.remote.scripts import remote
from ascendctl.remote.transport.local import LocalTransport
node = load_inventory(sys.argv[1]).nodes[0]
def high_water():  # KiB; this process's own peak (ru_maxrss would start at the test process's, from before the exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
before = high_water()
command, stdin = remote("follow_log.sh", sys.argv[2], 0, "n0nce", 0, 0)
stream = SSHNodeStream("a", LocalTransport(node).spawn(command, stdin=stdin), "n0nce")
lines, ended = [], None
while ended is None:
    select.select([stream.fileno()], [], [], 0.5)
    got, ended = stream.pump()
    lines += [(len(line), line[:8], line[-80:]) for line in got]
print(json.dumps({"lines": lines, "exit": ended.exit_code, "before": before,
                  "peak": high_water()}))
'''


@pytest.fixture
def local_node(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text("nodes:\n  - {name: a, host: 127.0.0.1, transport: local}\n")
    return path


def test_following_a_100_mb_line_cuts_it_with_a_note_and_stays_small(local_node: Path, tmp_path: Path) -> None:
    """Before: one 100 MB line took launch (following: SSHNodeStream) to 462 MB. The nodes' stamper writes no such line;
    a log written around it (an older node, a launcher writing its log itself) still must not grow the follower."""
    node = tmp_path / "node"
    node.mkdir()
    size = 100_000_000
    with open(node / "launcher.log", "wb") as log:
        log.write(b"before\n" + b"x" * size + b"\nafter\n")
    (node / "exit_code").write_text("0\n")
    proc = subprocess.run([sys.executable, "-c", FOLLOW, str(local_node), str(node)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["exit"] == 0
    note = f"ascendctl: the line above was cut at {MAX_LINE} bytes: {size - MAX_LINE} more bytes not shown"
    assert [(n, head) for n, head, _ in result["lines"]] == [(6, "before"), (MAX_LINE, "xxxxxxxx"), (len(note), note[:8]),
                                                              (5, "after")], result["lines"]
    assert result["lines"][2][2] == note[-80:]
    grew = (result["peak"] - result["before"]) // 1024
    assert grew < 64, f"following a {size // 10**6} MB line took {grew} MiB more"


def start_local_job(local_node: Path, tmp_path: Path) -> tuple[str, Path]:
    """A finished local job (launch, attached), then its launcher log replaced by 300 MB of stamped lines."""
    bin_dir, worker = job_files(tmp_path)
    inv = tmp_path / "job.yaml"
    inv.write_text(f"defaults:\n  transport: local\n  slots: 1\n  python: {bin_dir}/python\nnodes:\n  - {{name: a, host: 127.0.0.1}}\n")
    done = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--log-dir",
                           str(tmp_path / "logs"), f"--env=OUT_TIMES={tmp_path / 'times'}", "--", str(worker)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    log = tmp_path / "logs" / "a" / "launcher.log"
    line = b"2026-11-23T10:00:00.123456 | " + b"y" * 1000 + b"\n"
    with open(log, "wb") as handle:
        for _ in range(300):
            handle.write(line * 1000)
    return last_job()["id"], log


LOG_LINES = r'''
import json, sys
from ascendctl.remote.group import NodeGroup
from ascendctl.jobs.service import job_inventory, load_job
from ascendctl.jobs.ssh_runner import SSHRunner
record = load_job(sys.argv[1])
def high_water():  # KiB; this process's own peak (ru_maxrss would start at the test process's, from before the exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
before = high_water()
runner = SSHRunner(NodeGroup(job_inventory(record, None)))
count = size = 0
for line in runner.log_lines(record, "a"):
    count += 1
    size += len(line)
runner.close()
print(json.dumps({"count": count, "size": size, "before": before,
                  "peak": high_water()}))
'''


def test_reading_a_300_mb_launcher_log_streams_it_line_by_line_in_bounded_memory(local_node: Path, tmp_path: Path) -> None:
    """The runner's side of `logs JOB`: before, `log_texts` returned every node's whole log (a 921 MB log: 2.76 GB)."""
    job_id, _ = start_local_job(local_node, tmp_path)
    proc = subprocess.run([sys.executable, "-c", LOG_LINES, job_id], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert (result["count"], result["size"]) == (300_000, 300_000 * 1029)
    grew = (result["peak"] - result["before"]) // 1024
    assert grew < 64, f"reading a 300 MB log took {grew} MiB more"


def test_logs_of_a_300_mb_launcher_log_prints_it_in_bounded_memory(local_node: Path, tmp_path: Path) -> None:
    """`ascendctl logs JOB` (not following) of a 300 MB log: every line printed, the process under 200 MiB (before: about
    three times the log's size; a 921 MB log hit MemoryError under a 1.5 GB cap)."""
    job_id, _ = start_local_job(local_node, tmp_path)
    with open(tmp_path / "shown", "wb") as out:
        proc = subprocess.Popen(peak_of([*ASCENDCTL, "logs", job_id], tmp_path / "peak"), stdout=out, stderr=subprocess.PIPE)
        proc.wait()
    peak_kib = int((tmp_path / "peak").read_text())
    assert proc.stderr is not None
    assert proc.returncode == 0, proc.stderr.read()[-3000:]
    proc.stderr.close()
    lines = 0
    with open(tmp_path / "shown", "rb") as shown:
        for line in shown:
            lines += 1
            assert line.rstrip(b"\n").endswith(b"y" * 1000), line[:200]
    assert lines == 300_000
    assert peak_kib < 200 * 1024, f"logs peaked at {peak_kib // 1024} MiB for a 300 MB log"


def test_bounded_lines_fed_in_pieces_ending_anywhere_give_each_line_cut_with_its_note() -> None:
    """What SSHNodeStream and log_lines split a node's output with: reads end anywhere (in a long line, in a UTF-8
    character); the lines are the same as cutting each whole line at `limit`, each cut one followed by its note."""
    import random

    from ascendctl.jobs.ssh_runner import BoundedLines

    rng = random.Random(30)
    lines = [b"", b"short", "é".encode() * 40, b"x" * 99, b"y" * 100, b"z" * 101, b"w" * 1000, b"tail \xff bytes"]
    lines += [bytes(rng.choice(b"ab\xc3\xa9") for _ in range(rng.randrange(300))) for _ in range(200)]
    data = b"\n".join(lines) + b"\nunfinished" + b"u" * 150
    expected = []
    for raw in [*lines, b"unfinished" + b"u" * 150]:
        expected.append(raw[:100].decode("utf-8", "replace"))
        if len(raw) > 100:
            expected.append(f"ascendctl: the line above was cut at 100 bytes: {len(raw) - 100} more bytes not shown")
    for _ in range(50):
        splitter, got, pos = BoundedLines(limit=100), [], 0
        while pos < len(data):
            step = rng.choice((1, 2, 7, 64, 99, 100, 101, 333, 5000))
            got += splitter.feed(data[pos:pos + step])
            pos += step
        assert got + splitter.finish() == expected
