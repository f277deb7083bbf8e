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

from ascendctl.errors import AscendctlError, ExitCode
from ascendctl.models import EventSink, NodeEvent, NodeStatus
from ascendctl.redact import redact_document
from ascendctl.ui.terminal import LogFormatter as LogFormatter, SafeConsole, visible as visible  # re-exported for cli and the views

JSON_SCHEMA = 1
# Past this many nodes, text output folds nodes with the same outcome into one line or block, named by their folded set
# (`n[0001-0998]`); --json always keeps every node. Launch summaries, `status`, launch's teardown output, `launch --dry-run`
# and the collect table use it.
FOLD_NODES_ABOVE = 16

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


# Environment variables that mean "not a person at a terminal": progress stays off even if stderr is a tty.
CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "JENKINS_URL", "BUILDKITE", "TF_BUILD")
PROGRESS_DELAY = 0.5  # seconds before the line appears: a short fan-out never flickers one


def progress_wanted(*, as_json: bool = False) -> bool:
    """A progress line only for a person: stderr a terminal, no --json, not CI, not ASCENDCTL_NO_PROGRESS."""
    if as_json or not err.is_terminal or os.environ.get("ASCENDCTL_NO_PROGRESS"):
        return False
    return not any(os.environ.get(name) for name in CI_VARIABLES)


@contextmanager
def progress(label: str, *, as_json: bool = False) -> Iterator[EventSink | None]:
    """One transient line on stderr while nodes are worked on: done/total, failed so far, the slowest node still
    running and for how long. Nothing in --json, CI or a pipe (see `progress_wanted`)."""
    if not progress_wanted(as_json=as_json):
        yield None
        return
    import threading
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
    from rich.text import Text

    lock = threading.Lock()
    running: dict[str, float] = {}  # node -> when it started; insertion order = start order, so the first is the slowest
    failed = [0]

    class Slowest(ProgressColumn):
        max_refresh = 0.5

        def render(self, task: Task) -> Text:
            with lock:
                first = next(iter(running.items()), None)
                bad = failed[0]
            parts = [Text(f"{bad} failed", style="red" if bad else "dim")]
            if first is not None:
                parts.append(Text(f"  slowest: {visible(first[0])} {time.monotonic() - first[1]:.0f}s", style="yellow"))
            return Text.assemble(*parts)

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), Slowest(), TimeElapsedColumn(), console=err,
                   transient=True)
    task = bar.add_task(label, total=None)

    def sink(event: NodeEvent) -> None:
        with lock:
            if event.kind == "started":
                running[event.node] = time.monotonic()
            elif event.kind == "finished":
                running.pop(event.node, None)
                result = event.result
                if result is not None and (result.error is not None or getattr(result.value, "ok", True) is False):
                    failed[0] += 1
        if event.kind == "finished":
            bar.update(task, total=event.total, advance=1)
        else:
            bar.update(task, total=event.total)

    timer = threading.Timer(PROGRESS_DELAY, bar.start)
    timer.daemon = True
    timer.start()
    try:
        yield sink
    finally:
        timer.cancel()
        timer.join()
        bar.stop()
