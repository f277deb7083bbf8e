"""The verdict of a network check: slow nodes, slow links and broken pairs, from the measured pairs.

A pair's bandwidth is its slower direction. The cluster median is the median over measured pairs. A pair
below `threshold` x median is slow. A node whose every measured pair is slow (and that met at least two
partners) is a slow NODE: its median is below threshold x median with every partner. A slow pair whose
two nodes are not slow nodes is a slow LINK. A pair that could not be measured is broken; a node none of
whose pairs could be measured is a broken node. Pure; must not import typer or rich.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True, slots=True)
class Measurement:
    """One pair measured in one round: Gbit/s each way (None when that way was not measured), or why it failed."""

    a: str  # the server side
    b: str  # the client side
    a_to_b: float | None
    b_to_a: float | None
    round: int
    error: str | None = None

    @property
    def gbps(self) -> float | None:
        """The pair's bandwidth: its slower measured direction."""
        ways = [v for v in (self.a_to_b, self.b_to_a) if v is not None]
        return None if self.error is not None or not ways else min(ways)

    def key(self) -> tuple[str, str]:
        return (self.a, self.b) if self.a <= self.b else (self.b, self.a)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "a_to_b_gbps": self.a_to_b, "b_to_a_gbps": self.b_to_a,
                "round": self.round, "error": self.error}


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    median_gbps: float | None
    partners: int
    slow_partners: int
    status: str  # ok | slow | broken | unmeasured

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "median_gbps": self.median_gbps, "partners": self.partners,
                "slow_partners": self.slow_partners, "status": self.status}


@dataclass(frozen=True, slots=True)
class Verdict:
    threshold: float
    median_gbps: float | None
    nodes: tuple[NodeVerdict, ...]
    slow_links: tuple[tuple[str, str], ...] = field(default=())
    broken_links: tuple[tuple[str, str, str], ...] = field(default=())

    @property
    def slow_nodes(self) -> tuple[str, ...]:
        return tuple(n.node for n in self.nodes if n.status == "slow")

    @property
    def broken_nodes(self) -> tuple[str, ...]:
        return tuple(n.node for n in self.nodes if n.status == "broken")

    @property
    def clean(self) -> bool:
        return not (self.slow_nodes or self.broken_nodes or self.slow_links or self.broken_links)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "median_gbps": self.median_gbps,
                "slow_nodes": list(self.slow_nodes), "broken_nodes": list(self.broken_nodes),
                "slow_links": [list(p) for p in self.slow_links],
                "broken_links": [{"a": a, "b": b, "error": e} for a, b, e in self.broken_links],
                "nodes": [n.to_dict() for n in self.nodes]}


def pair_values(measurements: Iterable[Measurement]) -> dict[tuple[str, str], float | None]:
    """Each pair's bandwidth (median over its measurements), None when no measurement of it succeeded."""
    seen: dict[tuple[str, str], list[float]] = {}
    for m in measurements:
        values = seen.setdefault(m.key(), [])
        if m.gbps is not None:
            values.append(m.gbps)
    return {key: (statistics.median(values) if values else None) for key, values in seen.items()}


def is_slow(value: float | None, reference: float | None, threshold: float) -> bool:
    """A measured value below `threshold` x `reference` (the rule behind every 'slow' in netcheck)."""
    return value is not None and reference is not None and value < threshold * reference


def judge(nodes: Iterable[str], measurements: Iterable[Measurement], *, threshold: float = 0.8,
          reference: float | None = None, vouched: Iterable[str] = ()) -> Verdict:
    """Slow nodes, slow links and broken pairs (see the module docstring for the rules).

    `reference`: the healthy bandwidth to compare with, when the caller knows it better than the median of these
    pairs (`--quick` measures mostly suspects after its first round); `vouched`: nodes a healthy group
    measurement cleared, `ok` even when no pair of theirs was measured.
    """
    ordered = list(nodes)
    measured = list(measurements)
    cleared = set(vouched)
    values = pair_values(measured)
    good = [v for v in values.values() if v is not None]
    median = reference if reference is not None else statistics.median(good) if good else None

    def slow(value: float | None) -> bool:
        return is_slow(value, median, threshold)

    verdicts: list[NodeVerdict] = []
    for name in ordered:
        mine = [v for key, v in values.items() if name in key]
        numbers = [v for v in mine if v is not None]
        slow_count = sum(1 for v in numbers if slow(v))
        if not mine:
            status = "ok" if name in cleared else "unmeasured"
        elif not numbers:
            status = "broken"
        elif len(numbers) >= 2 and slow_count == len(numbers):
            status = "slow"
        else:
            status = "ok"
        verdicts.append(NodeVerdict(name, statistics.median(numbers) if numbers else None, len(mine), slow_count, status))
    flagged = {v.node for v in verdicts if v.status in ("slow", "broken")}
    slow_links = tuple(key for key, v in sorted(values.items()) if slow(v) and not flagged & set(key))
    errors = {m.key(): m.error for m in measured if m.error is not None}
    broken = tuple((a, b, errors.get((a, b)) or "no measurement")
                   for (a, b), v in sorted(values.items()) if v is None and not flagged & {a, b})
    return Verdict(threshold, median, tuple(verdicts), slow_links, broken)
