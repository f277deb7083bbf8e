"""The verdict of a network check: slow nodes, slow links and broken pairs, from the measured pairs, on two looks.

A pair's bandwidth is its slower direction. What is slow is outliers.py's rule (the one rule of ascendctl): the healthy
pairs' median and robust spread (over the first look's pairs, or what --quick's rounds found), and a look is slow when
it is below `threshold` x median AND more than 3 spreads below it. The first look flags: a node whose every measured
pair is slow (at least two partners) is a node suspect; any other pair below threshold x median, slow or within the
noise, is a link suspect. The second look (`schedule.second_look_rounds`: a link suspect's pair again, alone, then
each of its nodes with a known-good partner; a node suspect alone with a known-good partner) decides: a suspect is
named only when every look at it is slow (a link not when a node of it is as slow with a known-good partner); a second
look that is fine clears it (noise); anything else is inconclusive, which names nothing (exit 0). A pair that could not be measured is broken; a node none of whose pairs could be measured is a broken node.
Pure; must not import typer or rich.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from ascendctl.outliers import OK, SLOW, Judgement, Rule

if TYPE_CHECKING:
    from ascendctl.outliers import Spread

FIRST, SECOND = 1, 2  # the looks: the schedule's rounds; the rounds that measure the suspects again


@dataclass(frozen=True, slots=True)
class Measurement:
    """One pair measured in one round: Gbit/s each way (None when that way was not measured), or why it failed."""

    a: str  # the server side
    b: str  # the client side
    a_to_b: float | None
    b_to_a: float | None
    round: int
    error: str | None = None
    look: int = FIRST  # FIRST: the schedule's rounds; SECOND: a suspect measured again

    @property
    def gbps(self) -> float | None:
        """The pair's bandwidth: its slower measured direction."""
        ways = [v for v in (self.a_to_b, self.b_to_a) if v is not None]
        return None if self.error is not None or not ways else min(ways)

    def key(self) -> tuple[str, str]:
        return (self.a, self.b) if self.a <= self.b else (self.b, self.a)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "a_to_b_gbps": self.a_to_b, "b_to_a_gbps": self.b_to_a,
                "round": self.round, "error": self.error, "look": self.look}


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    median_gbps: float | None
    partners: int
    slow_partners: int
    status: str  # ok | slow | inconclusive | broken | unmeasured

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "median_gbps": self.median_gbps, "partners": self.partners,
                "slow_partners": self.slow_partners, "status": self.status}


@dataclass(frozen=True, slots=True)
class Suspect:
    """What the first look flagged, and what the looks at it say: `outcome` slow (named), cleared (a fine second look:
    it was noise), inconclusive (low, but not beyond the noise on every look), or pending (no second look yet)."""

    kind: str  # node | link
    nodes: tuple[str, ...]  # the node, or the pair (sorted)
    first: tuple[float, ...]  # first-look Gbit/s (a node: each of its pairs)
    second: tuple[float, ...]  # second-look Gbit/s (a link: its pair again; a node: with known-good partners)
    partners: tuple[str, ...]  # the known-good partners of the second look (a link: of either node)
    controls: tuple[float, ...]  # a link: its nodes with known-good partners, second look
    outcome: str  # slow | cleared | inconclusive | pending
    ratio: float | None  # the least slow look / median
    spreads: float | None  # how many spreads the least slow look lies below the median
    reason: str
    failed: tuple[str, ...] = ()  # second looks that could not be measured

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "nodes": list(self.nodes), "first_gbps": list(self.first),
                "second_gbps": list(self.second), "partners": list(self.partners), "controls_gbps": list(self.controls),
                "outcome": self.outcome, "ratio": None if self.ratio is None else round(self.ratio, 4),
                "spreads": None if self.spreads is None else round(self.spreads, 2), "reason": self.reason,
                "failed": list(self.failed)}


@dataclass(frozen=True, slots=True)
class NetcheckVerdict:
    threshold: float
    median_gbps: float | None
    nodes: tuple[NodeVerdict, ...]
    slow_links: tuple[tuple[str, str], ...] = field(default=())
    broken_links: tuple[tuple[str, str, str], ...] = field(default=())
    spread: Spread | None = None
    rule: Rule = field(default=Rule())
    suspects: tuple[Suspect, ...] = field(default=())

    @property
    def slow_nodes(self) -> tuple[str, ...]:
        return tuple(n.node for n in self.nodes if n.status == "slow")

    @property
    def broken_nodes(self) -> tuple[str, ...]:
        return tuple(n.node for n in self.nodes if n.status == "broken")

    @property
    def clean(self) -> bool:
        """Nothing named: no slow node or link beyond the noise, nothing broken (an inconclusive verdict is clean)."""
        return not (self.slow_nodes or self.broken_nodes or self.slow_links or self.broken_links)

    @property
    def inconclusive(self) -> tuple[Suspect, ...]:
        """Suspects neither named nor cleared: low, but not shown slow beyond the noise."""
        return tuple(s for s in self.suspects if s.outcome in ("inconclusive", "pending"))

    @property
    def outcome(self) -> str:
        """slow (a slow node or link named), broken (only broken pairs), inconclusive (something low, nothing beyond the
        noise), or clean."""
        if self.slow_nodes or self.slow_links:
            return "slow"
        if not self.clean:
            return "broken"
        return "inconclusive" if self.inconclusive else "clean"

    def to_dict(self) -> dict[str, Any]:
        spread = None if self.spread is None else {
            "median_gbps": self.spread.center, "relative": round(self.spread.relative, 4),
            "measured_relative": round(self.spread.measured_relative, 4), "pairs": self.spread.count,
            "left_out": self.spread.clipped}
        return {"threshold": self.threshold, "median_gbps": self.median_gbps, "outcome": self.outcome,
                "slow_nodes": list(self.slow_nodes), "broken_nodes": list(self.broken_nodes),
                "slow_links": [list(p) for p in self.slow_links],
                "broken_links": [{"a": a, "b": b, "error": e} for a, b, e in self.broken_links],
                "nodes": [n.to_dict() for n in self.nodes],
                "rule": {"spreads": self.rule.spreads, "floor": self.rule.floor, "min_effect": round(self.rule.min_effect, 6),
                         "looks": self.rule.looks},
                "spread": spread, "suspects": [s.to_dict() for s in self.suspects]}


def pair_values(measurements: Iterable[Measurement]) -> dict[tuple[str, str], float | None]:
    """Each pair's bandwidth (median over its measurements), None when no measurement of it succeeded."""
    seen: dict[tuple[str, str], list[float]] = {}
    for m in measurements:
        values = seen.setdefault(m.key(), [])
        if m.gbps is not None:
            values.append(m.gbps)
    return {key: (statistics.median(values) if values else None) for key, values in seen.items()}


def netcheck_rule(threshold: float) -> Rule:
    """outliers.Rule for bandwidths: lower is worse; the smallest shortfall worth naming is 1 - threshold."""
    return Rule(min_effect=1.0 - threshold)


def judge(nodes: Iterable[str], measurements: Iterable[Measurement], *, threshold: float = 0.8,
          spread: Spread | None = None, vouched: Iterable[str] = ()) -> NetcheckVerdict:
    """Slow nodes, slow links and broken pairs (see the module docstring for the rules).

    `spread`: the healthy pairs' median and spread, when the caller knows them better than these pairs' own (`--quick`
    measures mostly suspects after its first round); `vouched`: nodes a healthy group measurement cleared, `ok` even when
    no pair of theirs was measured."""
    ordered = list(nodes)
    measured = list(measurements)
    cleared = set(vouched)
    rule = netcheck_rule(threshold)
    first = pair_values(m for m in measured if m.look == FIRST)
    if spread is None:
        spread = rule.spread(v for v in first.values() if v is not None)

    def look(value: float | None) -> str | None:
        return None if value is None or spread is None else rule.look(value, spread)

    node_suspects: set[str] = set()
    broken: set[str] = set()
    for name in ordered:
        numbers = [v for key, v in first.items() if name in key and v is not None]
        mine = [key for key in first if name in key]
        if mine and not numbers:
            broken.add(name)
        elif len(numbers) >= 2 and all(look(v) == SLOW for v in numbers):
            node_suspects.add(name)
    flagged = [key for key, v in sorted(first.items()) if look(v) not in (None, OK) and not (node_suspects | broken) & set(key)]
    suspects = [_node_suspect(x, measured, node_suspects, rule, spread) for x in ordered if x in node_suspects]
    suspects += [_link_suspect(key, measured, set(flagged), node_suspects, rule, spread) for key in flagged]
    named_nodes = {s.nodes[0] for s in suspects if s.kind == "node" and s.outcome == "slow"}
    doubtful = {s.nodes[0] for s in suspects if s.kind == "node" and s.outcome in ("inconclusive", "pending")}
    verdicts: list[NodeVerdict] = []
    for name in ordered:
        mine_all = pair_values(m for m in measured if name in (m.a, m.b))
        numbers = [v for v in mine_all.values() if v is not None]
        slow_count = sum(1 for key, v in first.items() if name in key and look(v) == SLOW)
        if not mine_all:
            status = "ok" if name in cleared else "unmeasured"
        elif name in broken:
            status = "broken"
        elif name in named_nodes:
            status = "slow"
        elif name in doubtful:
            status = "inconclusive"
        else:
            status = "ok"
        verdicts.append(NodeVerdict(name, statistics.median(numbers) if numbers else None, len(mine_all), slow_count, status))
    slow_links = tuple(s.nodes for s in suspects if s.kind == "link" and s.outcome == "slow")
    errors = {m.key(): m.error for m in measured if m.error is not None}
    broken_links = tuple((a, b, errors.get((a, b)) or "no measurement")
                         for (a, b), v in sorted(first.items()) if v is None and not (broken | named_nodes) & {a, b})
    return NetcheckVerdict(threshold, None if spread is None else spread.center, tuple(verdicts),
                   tuple((a, b) for a, b in slow_links), broken_links, spread, rule, tuple(suspects))


def _second(measured: list[Measurement], key: tuple[str, str]) -> tuple[list[float], list[str]]:
    """The second looks at one pair: the values, and the errors of those that failed."""
    mine = [m for m in measured if m.look == SECOND and m.key() == key]
    return [m.gbps for m in mine if m.gbps is not None], [m.error or "no value" for m in mine if m.gbps is None]


def _describe(j: Judgement, spread: Spread, second: list[float]) -> str:
    width = f"the healthy pairs vary by {spread.measured_relative:.0%}"
    if j.outcome == "slow":
        return f"slow on every look ({len(j.looks)}): at most {j.ratio:.2f} x median, {j.spreads:.1f} spreads below it ({width})"
    if j.outcome == "ok":
        return f"fine on the second look ({max(second) / spread.center:.2f} x median): noise"
    return f"low, but not beyond the noise on every look (up to {j.ratio:.2f} x median, {j.spreads:.1f} spreads below it)"


def _node_suspect(x: str, measured: list[Measurement], suspects: set[str], rule: Rule, spread: Spread | None) -> Suspect:
    """A node slow with every partner on the first look, judged with its second looks against known-good partners."""
    firsts = tuple(v for v in pair_values(m for m in measured if m.look == FIRST and x in (m.a, m.b)).values() if v is not None)
    seconds: list[float] = []
    failed: list[str] = []
    partners: list[str] = []
    for m in measured:
        other = m.b if m.a == x else m.a if m.b == x else None
        if m.look != SECOND or other is None or other in suspects:
            continue
        partners.append(other)
        if m.gbps is None:
            failed.append(m.error or "no value")
        else:
            seconds.append(m.gbps)
    return _decide("node", (x,), firsts, seconds, tuple(partners), (), failed, rule, spread)


def _link_suspect(key: tuple[str, str], measured: list[Measurement], flagged: set[tuple[str, str]], slow_nodes: set[str],
                  rule: Rule, spread: Spread | None) -> Suspect:
    """A pair low on the first look, judged with its second looks, and its nodes' second looks with known-good partners
    (second looks of a pair that is not itself a suspect)."""
    firsts = tuple(m.gbps for m in measured if m.look == FIRST and m.key() == key and m.gbps is not None)
    seconds, failed = _second(measured, key)
    controls: list[float] = []
    partners: list[str] = []
    for m in measured:
        if m.look != SECOND or m.key() in flagged or not set(key) & {m.a, m.b} or slow_nodes & {m.a, m.b}:
            continue
        partners.append(m.b if m.a in key else m.a)
        if m.gbps is not None:
            controls.append(m.gbps)
    suspect = _decide("link", key, firsts, seconds, tuple(partners), tuple(controls), failed, rule, spread)
    if suspect.outcome == "slow" and spread is not None:
        best = max((*firsts, *seconds))
        # a node of it as slow with a known-good partner too (within the minimum effect of the link's best look): the
        # node, not this link, and the first look did not see that node slow with its other partners
        if any(rule.look(c, spread) == SLOW and c * (1 - rule.min_effect) <= best for c in controls):
            return _replace(suspect, "inconclusive", "slow again, but a node of it was as slow with a known-good partner")
    return suspect


def _decide(kind: str, nodes: tuple[str, ...], firsts: tuple[float, ...], seconds: list[float], partners: tuple[str, ...],
            controls: tuple[float, ...], failed: list[str], rule: Rule, spread: Spread | None) -> Suspect:
    if spread is None:
        return Suspect(kind, nodes, firsts, tuple(seconds), partners, controls, "pending", None, None, "nothing to compare with",
                       tuple(failed))
    if not seconds:
        j = rule.judge(list(firsts), spread)
        why = f"second look failed: {failed[0]}" if failed else "not measured a second time"
        return Suspect(kind, nodes, firsts, (), partners, controls, "inconclusive" if failed else "pending", j.ratio, j.spreads,
                       why, tuple(failed))
    j = rule.judge([*firsts, *seconds], spread)
    # a fine second look clears it; a fine first look (a node suspect's is never fine) with a low second look does not
    if j.outcome == "ok" and all(rule.look(v, spread) != OK for v in seconds):
        j = Judgement("inconclusive", j.looks, j.classes, j.ratio, j.spreads)
    outcome = {"slow": "slow", "ok": "cleared"}.get(j.outcome, "inconclusive")
    return Suspect(kind, nodes, firsts, tuple(seconds), partners, controls, outcome, j.ratio, j.spreads,
                   _describe(j, spread, seconds), tuple(failed))


def _replace(s: Suspect, outcome: str, reason: str) -> Suspect:
    return Suspect(s.kind, s.nodes, s.first, s.second, s.partners, s.controls, outcome, s.ratio, s.spreads, reason, s.failed)
