"""Produce real torch.profiler Chrome traces of a 4-rank gloo job on localhost (tests/data/perf/INDEX.md).

Run from the repository root (writes tests/data/perf/<name>/rank<R>.pt.trace.json.gz):

    .venv/bin/python tests/data/perf/make_traces.py straggler --slow-rank 2
    .venv/bin/python tests/data/perf/make_traces.py even

`--links` runs the link job instead (tests/cluster/test_perf_hosts.py runs it on test hosts through `ascendctl launch`,
one rank per host, `--worker --out DIR`): each step a matmul, an all_reduce of LINK_FLOATS floats, then `rounds`,
each after a barrier, in which pairs of ranks `send` and `recv` LINK_FLOATS floats, each rank in one pair at most, so
every ordered pair of ranks moves 1 MiB once per step and each receiver's `gloo:recv` times its link (the barrier keeps
a late sender out of it). `--out DIR` writes the traces there instead.

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
from typing import Callable

STEPS = 8
EXTRA = 0.06  # seconds the slow rank spends before each all_reduce
LINK_STEPS = 3  # profiled steps of the link job (after one warm-up step)
LINK_FLOATS = 1 << 18  # 1 MiB of float32 per all_reduce and per transfer


def profiled(out: Path, steps: int, step: Callable[[], None]) -> None:
    """Run `step` once as a warm-up and `steps` times profiled under torch.profiler (CPU activities, record_shapes),
    prof.step() after each, then write out/rank<R>.pt.trace.json.gz and leave the process group."""
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    out.mkdir(parents=True, exist_ok=True)
    plain = out / f"rank{dist.get_rank()}.pt.trace.json"

    def save(prof: profile) -> None:
        prof.export_chrome_trace(str(plain))

    # a schedule makes prof.step() mark each step with a ProfilerStep#N range; record_shapes adds the collectives'
    # record_param_comms events (their "Collective name", "In msg nelems", ...), the peer of a c10d::send / c10d::recv_
    # op (its third "Concrete Inputs") and the shape and type of the tensor a gloo range moves
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, on_trace_ready=save,
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
        for _ in range(steps + 1):
            step()
            prof.step()
    with open(plain, "rb") as src, gzip.open(str(plain) + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    plain.unlink()
    dist.destroy_process_group()


def worker(out: Path, slow_rank: int | None, extra: float = EXTRA) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import record_function

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    a = torch.randn(128, 128)
    dist.all_reduce(torch.zeros(4096))  # warm the connections up outside the profile

    def step() -> None:
        with record_function("forward_backward"):
            b = a @ a
            grad = b.flatten()[:4096].clone()
            if rank == slow_rank:
                time.sleep(extra)
        dist.all_reduce(grad)

    profiled(out, STEPS, step)


def rounds(world: int) -> list[list[tuple[int, int]]]:
    """The link job's rounds: every ordered pair (source, destination) once, by distance k = 1..world-1, packed in
    order into rounds where each rank is in one pair at most. A host then carries one transfer at a time, its data
    or its acknowledgements, never the data of one transfer queued in its shaped NIC ahead of the acknowledgements of
    another (which once made healthy links 25% slower than the rest)."""
    found: list[list[tuple[int, int]]] = []
    for k in range(1, world):
        pending = [(rank, (rank + k) % world) for rank in range(world)]
        while pending:
            busy: set[int] = set()
            found.append([])
            for pair in list(pending):
                if not busy & set(pair):
                    busy |= set(pair)
                    found[-1].append(pair)
                    pending.remove(pair)
    return found


def link_worker(out: Path) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import record_function

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    a = torch.randn(128, 128)
    grad, inbox = torch.ones(LINK_FLOATS), torch.empty(LINK_FLOATS)
    dist.all_reduce(torch.zeros(16))  # warm the connections up outside the profile

    def step() -> None:
        with record_function("forward_backward"):
            _ = a @ a  # compute
        dist.all_reduce(grad)
        for pairs in rounds(world):
            dist.barrier()
            for source, destination in pairs:
                if rank == source:
                    dist.send(grad, destination)
                elif rank == destination:
                    dist.recv(inbox, source)

    profiled(out, LINK_STEPS, step)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--slow-rank", type=int, default=None)
    parser.add_argument("--extra", type=float, default=EXTRA, help="seconds the slow rank spends before each all_reduce")
    parser.add_argument("--links", action="store_true", help="the link job (p2p rounds) instead of the straggler job")
    parser.add_argument("--out", type=Path, default=None, help="where the traces go (default: beside this script)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = args.out or Path(__file__).resolve().parent / args.name
    if args.worker:
        link_worker(out) if args.links else worker(out, args.slow_rank, args.extra)
        return
    venv = Path(sys.executable).parent
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    cmd = [str(venv / "torchrun"), "--nproc-per-node", "4", "--master-addr", "127.0.0.1", "--master-port", "29517",
           "--local-addr", "127.0.0.1", __file__, args.name, "--worker"]
    if args.slow_rank is not None:
        cmd += ["--slow-rank", str(args.slow_rank), "--extra", str(args.extra)]
    cmd += ["--links"] * args.links + (["--out", str(out)] if args.out else [])
    subprocess.run(cmd, check=True, env=env)


if __name__ == "__main__":
    main()
