"""Prints `rank R: step S` every STEP_SECONDS without flushing, until the file STOP_FILE exists (60 s at most).

Used by tests/cluster/test_launch_hosts.py to see that output streams while the job runs: on a pipe Python
block-buffers stdout, so without PYTHONUNBUFFERED these lines would reach ascendctl only when the rank exits.
"""

import os
import time

rank = os.environ.get("RANK", "?")
stop = os.environ["STOP_FILE"]
deadline = time.monotonic() + 60
step = 0
while not os.path.exists(stop) and time.monotonic() < deadline:
    step += 1
    print(f"rank {rank}: step {step}")  # no flush=True: the point of the test
    time.sleep(float(os.environ.get("STEP_SECONDS", "0.2")))
print(f"rank {rank}: done after {step} steps")
