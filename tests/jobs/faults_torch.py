"""A data-parallel toy training loop (gloo) with one injected fault; used by tests/cluster/test_triage_hosts.py.

Every rank logs `rank R: step S loss: X` after each step's all-reduce, so triage can see where
progress stopped. JOB_FAULT picks what goes wrong, on rank JOB_FAULT_RANK at step JOB_FAULT_STEP
(default 2):
  exit    the rank exits with code 7 without printing anything (os._exit: sys.exit(7) with a live gloo group
          sometimes aborts in the interpreter's teardown, SIGABRT instead of 7, which is another case)
  raise   the rank raises RuntimeError in the middle of training (JOB_FAULT_TEXT is appended to its message)
  hang    the rank stops calling collectives (sleeps) while the others wait in the all-reduce
  kill    the rank is killed by SIGKILL (sent to itself: no message, no traceback, as the OOM killer or an operator)
  nan     every rank's loss becomes NaN at that step (a diverged model): each logs it and exits 1
  import  (at start) `import asct_dep`, a module only some hosts have on their PYTHONPATH
  args    (at start, every rank) the script's own argument parsing rejects JOB_ARGS (a ValueError raised in parse_args)
  npu_event  the rank's NPU reports an HBM multi-bit ECC error in the node's device event log JOB_EVENT_LOG (CANN's
          slog/dev-os-N/run/event/event_*.log; `Event id=0x80e01801`, the id form of MindCluster's fault knowledge
          base), then the rank exits 7 without a word (its device is gone)
JOB_TIMEOUT: the gloo timeout in seconds (default 60). JOB_NUMEL: floats all-reduced per step
(default 4; a large value makes every step cross the network in full-size frames). JOB_MONITORED=1: every step first
passes `dist.monitored_barrier` (rank 0 then names the ranks that did not arrive).
"""

import datetime
import os
import signal
import sys
import time

fault = os.environ.get("JOB_FAULT", "")
if fault == "import":
    import asct_dep  # noqa: F401  (present on some hosts only)

import torch
import torch.distributed as dist


def parse_args(argv: list[str]) -> dict[str, str]:
    """The script's own options (`--name=value`); one it does not know is the job's arguments' fault."""
    known = {"--steps", "--lr"}
    unknown = [a for a in argv if a.split("=", 1)[0] not in known]
    if unknown:
        raise ValueError(f"remaining_argv: {unknown}")
    return dict(a.split("=", 1) for a in argv)


if fault == "args":
    parse_args(os.environ.get("JOB_ARGS", "").split())

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "60"))))
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank}/{world} started pid {os.getpid()}", flush=True)
target = os.environ.get("JOB_FAULT_RANK") == str(rank)
fault_step = int(os.environ.get("JOB_FAULT_STEP", "2"))
numel = int(os.environ.get("JOB_NUMEL", "4"))
torch.manual_seed(0)
weight = torch.zeros(4, requires_grad=True)
x, y = torch.randn(64, 4), torch.randn(64)
for step in range(1, 6):
    if step == fault_step and target:
        if fault == "npu_event":
            now = datetime.datetime.now()
            stamp = now.strftime("%Y-%m-%d-%H:%M:%S.") + f"{now.microsecond // 1000:03d}.{now.microsecond % 1000:03d}"
            with open(os.environ["JOB_EVENT_LOG"], "a") as log:
                log.write(f"[EVENT] TDT(4717,tsdaemon):{stamp} [tsdaemon.cpp:1811][RunSpecialProcess][tid:4717] "
                          "[TsdEVENT] Event id=0x80e01801.\n")
            fault = "exit"
        if fault == "exit":
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(7)
        if fault == "raise":
            raise RuntimeError(f"rank {rank}: bad batch at step {step}" + os.environ.get("JOB_FAULT_TEXT", ""))
        if fault == "hang":
            time.sleep(600)
        if fault == "kill":
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    loss = ((x @ weight - y) ** 2).mean()
    if fault == "nan" and step == fault_step:
        loss = loss * float("nan")
    if not torch.isfinite(loss):
        print(f"rank {rank}: step {step} loss: {loss.item():.4f}", flush=True)
        print(f"rank {rank}: loss is not finite at step {step}, stopping", flush=True)
        sys.exit(1)
    loss.backward()
    grad = weight.grad
    assert grad is not None
    payload = torch.cat([grad, torch.zeros(max(0, numel - 4))])
    if os.environ.get("JOB_MONITORED") == "1":
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=int(os.environ.get("JOB_TIMEOUT", "60"))))
    dist.all_reduce(payload)
    with torch.no_grad():
        weight -= 0.01 * payload[:4] / world
        grad.zero_()
    print(f"rank {rank}: step {step} loss: {loss.item():.4f}", flush=True)
dist.destroy_process_group()
