"""Terminal and JSON rendering: the only module that imports Rich.

stdout carries results (tables, command output, one JSON document); progress,
warnings and errors go to stderr. Text that came from nodes is printed with
markup disabled, so a log line containing `[/]` cannot break rendering.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .errors import AscendctlError, ExitCode
from .execute import ExecReport
from .inventory import BUILTIN_SOURCE, Inventory
from .models import EventSink, NodeEvent, NodeStatus
from .nodeset import fold, group_by
from .settings import CLUSTER_SETTINGS, NODE_SETTINGS

JSON_SCHEMA = 1

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

STATUS_STYLE = {
    NodeStatus.OK: "green",
    NodeStatus.FAILED: "red",
    NodeStatus.UNREACHABLE: "red",
    NodeStatus.AUTH_FAILED: "red",
    NodeStatus.HOST_KEY: "red",
    NodeStatus.TIMEOUT: "yellow",
    NodeStatus.ERROR: "magenta",
}


def error(message: str, *, subject: str | None = None, hint: str | None = None, level: str = "error") -> None:
    """Print `ascendctl: <level>: [<subject>: ]<message>` and an optional hint line to stderr."""
    lines = message.splitlines() or [""]
    prefix = f"ascendctl: {level}: " + (f"{subject}: " if subject else "")
    for line in lines:
        err.print(prefix + line, markup=False)
    if hint:
        err.print(f"  hint: {hint}", markup=False)


def warning(message: str, *, subject: str | None = None, hint: str | None = None) -> None:
    error(message, subject=subject, hint=hint, level="warning")


def show_exception(exc: AscendctlError) -> None:
    error(exc.message, hint=exc.hint)


def emit_json(command: list[str], exit_code: ExitCode, data: dict[str, Any], errors: list[dict[str, Any]] | None = None) -> None:
    """Write the one JSON document of a command to stdout: data keys plus the envelope keys."""
    status = "ok" if exit_code == ExitCode.OK else ("error" if exit_code in (ExitCode.ERROR, ExitCode.USAGE) else "partial")
    document = {"schema": JSON_SCHEMA, "command": command, "status": status, "exit_code": int(exit_code), **data,
                "errors": errors or []}
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    sys.stdout.flush()


@contextmanager
def progress(label: str) -> Iterator[EventSink | None]:
    """A progress bar on stderr while nodes are worked on; nothing when stderr is not a terminal."""
    if not err.is_terminal or os.environ.get("ASCENDCTL_NO_PROGRESS"):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True)
    task: list[Any] = []

    def sink(event: NodeEvent) -> None:
        if not task:
            task.append(bar.add_task(label, total=event.total))
        if event.kind == "finished":
            bar.advance(task[0])

    with bar:
        yield sink


# -- exec --------------------------------------------------------------------------------
def show_exec(report: ExecReport, *, as_json: bool, argv: list[str]) -> None:
    """Print exec results grouped by identical outcome, or the JSON document."""
    if as_json:
        errors = [
            {"code": n.status.value, "node": n.name, "message": n.error or f"exit {n.exit_code}"}
            for n in report.nodes
            if n.status != NodeStatus.OK
        ]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    for names, sample in report.groups():
        style = STATUS_STYLE[sample.status]
        status = sample.status.value if sample.exit_code is None else f"{sample.status.value}, exit {sample.exit_code}"
        out.rule(f"[bold]{escape(fold(names))}[/] ({len(names)}) [{style}]{status}[/]", align="left", characters="-")
        if sample.stdout:
            out.print(sample.stdout.rstrip("\n"), markup=False)
        if sample.stderr:
            out.print(sample.stderr.rstrip("\n"), markup=False, style="dim")
        if sample.error:
            out.print(f"{sample.status.value}: {sample.error}", markup=False, style=style)
            if sample.hint:
                out.print(f"  hint: {sample.hint}", markup=False)
    bad = [n for n in report.nodes if n.status != NodeStatus.OK]
    if bad:
        for (status, _), names in group_by(bad, key=lambda n: (n.status, n.error), name=lambda n: n.name):
            sample = next(n for n in bad if n.status == status and n.name == names[0])
            what = sample.error if sample.error else f"exited {sample.exit_code}"
            level = "error" if status != NodeStatus.FAILED else "warning"
            error(what, subject=fold(names), level=level)


# -- inventory ---------------------------------------------------------------------------
def show_inventory_valid(inventory: Inventory) -> None:
    names = fold(inventory.names)
    slots = sum(node.slots for node in inventory.nodes)
    out.print(f"{inventory.source}: ok, {len(inventory.nodes)} node(s) {names}, {slots} slot(s)", markup=False)


def show_inventory(inventory: Inventory, *, as_json: bool, argv: list[str]) -> None:
    """Nodes after range expansion, then each setting's value and source, folded across nodes."""
    if as_json:
        emit_json(argv, ExitCode.OK, inventory_to_dict(inventory))
        return
    if inventory.source == BUILTIN_SOURCE:
        err.print("ascendctl: note: no inventory file: using this machine only (pass -i FILE or create ./inventory.yaml)", markup=False)
    nodes = Table(title=f"nodes ({inventory.source})", title_justify="left", box=None, pad_edge=False)
    for column in ("#", "name", "host", "transport", "slots", "interface"):
        nodes.add_column(column)
    for node in inventory.nodes:
        nodes.add_row(str(node.index), escape(node.name), escape(node.host), node.transport, str(node.slots), escape(node.interface or "-"))
    out.print(nodes)
    out.print()
    table = Table(title="effective settings", title_justify="left", box=None, pad_edge=False)
    for column in ("setting", "value", "source", "nodes"):
        table.add_column(column)
    everyone = fold(inventory.names)
    for key in NODE_SETTINGS:
        grouped = group_by(inventory.nodes, key=lambda n: (_show(getattr(n, key)), n.sources.get(key, "default")), name=lambda n: n.name)
        for (value, source), names in grouped:
            table.add_row(key, escape(value), source, escape(fold(names)))
    for key in CLUSTER_SETTINGS:
        table.add_row(key, escape(_show(getattr(inventory, key))), inventory.sources.get(key, "default"), escape(everyone))
    out.print(table)


def inventory_to_dict(inventory: Inventory) -> dict[str, Any]:
    return {
        "source": inventory.source,
        "settings": {key: {"value": getattr(inventory, key), "source": inventory.sources.get(key, "default")} for key in CLUSTER_SETTINGS},
        "nodes": [
            {
                "name": node.name,
                "host": node.host,
                "index": node.index,
                "settings": {key: {"value": _jsonable(getattr(node, key)), "source": node.sources.get(key, "default")} for key in NODE_SETTINGS},
            }
            for node in inventory.nodes
        ],
    }


def _jsonable(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) or hasattr(value, "items") else value


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    if hasattr(value, "items"):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "{}"
    return str(value)
