"""Rendering of `ascendctl inventory validate|show`."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..errors import ExitCode
from ..inventory import BUILTIN_SOURCE, Inventory
from ..nodeset import fold, group_by
from ..redact import redact_env, redact_value
from ..settings import CLUSTER_SETTINGS, NODE_SETTINGS
from . import emit_json, err, out


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
    if inventory.groups:
        groups = Table(title="groups (-w @NAME)", title_justify="left", box=None, pad_edge=False)
        for column in ("group", "nodes"):
            groups.add_column(column)
        for name, members in inventory.groups.items():
            groups.add_row("@" + escape(name), escape(fold(members)) or "-")
        out.print(groups)
        out.print()
    table = Table(title="effective settings", title_justify="left", box=None, pad_edge=False)
    for column in ("setting", "value", "source", "nodes"):
        table.add_column(column)
    everyone = fold(inventory.names)
    for key in ("name", "host"):  # where the node list itself came from (a Slurm allocation says)
        by_source = group_by(inventory.nodes, key=lambda n: n.sources.get(key), name=lambda n: n.name)
        for source, names in by_source:
            if source is not None:
                table.add_row(key, "(per node)", escape(source), escape(fold(names)))
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
        "settings": {key: {"value": _jsonable(getattr(inventory, key)), "source": inventory.sources.get(key, "default")} for key in CLUSTER_SETTINGS},
        "groups": {name: list(members) for name, members in inventory.groups.items()},
        "nodes": [
            {
                "name": node.name,
                "host": node.host,
                "index": node.index,
                "sources": {key: node.sources[key] for key in ("name", "host") if key in node.sources},
                "settings": {key: {"value": _jsonable(getattr(node, key)), "source": node.sources.get(key, "default")} for key in NODE_SETTINGS},
            }
            for node in inventory.nodes
        ],
    }


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple):
        return list(value)
    return dict(value) if hasattr(value, "items") else value


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    if hasattr(value, "items"):  # env: secret-named values and credentials inside values are never shown
        return " ".join(f"{k}={v}" for k, v in redact_env(value).items()) or "{}"
    return redact_value(str(value))
