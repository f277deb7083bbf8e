"""What may reach the operator's terminal: `visible(text)` and the consoles and log formatter built on it.

Text from nodes (command output, log lines, tool output quoted in a check, error text from a
server) can hold escape sequences that clear the screen, set the clipboard (OSC 52), retitle the
window or reorder what is shown (bidi overrides). Every terminal path shows them escaped instead:
the shared consoles sanitise in `render_str` (print of a str, table cells, titles, rules), raw
writes and `Text` objects go through `visible` (ui.write_out, launch_view's line sink), log
records through `LogFormatter`. JSON documents are not sanitised: they carry the node's text
exactly, JSON-escaped. Imports only rich, the standard library and the class of hidden characters (paths.py, which
the inventory refuses in its strings).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import lru_cache
from typing import Any

from rich.console import Console
from rich.text import Text

from ascendctl.paths import HIDDEN_CATEGORIES as _HIDDEN_CATEGORIES  # Cc, Cf, Cs, Zl, Zp: see there

# Everything but printable ASCII, newline and tab; each match is then judged by its Unicode category.
_SUSPECT = re.compile(r"[^\x20-\x7e\n\t]")


@lru_cache(maxsize=4096)
def _shown(char: str) -> str:
    if unicodedata.category(char) not in _HIDDEN_CATEGORIES:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with control and format characters shown escaped (`\\x1b`, `\\u202e`); newline and tab kept."""
    return _SUSPECT.sub(lambda match: _shown(match.group()), text)


class SafeConsole(Console):
    """A rich Console that shows every string it renders through `visible` and never turns `:name:` into emoji."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        super().__init__(**kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)


class LogFormatter(logging.Formatter):
    """`ascendctl: LEVEL: logger: message`, sanitised; exception and stack traces only when `tracebacks`."""

    def __init__(self, *, tracebacks: bool) -> None:
        super().__init__("ascendctl: %(levelname)s: %(name)s: %(message)s")
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if not self.tracebacks and (record.exc_info or record.exc_text or record.stack_info):
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None, "stack_info": None})
        return visible(super().format(record))
