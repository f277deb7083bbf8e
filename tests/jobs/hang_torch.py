"""A hang for `ascendctl stacks` (tests/cluster/test_stacks_hosts.py): every rank all-reduces in a loop with gloo;
rank JOB_STUCK_RANK (default 4) sleeps in Python before its JOB_STUCK_STEP-th (default 5th) all-reduce, so every other
rank blocks in it. JOB_STEP_SLEEP: seconds each step computes (sleeps) before its all-reduce (default 0: a steady pace
for `launch --hang-timeout auto` to learn).

Each rank prints `rank R: step N done` after each all-reduce, and the stuck rank `rank R: stuck before all-reduce #5`.
JOB_STEPS: all-reduces in all (default 1000); JOB_TIMEOUT: gloo's timeout in seconds (default 120: longer than the test).
"""

import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "120"))))
rank = dist.get_rank()
stuck = int(os.environ.get("JOB_STUCK_RANK", "4"))
stuck_step = int(os.environ.get("JOB_STUCK_STEP", "5"))
pace = float(os.environ.get("JOB_STEP_SLEEP", "0"))
value = torch.ones(1)


def train_step(step: int) -> None:
    if pace:
        time.sleep(pace)
    if rank == stuck and step == stuck_step:
        print(f"rank {rank}: stuck before all-reduce #{step}", flush=True)
        time.sleep(600)  # the stuck rank: the line `ascendctl stacks` names
    dist.all_reduce(value)


for step in range(1, int(os.environ.get("JOB_STEPS", "1000")) + 1):
    train_step(step)
    print(f"rank {rank}: step {step} done", flush=True)
dist.destroy_process_group()
