"""Command-line interface: the only module that imports Typer.

Each command is parse -> one core call -> render (ui) -> exit code. The single
error boundary is @cli_errors.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer

from . import __version__
from .errors import AscendctlError, ExitCode

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="ascendctl",
    help="Launch and babysit multi-node training on Ascend NPU (and GPU) clusters.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold key paths and secrets
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
inventory_app = typer.Typer(help="Check and show the inventory.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")

_state: dict[str, Any] = {"debug": False}

InventoryOpt = Annotated[
    Optional[str],
    typer.Option("-i", "--inventory", envvar="ASCENDCTL_INVENTORY", help="Inventory YAML (default: ./inventory.yaml, else this machine only).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ConnectTimeoutOpt = Annotated[Optional[float], typer.Option("--connect-timeout", help="Seconds to connect and authenticate.", min=0.1, show_default=False)]
CommandTimeoutOpt = Annotated[Optional[float], typer.Option("--command-timeout", help="Seconds a remote command may run.", min=0.1, show_default=False)]
FanoutOpt = Annotated[Optional[int], typer.Option("--fanout", help="Nodes contacted at once.", min=1, show_default=False)]
AcceptKeysOpt = Annotated[bool, typer.Option("--accept-new-host-keys", help="Accept and record unknown host keys (never changed ones).")]


def cli_errors(func: F) -> F:
    """Turn AscendctlError into a message and its exit code; anything else into an internal error."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from . import ui

        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except AscendctlError as exc:
            from .errors import Interrupted

            if isinstance(exc, Interrupted):
                names = exc.incomplete
                from .nodeset import fold

                ui.error(f"{fold(names)} did not complete" if names else "stopped", subject="interrupted", level="error")
            else:
                ui.show_exception(exc)
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            ui.error("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Exception as exc:
            if _state["debug"]:
                raise
            log_path = _write_crash_log()
            ui.error(f"{type(exc).__name__}: {exc} (details: {log_path})", level="internal error")
            raise typer.Exit(int(ExitCode.ERROR)) from None

    return wrapper  # type: ignore[return-value]


def _write_crash_log() -> str:
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "ascendctl"
    try:
        state.mkdir(parents=True, exist_ok=True)
        path = state / "last-error.log"
        path.write_text(traceback.format_exc(), encoding="utf-8")
        return str(path)
    except OSError:
        return "rerun with --debug"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ascendctl {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version and exit.")] = None,
    verbose: Annotated[int, typer.Option("-v", "--verbose", count=True, help="More log output on stderr (-vv for debug).")] = 0,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for internal errors.")] = False,
) -> None:
    """Launch and babysit multi-node training on Ascend NPU (and GPU) clusters."""
    _state["debug"] = debug
    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logging.basicConfig(level=level, format="ascendctl: %(levelname)s: %(name)s: %(message)s", stream=sys.stderr, force=True)
    logging.getLogger("paramiko").setLevel(logging.DEBUG if verbose >= 3 else logging.WARNING)


def _flags(**values: Any) -> dict[str, Any]:
    """Command-line overrides for the settings chain (None and False mean 'not given')."""
    return {key: value for key, value in values.items() if value not in (None, False)}


def _argv() -> list[str]:
    return ["ascendctl", *sys.argv[1:]]


@app.command("exec")
@cli_errors
def exec_command(
    command: Annotated[list[str], typer.Argument(help="Command to run with /bin/sh on every node (after --).", show_default=False)],
    inventory: InventoryOpt = None,
    as_json: JsonOpt = False,
    connect_timeout: ConnectTimeoutOpt = None,
    command_timeout: CommandTimeoutOpt = None,
    fanout: FanoutOpt = None,
    accept_new_host_keys: AcceptKeysOpt = False,
) -> None:
    """Run a shell command on every node; identical outputs are folded together."""
    from . import ui
    from .execute import run_command
    from .inventory import load_inventory

    flags = _flags(connect_timeout=connect_timeout, command_timeout=command_timeout, fanout=fanout, accept_new_host_keys=accept_new_host_keys)
    inv = load_inventory(inventory, flags=flags)
    with ui.progress("exec") as sink:
        report = run_command(inv, " ".join(command), on_event=sink)
    ui.show_exec(report, as_json=as_json, argv=_argv())
    raise typer.Exit(int(report.exit_code))


@inventory_app.command("validate")
@cli_errors
def inventory_validate(inventory: InventoryOpt = None) -> None:
    """Check the inventory file and report every problem at once (exit 2 if any)."""
    from . import ui
    from .inventory import load_inventory

    ui.show_inventory_valid(load_inventory(inventory))


@inventory_app.command("show")
@cli_errors
def inventory_show(inventory: InventoryOpt = None, as_json: JsonOpt = False) -> None:
    """Show nodes after range expansion and each effective setting with its source."""
    from . import ui
    from .inventory import load_inventory

    ui.show_inventory(load_inventory(inventory), as_json=as_json, argv=_argv())


def main() -> None:
    """Console-script entry point."""
    app()
