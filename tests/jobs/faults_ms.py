"""MindSpore (msrun, CPU collectives) with one injected fault; used by tests/cluster/test_triage_hosts.py.

JOB_FAULT on rank JOB_FAULT_RANK: `exit` (sys.exit(7) without a message), `raise` (RuntimeError) or `freeze`
(SIGSTOP to itself: every thread stops, its heartbeats to msrun's scheduler too, and it prints nothing), after init,
while the other ranks wait in an all-reduce.
"""

import os
import signal
import sys

import mindspore as ms
from mindspore import ops
from mindspore.communication import get_group_size, get_rank, init

ms.set_context(mode=ms.PYNATIVE_MODE)
ms.set_device("CPU")
init()
rank, world = get_rank(), get_group_size()
print(f"rank {rank}/{world} started pid {os.getpid()}", flush=True)
if str(rank) == os.environ.get("JOB_FAULT_RANK"):
    if os.environ.get("JOB_FAULT") == "exit":
        sys.exit(7)
    if os.environ.get("JOB_FAULT") == "freeze":
        os.kill(os.getpid(), signal.SIGSTOP)
    raise RuntimeError(f"rank {rank}: bad batch")
value = ops.AllReduce()(ms.Tensor([float(rank)], ms.float32)).asnumpy()[0]
print(f"rank {rank}: allreduce sum {value:g}", flush=True)
