"""A real gloo hang for the Flight Recorder tests: every rank all-reduces a 4x8 float tensor in a loop, ranks 0 and 2
also broadcast in a group of their own; rank JOB_STUCK_RANK (default 2) sleeps before its 5th all-reduce, so every
other rank blocks in all-reduce #5 of the default group. Each rank touches READY_DIR/<rank> when it reaches step 5.

With PICKLE_DIR set, a thread writes torch's pickle dump (`_dump_fr_trace()`, the form torch's watchdog writes on a
timeout) to PICKLE_DIR/torch-fr-rank-<rank> once PICKLE_DIR/request exists. Run by tests/data/flight/make_dumps.py and
by tests/test_flight_recorder.py (through `ascendctl launch --flight-recorder`).
"""

import datetime
import os
import threading
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "120"))))
rank = dist.get_rank()
stuck = int(os.environ.get("JOB_STUCK_RANK", "2"))
pair = dist.new_group([0, 2])  # a second group: gloo's pg_config keys it '' like the first
value = torch.ones(4, 8)


def pickle_on_request(folder: str) -> None:
    while not os.path.exists(os.path.join(folder, "request")):
        time.sleep(0.1)
    from torch._C._distributed_c10d import _dump_fr_trace

    target = os.path.join(folder, f"torch-fr-rank-{rank}")
    with open(target + ".tmp", "wb") as out:
        out.write(_dump_fr_trace())
    os.rename(target + ".tmp", target)


if os.environ.get("PICKLE_DIR"):
    threading.Thread(target=pickle_on_request, args=(os.environ["PICKLE_DIR"],), daemon=True).start()

for step in range(1, 1001):
    if step == 5 and os.environ.get("READY_DIR"):
        open(os.path.join(os.environ["READY_DIR"], str(rank)), "w").close()
    if rank == stuck and step == 5:
        time.sleep(600)  # the stuck rank
    dist.all_reduce(value)
    if rank in (0, 2):
        dist.broadcast(torch.ones(3), src=0, group=pair)
dist.destroy_process_group()
