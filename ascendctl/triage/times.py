"""Timestamps in the forms real training logs use, normalised so they sort and subtract.

Owns one thing: turning a log line's time (glog, Python logging, plog/MindSpore, torchrun
report fields, ISO, syslog, `dmesg -T`, HF `MM/DD/YYYY`, ascendctl's own launch stamp) into
`YYYY-MM-DDTHH:MM:SS.ffffff`. Forms without a year get year 0000 and are completed later
from the other times of the same run. Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

NO_YEAR = "0000"
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

# ascendctl launch writes every line of a node's launcher log as "<node-local time> | <line>".
STAMP_RX = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}) \| ")
STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%6N"  # date(1) format of the stamp (GNU date: %6N = microseconds)

_TIME_RX = re.compile(
    # plog / MindSpore / CANN: 2024-01-01-12:00:00.123.456
    r"(?P<py>\d{4})-(?P<pm>\d\d)-(?P<pd>\d\d)-(?P<pH>\d\d):(?P<pM>\d\d):(?P<pS>\d\d)\.(?P<pms>\d{3})\.(?P<pus>\d{3})"
    # ISO and Python logging: 2024-01-01T12:00:00.5Z, 2024-01-01 12:00:00,123, torchrun 2024-01-01_12:00:00
    r"|(?P<iy>\d{4})-(?P<im>\d\d)-(?P<id>\d\d)[T _](?P<iH>\d\d):(?P<iM>\d\d):(?P<iS>\d\d)(?:[.,](?P<ifr>\d{1,9}))?"
    # dmesg -T: [Mon Jan  1 12:00:02 2024]
    r"|\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<dmon>[A-Z][a-z]{2}) +(?P<dd>\d{1,2}) (?P<dH>\d\d):(?P<dM>\d\d):(?P<dS>\d\d) (?P<dy>\d{4})\]"
    # HF / transformers: 11/23/2026 15:35:08
    r"|\b(?P<um>[01]\d)/(?P<ud>[0-3]\d)/(?P<uy>\d{4}) (?P<uH>\d\d):(?P<uM>\d\d):(?P<uS>\d\d)\b"
    # glog (torch, NCCL wrappers): E1123 06:38:52.617000 or [E1123 06:38:52.617000
    r"|(?:^|[\s\[:])[IWEF](?P<gm>[01]\d)(?P<gd>[0-3]\d) (?P<gH>\d\d):(?P<gM>\d\d):(?P<gS>\d\d)\.(?P<gfr>\d{3,9})\b"
    # syslog: Jan  1 12:00:02 host ...
    r"|^(?P<smon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<sd>\d{1,2}) (?P<sH>\d\d):(?P<sM>\d\d):(?P<sS>\d\d)\b"
)


def parse_time(line: str) -> str | None:
    """The first timestamp in a line, normalised to `YYYY-MM-DDTHH:MM:SS.ffffff` (year 0000 when the form has none)."""
    m = _TIME_RX.search(line)
    if m is None:
        return None
    g = m.groupdict()
    if g["py"]:
        return f"{g['py']}-{g['pm']}-{g['pd']}T{g['pH']}:{g['pM']}:{g['pS']}.{g['pms']}{g['pus']}"
    if g["iy"]:
        return f"{g['iy']}-{g['im']}-{g['id']}T{g['iH']}:{g['iM']}:{g['iS']}.{(g['ifr'] or '')[:6].ljust(6, '0')}"
    if g["dy"]:
        return f"{g['dy']}-{_MONTHS[g['dmon']]:02d}-{int(g['dd']):02d}T{g['dH']}:{g['dM']}:{g['dS']}.000000"
    if g["uy"]:
        return f"{g['uy']}-{g['um']}-{g['ud']}T{g['uH']}:{g['uM']}:{g['uS']}.000000"
    if g["gm"]:
        return f"{NO_YEAR}-{g['gm']}-{g['gd']}T{g['gH']}:{g['gM']}:{g['gS']}.{g['gfr'][:6].ljust(6, '0')}"
    return f"{NO_YEAR}-{_MONTHS[g['smon']]:02d}-{int(g['sd']):02d}T{g['sH']}:{g['sM']}:{g['sS']}.000000"


def split_stamp(line: str) -> tuple[str | None, str]:
    """(stamp, rest) for a line of an ascendctl launcher log; (None, line) for any other line."""
    m = STAMP_RX.match(line)
    if m is None:
        return None, line
    return m.group(1), line[m.end():]


def with_year(time: str, year: str) -> str:
    """Complete a year-less time with `year`."""
    return year + time[4:] if time.startswith(NO_YEAR) else time


def seconds(time: str) -> float | None:
    """Seconds since the epoch of a normalised time read as UTC (only differences are meaningful)."""
    if time.startswith(NO_YEAR):
        return None
    try:
        return _epoch(time)
    except ValueError:
        return None


def _epoch(time: str) -> float:
    dt = datetime.strptime(time, "%Y-%m-%dT%H:%M:%S.%f")
    return (dt - datetime(1970, 1, 1)).total_seconds()


def from_epoch(epoch: float, utc_offset_seconds: int | None = None) -> str:
    """A normalised time for epoch seconds: the node's local time when its UTC offset is known, else this machine's."""
    if utc_offset_seconds is None:
        dt = datetime.fromtimestamp(epoch)
    else:
        dt = datetime.fromtimestamp(epoch + utc_offset_seconds, tz=timezone.utc).replace(tzinfo=None)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f")


def parse_utc_offset(text: str) -> int | None:
    """`date +%z` output (+0800, -0530) as seconds east of UTC."""
    m = re.fullmatch(r"\s*([+-])(\d\d)(\d\d)\s*", text)
    if m is None:
        return None
    value = int(m.group(2)) * 3600 + int(m.group(3)) * 60
    return value if m.group(1) == "+" else -value
