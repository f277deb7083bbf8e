"""perf benchmark: `ascendctl perf` over RANKS synthetic Chrome traces (gzip), and whether it names the slow rank.

Each trace has the shape of tests/data/perf/straggler (torch.profiler on CPU: ProfilerStep#N ranges, cpu_op ranges,
`gloo:all_reduce` ranges) with STEPS steps of OPS collectives each; rank SLOW computes 30% more, so it waits least.
Prints the files' size, the wall and CPU time (the reader processes' included), peak RSS (of the largest process, and
the process tree's sampled every 20 ms: the readers are processes of their own), the load average, and the verdict.
The temp dir is deleted.

Without arguments: 64 ranks x 50 steps x 20 ops, then 1,024 ranks x 10 steps x 20 ops (issue #31: < 10 s, < 500 MB).
Run from the repository root:  .venv/bin/python bench/perf.py [--ranks N [--steps 50] [--ops 20]] [--slow 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ASCENDCTL, timed


Draws = list[list[tuple[list[float], float]]]


def draws(ranks: int, steps: int, ops: int, slow: int) -> Draws:
    """Every rank's compute time (us) of each op of each step, and the longest: drawn once, as they describe one run."""
    rng = random.Random(31)
    found = []
    for _ in range(steps):
        step = []
        for _ in range(ops):
            computes = [900.0 * (1.3 if r == slow else 1.0) * rng.uniform(0.97, 1.03) for r in range(ranks)]
            step.append((computes, max(computes)))
        found.append(step)
    return found


def trace(rank: int, ranks: int, computes_of: Draws) -> dict[str, object]:
    """One rank's trace; every rank starts each op's compute together and leaves the all_reduce together, 300 us after
    the last one (the slow rank, most of the time) arrives."""
    events: list[dict[str, object]] = []
    t = 1_000_000.0
    for step, step_ops in enumerate(computes_of, start=1):
        start = t
        for computes, longest in step_ops:
            finish = t + longest + 300.0
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t,
                           "dur": computes[rank]})
            events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2,
                           "ts": t + computes[rank], "dur": finish - t - computes[rank], "args": {"Input Dims": [[4096]]}})
            t = finish
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": start, "dur": t - start})
    return {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": ranks}, "traceEvents": events}


# the runs made without arguments: issue #31's bound is 1,024 ranks in < 10 s and < 500 MB
RUNS = ((64, 50, 20), (1024, 10, 20))
TARGET_S, TARGET_MIB = 10.0, 500.0
# runs its arguments as a child and prints the child's peak RSS (KiB) on stderr: each run's own, not this script's
PEAK_RSS = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")


def _tree_rss_kib(root: int) -> int:
    """The resident memory of `root` and all its descendants now (KiB), from /proc."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        parents[int(entry)] = int(fields.get("PPid", "0").strip())
        rss[int(entry)] = int(fields.get("VmRSS", "0 kB").split()[0])
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    return sum(rss.get(pid, 0) for pid in tree)


def tree_peak_kib(argv: list[str]) -> int:
    """Run argv; the peak of its process tree's resident memory, sampled every 20 ms (KiB)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kib(proc.pid))
        time.sleep(0.02)
    return peak


def run(ranks: int, steps: int, ops: int, slow: int) -> None:
    """Write the traces of one run, time `ascendctl perf` over them, print the figures."""
    work = Path(tempfile.mkdtemp(prefix="ascendctl-bench-perf-"))
    try:
        size = 0
        table = draws(ranks, steps, ops, slow)
        for rank in range(ranks):
            path = work / f"rank{rank}.pt.trace.json.gz"
            path.write_bytes(gzip.compress(json.dumps(trace(rank, ranks, table)).encode(), 6))
            size += path.stat().st_size
        argv = [*ASCENDCTL, "perf", str(work), "--json"]
        load = os.getloadavg()[0]
        wall, cpu = timed(argv, ok_codes=(0, 3))
        measured = subprocess.run([sys.executable, "-c", PEAK_RSS, *argv], capture_output=True, text=True)
        document = json.loads(measured.stdout)
        rss = int(measured.stderr.split()[-1]) / 1024
        tree = tree_peak_kib(argv) / 1024
        calls = ranks * steps * ops
        met = "met" if wall < TARGET_S and max(rss, tree) < TARGET_MIB else "NOT met"
        print(f"perf: {ranks} ranks x {steps} steps x {ops} all_reduce = {calls} calls, "
              f"{size / 1e6:.1f} MB gzip; {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss:.0f} MiB "
              f"(its process tree: {tree:.0f} MiB) (target < {TARGET_S:g} s, < {TARGET_MIB:g} MiB: {met}); "
              f"{os.cpu_count()} cores, load average {load:.2f} before")
        print(f"verdict: {document['verdict']}")
        named = (document["straggler"] or {}).get("rank")
        print(f"slow rank {slow}: {'named' if named == slow else f'NOT named (named: {named})'}")
    finally:
        shutil.rmtree(work)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, help="one run of this many ranks (default: the runs of RUNS)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--ops", type=int, default=20)
    parser.add_argument("--slow", type=int, default=5)
    args = parser.parse_args()
    for ranks, steps, ops in RUNS if args.ranks is None else ((args.ranks, args.steps, args.ops),):
        run(ranks, steps, ops, args.slow)


if __name__ == "__main__":
    main()
