"""Parsers for host facts: ``ip -o link|addr|route get``, ``df -Pk``, ``ulimit`` and ``ss -Hltn``.

Pure functions over text; must not import typer, rich, paramiko or transport code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ascendctl.facts.parsers import ParseError, body_lines, excerpt

__all__ = [
    "Link",
    "Address",
    "Route",
    "DiskUsage",
    "Ulimits",
    "Listener",
    "parse_ip_link",
    "parse_ip_addr",
    "parse_ip_route_get",
    "parse_df_kib",
    "parse_ulimit_value",
    "parse_ulimits",
    "parse_ss_listeners",
    "parse_ss_listen",
]


@dataclass(frozen=True, slots=True)
class Link:
    """One line of ``ip -o link show``."""

    index: int
    name: str  # without the '@peer' suffix ('veth-a@if2' -> 'veth-a')
    flags: tuple[str, ...]  # ('BROADCAST', 'MULTICAST', 'UP', 'LOWER_UP')
    mtu: int
    state: str  # 'UP', 'DOWN', 'UNKNOWN' (loopback and some virtual links)
    mac: str | None

    @property
    def up(self) -> bool:
        """Administratively up with carrier (UNKNOWN counts when LOWER_UP is set, as for loopback)."""
        return self.state == "UP" or (self.state == "UNKNOWN" and "LOWER_UP" in self.flags)


@dataclass(frozen=True, slots=True)
class Address:
    """One line of ``ip -o -4 addr show`` (or ``-6``)."""

    ifname: str
    family: str  # 'inet' or 'inet6'
    address: str
    prefixlen: int
    scope: str | None
    secondary: bool

    @property
    def cidr(self) -> str:
        """'10.0.0.1/24'."""
        return f"{self.address}/{self.prefixlen}"


@dataclass(frozen=True, slots=True)
class Route:
    """``ip -o route get ADDR``: where traffic to ADDR leaves this host."""

    destination: str
    dev: str
    src: str | None  # None when the output has no 'src' (e.g. 'route get X from Y')
    via: str | None  # the gateway; None for on-link destinations


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """One row of ``df -Pk``; sizes in KiB."""

    filesystem: str
    total_kib: int
    used_kib: int
    available_kib: int
    capacity_pct: int | None  # None when df prints '-'
    mount: str


@dataclass(frozen=True, slots=True)
class Ulimits:
    """Shell resource limits; None means 'unlimited'."""

    nofile: int | None  # ulimit -n
    memlock_kib: int | None  # ulimit -l


@dataclass(frozen=True, slots=True)
class Listener:
    """A listening TCP socket from ``ss -Hltn``."""

    address: str  # '0.0.0.0', '127.0.0.1', '::', '*'; brackets and '%iface' removed
    port: int


# --- ip --------------------------------------------------------------------------------------------------

_LINK = re.compile(r"^(\d+):\s+(\S+?):\s+<([^>]*)>\s+(.*)$")


def parse_ip_link(text: str) -> list[Link]:
    """Parse ``ip -o link show`` into links (name, mtu, state, flags, MAC)."""
    links: list[Link] = []
    for line in body_lines(text):
        if not line.strip():
            continue
        match = _LINK.match(line.strip())
        words = match.group(4).replace("\\", " ").split() if match else []
        mtu, state = _after(words, "mtu"), _after(words, "state")
        if match is None or mtu is None or not mtu.isdigit() or state is None:
            raise ParseError(f"expected an 'ip -o link show' line '<n>: <name>: <FLAGS> mtu <n> ... state <S>', got {line.strip()!r}")
        mac = next((words[i + 1] for i, word in enumerate(words[:-1]) if word.startswith("link/")), None)
        links.append(
            Link(
                index=int(match.group(1)),
                name=match.group(2).split("@", 1)[0],
                flags=tuple(flag for flag in match.group(3).split(",") if flag),
                mtu=int(mtu),
                state=state,
                mac=mac,
            )
        )
    if not links:
        raise ParseError("expected at least one 'ip -o link show' line (there is always lo), got empty output")
    return links


_ADDR = re.compile(r"^(\d+):\s+(\S+)\s+(inet6?)\s+([0-9A-Fa-f.:]+)/(\d+)\s*(.*)$")


def parse_ip_addr(text: str) -> list[Address]:
    """Parse ``ip -o -4 addr show`` (``-6`` too); empty output means no addresses, not an error."""
    addresses: list[Address] = []
    for line in body_lines(text):
        if not line.strip():
            continue
        match = _ADDR.match(line.strip())
        if match is None:
            raise ParseError(f"expected an 'ip -o addr show' line '<n>: <ifname> inet <addr>/<len> ...', got {line.strip()!r}")
        rest = match.group(6).split("\\", 1)[0].split()
        scope = rest[rest.index("scope") + 1] if "scope" in rest[:-1] else None
        addresses.append(Address(match.group(2), match.group(3), match.group(4), int(match.group(5)), scope, "secondary" in rest))
    return addresses


def parse_ip_route_get(text: str) -> Route:
    """Parse ``ip -o route get ADDR`` into the outgoing device, source address and gateway."""
    lines = [line for line in body_lines(text) if line.strip()]
    if len(lines) != 1:
        raise ParseError(f"expected one 'ip -o route get' line '<dst> [via <gw>] dev <if> src <addr> ...', got {excerpt(text)}")
    words = lines[0].replace("\\", " ").split()
    # A leading route type ('local 127.0.0.1 dev lo', 'broadcast ...') comes before the destination.
    typed = len(words) > 1 and words[0] in ("local", "broadcast", "multicast", "unicast", "anycast", "unreachable")
    destination = words[1] if typed else words[0]
    dev = _after(words, "dev")
    if dev is None:
        raise ParseError(f"expected 'dev <if>' in ip route get output, got {lines[0].strip()!r}")
    return Route(destination, dev, _after(words, "src"), _after(words, "via"))


def _after(words: list[str], key: str) -> str | None:
    """The word following ``key`` in ``words``, or None."""
    for i, word in enumerate(words[:-1]):
        if word == key:
            return words[i + 1]
    return None


# --- df --------------------------------------------------------------------------------------------------

_DF_ROW = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+%|-)\s+(/.*)$")


def parse_df_kib(text: str) -> list[DiskUsage]:
    """Parse ``df -Pk [PATH...]`` (POSIX format, 1024-byte blocks)."""
    lines = [line for line in body_lines(text) if line.strip()]
    if not lines or not lines[0].startswith("Filesystem") or "1024-blocks" not in lines[0]:
        raise ParseError(f"expected 'df -Pk' output starting with a 'Filesystem 1024-blocks ...' header, got {excerpt(text)}")
    rows: list[DiskUsage] = []
    for line in lines[1:]:
        match = _DF_ROW.match(line.rstrip())
        if match is None:
            raise ParseError(f"expected a df -Pk row '<fs> <total> <used> <avail> <n>% <mount>', got {line.strip()!r}")
        fs, total, used, avail, capacity, mount = match.groups()
        rows.append(DiskUsage(fs, int(total), int(used), int(avail), None if capacity == "-" else int(capacity[:-1]), mount))
    if not rows:
        raise ParseError("expected at least one row after the df -Pk header, found none")
    return rows


# --- ulimit ----------------------------------------------------------------------------------------------


def parse_ulimit_value(text: str) -> int | None:
    """Parse one ``ulimit -X`` value: a number, or 'unlimited' (None)."""
    lines = [line.strip() for line in body_lines(text) if line.strip()]
    if len(lines) != 1:
        raise ParseError(f"expected one ulimit value (a number or 'unlimited'), got {excerpt(text)}")
    return _limit(lines[0])


def _limit(value: str) -> int | None:
    if value == "unlimited":
        return None
    if not value.isdigit():
        raise ParseError(f"expected a ulimit value (a number or 'unlimited'), got {value!r}")
    return int(value)


# (dash 'ulimit -a' label, bash 'ulimit -a' flag) for each field of Ulimits
_ULIMIT_A = {"nofile": ("nofiles", "-n"), "memlock_kib": ("locked memory(kbytes)", "-l")}


def parse_ulimits(text: str) -> Ulimits:
    """Parse ``ulimit -n; ulimit -l`` (two values, in that order) or ``ulimit -a`` from dash or bash."""
    lines = [line.strip() for line in body_lines(text) if line.strip()]
    if len(lines) == 2 and all(re.fullmatch(r"\d+|unlimited", line) for line in lines):
        return Ulimits(_limit(lines[0]), _limit(lines[1]))
    found: dict[str, int | None] = {}
    for line in lines:
        value = line.rsplit(None, 1)[-1]
        for field, (dash_label, bash_flag) in _ULIMIT_A.items():
            if line.startswith(dash_label + " ") or re.search(rf"[(\s]{bash_flag}\)", line):
                found[field] = _limit(value)
    if len(found) != len(_ULIMIT_A):
        raise ParseError(f"expected 'ulimit -n; ulimit -l' values or 'ulimit -a' output with open files and locked memory, got {excerpt(text)}")
    return Ulimits(found["nofile"], found["memlock_kib"])


# --- ss --------------------------------------------------------------------------------------------------


def parse_ss_listeners(text: str) -> list[Listener]:
    """Parse ``ss -Hltn`` (a header line, as without -H, is skipped); no output means nothing listens."""
    listeners: list[Listener] = []
    for line in body_lines(text):
        words = line.split()
        if not words or words[0] == "State" or words[:2] == ["Recv-Q", "Send-Q"]:
            continue
        # With -l the state column is LISTEN (UNCONN for UDP); it is absent when ss is given a state filter.
        local = words[3] if words[0] in ("LISTEN", "UNCONN") and len(words) >= 5 else words[2] if len(words) >= 4 else ""
        host, sep, port = local.rpartition(":")
        if not sep or not port.isdigit():
            raise ParseError(f"expected an ss -ltn row 'LISTEN <recv-q> <send-q> <addr>:<port> <peer>', got {line.strip()!r}")
        host = host.split("%", 1)[0].strip("[]")
        listeners.append(Listener(host or "*", int(port)))
    return listeners


def parse_ss_listen(text: str) -> frozenset[int]:
    """The set of listening TCP ports in ``ss -Hltn`` output."""
    return frozenset(listener.port for listener in parse_ss_listeners(text))
