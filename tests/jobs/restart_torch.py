"""A job for `launch --restarts` (tests/adversarial/test_restarts_hosts.py): gloo all-reduces over JOB_STEPS steps.

ASCENDCTL_ATTEMPT (set by launch --restarts) picks what goes wrong, only on the attempt JOB_BAD_ATTEMPT (default 1):
JOB_KILL_RANK=R: rank R kills itself with SIGKILL at step 2 (a transient: the next attempt runs through);
JOB_SLEEP_ATTEMPT=S: every rank sleeps S seconds at step 2 (a quiet job, for a node taken off the network meanwhile).
JOB_IMPORT=NAME: every rank imports NAME first (a missing module: the job's own error, on every attempt).
"""

import datetime
import os
import signal
import time

if os.environ.get("JOB_IMPORT"):
    __import__(os.environ["JOB_IMPORT"])

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "60"))))
rank = dist.get_rank()
attempt = os.environ.get("ASCENDCTL_ATTEMPT", "")
bad = attempt == os.environ.get("JOB_BAD_ATTEMPT", "1")
print(f"rank {rank}: attempt {attempt} started", flush=True)
value = torch.ones(1)
for step in range(1, int(os.environ.get("JOB_STEPS", "4")) + 1):
    if bad and step == 2:
        if str(rank) == os.environ.get("JOB_KILL_RANK"):
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(float(os.environ.get("JOB_SLEEP_ATTEMPT", "0")))
    dist.all_reduce(value)
    print(f"rank {rank}: step {step} done", flush=True)
dist.destroy_process_group()
print(f"rank {rank}: attempt {attempt} finished", flush=True)
