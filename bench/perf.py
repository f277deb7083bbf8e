"""perf benchmark: `ascendctl perf` over RANKS synthetic Chrome traces (gzip), and whether it names the slow rank.

Each trace has the shape of tests/data/perf/straggler (torch.profiler on CPU: ProfilerStep#N ranges, cpu_op ranges,
`gloo:all_reduce` ranges) with STEPS steps of OPS collectives each; rank SLOW computes 30% more, so it waits least.
Prints the files' size, the wall and CPU time, peak RSS, and the verdict. The temp dir is deleted.

Run from the repository root:  .venv/bin/python bench/perf.py [--ranks 64] [--steps 50] [--ops 20] [--slow 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

from common import ASCENDCTL, timed


def trace(rank: int, ranks: int, steps: int, ops: int, slow: int, rng: random.Random) -> dict[str, object]:
    """One rank's trace; every rank starts each op's compute together and leaves the all_reduce together, 300 us after
    the last one (the slow rank, most of the time) arrives."""
    events: list[dict[str, object]] = []
    t = 1_000_000.0
    for step in range(1, steps + 1):
        start = t
        for _ in range(ops):
            computes = [900.0 * (1.3 if r == slow else 1.0) * rng.uniform(0.97, 1.03) for r in range(ranks)]
            finish = t + max(computes) + 300.0
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t,
                           "dur": computes[rank]})
            events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2,
                           "ts": t + computes[rank], "dur": finish - t - computes[rank], "args": {"Input Dims": [[4096]]}})
            t = finish
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": start, "dur": t - start})
    return {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": ranks}, "traceEvents": events}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--ops", type=int, default=20)
    parser.add_argument("--slow", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ascendctl-bench-perf-"))
    try:
        size = 0
        for rank in range(args.ranks):
            rng = random.Random(31)  # the same draws on every rank: they describe one run
            path = work / f"rank{rank}.pt.trace.json.gz"
            path.write_bytes(gzip.compress(json.dumps(trace(rank, args.ranks, args.steps, args.ops, args.slow, rng)).encode(), 6))
            size += path.stat().st_size
        argv = [*ASCENDCTL, "perf", str(work), "--json"]
        wall, cpu = timed(argv, ok_codes=(0, 3))
        document = json.loads(subprocess.run(argv, capture_output=True, text=True).stdout)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        calls = args.ranks * args.steps * args.ops
        print(f"perf: {args.ranks} ranks x {args.steps} steps x {args.ops} all_reduce = {calls} calls, "
              f"{size / 1e6:.1f} MB gzip; {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss:.0f} MiB")
        print(f"verdict: {document['verdict']}")
        named = (document["straggler"] or {}).get("rank")
        print(f"slow rank {args.slow}: {'named' if named == args.slow else f'NOT named (named: {named})'}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
