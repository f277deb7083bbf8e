"""All-reduce every worker's rank with MindSpore collectives on CPU and check the sum.

JOB_FAIL_RANK=R: rank R raises after init while the others wait in the all-reduce.
JOB_SLEEP=S: every rank sleeps S seconds before the all-reduce (a job to interrupt).
JOB_STALL_RANK=R: rank R stalls (sleeps 600 s in Python, in `stall`) before the all-reduce the others wait in: a hang
for `ascendctl stacks` (tests/cluster/test_stacks_hosts.py).
"""

import os
import sys
import time

import mindspore as ms
from mindspore import ops
from mindspore.communication import get_group_size, get_rank, init

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
init()
rank, world = get_rank(), get_group_size()
print(f"rank {rank}/{world} started pid {os.getpid()}", flush=True)
time.sleep(float(os.environ.get("JOB_SLEEP", "0")))
if str(rank) == os.environ.get("JOB_FAIL_RANK"):
    raise RuntimeError(f"rank {rank} fails on purpose")


def stall() -> None:
    print(f"rank {rank}: stalling before the all-reduce", flush=True)
    time.sleep(600)  # the stalled rank


if str(rank) == os.environ.get("JOB_STALL_RANK"):
    stall()
value = ops.AllReduce()(ms.Tensor([float(rank)], ms.float32)).asnumpy()[0]
expected = world * (world - 1) / 2
print(f"rank {rank}: allreduce sum {value:g} expected {expected:g}", flush=True)
sys.exit(0 if value == expected else 3)
