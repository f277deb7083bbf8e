"""Options shared by commands, the error boundary, and small helpers for the CLI package."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, TypeVar

import typer

from ..errors import AscendctlError, ExitCode

if TYPE_CHECKING:
    from ..inventory import Inventory

F = TypeVar("F", bound=Callable[..., Any])

state: dict[str, Any] = {"debug": False}

InventoryOpt = Annotated[
    Optional[str],
    typer.Option("-i", "--inventory", envvar="ASCENDCTL_INVENTORY", help="Inventory YAML (default: ./inventory.yaml, else this machine only).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ConnectTimeoutOpt = Annotated[Optional[float], typer.Option("--connect-timeout", help="Seconds to connect and authenticate.", min=0.1, show_default=False)]
CommandTimeoutOpt = Annotated[Optional[float], typer.Option("--command-timeout", help="Seconds a remote command may run.", min=0.1, show_default=False)]
FanoutOpt = Annotated[Optional[int], typer.Option("--fanout", help="Nodes contacted at once.", min=1, show_default=False)]
AcceptKeysOpt = Annotated[bool, typer.Option("--accept-new-host-keys", help="Accept and record unknown host keys (never changed ones).")]
NodesOpt = Annotated[Optional[str], typer.Option("-w", "--nodes", metavar="NODESET",
                                                 help="Only these nodes: names or hosts in node-set syntax (n[01-04],n07; @group).",
                                                 show_default=False)]
ExcludeOpt = Annotated[Optional[str], typer.Option("-x", "--exclude", metavar="NODESET",
                                                   help="Leave these nodes out (same syntax as -w).", show_default=False)]


def load_selected(inventory: str | None, nodes: str | None = None, exclude: str | None = None,
                  flags: dict[str, Any] | None = None) -> "Inventory":
    """The inventory (file, $ASCENDCTL_INVENTORY, ./inventory.yaml or this machine) narrowed by -w/-x."""
    from ..inventory import load_inventory
    from ..selection import select_nodes

    return select_nodes(load_inventory(inventory, flags=flags), nodes, exclude)


def cli_errors(func: F) -> F:
    """Turn AscendctlError into a message and its exit code; anything else into an internal error."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from .. import ui

        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except AscendctlError as exc:
            from ..errors import Interrupted

            if isinstance(exc, Interrupted):
                names = exc.incomplete
                from ..nodeset import fold

                ui.error(f"{fold(names)} did not complete" if names else "stopped", subject="interrupted", level="error")
            else:
                ui.show_exception(exc)
            raise typer.Exit(int(exc.exit_code)) from None
        except KeyboardInterrupt:
            ui.error("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Exception as exc:
            if state["debug"]:
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


def flags_of(**values: Any) -> dict[str, Any]:
    """Command-line overrides for the settings chain (None and False mean 'not given')."""
    return {key: value for key, value in values.items() if value not in (None, False)}


def argv_now() -> list[str]:
    return ["ascendctl", *sys.argv[1:]]


