"""Rendering of `ascendctl inventory validate|show`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from ascendctl.errors import ExitCode
from ascendctl.inventory.load import BUILTIN_SOURCE
from ascendctl.nodeset import fold, group_by
from ascendctl.redact import redact_env, redact_value
from ascendctl.inventory.settings import CLUSTER_SETTINGS, NODE_SETTINGS
from ascendctl.inventory.starter import STDOUT
from ascendctl.ui import emit_json, err, error, out, print_columns, write_out

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ascendctl.inventory.load import Inventory
    from ascendctl.remote.transport.ssh_config import ConfigLine
    from ascendctl.inventory.starter import InitResult


def show_inventory_valid(inventory: Inventory, *, as_json: bool = False, argv: list[str] | None = None) -> None:
    names = fold(inventory.names)
    slots = sum(node.slots for node in inventory.nodes)
    if as_json:
        emit_json(argv or [], ExitCode.OK, {"source": inventory.source, "nodes": len(inventory.nodes), "node_set": names,
                                            "slots": slots, "groups": {k: list(v) for k, v in inventory.groups.items()}})
        return
    out.print(f"{inventory.source}: ok, {len(inventory.nodes)} node(s) {names}, {slots} slot(s)", markup=False)


def show_inventory(inventory: Inventory, *, as_json: bool, argv: list[str],
                   ssh_config: Mapping[str, Sequence[ConfigLine]] | None = None) -> None:
    """Nodes after range expansion, then each setting's value and source, folded across nodes; then what the ssh
    config decides (`ssh_config`: node name -> the lines taken), each line with its file:line."""
    ssh_config = ssh_config or {}
    if as_json:
        emit_json(argv, ExitCode.OK, inventory_to_dict(inventory, ssh_config))
        return
    if inventory.source == BUILTIN_SOURCE:
        err.print("ascendctl: note: no inventory file: using this machine only (pass -i FILE or create ./inventory.yaml)", markup=False)
    print_columns(f"nodes ({inventory.source})", ("#", "name", "host", "transport", "slots", "interface"),
                  [(str(node.index), node.name, node.host, node.transport, str(node.slots), node.interface or "-")
                   for node in inventory.nodes])
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
    folded: dict[tuple[str, ...], str] = {}  # most settings group every node the same way: fold each grouping once
    everyone = folded.setdefault(tuple(inventory.names), fold(inventory.names))
    shown: dict[int, str] = {}  # by id: nodes of one entry share their value objects, so each is formatted once

    def show_once(value: Any) -> str:
        text = shown.get(id(value))
        if text is None:
            text = shown[id(value)] = _show(value)
        return text

    for key in ("name", "host"):  # where the node list itself came from (a Slurm allocation says)
        by_source = group_by(inventory.nodes, key=lambda n: n.sources.get(key), name=lambda n: n.name)
        for source, names in by_source:
            if source is not None:
                table.add_row(key, "(per node)", escape(source), escape(fold(names)))
    for key in NODE_SETTINGS:
        grouped = group_by(inventory.nodes, key=lambda n: (show_once(getattr(n, key)), n.sources.get(key, "default")), name=lambda n: n.name)
        for (value, source), names in grouped:
            group = tuple(names)
            if group not in folded:
                folded[group] = fold(names)
            table.add_row(key, escape(value), source, escape(folded[group]))
    for key in CLUSTER_SETTINGS:
        table.add_row(key, escape(_show(getattr(inventory, key))), inventory.sources.get(key, "default"), escape(everyone))
    out.print(table)
    if any(ssh_config.values()):
        out.print()
        taken = Table(title=f"from the ssh config ({inventory.ssh_config})", title_justify="left", box=None, pad_edge=False)
        for column in ("option", "value", "source", "nodes"):
            taken.add_column(column)
        rows: dict[tuple[str, str, str], list[str]] = {}
        for node in inventory.nodes:
            for line in ssh_config.get(node.name, ()):
                rows.setdefault((line.option, line.value, line.where), []).append(node.name)
        for (option, value, where), names in rows.items():
            taken.add_row(option, escape(value), escape(where), escape(fold(names)))
        out.print(taken)


def inventory_to_dict(inventory: Inventory, ssh_config: Mapping[str, Sequence[ConfigLine]] | None = None) -> dict[str, Any]:
    ssh_config = ssh_config or {}
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
                **({"ssh_config": [{"option": line.option, "value": line.value, "source": line.where}
                                   for line in ssh_config[node.name]]} if node.name in ssh_config else {}),
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


def show_init(result: InitResult) -> None:
    """`inventory init`: the YAML itself on stdout with `-o -`, else the path written (and a notice on stderr)."""
    if result.output == STDOUT:
        write_out(result.text)
        return
    error(f"wrote {result.nodes} node(s) {result.origin} to {result.output}; "
          f"check it with `ascendctl inventory validate -i {result.output}`", level="notice")
    write_out(result.output + "\n")
