"""Host memory runs out on one rank; used by tests/cluster/test_triage_hosts.py.

Every rank joins a gloo group and logs `rank R/W started pid P`. Rank JOB_OOM_RANK then waits
(up to 60 s) until the file JOB_OOM_GO exists (the test first moves this pid into a small memory
cgroup) and allocates 50 MB blocks until the kernel OOM killer ends it; the other ranks wait in an
all-reduce. JOB_TIMEOUT: the gloo timeout in seconds (default 60).
"""

import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "60"))))
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world} started pid {os.getpid()}", flush=True)
if str(rank) == os.environ.get("JOB_OOM_RANK"):
    go = os.environ["JOB_OOM_GO"]
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    blocks = []
    for i in range(200):  # 10 GB: far above the cgroup's limit
        blocks.append(bytearray(50 * 2**20))
        for j in range(0, len(blocks[-1]), 4096):  # touch every page
            blocks[-1][j] = 1
        print(f"rank {rank}: allocated {(i + 1) * 50} MB", flush=True)
    raise SystemExit(f"rank {rank}: was not OOM-killed")
value = torch.tensor([float(rank)])
dist.all_reduce(value)
print(f"rank {rank}: allreduce sum {value.item():g}", flush=True)
dist.destroy_process_group()
