"""Pick nodes out of an inventory: `-w/--nodes` and `-x/--exclude`, in ClusterShell's node-set syntax.

`n[01-16]`, `n01,n05`, `@rack1` (an inventory group, as clush and Ansible spell it), `@all`, and
ClusterShell's operators (`n[01-08]!n03`). A pattern matches node names or hosts. The selected nodes keep
inventory order and are renumbered from 0, so launch ranks follow the selection. Pure; no typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Collection, Iterable, Mapping

from ascendctl.errors import UsageError
from ascendctl.inventory.load import MAX_NODES, NodeNames
from ascendctl.nodeset import range_size
from ascendctl.paths import hidden_char

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory

_GROUP_REF = re.compile(r"@([^,!&^\[\]\s]+)")
_TOP_LEVEL_OPERATOR = re.compile(r"[,!&^](?![^\[]*\])")  # a node-set list/set operator outside [...]
ALL_GROUP = "all"


def expand_nodeset(pattern: str, groups: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Names (or hosts) a node-set pattern stands for; UsageError for bad syntax or an unknown group."""
    from ClusterShell.NodeSet import NodeSet, NodeSetException
    from ClusterShell.NodeUtils import GroupResolver, GroupSource

    hidden = hidden_char(pattern)
    if hidden is not None:  # no node name or host holds one: say what it is rather than "no such node"
        raise UsageError(f"bad node set {pattern!r}: it cannot contain control or invisible characters ({hidden})",
                         hint="retype the node set; a pasted one can carry invisible characters")
    unknown = sorted({g for g in _GROUP_REF.findall(pattern) if g not in groups})
    if unknown:
        known = ", ".join("@" + g for g in sorted(groups)) or "none"
        raise UsageError(f"unknown node group {', '.join('@' + g for g in unknown)} in {pattern!r}",
                         hint=f"groups in this inventory: {known} (`groups:` at the top of the inventory)")
    size = 0
    for part in _TOP_LEVEL_OPERATOR.split(pattern):
        if part and not part.startswith("@"):  # a group is at most the inventory
            try:
                size += range_size(part)
            except ValueError:
                pass  # malformed: NodeSet says how, below
    if size > MAX_NODES:
        raise UsageError(f"node set {pattern!r} stands for {size:,} names; an inventory holds at most {MAX_NODES:,}")
    source = GroupSource("inventory", {name: ",".join(members) for name, members in groups.items()})
    try:
        return list(NodeSet(pattern, resolver=GroupResolver(source)))
    except (NodeSetException, ValueError) as exc:
        raise UsageError(f"bad node set {pattern!r}: {exc}", hint="e.g. -w 'n[01-04,07]' or -w @rack1") from None


def select_nodes(inventory: Inventory, nodes: str | None = None, exclude: str | None = None, *,
                 names: Collection[str] | None = None) -> Inventory:
    """The inventory narrowed to `nodes` (default: all), or to exactly the node `names`, minus `exclude`.

    Every name asked for must exist; `names` (the nodes `--rerun-failed` repeats on) replaces `nodes`.
    """
    if names is not None and nodes:
        raise UsageError("-w cannot be combined with --rerun-failed, which picks the nodes itself",
                         hint="use -x to leave some of them out")
    if not nodes and not exclude and names is None:
        return inventory
    groups = {ALL_GROUP: tuple(inventory.names), **inventory.groups}
    if names is not None:
        from ascendctl.nodeset import fold

        wanted = set(names) & set(inventory.names)
        if len(wanted) < len(set(names)):
            raise UsageError(f"{fold(sorted(set(names) - wanted))}: no such node in {inventory.source} any more",
                             hint="the inventory changed since that run; run the command without --rerun-failed")
    else:
        wanted = _matching(inventory, expand_nodeset(nodes, groups), nodes) if nodes else set(inventory.names)
    unwanted = _matching(inventory, expand_nodeset(exclude, groups), exclude) if exclude else set()
    chosen = [node for node in inventory.nodes if node.name in wanted and node.name not in unwanted]
    if not chosen:
        raise UsageError("no node left to run on" + (f" after excluding {exclude!r}" if exclude else ""),
                         hint="`ascendctl inventory show` lists the nodes and groups")
    return replace(inventory, nodes=tuple(replace(node, index=i) for i, node in enumerate(chosen)))


def _matching(inventory: Inventory, items: Iterable[str], pattern: str) -> set[str]:
    """Node names for `items` (each a name or a host); UsageError naming what matched nothing."""
    found, missing = NodeNames(inventory.nodes).lookup(items)
    if missing:
        from ascendctl.nodeset import fold

        raise UsageError(f"{fold(missing)} in {pattern!r}: no such node in {inventory.source}",
                         hint="`ascendctl inventory show` lists the nodes (names or hosts may be given)")
    return found
