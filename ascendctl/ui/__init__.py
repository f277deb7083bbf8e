"""Terminal and JSON rendering: the only package that imports Rich.

stdout carries results (tables, command output, one JSON document); progress,
warnings and errors go to stderr. Text that came from nodes is printed with
markup disabled (or escaped), so a log line containing `[/]` cannot break rendering,
and shown through `terminal.visible` (the consoles do it; raw writes use `write_out`),
so its escape sequences never reach the terminal.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import AscendctlError, ExitCode
from ..models import EventSink, NodeEvent, NodeStatus
from ..redact import redact_document
from .terminal import LogFormatter as LogFormatter, SafeConsole, visible as visible  # re-exported for cli and the views

JSON_SCHEMA = 1

out = SafeConsole(highlight=False, soft_wrap=True)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)

STATUS_STYLE = {
    NodeStatus.OK: "green",
    NodeStatus.FAILED: "red",
    NodeStatus.UNREACHABLE: "red",
    NodeStatus.AUTH_FAILED: "red",
    NodeStatus.HOST_KEY: "red",
    NodeStatus.TIMEOUT: "yellow",
    NodeStatus.ERROR: "magenta",
}


def error(message: str, *, subject: str | None = None, hint: str | None = None, level: str = "error") -> None:
    """Print `ascendctl: <level>: [<subject>: ]<message>` and an optional hint line to stderr."""
    lines = message.rstrip("\n").split("\n")
    prefix = f"ascendctl: {level}: " + (f"{subject}: " if subject else "")
    for line in lines:
        err.print(prefix + line, markup=False)
    if hint:
        err.print(f"  hint: {hint}", markup=False)


def print_columns(title: str, headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A plain aligned table on stdout, markup off; for long listings (a Rich Table of 10,000 rows takes seconds)."""
    widths = [max([len(header), *(len(row[i]) for row in rows)]) for i, header in enumerate(headers)]
    lines = [title] + ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in (headers, *rows)]
    write_out("\n".join(lines) + "\n")  # plain text: nothing for Rich to parse or wrap


def warning(message: str, *, subject: str | None = None, hint: str | None = None) -> None:
    error(message, subject=subject, hint=hint, level="warning")


def show_exception(exc: AscendctlError) -> None:
    error(exc.message, hint=exc.hint)


def emit_json(command: list[str], exit_code: ExitCode, data: dict[str, Any], errors: list[dict[str, Any]] | None = None) -> None:
    """Write the one JSON document of a command to stdout: data keys plus the envelope keys."""
    status = "ok" if exit_code == ExitCode.OK else ("error" if exit_code in (ExitCode.ERROR, ExitCode.USAGE) else "partial")
    # json.dumps escapes every control and non-ASCII character: exact, and safe on a terminal.
    document = redact_document({"schema": JSON_SCHEMA, "command": command, "status": status, "exit_code": int(exit_code),
                                **data, "errors": errors or []})
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    sys.stdout.flush()


def write_out(text: str, *, to_stderr: bool = False) -> None:
    """Write `text` to stdout (or stderr) as it is (no wrapping, no markup), control characters shown escaped."""
    if to_stderr:
        sys.stderr.write(visible(text))
        sys.stderr.flush()
    else:
        sys.stdout.write(visible(text))
        sys.stdout.flush()


@contextmanager
def progress(label: str) -> Iterator[EventSink | None]:
    """A progress bar on stderr while nodes are worked on; nothing when stderr is not a terminal."""
    if not err.is_terminal or os.environ.get("ASCENDCTL_NO_PROGRESS"):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True)
    task: list[Any] = []

    def sink(event: NodeEvent) -> None:
        if not task:
            task.append(bar.add_task(label, total=event.total))
        if event.kind == "finished":
            bar.advance(task[0])

    with bar:
        yield sink
