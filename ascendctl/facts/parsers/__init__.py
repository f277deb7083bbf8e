"""Pure parsers for the text node-side tools print: npu-smi, hccn_tool, chronyc/ntpq/timedatectl, ip/df/ss/ulimit.

Each parser takes a command's stdout as ``str`` and returns frozen records; text that does not look like
the expected output raises ``ParseError`` naming what was expected. No I/O here, and no imports of typer,
rich, paramiko or any transport code: the check framework runs commands, these modules only read text.
"""

from __future__ import annotations

import re

__all__ = ["ParseError"]

# SGR colour/underline codes: nvidia-smi underlines its topo header when stdout is a terminal.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class ParseError(ValueError):
    """Text is not the tool output a parser expects; the message says what was expected and what was found."""


def body_lines(text: str) -> list[str]:
    """Split ``text`` into lines without ANSI codes, dropping leading ``# `` comment lines (capture headers)."""
    lines = _ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).split("\n")
    start = 0
    while start < len(lines) and (lines[start].startswith("# ") or lines[start] == "#"):
        start += 1
    return lines[start:]


def excerpt(text: str, limit: int = 80) -> str:
    """Return a short one-line ``repr`` of ``text`` for error messages."""
    flat = text.strip()
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")
