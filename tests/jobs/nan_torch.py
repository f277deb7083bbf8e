"""A data-parallel toy training loop with gloo whose loss goes NaN on one rank; used by
tests/cluster/test_triage_hosts.py.

Every rank logs `rank R: step S loss: X` and all-reduces its gradient each step. On rank
JOB_NAN_RANK the loss becomes NaN at step JOB_NAN_STEP (default 3): it logs that loss, then stops
with exit code 1 ("loss is not finite") while the other ranks wait in the all-reduce.
JOB_TIMEOUT: the gloo timeout in seconds (default 60).
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "60"))))
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world} started pid {os.getpid()}", flush=True)
torch.manual_seed(0)
weight = torch.zeros(4, requires_grad=True)
x, y = torch.randn(64, 4), torch.randn(64)
for step in range(1, 6):
    loss = ((x @ weight - y) ** 2).mean()
    if str(rank) == os.environ.get("JOB_NAN_RANK") and step == int(os.environ.get("JOB_NAN_STEP", "3")):
        loss = loss * float("nan")
    print(f"rank {rank}: step {step} loss: {loss.item():.4f}", flush=True)
    if not torch.isfinite(loss):
        print(f"rank {rank}: loss is not finite at step {step}, stopping", flush=True)
        sys.exit(1)
    loss.backward()
    grad = weight.grad
    assert grad is not None
    dist.all_reduce(grad)
    with torch.no_grad():
        weight -= 0.01 * grad / world
        grad.zero_()
    dist.barrier()
dist.destroy_process_group()
