"""A job for `launch --restarts` (tests/adversarial/test_restarts_hosts.py): gloo all-reduces over JOB_STEPS steps.

ASCENDCTL_ATTEMPT (set by launch --restarts) picks what goes wrong, only on the attempt JOB_BAD_ATTEMPT (default 1; `all`:
on every attempt):
JOB_KILL_RANK=R: rank R kills itself with SIGKILL at step 2 (a transient: the next attempt runs through);
JOB_SLEEP_ATTEMPT=S: every rank sleeps S seconds at step 2 (a quiet job, for a node taken off the network meanwhile).
JOB_FAULT_RANK=R with JOB_FAULT_LINE=FILE: rank R prints FILE's first line (a real device fault's log line) at step 2
and exits 1 (a fault of its node: `launch --restarts` replaces the node).
JOB_IMPORT=NAME: every rank imports NAME first (a missing module: the job's own error, on every attempt).
JOB_CKPT_DIR=DIR: rank 0 saves a checkpoint after each step (DIR/ckpt-N/, its data, then a `.metadata` marker last, as
torch's distributed checkpoint does); on the bad attempt it leaves ckpt-2 cut short (data, no marker). A relaunch
resumes after the step of ASCENDCTL_RESUME_FROM (set by launch --checkpoint-dir).
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
bad = os.environ.get("JOB_BAD_ATTEMPT", "1") in (attempt, "all")
print(f"rank {rank}: attempt {attempt} started", flush=True)
value = torch.ones(1)
ckpt = os.environ.get("JOB_CKPT_DIR")
resume = os.environ.get("ASCENDCTL_RESUME_FROM")
first = int(resume.rsplit("-", 1)[1]) + 1 if resume else 1
if resume:
    print(f"rank {rank}: resuming from {resume}", flush=True)  # no step named: a relaunch that dies at once logs none
for step in range(first, int(os.environ.get("JOB_STEPS", "4")) + 1):
    if bad and step == 2:
        if ckpt and rank == 0:  # a save cut short: its data, never its marker
            os.makedirs(f"{ckpt}/ckpt-2", exist_ok=True)
            with open(f"{ckpt}/ckpt-2/rank0.distcp", "w") as f:
                f.write("partial")
        if str(rank) == os.environ.get("JOB_KILL_RANK"):
            time.sleep(1)  # rank 0 has written its part by then
            os.kill(os.getpid(), signal.SIGKILL)
        if str(rank) == os.environ.get("JOB_FAULT_RANK"):
            with open(os.environ["JOB_FAULT_LINE"], encoding="utf-8") as f:
                print(f.readline().rstrip("\n"), flush=True)
            raise SystemExit(1)
        time.sleep(float(os.environ.get("JOB_SLEEP_ATTEMPT", "0")))
    dist.all_reduce(value)
    print(f"rank {rank}: step {step} done", flush=True)
    if ckpt and rank == 0:
        os.makedirs(f"{ckpt}/ckpt-{step}", exist_ok=True)
        with open(f"{ckpt}/ckpt-{step}/rank0.distcp", "w") as f:
            f.write(f"step {step}\n" * 100)
        with open(f"{ckpt}/ckpt-{step}/.metadata", "w") as f:
            f.write("done")
dist.destroy_process_group()
print(f"rank {rank}: attempt {attempt} finished", flush=True)
