"""One transport protocol for every way of reaching a node, and the factory that opens them.

`LocalTransport` runs on this machine with subprocess; `SSHTransport` uses Paramiko,
which is imported only when an SSH node is opened. Tests add a FakeTransport.
Must not import typer or rich.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable


# A command that outlives its limit is stopped on the node itself: its whole process group gets TERM,
# then KILL after KILL_GRACE seconds (a wedged vendor tool ignores TERM). Closing our end of an SSH
# channel does not stop a remote command, so this is what keeps a timed-out probe from lingering.
KILL_GRACE = 2.0
# How long past limit + grace we wait for the node to report the stop before calling it silent.
ANSWER_SLACK = 5.0


def bounded_run(command_word: str, seconds_word: str, *, redirect: str = "") -> str:
    """Shell text that runs `sh -c <command_word>` under `timeout` and leaves nothing of it behind.

    The words are shell words (quoted text or "$1"/"$t"). `timeout -k` alone is not enough: when the command's
    shell dies of TERM while a child ignores it (a wedged vendor tool), timeout returns 124 at once and never
    sends KILL. So after a timeout, whatever is left of the command's process group (timeout's pid) is KILLed
    after the grace. Not `exec timeout` either: timeout dies with its group on KILL, and the shell above it
    turns that into exit status 137. `redirect` applies to the command (a background job's stdin is /dev/null
    unless redirected from a saved descriptor); the text leaves the command's exit status in `$rc`.
    """
    return (f'timeout -k {KILL_GRACE:g} {seconds_word} sh -c {command_word} {redirect} & p=$!; wait "$p"; rc=$?; '
            f'if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then '
            f'kill -0 -"$p" 2>/dev/null && {{ sleep {KILL_GRACE:g}; kill -KILL -"$p" 2>/dev/null; }}; fi')


def node_bounded(command: str, limit: float) -> str:
    """`command` run on the node under its `timeout` (coreutils/busybox) with `limit` seconds, when it has one."""
    if not math.isfinite(limit):
        return command
    inner = shlex.quote(command)
    return (f"if command -v timeout >/dev/null 2>&1; then exec 3<&0; {bounded_run(inner, f'{limit:g}', redirect='<&3 3<&-')}; "
            f'exit "$rc"; else exec sh -c {inner}; fi')


def stopped_at_limit(exit_code: int, elapsed: float, limit: float) -> bool:
    """Did `timeout` stop the command (124 after TERM, 137 after KILL) rather than the command exiting by itself?"""
    return exit_code in (124, 137) and elapsed >= limit - 0.05

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import CommandResult


@runtime_checkable
class Spawned(Protocol):
    """A command left running on a node, read without blocking: many of them are followed by one event loop."""

    def fileno(self) -> int:
        """A file descriptor that becomes readable when output (or the end) is there; for `selectors`."""
        ...

    def read(self) -> bytes:
        """The stdout that has arrived since the last read (b"" when none); stderr is discarded."""
        ...

    def finished(self) -> bool:
        """The command ended (or its connection did) and all of its output was read."""
        ...

    def close(self) -> None:
        """Stop reading (the remote command gets EOF/hangup); safe to call twice."""
        ...


@runtime_checkable
class Transport(Protocol):
    """Run commands on and copy files to and from one node."""

    def run(self, command: str, *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        """Run `command` with /bin/sh; a non-zero exit is a result, a timeout raises CommandTimeoutError."""
        ...

    def stream(
        self,
        command: str,
        *,
        on_stdout: Callable[[bytes], None] | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
        timeout: float | None = None,
        idle: float | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Like run, but output goes to the callbacks chunk by chunk as it arrives (never all in memory).

        `timeout` None means the node's command_timeout; pass float("inf") for a stream with no limit.
        `idle`: the node must keep sending; once nothing at all (no stdout, no stderr) has arrived for `idle`
        seconds it is lost: NodeSilentError (`unreachable`). For transfers with no total limit (collect), whose
        node-side program says it is alive while it has nothing to send. A transport that hands output over only
        at the end (Slurm steps) cannot watch it and leaves it to the node's own watchdog.
        """
        ...

    def spawn(self, command: str, *, stdin: bytes | None = None) -> Spawned:
        """Start `command` and return at once; its stdout is read through the handle, without a thread per command."""
        ...

    def put(self, local: Path, remote: str) -> None:
        """Copy a local file to the node."""
        ...

    def get(self, remote: str, local: Path) -> None:
        """Copy a file from the node."""
        ...

    def close(self) -> None:
        """Release the connection; safe to call twice and from another thread."""
        ...
