"""Produce real torch.profiler Chrome traces of a 4-rank gloo job on localhost (tests/data/perf/INDEX.md).

Run from the repository root (writes tests/data/perf/<name>/rank<R>.pt.trace.json.gz):

    .venv/bin/python tests/data/perf/make_traces.py straggler --slow-rank 2
    .venv/bin/python tests/data/perf/make_traces.py even

It starts `torchrun --nproc-per-node 4` on 127.0.0.1 with gloo; each rank runs STEPS steps of a small matmul and one
all_reduce under torch.profiler (CPU activities), calls prof.step() per step (the ProfilerStep#N ranges) and exports
a Chrome trace. `--slow-rank R` makes rank R sleep EXTRA seconds of "compute" before each all_reduce, so it arrives
last at every collective and the other ranks wait for it inside the all_reduce.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

STEPS = 8
EXTRA = 0.06  # seconds the slow rank spends before each all_reduce


def worker(out: Path, slow_rank: int | None) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    a = torch.randn(128, 128)
    grad = torch.zeros(4096)
    dist.all_reduce(grad)  # warm the connections up outside the profile
    out.mkdir(parents=True, exist_ok=True)
    plain = out / f"rank{rank}.pt.trace.json"

    def save(prof: profile) -> None:
        prof.export_chrome_trace(str(plain))

    # a schedule makes prof.step() mark each step with a ProfilerStep#N range; record_shapes adds the collectives'
    # record_param_comms events (their "Collective name", "In msg nelems", ...)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, on_trace_ready=save,
                 schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1)) as prof:
        for _ in range(STEPS + 1):
            with record_function("forward_backward"):
                b = a @ a
                grad = b.flatten()[:4096].clone()
                if rank == slow_rank:
                    time.sleep(EXTRA)
            dist.all_reduce(grad)
            prof.step()
    with open(plain, "rb") as src, gzip.open(str(plain) + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--slow-rank", type=int, default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(__file__).resolve().parent / args.name
    if args.worker:
        worker(out, args.slow_rank)
        return
    venv = Path(sys.executable).parent
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    cmd = [str(venv / "torchrun"), "--nproc-per-node", "4", "--master-addr", "127.0.0.1", "--master-port", "29517",
           "--local-addr", "127.0.0.1", __file__, args.name, "--worker"]
    if args.slow_rank is not None:
        cmd += ["--slow-rank", str(args.slow_rank)]
    subprocess.run(cmd, check=True, env=env)


if __name__ == "__main__":
    main()
