"""Terminal safety: `visible()` escapes each class of control character; every terminal path uses it; JSON stays exact."""

from __future__ import annotations

import ast
import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.markup import escape
from rich.table import Table
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.ui import launch_view, write_out
from ascendctl.ui.terminal import LogFormatter, SafeConsole, visible

REPO = Path(__file__).resolve().parent.parent
# What a hostile node prints: clear screen, OSC 52 (set the clipboard), a window title ended by ST,
# a C1 CSI, bidi override and isolate, rich markup and an emoji code.
HOSTILE = ("\x1b[2J\x1b]52;c;ZXZpbA==\x07\x1b]0;title\x1b\\ \x9b31m \u202eevil\u2066 "
           "[red]x[/red] [link=https://e.vil]y[/link] :warning:")
HOSTILE_SHOWN = ("\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\x1b]0;title\\x1b\\ \\x9b31m \\u202eevil\\u2066 "
                 "[red]x[/red] [link=https://e.vil]y[/link] :warning:")
runner = CliRunner()


@pytest.mark.parametrize("raw, shown", [
    # C0 controls other than newline and tab
    ("\x00", "\\x00"), ("\x07", "\\x07"), ("\x08", "\\x08"), ("\r", "\\x0d"), ("\x0b\x0c", "\\x0b\\x0c"), ("\x1f", "\\x1f"),
    # ESC sequences: CSI, OSC 52 ended by BEL, OSC ended by ST
    ("\x1b[2J", "\\x1b[2J"), ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"), ("\x1b]0;t\x1b\\", "\\x1b]0;t\\x1b\\"),
    # DEL and C1
    ("\x7f", "\\x7f"), ("\x80", "\\x80"), ("\x85", "\\x85"), ("\x9b31m", "\\x9b31m"), ("\x9f", "\\x9f"),
    # bidi embeddings/overrides and isolates
    ("\u202a\u202b\u202c\u202d\u202e", "\\u202a\\u202b\\u202c\\u202d\\u202e"),
    ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
    # other format controls, separators, a tag character, a lone surrogate (an undecodable byte)
    ("\u200b\u200e\u200f", "\\u200b\\u200e\\u200f"), ("\ufeff", "\\ufeff"), ("\u2028\u2029", "\\u2028\\u2029"),
    ("\U000e0041", "\\U000e0041"), ("\udcff", "\\udcff"),
])
def test_visible_shows_each_class_of_control_escaped(raw: str, shown: str) -> None:
    assert visible(f"a{raw}b") == f"a{shown}b"


def test_visible_keeps_text_newlines_tabs_and_printable_unicode() -> None:
    text = "line 1\tcol\nзначение 中文 é — ✓ 🙂 [red]x[/red] :warning: \\x1b"
    assert visible(text) == text


def _console(**kwargs: Any) -> tuple[SafeConsole, io.StringIO]:
    buf = io.StringIO()
    return SafeConsole(file=buf, width=200, highlight=False, soft_wrap=True, **kwargs), buf


@pytest.mark.parametrize("terminal", [False, True])
def test_console_shows_node_text_escaped_and_its_markup_literally(terminal: bool) -> None:
    console, buf = _console(force_terminal=terminal, no_color=not terminal, color_system="standard" if terminal else None)
    console.print(HOSTILE, markup=False)
    console.print(f"[bold]{escape(HOSTILE)}[/]")
    table = Table()
    table.add_column(escape(HOSTILE))
    table.add_row(escape(HOSTILE))
    console.print(table)
    console.rule(escape(HOSTILE))
    text = buf.getvalue()
    assert text.count(HOSTILE_SHOWN) == 5
    assert "\x1b[2J" not in text and "\x1b]" not in text and "\x9b" not in text and "\u202e" not in text
    assert "⚠" not in text
    if terminal:  # our own styling still reaches the terminal
        assert "\x1b[1m" in text


@pytest.mark.parametrize("terminal", [False, True])
def test_launch_line_sink_shows_node_lines_escaped(terminal: bool, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    console, buf = _console(force_terminal=terminal, no_color=not terminal, color_system="standard" if terminal else None)
    monkeypatch.setattr(launch_view, "out", console)
    sink = launch_view.line_sink(["h01"])
    sink("h01", HOSTILE)
    text = buf.getvalue() + capsys.readouterr().out
    if terminal:  # the prefix is coloured: the line follows its style codes
        assert f" {HOSTILE_SHOWN}" in text and "\x1b[36m" in text
    else:
        assert text == f"[h01] {HOSTILE_SHOWN}\n"
    assert "\x1b[2J" not in text and "\x1b]" not in text and "\u202e" not in text


def test_raw_writes_show_controls_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    write_out(HOSTILE + "\n")
    assert capsys.readouterr().out == HOSTILE_SHOWN + "\n"


def test_ui_writes_only_through_the_sanitising_paths() -> None:
    """The one mechanism: consoles are SafeConsoles, raw writes are ui.write_out (or the JSON document)."""
    raw_writes: list[str] = []
    for path in sorted((REPO / "ascendctl" / "ui").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = ast.unparse(node.func)
                if target in ("sys.stdout.write", "sys.stderr.write", "os.write") or target.endswith(".buffer.write"):
                    raw_writes.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("Console", "rich.console.Console"):
                raw_writes.append(f"{path.name}:{node.lineno}: Console()")
            if isinstance(node, ast.Name) and node.id == "print" or isinstance(node, ast.Attribute) and node.attr == "echo":
                raw_writes.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    # emit_json (json.dumps escapes every control character) and write_out (visible; stdout or stderr)
    assert [w.split(":")[0] for w in raw_writes] == ["__init__.py"] * 3, raw_writes


def test_log_formatter_drops_tracebacks_unless_asked_and_escapes_messages() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("paramiko.transport", logging.ERROR, __file__, 1, "node said %s", ("\x1b[2J",),
                                   sys.exc_info(), sinfo="Stack (most recent call last): here")
    assert LogFormatter(tracebacks=False).format(record) == "ascendctl: ERROR: paramiko.transport: node said \\x1b[2J"
    full = LogFormatter(tracebacks=True).format(record)
    assert "Traceback (most recent call last)" in full and "ValueError: boom" in full and "Stack (most" in full


def test_paramiko_logs_only_at_vvv() -> None:
    paramiko_log = logging.getLogger("paramiko")
    runner.invoke(app, ["-vv", "inventory", "validate"], catch_exceptions=False)
    assert paramiko_log.level == logging.CRITICAL
    runner.invoke(app, ["-vvv", "inventory", "validate"], catch_exceptions=False)
    assert paramiko_log.level == logging.DEBUG
    runner.invoke(app, ["inventory", "validate"], catch_exceptions=False)
    assert paramiko_log.level == logging.CRITICAL


def test_exec_output_is_escaped_on_the_terminal_and_exact_in_json(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("defaults: {transport: local}\nnodes: [n1]\n")
    script = tmp_path / "hostile.py"
    script.write_text(f"import sys\nsys.stdout.write({HOSTILE!r} + '\\n')\nsys.stderr.write({HOSTILE!r})\n")
    command = ["--", sys.executable, str(script)]
    result = runner.invoke(app, ["exec", "-i", str(inventory), *command], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == [HOSTILE_SHOWN, HOSTILE_SHOWN]
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--json", *command], catch_exceptions=False)
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout  # JSON-escaped
    (node,) = json.loads(result.stdout)["nodes"]
    assert (node["stdout"], node["stderr"]) == (HOSTILE + "\n", HOSTILE)
