"""Shell programs shipped with ascendctl (ascendctl/sh/*.sh) and how they run on a node.

Every multi-line remote program is a `.sh` file in the package (shellcheck reads them in the test suite);
it reaches a node on the command's stdin (`sh -s -- ARGS`), so nothing is installed and every argument
is quoted. Pure; must not import typer or rich.
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from importlib.resources import files

SCRIPTS = ("job_wrapper.sh", "stamp_lines.sh", "follow_log.sh", "teardown_job.sh", "job_state.sh", "collect_node.sh",
           "slurm_task.sh", "probe_runner.sh", "name_lookup.sh", "stacks_node.sh", "checkpoint_scan.sh")


@lru_cache(maxsize=None)
def script(name: str) -> str:
    """The text of a packaged shell program."""
    return (files("ascendctl") / "sh" / name).read_text(encoding="utf-8")


def remote(name: str, *args: object) -> tuple[str, bytes]:
    """(command, stdin) that runs a packaged script with these arguments on a node."""
    return f"sh -s -- {shlex.join(str(a) for a in args)}", script(name).encode()
