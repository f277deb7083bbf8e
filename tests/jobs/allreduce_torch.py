"""All-reduce every worker's rank with gloo and check the sum; used by tests/cluster/test_launch_hosts.py.

JOB_FAIL_RANK=R: rank R raises after init while the others wait in the all-reduce.
JOB_SLEEP=S: every rank sleeps S seconds before the all-reduce (a job to interrupt).
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "60"))))
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world} started pid {os.getpid()}", flush=True)
time.sleep(float(os.environ.get("JOB_SLEEP", "0")))
if str(rank) == os.environ.get("JOB_FAIL_RANK"):
    raise RuntimeError(f"rank {rank} fails on purpose")
value = torch.tensor([float(rank)])
dist.all_reduce(value)
expected = world * (world - 1) / 2
print(f"rank {rank}: allreduce sum {value.item():g} expected {expected:g}", flush=True)
dist.destroy_process_group()
sys.exit(0 if value.item() == expected else 3)
