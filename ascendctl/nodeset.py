"""Fold node names into ranges (`node[01-04,07]`) and group nodes with identical outcomes.

Uses ClusterShell's NodeSet, the HPC standard for this syntax. Pure; must not import
typer or rich.
"""

from __future__ import annotations

import re
from typing import Callable, Hashable, Iterable, Sequence, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_NUMBERED = re.compile(r"(.*?)(\d+)(\D*)")  # a name's last number, with what comes before and after it
_TOP_LEVEL_COMMA = re.compile(r",(?![^\[]*\])")  # a comma outside [...]
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_RANGE_ITEM = re.compile(r"(\d{1,18})(?:-(\d{1,18})(?:/(\d{1,18}))?)?")
# NodeSet reads these outside brackets as lists, set operators and @groups (which can run the site's group
# commands); an inventory entry is one plain name or one range.
_NOT_IN_NAMES = frozenset(",@!&^*[] \t\n\r")


def range_size(pattern: str) -> int:
    """How many names a range like `n[1-4,7]x[1-2]` expands to, by arithmetic, without expanding it.

    Counts repeats (an upper bound of NodeSet's length). ValueError says what is malformed.
    """
    parts = _BRACKETS.split(pattern)
    texts, groups = parts[0::2], parts[1::2]
    for text in texts:
        bad = sorted(_NOT_IN_NAMES.intersection(text))
        if bad:
            raise ValueError(f"unexpected {bad[0]!r} outside [...] (one name or one range like node[01-16])")
    size = 1
    for group in groups:
        count = 0
        for item in group.split(","):
            match = _RANGE_ITEM.fullmatch(item)
            if match is None:
                raise ValueError(f"[{group}]: expected numbers and ranges like [1-4,7] or [0-30/2]")
            low, high, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
            if high < low or step == 0:
                raise ValueError(f"[{group}]: {item!r} is an empty range")
            count += (high - low) // step + 1
        size *= count
    return size


def list_size(pattern: str) -> int:
    """`range_size` of a comma-separated list of names and ranges, like `n[1-4],m1` (ValueError if malformed)."""
    return sum(range_size(part) for part in _TOP_LEVEL_COMMA.split(pattern))


_FINGERPRINT = re.compile(r"\b(SHA256|MD5):[A-Za-z0-9+/:=]{16,}")


def generic(text: str | None, host: str) -> str | None:
    """`text` with what is each node's own (its address, its host key fingerprint) shown as `<host>` and
    `<fingerprint>`, so one error on many nodes folds into one line (JSON keeps every node's own words)."""
    if not text:
        return text
    if host and host in text:
        text = text.replace(host, "<host>")
    return _FINGERPRINT.sub(r"\1:<fingerprint>", text)


def own_fingerprints(texts: Iterable[tuple[str, str | None]], *, limit: int = 16) -> str:
    """`h01 SHA256:..., h02 SHA256:...`: the fingerprints that `generic` folded away, which a person must check
    node by node before trusting a key ("" when the texts name none). At most `limit`; the rest are counted."""
    found = [f"{name} {match.group(0)}" for name, text in texts if text and (match := _FINGERPRINT.search(text))]
    if len(found) > limit:
        return ", ".join(found[:limit]) + f" and {len(found) - limit} more (--json has each node's own)"
    return ", ".join(found)


def hint_with_fingerprints(hint: str | None, folded: str | None, texts: Iterable[tuple[str, str | None]]) -> str | None:
    """The hint of a folded error, plus each node's fingerprint when the folded text hid them (`generic`)."""
    if not folded or ":<fingerprint>" not in folded:
        return hint
    own = own_fingerprints(texts)
    return f"{hint}; fingerprints: {own}" if hint else f"fingerprints: {own}"


def fold(names: Iterable[str]) -> str:
    """Fold names into the compact range form, e.g. ['n1','n2','n4'] -> 'n[1-2,4]'."""
    names = list(names)
    if not names:
        return ""
    from ClusterShell.NodeSet import NodeSet, NodeSetException

    # NodeSet parses each name it is given (0.4 s for 10,000 names): hand it one range per
    # prefix/suffix/padding instead, and let it produce the canonical form.
    groups: dict[tuple[str, str, int], list[int]] = {}
    plain: list[str] = []
    for name in names:
        match = _NUMBERED.fullmatch(name)
        if match is None:
            plain.append(name)
            continue
        digits = match[2]
        width = len(digits) if digits[0] == "0" and len(digits) > 1 else 0
        groups.setdefault((match[1], match[3], width), []).append(int(digits))
    parts = [f"{prefix}[{_padded(numbers, width)}]{suffix}" for (prefix, suffix, width), numbers in groups.items()]
    try:
        return str(NodeSet(",".join(parts + plain)))
    except NodeSetException:  # a name NodeSet cannot parse: fall back to a plain list
        return ",".join(names)


def _padded(numbers: list[int], width: int) -> str:
    text = fold_numbers(numbers)
    return ",".join("-".join(n.zfill(width) for n in part.split("-")) for part in text.split(",")) if width else text


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


def fold_ids(ids: Sequence[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3,5', for messages."""
    from ClusterShell.RangeSet import RangeSet

    return str(RangeSet.fromlist([str(i) for i in ids])) if ids else ""
