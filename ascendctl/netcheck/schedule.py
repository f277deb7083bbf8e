"""Which nodes measure with which, round by round: the circle-method pair schedule and the quick ring.

Pure: node indexes in, rounds of pairs out. A round is a list of pairs measured at the same time; in a
pair round every node is in at most one pair. Must not import typer or rich.
"""

from __future__ import annotations

import math

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


def ring_round(n: int) -> list[Pair]:
    """`--quick`'s first round: node i with node i+1 (and the last with the first), all at once."""
    if n < 2:
        return []
    if n == 2:
        return [(0, 1)]
    return [(i, (i + 1) % n) for i in range(n)]


def confirmation_rounds(n: int, suspects: list[int], met: set[frozenset[int]], *, partners: int = 2) -> list[list[Pair]]:
    """After a slow ring: rounds of disjoint pairs giving each suspect `partners` clean nodes it has not met.

    Clean nodes are the ones not suspected; a suspect with no clean node left to meet gets what there is.
    Each round pairs every remaining suspect with a distinct clean node, so a round costs one pair round.
    """
    clean = [i for i in range(n) if i not in set(suspects)]
    seen = set(met)
    wanted = {s: partners for s in suspects}
    rounds: list[list[Pair]] = []
    while any(wanted.values()):
        busy: set[int] = set()
        pairs: list[Pair] = []
        for s in suspects:
            if not wanted[s]:
                continue
            partner = next((c for c in clean if c not in busy and frozenset((s, c)) not in seen), None)
            if partner is None:
                if not any(frozenset((s, c)) not in seen for c in clean):
                    wanted[s] = 0  # met every clean node already
                continue
            busy.add(partner)
            seen.add(frozenset((s, partner)))
            wanted[s] -= 1
            pairs.append((partner, s))
        if not pairs:
            break
        rounds.append(pairs)
    return rounds
