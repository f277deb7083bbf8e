"""Options shared by commands, the error boundary, and small helpers for the CLI package."""

from __future__ import annotations

import functools
import inspect
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, TypeVar

import typer
from typer.core import TyperGroup

from ascendctl.errors import AscendctlError, ExitCode

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory

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
HtmlOpt = Annotated[Optional[Path], typer.Option("--html", help="Also write the HTML report (as `ascendctl report`) to this file.",
                                                 show_default=False)]
AcceptKeysOpt = Annotated[bool, typer.Option("--accept-new-host-keys", help="Accept and record unknown host keys (never changed ones).")]
NodesOpt = Annotated[Optional[str], typer.Option("-w", "--nodes", metavar="NODESET",
                                                 help="Only these nodes: names or hosts in node-set syntax (n[01-04],n07; @group).",
                                                 show_default=False)]
ExcludeOpt = Annotated[Optional[str], typer.Option("-x", "--exclude", metavar="NODESET",
                                                   help="Leave these nodes out (same syntax as -w).", show_default=False)]
RerunFailedOpt = Annotated[bool, typer.Option("--rerun-failed", help="Only the nodes that failed or were unreachable in this "
                                              "command's last run on this inventory (-x still applies).")]
IncludeQuarantinedOpt = Annotated[bool, typer.Option("--include-quarantined", help="Also use the nodes `ascendctl nodes` lists as "
                                                     "quarantined (left out by default).")]

# The node options, declared once: a command names the ones it takes in `@node_options(...)` and receives them as one
# NodeOptions (parameter `cluster`); their flags, help and order in --help come from here.
NODE_OPTIONS: dict[str, tuple[Any, Any]] = {
    "inventory": (InventoryOpt, None),
    "nodes": (NodesOpt, None),
    "exclude": (ExcludeOpt, None),
    "connect_timeout": (ConnectTimeoutOpt, None),
    "command_timeout": (CommandTimeoutOpt, None),
    "fanout": (FanoutOpt, None),
    "accept_new_host_keys": (AcceptKeysOpt, False),
    "rerun_failed": (RerunFailedOpt, False),
    "include_quarantined": (IncludeQuarantinedOpt, False),
}
# Every command that reaches the nodes of an inventory (it takes -i and --connect-timeout) leaves quarantined nodes out
# and takes --include-quarantined: node_options adds it, NodeOptions.select applies it (docs/nodes.md).
REACHES_NODES = ("inventory", "connect_timeout")


@dataclass(frozen=True, slots=True)
class NodeOptions:
    """What the user said about which nodes and how to reach them (-i -w -x, timeouts, --fanout, host keys)."""

    inventory: str | None = None
    nodes: str | None = None
    exclude: str | None = None
    connect_timeout: float | None = None
    command_timeout: float | None = None
    fanout: int | None = None
    accept_new_host_keys: bool = False
    rerun_failed: bool = False
    include_quarantined: bool | None = None  # None: the command keeps quarantined nodes (it does not reach nodes)

    @property
    def flags(self) -> dict[str, Any]:
        """Command-line overrides for the settings chain (only what was given)."""
        return flags_of(connect_timeout=self.connect_timeout, command_timeout=self.command_timeout, fanout=self.fanout,
                        accept_new_host_keys=self.accept_new_host_keys)

    def select(self, command: str | None = None, *, base: "Inventory | None" = None,
               keep_quarantined: bool = False) -> "Inventory":
        """The inventory (-i, $ASCENDCTL_INVENTORY, ./inventory.yaml or this machine; or `base`, e.g. a job's nodes)
        narrowed by -w/-x, and with --rerun-failed to the nodes `command`'s last run left failed or unreachable; for a
        command that reaches nodes, without the quarantined ones unless --include-quarantined (said once on stderr) or
        `keep_quarantined` (a recorded job's own nodes: collect must take the logs of the node quarantined for it)."""
        from ascendctl.inventory.load import load_inventory
        from ascendctl.inventory.retry import rerun_nodes
        from ascendctl.inventory.selection import select_nodes

        loaded = base if base is not None else load_inventory(self.inventory, flags=self.flags)
        names = rerun_nodes(command, loaded.source) if self.rerun_failed and command else None
        chosen = select_nodes(loaded, self.nodes, self.exclude, names=names)
        if self.include_quarantined is not False or keep_quarantined:
            return chosen
        from ascendctl import ui
        from ascendctl.errors import UsageError
        from ascendctl.inventory.nodestate import without_quarantined
        from ascendctl.nodeset import fold

        kept, left_out = without_quarantined(chosen)
        if not left_out:
            return kept
        if not kept.nodes:
            raise UsageError(f"no node left to run on: {fold(left_out)} {'is' if len(left_out) == 1 else 'are'} quarantined",
                             hint="`ascendctl nodes` says why; `ascendctl nodes release NODESET`, or --include-quarantined to use them")
        count = f"{len(left_out)} quarantined node{'s' if len(left_out) != 1 else ''}"
        ui.error(f"leaving out {count}: {fold(left_out)} (ascendctl nodes; --include-quarantined to use them)", level="notice")
        return kept


def node_options(*names: str) -> Callable[[F], F]:
    """Give a command the node options `names` (keys of NODE_OPTIONS, shown in that order after its own options); the
    function takes them as one keyword parameter, `cluster: NodeOptions`."""
    unknown = [name for name in names if name not in NODE_OPTIONS]
    if unknown:
        raise ValueError(f"unknown node options: {unknown}")
    if all(name in names for name in REACHES_NODES) and "include_quarantined" not in names:
        names += ("include_quarantined",)
    chosen = [name for name in NODE_OPTIONS if name in names]

    def decorate(func: F) -> F:
        own = inspect.signature(func, eval_str=True)
        params = [p for p in own.parameters.values() if p.name != "cluster"]
        params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=NODE_OPTIONS[name][1],
                                     annotation=NODE_OPTIONS[name][0]) for name in chosen]
        params.sort(key=lambda p: p.kind)  # keyword-only parameters after the others, as Python requires

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            cluster = NodeOptions(**{name: kwargs.pop(name) for name in chosen if name in kwargs})
            return func(*args, cluster=cluster, **kwargs)

        wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": own.return_annotation}
        return wrapper  # type: ignore[return-value]

    return decorate


# Options of the top-level callback that users also type after the command (`ascendctl preflight -v`).
_GLOBAL_FLAGS = {"-q", "--quiet", "--debug", "--verbose"}


def _is_global(token: str) -> bool:
    return token in _GLOBAL_FLAGS or (len(token) > 1 and token[0] == "-" and token[1:] == "v" * (len(token) - 1))


class GlobalOptionsGroup(TyperGroup):
    """The top-level group: -v/-vv/-q/--debug are accepted anywhere before `--`, as users type them."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        cut = args.index("--") if "--" in args else len(args)
        hoisted = [a for a in args[:cut] if _is_global(a)]
        rest = [a for a in args[:cut] if not _is_global(a)] + args[cut:]
        return list(super().parse_args(ctx, hoisted + rest))


def examples(*lines: str, codes: str = "0 ok, 1 error, 2 usage or bad inventory, 3 checks failed, 4 nodes unreachable") -> str:
    """A command's --help epilog: examples, then its exit codes (click keeps `\\b` paragraphs as written)."""
    body = "\n".join(f"  {line}" for line in lines)
    return f"\b\nExamples:\n{body}\n\n\b\nExit codes: {codes}."


def cli_errors(func: F) -> F:
    """Turn AscendctlError into a message and its exit code; anything else into an internal error."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ascendctl import ui

        as_json = bool(kwargs.get("as_json"))
        junit = kwargs.get("junit")

        def failed(code: ExitCode, message: str, hint: str | None = None, problems: list[str] | None = None) -> typer.Exit:
            """The failure's message on stderr; with --json also its document on stdout, with --junit its XML file."""
            error = {"message": message, "hint": hint, **({"problems": problems} if problems else {})}
            if as_json:
                ui.emit_json(argv_now(), code, {}, errors=[error])
            if isinstance(junit, Path):
                _write_failure_junit(junit, message)
            return typer.Exit(int(code))

        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except AscendctlError as exc:
            from ascendctl.errors import Interrupted, InventoryError, NothingToDo

            if isinstance(exc, NothingToDo):  # a notice, not a failure: exit 0, and with --json an ok document
                ui.error(exc.message, level="notice", hint=exc.hint)
                if as_json:
                    ui.emit_json(argv_now(), ExitCode.OK, {"nothing_to_do": exc.message})
                raise typer.Exit(int(ExitCode.OK)) from None
            if isinstance(exc, Interrupted):
                names = exc.incomplete
                from ascendctl.nodeset import fold

                what = f"{fold(names)} did not complete" if names else "stopped"
                ui.error(f"{what} ({exc.signame})", subject="interrupted", level="error")
            else:
                ui.show_exception(exc)
            problems = exc.problems if isinstance(exc, InventoryError) else None
            raise failed(exc.exit_code, exc.message, exc.hint, problems) from None
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM/SIGHUP where interrupts.stop_on_signals is installed
            from ascendctl.errors import signal_name, stop_exit_code

            ui.error(f"stopped by {signal_name(stop)}", subject="interrupted")
            raise failed(stop_exit_code(signal_name(stop)), f"stopped by {signal_name(stop)}") from None
        except Exception as exc:
            if state["debug"]:
                raise
            log_path = _write_crash_log()
            ui.error(f"{type(exc).__name__}: {exc} (details: {log_path})", level="internal error")
            raise failed(ExitCode.ERROR, f"internal error: {type(exc).__name__}: {exc}", f"details: {log_path}") from None

    return wrapper  # type: ignore[return-value]


def _write_failure_junit(path: Path, message: str) -> None:
    """--junit is always written when asked: a run that failed before any check gives one errored testcase."""
    from ascendctl.preflight.junit import junit_error_xml

    try:
        path.write_text(junit_error_xml(message), encoding="utf-8")
    except OSError:
        pass  # the run's own error is what the user needs; it is already on stderr


def _write_crash_log() -> str:
    from ascendctl.jobs.record import state_dir

    state = state_dir()
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


