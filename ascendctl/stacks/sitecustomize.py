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
"""

import os
import sys

_ENV_PID = "ASCENDCTL_STACKS_PID"  # set by a registered rank for its children: they are not ranks of their own
_hook: object = None  # the open stacks file (faulthandler keeps its own reference too)


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
