"""Which nodes measure with which, round by round: the circle-method pair schedule, `--quick`'s bisection, and the
second look at what the first one flagged.

Pure: node indexes in, rounds of pairs (or of groups) out (the second look: node names, from a verdict). A round is
measured all at once; in a pair round every node is in at most one pair, in a group round in at most one group. What is
slow is outliers.py's rule, through verdict.netcheck_rule. Must not import typer or rich.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from ascendctl.outliers import SLOW
from ascendctl.netcheck.verdict import SECOND, Measurement, netcheck_rule

if TYPE_CHECKING:
    from ascendctl.outliers import Spread
    from ascendctl.netcheck.verdict import NetcheckVerdict

Pair = tuple[int, int]  # (server index, client index); the client is the one that connects


def circle_round(n: int, r: int) -> list[Pair]:
    """Round `r` (0-based, < rounds_for_all_pairs(n)) of the circle method over nodes 0..n-1.

    Node 0 stays put, the others rotate one place per round; positions i and m-1-i meet. For odd n
    a phantom node n gives its partner a bye. Over all rounds every pair meets exactly once.
    """
    m = n + (n % 2)
    if m < 2:
        return []
    ring = m - 1

    def at(position: int) -> int:
        return 0 if position == 0 else 1 + (position - 1 + r) % ring

    pairs: list[Pair] = []
    for i in range(m // 2):
        a, b = at(i), at(m - 1 - i)
        if a < n and b < n:
            pairs.append((min(a, b), max(a, b)))
    return pairs


def rounds_for_all_pairs(n: int) -> int:
    """Rounds the circle method needs to meet every pair once: n-1, or n for odd n (one bye each)."""
    return 0 if n < 2 else n - 1 + (n % 2)


def partners_promised(n: int) -> int:
    """How many different partners the default schedule gives every node: ceil(log2 n) + 1, at most n-1."""
    if n < 2:
        return 0
    return min(n - 1, math.ceil(math.log2(n)) + 1)


def default_round_count(n: int) -> int:
    """Circle-method rounds for `partners_promised(n)` partners each (odd n: one more, for the bye)."""
    if n < 2:
        return 0
    want = partners_promised(n)
    return min(rounds_for_all_pairs(n), want + (n % 2))


def pair_rounds(n: int, *, all_pairs: bool = False) -> list[list[Pair]]:
    """The `--pairs` schedule (enough rounds for the promised partners) or the `--all-pairs` one."""
    count = rounds_for_all_pairs(n) if all_pairs else default_round_count(n)
    return [circle_round(n, r) for r in range(count)]


Group = tuple[int, ...]


def ring_links(group: Sequence[int]) -> list[Pair]:
    """The links of a ring over `group`, (g[i], g[i+1]) as (server, client); two nodes are one pair (both ways)."""
    k = len(group)
    if k < 2:
        return []
    if k == 2:
        return [(group[0], group[1])]
    return [(group[i], group[(i + 1) % k]) for i in range(k)]


@dataclass(frozen=True, slots=True)
class GroupResult:
    """A group measured as a ring: its figure (Gbit/s, None when it failed) and, for pairwise backends, each link's."""

    nodes: Group
    gbps: float | None
    links: tuple[tuple[Pair, float | None], ...] = ()


@dataclass(slots=True)
class _Item:
    """One open question of the bisection: `split` a suspect set, `single` (a node against healthy helpers), `cross`."""

    kind: str
    nodes: Group
    evidence: tuple[Pair, ...] = ()  # the links that made `nodes` suspect (split)
    slow: bool | None = True  # whether `nodes` together were measured slow (None: not known yet)
    groups: list[Group] = field(default_factory=list)  # what this round measures for it


class QuickSearch:
    """`--quick`: one ring over every node, then, only if it is slow, bisection down to the slow node or link.

    Round 1 measures every node as one ring. With a pairwise backend (per_link: tcp, torch) every ring link has its
    own rate and the healthy spread is the ring links' (outliers.Rule.spread): no link slow against it, and the search
    stops; else the nodes on slow links are the suspects. With an aggregate backend (an all-reduce per group:
    hccl_test, nccl-tests) round 2 measures both halves at once and the healthy spread is that of the figures of rounds
    1-2, from their best (a slow node slows the ring and one half: two figures of three): ring and halves all healthy,
    and it stops.
    A suspect set is split into halves measured at the same time (a half of one node is measured with a healthy
    helper as a pair): a slow half is split again, a healthy one is cleared (it and the other half are each other's
    reference); when both halves are healthy but their union was slow, the fault is a link between them, and the
    union's links that cross the halves are measured as pairs. A node alone in a slow pair is measured with a second
    healthy helper, unless it already has two slow pairs, so that the verdict (verdict.judge) has two partners to call
    it a slow node. Groups of one round are disjoint. `next_round()` gives the groups to measure, `record()` takes
    their results in the same order; `next_round()` is None when done.
    """

    def __init__(self, n: int, *, threshold: float = 0.8, per_link: bool = True) -> None:
        self.n = n
        self.threshold = threshold
        self.rule = netcheck_rule(threshold)
        self.per_link = per_link
        self.spread: Spread | None = None
        self.cleared: set[int] = set()
        self.rounds = 0
        self.max_rounds = 4 * math.ceil(math.log2(max(n, 2))) + 8  # a guard; the search needs about log2(n)+2
        self._items: list[_Item] = []
        self._scheduled: list[_Item] = []
        self._figures: list[float] = []  # aggregate: the figures of rounds 1-2, for the reference
        self._ring: GroupResult | None = None
        self._slow_with: dict[int, set[int]] = {i: set() for i in range(n)}  # pair partners a node was slow with
        self._met: dict[int, set[int]] = {i: set() for i in range(n)}

    @property
    def reference(self) -> float | None:
        """The healthy figure the search compares with (the spread's median)."""
        return None if self.spread is None else self.spread.center

    def _is_slow(self, value: float | None) -> bool:
        """Slow beyond the noise (outliers.py); a failed measurement is slow; nothing is, before there is a spread."""
        if value is None:
            return True
        return self.spread is not None and self.rule.look(value, self.spread) == SLOW

    def _suspects(self) -> set[int]:
        return {x for item in self._items for x in item.nodes}

    def next_round(self) -> list[Group] | None:
        """The groups to measure now (disjoint), or None when the search is over."""
        if self.n < 2 or self.rounds >= self.max_rounds:
            return None
        if self.rounds == 0:
            return [tuple(range(self.n))]
        busy: set[int] = set()
        suspects = self._suspects()
        helpers = [i for i in range(self.n) if i in self.cleared and i not in suspects]
        self._scheduled = []
        # a lone suspect that has met every healthy node has nothing left to learn
        self._items = [item for item in self._items if item.kind != "single"
                       or any(h not in self._met[item.nodes[0]] for h in helpers)]
        for item in self._items:
            groups = self._plan(item, busy, helpers)
            if groups is None:
                continue
            item.groups = groups
            busy.update(x for g in groups for x in g)
            self._scheduled.append(item)
        if not self._scheduled:
            self._items = []  # nothing left that can be measured (no healthy helper): stop with what is known
            return None
        return [g for item in self._scheduled for g in item.groups]

    def _plan(self, item: _Item, busy: set[int], helpers: list[int]) -> list[Group] | None:
        """The groups an item needs this round, or None when they cannot all be had (it waits)."""
        if set(item.nodes) & busy:
            return None
        if item.kind == "cross":
            return [item.nodes]
        taken: set[int] = set(busy)

        def helper(x: int, *, new: bool = False) -> int | None:
            found = next((h for h in helpers if h not in taken and h not in self._met[x] and h != x), None)
            if found is None and not new:
                found = next((h for h in helpers if h not in taken and h != x), None)
            if found is not None:
                taken.add(found)
            return found

        if item.kind == "single":  # a partner it has not met: a second opinion
            h = helper(item.nodes[0], new=True)
            return None if h is None else [(item.nodes[0], h)]
        groups: list[Group] = []
        for half in _halves(item.nodes):
            if len(half) > 1:
                groups.append(half)
                continue
            h = helper(half[0])
            if h is not None:
                groups.append((half[0], h))
            elif item.slow is not None:
                return None  # a known-slow set waits for a helper; the first aggregate split goes on without one
        return groups

    def record(self, results: Sequence[GroupResult]) -> None:
        """The results of the groups `next_round()` gave, in its order."""
        self.rounds += 1
        if self.rounds == 1:
            self._after_ring(results[0])
            return
        if self.spread is None and not self.per_link:
            # the halves are the ring's reference, and the ring theirs: the healthy figures of rounds 1-2, from the best
            self._figures += [r.gbps for r in results if r.gbps is not None]
            self.spread = self.rule.spread(self._figures, trust_best=True)
            assert self._ring is not None
            self._note_pairs(self._ring)
            for item in self._items:
                if item.slow is None:
                    item.slow = self._slow(self._ring)
        for r in results:
            self._note_pairs(r)
        by_group = {r.nodes: r for r in results}
        done = self._scheduled
        self._items = [item for item in self._items if item not in done]
        for item in done:
            self._items += self._resolve(item, [by_group[g] for g in item.groups])

    def _slow(self, r: GroupResult) -> bool:
        return self._is_slow(r.gbps)

    def _note_pairs(self, r: GroupResult) -> None:
        """Who met whom in a pair (a ring link, or a group of two) and whether that pair was slow."""
        links = r.links
        if not links and len(r.nodes) == 2:
            links = (((r.nodes[0], r.nodes[1]), r.gbps),)
        for (a, b), value in links:
            self._met[a].add(b)
            self._met[b].add(a)
            if self._is_slow(value):
                self._slow_with[a].add(b)
                self._slow_with[b].add(a)

    def _after_ring(self, ring: GroupResult) -> None:
        everyone = tuple(range(self.n))
        if self.per_link:
            self.spread = self.rule.spread(v for _, v in ring.links if v is not None)
            self._note_pairs(ring)
            slow = [link for link, v in ring.links if self._is_slow(v)]
            suspects = tuple(i for i in everyone if any(i in link for link in slow))
            self.cleared = set(everyone) - set(suspects)
            if suspects:
                self._items = [_Item("split", suspects, tuple(slow))]
            return
        self._ring = ring
        if ring.gbps is not None:
            self._figures.append(ring.gbps)
        if self.n == 2:  # one pair: nothing to compare it with
            self._note_pairs(ring)
            self.cleared = set(everyone) if ring.gbps is not None else set()
            return
        self._items = [_Item("split", everyone, tuple(ring_links(everyone)), slow=None if ring.gbps is not None else True)]

    def _resolve(self, item: _Item, results: list[GroupResult]) -> list[_Item]:
        """What a measured item leaves open."""
        if item.kind == "cross":
            if not self._slow(results[0]):
                self.cleared.update(item.nodes)
            return []
        if item.kind == "single":
            x = item.nodes[0]
            if not self._slow(results[0]):
                self.cleared.add(x)
                return []
            return [] if len(self._slow_with[x]) >= 2 else [item]
        halves = _halves(item.nodes)
        measured = {half: next((r for r in results if half[0] in r.nodes), None) for half in halves}
        out: list[_Item] = []
        quiet = True
        for half, r in measured.items():
            if r is None:  # a lone node without a helper (first aggregate split): a suspect when the set was slow
                if item.slow:
                    out.append(_Item("single", half))
                    quiet = False
                else:
                    self.cleared.update(half)  # the ring it was in is healthy
                continue
            if not self._slow(r):
                self.cleared.update(half)
                continue
            quiet = False
            if len(half) == 1:
                if len(self._slow_with[half[0]]) < 2:
                    out.append(_Item("single", half))
            else:
                out.append(_Item("split", half, tuple(ring_links(half))))
        if quiet and item.slow:
            sides = {x: 0 for x in halves[0]} | {x: 1 for x in halves[1]}
            crossing = [(a, b) for a, b in item.evidence if a in sides and b in sides and sides[a] != sides[b]]
            seen: set[frozenset[int]] = set()
            for a, b in crossing:
                if frozenset((a, b)) not in seen:
                    seen.add(frozenset((a, b)))
                    out.append(_Item("cross", (a, b)))
        return out


def _halves(nodes: Group) -> tuple[Group, Group]:
    middle = (len(nodes) + 1) // 2
    return nodes[:middle], nodes[middle:]


def quick_search_rounds(n: int, figure: Callable[[Group], tuple[float | None, tuple[tuple[Pair, float | None], ...]]],
                        *, threshold: float = 0.8, per_link: bool = True) -> tuple[QuickSearch, list[list[Group]]]:
    """Run a QuickSearch with `figure(group) -> (gbps, links)` standing for the measurement (simulations, tests)."""
    search = QuickSearch(n, threshold=threshold, per_link=per_link)
    rounds: list[list[Group]] = []
    while (groups := search.next_round()) is not None:
        rounds.append(groups)
        search.record([GroupResult(g, *figure(g)) for g in groups])
    return search, rounds


AGAIN, CONTROLS = "again", "controls"  # the second look's two steps


def second_look_rounds(verdict: NetcheckVerdict, measured: Iterable[Measurement], step: str = AGAIN, *,
                       limit: int | None = None) -> list[list[tuple[str, str]]]:
    """The rounds of one step of the second look at what `verdict` flagged (node names, (server, client)); empty when
    that step has nothing to measure.

    AGAIN: every suspect not yet looked at twice, each ALONE in a round of its own (what flagged it may have been the
    other pairs of its round: on a shared or busy network the pairs of a round slow each other down): a link suspect's
    pair; a node suspect with a known-good partner, one it has not met when there is one. The worst first (node
    suspects, then the lowest pairs), at most `limit` rounds (default: one per node): what is left stays
    inconclusive. CONTROLS: each node of a link that was slow again, with a known-good partner (is it the link, or the
    node?), packed into as few rounds as disjoint pairs allow (they can only make a verdict inconclusive, never name).
    Known-good: a node in no suspect, not broken, best median first; when there are too few, the nodes in the fewest
    link suspects."""
    measured = list(measured)
    met: dict[str, set[str]] = {}
    for m in measured:
        met.setdefault(m.a, set()).add(m.b)
        met.setdefault(m.b, set()).add(m.a)
    usable = {n.node: n for n in verdict.nodes if n.status in ("ok", "inconclusive") and n.node not in
              {s.nodes[0] for s in verdict.suspects if s.kind == "node"}}
    in_links = {name: sum(1 for s in verdict.suspects if s.kind == "link" and name in s.nodes) for name in usable}
    good = sorted(usable, key=lambda name: (in_links[name], -(usable[name].median_gbps or 0.0), name))
    # a task: (node, fixed partner or None, nodes the partner must not be)
    tasks: list[tuple[str, str | None, tuple[str, ...]]] = []
    if step == AGAIN:
        pending = sorted((s for s in verdict.suspects if s.outcome == "pending"),
                         key=lambda s: (s.kind != "node", min(s.first, default=0.0)))
        for s in pending:
            tasks.append((s.nodes[0], s.nodes[1] if s.kind == "link" else None, ()))
    else:
        for s in verdict.suspects:
            if s.kind == "link" and s.outcome == "slow" and not s.partners:
                tasks += [(s.nodes[0], None, s.nodes), (s.nodes[1], None, s.nodes)]
    rounds: list[list[tuple[str, str]]] = []
    while tasks:
        busy: set[str] = set()
        pairs: list[tuple[str, str]] = []
        left: list[tuple[str, str | None, tuple[str, ...]]] = []
        for task in tasks:
            node, partner, avoid = task
            if partner is None:
                candidates = [g for g in good if g != node and g not in avoid]
                if not candidates:
                    continue  # no known-good partner at all: it stays as it is (inconclusive)
                free = [g for g in candidates if g not in busy]
                partner = next((g for g in free if g not in met.get(node, set())), free[0] if free else None)
            if partner is None or node in busy or partner in busy or (step == AGAIN and pairs):
                left.append(task)
                continue
            busy.update((node, partner))
            met.setdefault(node, set()).add(partner)
            pairs.append((node, partner))
        if not pairs:
            break
        rounds.append(pairs)
        tasks = left
    if step == AGAIN:
        return rounds[:len(verdict.nodes) if limit is None else limit]
    return rounds


def with_second_looks(measured: list[Measurement], judge_now: Callable[[list[Measurement]], NetcheckVerdict],
                      measure: Callable[[list[tuple[str, str]], int], list[Measurement]], *, first_round: int = 0,
                      ) -> tuple[NetcheckVerdict, list[list[tuple[str, str]]]]:
    """Judge; measure the second look (`measure(pairs, round index)`): the suspects again, each alone, then the controls
    of the links that were slow again; judge again after each step. Returns the last verdict and the rounds measured;
    `measured` grows by their measurements (look SECOND)."""
    verdict = judge_now(measured)
    done: list[list[tuple[str, str]]] = []
    for step in (AGAIN, CONTROLS):
        rounds = second_look_rounds(verdict, measured, step)
        if not rounds:
            continue
        for pairs in rounds:
            measured.extend(_as_second(m) for m in measure(pairs, first_round + len(done)))
            done.append(pairs)
        verdict = judge_now(measured)
    return verdict, done


def _as_second(m: Measurement) -> Measurement:
    return Measurement(m.a, m.b, m.a_to_b, m.b_to_a, m.round, m.error, SECOND)
