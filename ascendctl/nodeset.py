"""Fold node names into ranges (`node[01-04,07]`) and group nodes with identical outcomes.

Uses ClusterShell's NodeSet, the HPC standard for this syntax. Pure; must not import
typer or rich.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def fold(names: Iterable[str]) -> str:
    """Fold names into the compact range form, e.g. ['n1','n2','n4'] -> 'n[1-2,4]'."""
    names = list(names)
    if not names:
        return ""
    from ClusterShell.NodeSet import NodeSet, NodeSetException

    try:
        return str(NodeSet.fromlist(names))
    except NodeSetException:  # a name NodeSet cannot parse: fall back to a plain list
        return ",".join(names)


def group_by(items: Iterable[T], key: Callable[[T], K], name: Callable[[T], str]) -> list[tuple[K, list[str]]]:
    """Group items by `key`, keeping first-appearance order; each group lists its node names."""
    groups: dict[K, list[str]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(name(item))
    return list(groups.items())


def fold_numbers(numbers: Iterable[int]) -> str:
    """Fold integers into ranges: [0, 1, 2, 5, 7, 8] -> '0-2,5,7-8'."""
    values = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)
