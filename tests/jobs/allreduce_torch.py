"""All-reduce every worker's rank with gloo and check the sum; used by tests/cluster/test_launch_hosts.py.

JOB_FAIL_RANK=R: rank R raises after init while the others wait in the all-reduce.
JOB_SLEEP=S: every rank sleeps S seconds before the all-reduce (a job to interrupt).
JOB_PRINT_ENV=NAME,NAME: every rank prints `rank R env NAME=value` for these variables.
JOB_CHECK_SHA=NAME:SHA256,...: every rank prints `rank R env NAME sha256 ok` (or `differs`), never the value.
JOB_IGNORE_TERM=1: every rank ignores SIGTERM (a teardown then needs its SIGKILL).
"""

import datetime
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

if os.environ.get("JOB_IGNORE_TERM") == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "60"))))
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world} started pid {os.getpid()}", flush=True)
for name in filter(None, os.environ.get("JOB_PRINT_ENV", "").split(",")):
    print(f"rank {rank} env {name}={os.environ.get(name, '<unset>')}", flush=True)
for item in filter(None, os.environ.get("JOB_CHECK_SHA", "").split(",")):
    name, digest = item.split(":")
    seen = hashlib.sha256(os.environ.get(name, "").encode()).hexdigest()
    print(f"rank {rank} env {name} sha256 {'ok' if seen == digest else 'differs'}", flush=True)
time.sleep(float(os.environ.get("JOB_SLEEP", "0")))
if str(rank) == os.environ.get("JOB_FAIL_RANK"):
    raise RuntimeError(f"rank {rank} fails on purpose")
value = torch.tensor([float(rank)])
dist.all_reduce(value)
expected = world * (world - 1) / 2
print(f"rank {rank}: allreduce sum {value.item():g} expected {expected:g}", flush=True)
dist.destroy_process_group()
sys.exit(0 if value.item() == expected else 3)
