"""Parsers for ``hccn_tool -i N -link -g``, ``-net_health -g`` (NPU RoCE port state) and ``-ping -g address IP``.

Address queries (``-ip -g``) and /etc/hccn.conf belong to ascendctl.facts.devices, not here. Pure functions over
text; must not import typer, rich, paramiko or transport code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ascendctl.facts.parsers import ParseError, body_lines, excerpt

__all__ = ["NetHealth", "NET_HEALTH_STATUSES", "PingResult", "parse_link", "parse_net_health", "parse_ping"]

# What hccn_tool's -net_health reports, by the numeric code its API uses (0 is the only healthy one).
# Field captures also show 'Socket failed' for code 1.
NET_HEALTH_STATUSES: tuple[str, ...] = (
    "Success",
    "Socket fail",
    "Receive timeout",
    "Unreachable",
    "Time exceeded",
    "Fault",
    "Init",
    "Thread error",
    "Detect ip set",
)

_LINK = re.compile(r"^\s*link status\s*:\s*(\S+)\s*$", re.IGNORECASE)
_NET_HEALTH = re.compile(r"^\s*net health status\s*:\s*(.*?)\s*$", re.IGNORECASE)
# `3 packets transmitted, 2 received, 33.33% packet loss` (the driver's summary line)
_PING_SUMMARY = re.compile(r"(\d+)\s+packets? transmitted,\s*(\d+)\s+received,\s*([0-9.]+)%\s*packet loss", re.IGNORECASE)
# what the driver prints for a lost packet (`recv time out seq=0`; newer drivers `seq:0`) or one it could not send
_PING_LOST = re.compile(r"^\s*(?:recv time out|pkt send fail) seq\s*[=:]", re.IGNORECASE)
_PING_ERROR = re.compile(r"Destination Host Unreachable|Message too long", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class NetHealth:
    """Result of the NPU's periodic probe of its ``netdetect`` address."""

    status: str  # as printed: 'Success', 'Socket failed', 'Fault', 'Init', ...
    ok: bool  # True only for 'Success'


def parse_link(text: str) -> str:
    """Parse ``hccn_tool -i N -link -g`` (``link status: UP``) into 'UP' or 'DOWN'."""
    for line in body_lines(text):
        if match := _LINK.match(line):
            state = match.group(1).upper()
            if state not in ("UP", "DOWN"):
                raise ParseError(f"expected 'link status: UP' or 'DOWN' from hccn_tool -link -g, got {line.strip()!r}")
            return state
    raise ParseError(f"expected a 'link status: UP|DOWN' line from hccn_tool -link -g, got {excerpt(text)}")


def parse_net_health(text: str) -> NetHealth:
    """Parse ``hccn_tool -i N -net_health -g`` (``net health status: Success``); only 'Success' is ok."""
    for line in body_lines(text):
        if match := _NET_HEALTH.match(line):
            status = match.group(1)
            if not status:
                raise ParseError(f"expected a status after 'net health status:', got {line.strip()!r}")
            return NetHealth(status=status, ok=status.lower() == "success")
    raise ParseError(f"expected a 'net health status: <status>' line from hccn_tool -net_health -g, got {excerpt(text)}")


@dataclass(frozen=True, slots=True)
class PingResult:
    """``hccn_tool -i N -ping -g address IP``: packets sent and answered, and the driver's complaint if any."""

    transmitted: int
    received: int
    loss_percent: float
    lost_lines: int  # `recv time out seq=...` / `pkt send fail seq:...` lines
    problem: str | None = None  # 'Destination Host Unreachable' or 'Message too long' when printed

    @property
    def ok(self) -> bool:
        """Every packet answered and no error line: the device reaches that address over its RoCE port."""
        return self.transmitted > 0 and self.received == self.transmitted and self.problem is None


def parse_ping(text: str) -> PingResult:
    """Parse ``hccn_tool -i N -ping -g address IP``: the ``N packets transmitted, M received, P% packet loss`` line.

    ParseError when the summary line is missing (the tool failed before pinging: no such device, busy, ...).
    """
    lost = 0
    problem = None
    summary = None
    for line in body_lines(text):
        if _PING_LOST.match(line):
            lost += 1
        if problem is None and (match := _PING_ERROR.search(line)):
            problem = match.group(0)
        if found := _PING_SUMMARY.search(line):
            summary = found
    if summary is None:
        raise ParseError(f"expected 'N packets transmitted, M received, P% packet loss' from hccn_tool -ping, got {excerpt(text)}")
    return PingResult(int(summary.group(1)), int(summary.group(2)), float(summary.group(3)), lost, problem)
