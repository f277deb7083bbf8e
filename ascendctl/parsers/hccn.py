"""Parsers for ``hccn_tool -i N -link -g`` and ``hccn_tool -i N -net_health -g`` (NPU RoCE port state).

Address queries (``-ip -g``) and /etc/hccn.conf belong to ascendctl.devices, not here. Pure functions over
text; must not import typer, rich, paramiko or transport code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import ParseError, body_lines, excerpt

__all__ = ["NetHealth", "NET_HEALTH_STATUSES", "parse_link", "parse_net_health"]

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
