"""The Typer application and its global options; each *_cmd module adds its commands to `app`."""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Optional

import typer

from ascendctl.version import __version__
from ascendctl.cli.common import GlobalOptionsGroup, state

app = typer.Typer(
    name="ascendctl",
    help="Launch and babysit multi-node training on Ascend NPU (and GPU) clusters.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold key paths and secrets
    add_completion=True,
    rich_markup_mode=None,  # help text is plain: `[node]` and `[OPTIONS]` are text, not markup
    cls=GlobalOptionsGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="\b\nExamples:\n  ascendctl preflight -i cluster.yaml\n  ascendctl exec -w 'n[01-04]' -- npu-smi info\n"
           "  ascendctl launch -i cluster.yaml --launcher torchrun -- train.py\n  ascendctl triage bundle.tar.gz\n\n"
           "\b\nExit codes: 0 ok, 1 error, 2 usage or bad inventory, 3 checks failed, 4 nodes unreachable, 5 job failed,\n"
           "130 interrupted. -v/-q/--debug may also follow the command.",
)
inventory_app = typer.Typer(help="Check and show the inventory.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(inventory_app, name="inventory")


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ascendctl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version and exit.")] = None,
    verbose: Annotated[int, typer.Option("-v", "--verbose", count=True, metavar="", show_default=False, help="More log output on stderr (-vv for debug, -vvv adds paramiko's).")] = 0,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for internal errors (and in log records).")] = False,
) -> None:
    """Launch and babysit multi-node training on Ascend NPU (and GPU) clusters."""
    from ascendctl.ui import LogFormatter

    state["debug"] = debug
    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter(tracebacks=debug))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # paramiko logs a failed handshake as ERROR records holding traceback lines (not exc_info), and
    # ascendctl reports every such failure itself: its logger speaks only at -vvv.
    logging.getLogger("paramiko").setLevel(logging.DEBUG if verbose >= 3 else logging.CRITICAL)
