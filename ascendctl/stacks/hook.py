"""Where the stacks hook lives in a job's node directory and what `launch` ships there. Pure; must not import typer or rich.

`launch` puts `sitecustomize.py` (this package's, read as data, never imported) into `<node dir>/pyhook/` with the
start payload and that directory first on the job's PYTHONPATH; every rank then writes its stacks, on SIGWINCH, to
`<node dir>/stacks/live/rank-<rank>.<pid>.txt`, and `stacks` moves each capture into `<node dir>/stacks/<stamp>/`.
"""

from __future__ import annotations

import signal
from functools import lru_cache
from importlib.resources import files

HOOK_DIR = "pyhook"  # under the node's job directory: sitecustomize.py, first on PYTHONPATH
STACKS_DIR = "stacks"  # under the node's job directory: live/ (the ranks' files) and one folder per capture
LIVE_DIR = "live"
SIGNAL_NAME = "WINCH"  # default action: ignore; see sitecustomize.py for why this one
# the number the node's kernel uses for it, to read SigCgt in /proc/PID/status (28 on every Linux ascendctl targets)
SIGNAL_NUMBER = int(getattr(signal, "SIGWINCH", 28))


def hook_dir(node_dir: str) -> str:
    """The directory launch puts first on a node's PYTHONPATH."""
    return f"{node_dir}/{HOOK_DIR}"


@lru_cache(maxsize=None)
def hook_source() -> str:
    """The text of the sitecustomize.py that launch ships to every node."""
    return (files("ascendctl") / "stacks" / "sitecustomize.py").read_text(encoding="utf-8")


def hook_files() -> tuple[tuple[str, str, int], ...]:
    """(path under the node's job directory, text, mode) of the hook, for the start payload."""
    return ((f"{HOOK_DIR}/sitecustomize.py", hook_source(), 0o600),)
