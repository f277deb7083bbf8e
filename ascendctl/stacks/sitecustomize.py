"""ascendctl's stacks hook: every rank of a launched job dumps its Python stacks on SIGWINCH (`ascendctl stacks`).

Shipped by `ascendctl launch` into `<node dir>/pyhook/sitecustomize.py` on every node and put first on the job's
PYTHONPATH, so each Python process of the job imports it at start-up (site.py). Never imported by ascendctl itself.

In a worker of the job (torchrun's: RANK and LOCAL_RANK set; msrun's: MS_ROLE=MS_WORKER) it opens
`<node dir>/stacks/live/rank-<rank>.<pid>.txt` (append mode), writes one header line (rank, local rank, pid, the
main thread's id) and registers `faulthandler` on SIGWINCH for all threads: the dump is written by a C-level handler
from inside the signal, so a rank blocked in C (a collective, a sleep, a read) answers too, with one short pause.
SIGWINCH because its default action is to ignore it (a process without the hook is not harmed by it) and nothing a
headless training process runs uses it: torch's c10 uses SIGUSR2 for its fatal-signal stack traces, Slurm and
Lightning SIGUSR1/SIGUSR2, torchrun and msrun SIGTERM/SIGINT/SIGHUP/SIGQUIT. ASCENDCTL_STACKS=0 turns the hook off.

The launchers, msrun's scheduler and the processes a rank starts itself (DataLoader workers, compile workers: they
inherit ASCENDCTL_STACKS_PID) are left alone. Then the sitecustomize that was there before (the next one on
sys.path: a site-packages one, the distribution's) runs, as if this one did not exist. Any error of the hook is
swallowed: it must never stop a job from starting. Standard library only; runs in the job's own Python (3.6+).

With ASCENDCTL_FLIGHT_RECORDER=1 (`launch --flight-recorder`) a registered rank also starts a daemon thread that
waits for `<node dir>/stacks/live/fr-rank-<rank>.<pid>.request` (stacks_node.sh creates it), then writes torch's
Flight Recorder (and torch_npu's HCCL one) as JSON to `fr-rank-<rank>.<pid>.json` and removes the request. A thread,
because a rank blocked in a collective never runs a Python signal handler (those run in the main thread only), while
the collective's wait releases the GIL, so another thread can call the dump API. It polls (a stat every
_FLIGHT_POLL seconds) rather than blocking on a FIFO, so that a rank that died can never block the node program.
It never imports torch: a process that has not loaded torch.distributed says so in the file.
"""

import os
import sys

_ENV_PID = "ASCENDCTL_STACKS_PID"  # set by a registered rank for its children: they are not ranks of their own
_hook: object = None  # the open stacks file (faulthandler keeps its own reference too)
_FLIGHT_POLL = 0.2  # seconds between the flight recorder thread's looks for a request
_FLIGHT_APIS = (("torch", "torch._C._distributed_c10d", "_dump_fr_trace_json"),
                ("hccl", "torch_npu._C._distributed_c10d", "_dump_hccl_trace_json"))


def _rank() -> "tuple[str, str, str] | None":
    """(rank, local rank, launcher) of a worker of the job, from its environment; None for any other process."""
    env = os.environ
    rank, local = env.get("RANK", ""), env.get("LOCAL_RANK", "")
    if rank.isdigit() and local.isdigit():
        return rank, local, "torchrun"
    if env.get("MS_ROLE") == "MS_WORKER":
        rank = env.get("RANK_ID", "") or env.get("MS_NODE_ID", "")
        if rank.isdigit():
            local = env.get("DEVICE_ID", "")
            return rank, local if local.isdigit() else "-", "msrun"
    return None


def _register() -> None:
    global _hook
    if os.environ.get("ASCENDCTL_STACKS", "1") == "0" or os.environ.get(_ENV_PID):
        return
    found = _rank()
    if found is None:
        return
    import _thread
    import faulthandler
    import signal

    rank, local, launcher = found
    live = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "stacks", "live")
    if not os.path.isdir(live):
        os.makedirs(live, exist_ok=True)
    pid = os.getpid()
    stream = open(os.path.join(live, "rank-%s.%d.txt" % (rank, pid)), "a", buffering=1)
    stream.write("# ascendctl-stacks rank=%s local_rank=%s launcher=%s pid=%d main_thread=0x%016x python=%s\n"
                 % (rank, local, launcher, pid, _thread.get_ident(), sys.version.split()[0]))
    stream.flush()
    faulthandler.register(signal.SIGWINCH, file=stream, all_threads=True, chain=False)
    os.environ[_ENV_PID] = str(pid)
    _hook = stream
    if os.environ.get("ASCENDCTL_FLIGHT_RECORDER") == "1":
        _flight_recorder(live, rank, pid)


def _flight_recorder(live: str, rank: str, pid: int) -> None:
    """Start the thread that dumps the Flight Recorder when asked (the module docstring says why a thread)."""
    import threading
    import time

    request = os.path.join(live, "fr-rank-%s.%d.request" % (rank, pid))
    target = os.path.join(live, "fr-rank-%s.%d.json" % (rank, pid))

    def serve() -> None:
        while os.getpid() == pid:  # a forked child has no such thread, but be sure
            time.sleep(_FLIGHT_POLL)
            if not os.path.exists(request):
                continue
            try:
                _flight_dump(target, int(rank), pid)
            except Exception:  # never disturb the job; stacks_node.sh reports the missing dump
                pass
            try:
                os.unlink(request)
            except OSError:
                pass

    threading.Thread(target=serve, name="ascendctl-flight-recorder", daemon=True).start()


def _flight_dump(target: str, rank: int, pid: int) -> None:
    """Every Flight Recorder this process has loaded, as one JSON document (ascendctl/stacks/flight.py reads it)."""
    import json

    dumps = {}  # type: dict[str, object]
    errors = []  # type: list[str]
    for source, module, name in _FLIGHT_APIS:
        top, _, rest = module.partition(".")
        found = sys.modules.get(top)
        for part in rest.split("."):
            found = getattr(found, part, None)
        dump = getattr(found, name, None)
        if dump is None:
            continue
        try:
            dumps[source] = json.loads(dump())
        except Exception as exc:
            errors.append("%s: %s: %s" % (name, type(exc).__name__, str(exc)[:300]))
    if not dumps and not errors:
        errors.append("torch.distributed is not loaded in this process: no Flight Recorder to dump")
    with open(target + ".tmp", "w") as stream:
        json.dump({"ascendctl_flight_recorder": 1, "rank": rank, "pid": pid, "dumps": dumps, "errors": errors}, stream)
    os.rename(target + ".tmp", target)


def _chain() -> None:
    """Run the sitecustomize this one hides: the next one on sys.path after this one's directory, which then stands
    in sys.modules as `sitecustomize` (importlib keeps what a module leaves there), as if this one did not exist."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    entries = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    after = sys.path[entries.index(here) + 1:] if here in entries else sys.path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", after)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _register()
except Exception:  # never stop a job from starting: `ascendctl stacks` says this rank has no hook
    pass
_chain()  # its errors are its own, reported by site.py as they would be without this hook
