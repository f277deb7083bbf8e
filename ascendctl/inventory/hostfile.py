"""Reading MPI/DeepSpeed hostfiles: which text is a hostfile, and its lines as (line, host, slots) entries.

The forms are the ones `render hostfile` writes (templates/hostfile-*.tmpl): Open MPI and DeepSpeed
`HOST slots=N [max_slots=N]`, MPICH `HOST:N`, plain `HOST`; `#` starts a comment. Only the syntax is
here: inventory.py turns the entries into an Inventory through the same validation as YAML (node
names, duplicates, slot range, the node cap). Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FORMS = "HOST, HOST:SLOTS, or HOST slots=N [max_slots=N]"
# A YAML inventory starts with a mapping key (`defaults:`, `nodes:`), a flow mapping, a list, a directive or `---`.
_YAML_START = re.compile(r"^(---|\.\.\.|%|\{|\[|-(\s|$)|[^#]*?:(\s|$))")
_COUNT_KEYS = ("slots", "max_slots", "max-slots")  # max_slots: Open MPI's oversubscription cap; read, not used


def _lines(text: str) -> list[str]:
    """Lines as an editor numbers them: str.splitlines() also breaks at U+0085, U+2028, U+2029, \\v, \\f and \\x1c-\\x1e,
    which would turn one line holding them into two hosts; here they stay in the field, where the inventory refuses them."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _fields(line: str) -> list[str]:
    """The fields of a line, split at spaces and tabs only (str.split() also splits at U+0085 and U+00A0)."""
    return [field for field in line.split("#", 1)[0].replace("\t", " ").split(" ") if field]


@dataclass(frozen=True, slots=True)
class HostfileEntry:
    """One host line: where it is, the host, and its slots as written (None when the line gives none)."""

    line: int
    host: str
    slots: int | str | None


def is_hostfile(text: str) -> bool:
    """True when the first line that is not blank or a comment reads as a hostfile line, not as YAML."""
    for raw in _lines(text):
        line = " ".join(_fields(raw))
        if line:
            return _YAML_START.match(line) is None
    return False  # empty or comments only: the YAML reader says what is missing


def parse_hostfile(text: str, max_entries: int) -> tuple[list[HostfileEntry], list[tuple[int, str]]]:
    """The host lines, and (line, problem) for each line that is not one of FORMS; stops past `max_entries` hosts."""
    entries: list[HostfileEntry] = []
    problems: list[tuple[int, str]] = []
    for number, raw in enumerate(_lines(text), start=1):
        fields = _fields(raw)
        if not fields:
            continue
        if len(entries) == max_entries:
            problems.append((number, f"more than {max_entries:,} hosts; an inventory holds at most {max_entries:,} nodes"))
            break
        host, slots = fields[0], None
        if host.count(":") == 1:  # MPICH `HOST:N` (an IPv6 address has more colons)
            host, slots = host.split(":")
            if not host:
                problems.append((number, f"expected {FORMS} (got {raw.strip()!r})"))
                continue
        for field in fields[1:]:
            key, sep, value = field.partition("=")
            if not sep or key not in _COUNT_KEYS:
                problems.append((number, f"{field!r}: expected slots=N or max_slots=N after the host ({FORMS})"))
            elif key == "slots":
                slots = value  # checked by the inventory's `slots` validator, as in YAML
            elif not value.isdigit():
                problems.append((number, f"{key}: expected a whole number (got {value!r})"))
        entries.append(HostfileEntry(number, host, _number(slots)))
    return entries, problems


def _number(text: str | None) -> int | str | None:
    """`"8"` -> 8; anything else stays text, for the `slots` validator to refuse with its own message."""
    return int(text) if text is not None and text.isdigit() else text
