"""Parsers for clock-synchronisation state: ``chronyc tracking|sources``, ``ntpq -pn``, ``timedatectl show``.

Every daemon is reduced to one ``TimeSync`` record. Offsets use one sign convention throughout: local clock
minus reference time, in seconds, so a positive offset means this node's clock is ahead. Pure functions
over text; must not import typer, rich, paramiko or transport code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ascendctl.facts.parsers import ParseError, body_lines, excerpt

__all__ = [
    "TimeSync",
    "ChronySource",
    "NtpPeer",
    "parse_chrony_tracking",
    "parse_chrony_sources",
    "parse_ntpq_peers",
    "parse_timedatectl_show",
    "timesync_from_chrony_sources",
    "timesync_from_ntpq",
]

# chrony's refid for its 'local' directive (127.127.1.1): the node serves its own clock.
_CHRONY_LOCAL_REFID = "7F7F0101"
_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True, slots=True)
class TimeSync:
    """How one node's clock is disciplined, whatever daemon does it."""

    daemon: str  # 'chrony', 'ntpd', 'timedatectl'
    synchronised: bool
    stratum: int | None  # this node's stratum; None when unknown or unsynchronised
    offset_s: float | None  # local clock minus reference, seconds (+ = ahead); None when unknown
    source: str | None  # the selected server, 'LOCAL' for chrony's local reference
    service_active: bool | None = None  # timedatectl's NTP=yes|no; None where the output does not say


@dataclass(frozen=True, slots=True)
class ChronySource:
    """One row of ``chronyc sources``."""

    mode: str  # '^' server, '=' peer, '#' local reference clock
    state: str  # '*' selected, '+' combined, '-' not combined, '?' unusable, 'x' falseticker, '~' too variable
    name: str
    stratum: int
    poll: int  # log2 seconds
    reach: int  # the 8-bit reachability register (printed in octal)
    last_rx: str  # '0', '21m', '-'
    offset_s: float  # adjusted offset; + means the local clock is ahead of the source
    measured_offset_s: float
    error_s: float

    @property
    def selected(self) -> bool:
        """chronyd synchronises to this source."""
        return self.state == "*"


@dataclass(frozen=True, slots=True)
class NtpPeer:
    """One row of ``ntpq -p`` / ``ntpq -pn``."""

    tally: str  # '*' system peer, 'o' PPS peer, '+' candidate, '-' outlier, 'x' falseticker, ' ' rejected, ...
    remote: str
    refid: str
    stratum: int
    type: str  # 'u' unicast, 'p' pool, 'l' local, ...
    when: str  # '63', '-', '7d'
    poll: int  # seconds
    reach: int  # the reachability register (printed in octal)
    delay_ms: float
    offset_ms: float  # as ntpq prints it: the server's offset relative to this host
    jitter_ms: float

    @property
    def selected(self) -> bool:
        """ntpd's system peer ('*', or 'o' when it is a PPS peer)."""
        return self.tally in ("*", "o")


# --- chrony ----------------------------------------------------------------------------------------------


def parse_chrony_tracking(text: str) -> TimeSync:
    """Parse ``chronyc tracking`` (or ``chronyc -c tracking``) into a TimeSync."""
    lines = [line for line in body_lines(text) if line.strip()]
    if len(lines) == 1 and lines[0].count(",") >= 13:
        return _chrony_tracking_csv(lines[0])
    fields: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    missing = [key for key in ("reference id", "stratum", "system time", "leap status") if key not in fields]
    if missing:
        raise ParseError(f"expected chronyc tracking output with {', '.join(missing)}, got {excerpt(text)}")
    ref = re.match(r"^(\S+)\s*(?:\((.*)\))?$", fields["reference id"])
    stratum = fields["stratum"]
    system_time = re.match(r"^([\d.]+)\s+seconds\s+(fast|slow)\s+of NTP time$", fields["system time"])
    if ref is None or not stratum.isdigit() or system_time is None:
        raise ParseError(
            "expected 'Reference ID : <hex> (<name>)', 'Stratum : <n>' and 'System time : <s> seconds fast|slow of NTP time', "
            f"got {fields['reference id']!r}, {stratum!r}, {fields['system time']!r}"
        )
    offset = float(system_time.group(1)) * (1 if system_time.group(2) == "fast" else -1)
    return _chrony_timesync(ref.group(1), ref.group(2) or "", int(stratum), offset, fields["leap status"])


def _chrony_tracking_csv(line: str) -> TimeSync:
    parts = line.split(",")
    try:
        stratum, correction = int(parts[2]), float(parts[4])
    except ValueError:
        raise ParseError(f"expected chronyc -c tracking fields 'refid,name,stratum,reftime,offset,...', got {excerpt(line)}") from None
    # The CSV 'system time' is the correction still to apply (true minus local): negative when the clock is fast.
    return _chrony_timesync(parts[0], parts[1], stratum, -correction, parts[13])


def _chrony_timesync(refid: str, name: str, stratum: int, offset_s: float, leap: str) -> TimeSync:
    synchronised = "not sync" not in leap.lower()
    if not synchronised:
        # chrony prints placeholders (stratum 0, '0.000000000 seconds fast') until it has a source.
        return TimeSync("chrony", False, None, None, None)
    source = "LOCAL" if refid.upper() == _CHRONY_LOCAL_REFID else (name or refid)
    return TimeSync("chrony", True, stratum, offset_s, source)


_SOURCE_ROW = re.compile(
    r"^([\^=#])([*+\-?x~ ])\s+(\S+)\s+(\d+)\s+(-?\d+)\s+([0-7]+)\s+(\S+)\s+"
    r"([+-]?[\d.]+)(ns|us|ms|s)\s*\[\s*([+-]?[\d.]+)(ns|us|ms|s)\s*\]\s+\+/-\s+([\d.]+)(ns|us|ms|s)\s*$"
)


def parse_chrony_sources(text: str) -> tuple[ChronySource, ...]:
    """Parse ``chronyc sources`` (plain, ``-v`` or ``-c``); no rows after the header means no sources configured."""
    lines = [line for line in body_lines(text) if line.strip()]
    if lines and all(line.count(",") == 9 for line in lines):
        return tuple(_chrony_source_csv(line) for line in lines)
    header_at = next((i for i, line in enumerate(lines) if line.startswith("MS Name/IP address")), None)
    if header_at is None:
        raise ParseError(f"expected chronyc sources output with an 'MS Name/IP address' header, got {excerpt(text)}")
    sources: list[ChronySource] = []
    for line in lines[header_at + 1 :]:
        if set(line.strip()) == {"="}:
            continue
        match = _SOURCE_ROW.match(line.rstrip())
        if match is None:
            raise ParseError(f"expected a chronyc sources row like '^* name 2 6 377 12 +1ms[+1ms] +/- 5ms', got {line.strip()!r}")
        g = match.groups()
        sources.append(
            ChronySource(
                mode=g[0],
                state=g[1].strip(),
                name=g[2],
                stratum=int(g[3]),
                poll=int(g[4]),
                reach=int(g[5], 8),
                last_rx=g[6],
                offset_s=float(g[7]) * _UNITS[g[8]],
                measured_offset_s=float(g[9]) * _UNITS[g[10]],
                error_s=float(g[11]) * _UNITS[g[12]],
            )
        )
    return tuple(sources)


def _chrony_source_csv(line: str) -> ChronySource:
    p = line.split(",")
    try:
        return ChronySource(p[0], p[1], p[2], int(p[3]), int(p[4]), int(p[5], 8), p[6], float(p[7]), float(p[8]), float(p[9]))
    except ValueError:
        raise ParseError(f"expected a chronyc -c sources row 'mode,state,name,stratum,poll,reach,lastrx,offset,measured,error', got {excerpt(line)}") from None


def timesync_from_chrony_sources(sources: tuple[ChronySource, ...]) -> TimeSync:
    """Summarise parsed ``chronyc sources`` rows: synchronised when one source is selected ('*')."""
    chosen = next((source for source in sources if source.selected), None)
    if chosen is None:
        return TimeSync("chrony", False, None, None, None)
    return TimeSync("chrony", True, chosen.stratum + 1, chosen.offset_s, chosen.name)


# --- ntpd ------------------------------------------------------------------------------------------------

_TALLY = " x.-+#*o"


def parse_ntpq_peers(text: str) -> tuple[NtpPeer, ...]:
    """Parse ``ntpq -pn`` (or ``-p``); 'No association ID's returned' gives an empty tuple."""
    lines = body_lines(text)
    if any("No association ID's returned" in line for line in lines):
        return ()
    header_at = next((i for i, line in enumerate(lines) if line.split()[:2] == ["remote", "refid"]), None)
    if header_at is None:
        raise ParseError(f"expected ntpq -p output with a 'remote refid st t when poll reach delay offset jitter' header, got {excerpt(text)}")
    peers: list[NtpPeer] = []
    pending = ""  # ntpq wraps a long remote (IPv6) onto its own line
    for line in lines[header_at + 1 :]:
        if not line.strip() or set(line.strip()) == {"="}:
            continue
        line = pending + line.strip() if pending else line
        if len(line.split()) == 1:
            pending = line + " "
            continue
        pending = ""
        peers.append(_ntpq_row(line))
    if pending:
        raise ParseError(f"expected the rest of the ntpq row for {pending.strip()!r}, got end of output")
    return tuple(peers)


def _ntpq_row(line: str) -> NtpPeer:
    tally = line[0] if line[0] in _TALLY else " "
    parts = (line[1:] if line[0] in _TALLY else line).split()
    if len(parts) != 10:
        raise ParseError(f"expected 10 ntpq columns 'remote refid st t when poll reach delay offset jitter', got {line.strip()!r}")
    remote, refid, stratum, kind, when, poll, reach, delay, offset, jitter = parts
    try:
        return NtpPeer(tally, remote, refid, int(stratum), kind, when, _ntp_seconds(poll), int(reach, 8), float(delay), float(offset), float(jitter))
    except ValueError:
        raise ParseError(f"expected numeric st/poll/reach/delay/offset/jitter in ntpq row {line.strip()!r}") from None


def _ntp_seconds(text: str) -> int:
    # ntpq abbreviates long polls: '17m', '1h' (poll is a power of two seconds, so this is exact enough to compare).
    scale = {"m": 60, "h": 3600, "d": 86400}.get(text[-1:], 1)
    return int(text[:-1] if scale != 1 else text) * scale


def timesync_from_ntpq(peers: tuple[NtpPeer, ...]) -> TimeSync:
    """Summarise parsed ``ntpq -p`` rows: synchronised when a peer carries the '*' (or PPS 'o') tally."""
    chosen = next((peer for peer in peers if peer.selected), None)
    if chosen is None:
        return TimeSync("ntpd", False, None, None, None)
    # ntpq's offset is the server relative to this host; flip it to local-minus-reference.
    return TimeSync("ntpd", True, chosen.stratum + 1, -chosen.offset_ms / 1000.0, chosen.remote)


# --- systemd ---------------------------------------------------------------------------------------------


def parse_timedatectl_show(text: str) -> TimeSync:
    """Parse ``timedatectl show`` (``NTPSynchronized=yes``, ``NTP=yes``); it reports no stratum or offset."""
    fields: dict[str, str] = {}
    for line in body_lines(text):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ParseError(f"expected 'Key=value' lines from timedatectl show, got {line.strip()!r}")
        fields[key.strip()] = value.strip()
    synced = fields.get("NTPSynchronized")
    if synced not in ("yes", "no"):
        raise ParseError(f"expected 'NTPSynchronized=yes|no' in timedatectl show output, got {excerpt(text)}")
    ntp = fields.get("NTP")
    return TimeSync("timedatectl", synced == "yes", None, None, None, None if ntp is None else ntp == "yes")
