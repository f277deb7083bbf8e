"""Local transport: the same protocol as SSH, run on this machine with subprocess.

Used by the built-in one-node inventory and `transport: local` nodes. Must not
import typer, rich or paramiko.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ascendctl.errors import CommandTimeoutError, NodeSilentError
from ascendctl.remote.transport.base import KILL_GRACE
from ascendctl.models import CommandResult

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node


class LocalTransport:
    """Runs commands with /bin/sh in their own process group, so a timeout kills them all."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._procs: set[subprocess.Popen[bytes]] = set()

    def run(self, command: str, *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        return self.stream(command, timeout=timeout, stdin=stdin)

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
        """Run `command`, handing output to the callbacks as it arrives (kept in the result otherwise)."""
        limit = self.node.command_timeout if timeout is None else timeout
        started = time.monotonic()
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._procs.add(proc)
        out: list[bytes] = []
        err: list[bytes] = []
        sinks = {proc.stdout: on_stdout or out.append, proc.stderr: on_stderr or err.append}
        heard = started  # when the last byte arrived (the `idle` clock)
        try:
            if stdin is not None and proc.stdin is not None:
                proc.stdin.write(stdin)
                proc.stdin.close()
            with selectors.DefaultSelector() as selector:
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        selector.register(pipe, selectors.EVENT_READ)
                while selector.get_map():
                    now = time.monotonic()
                    remaining = started + limit - now
                    if remaining <= 0:
                        _stop_group(proc)
                        raise CommandTimeoutError.after(limit, _text(b"".join(out)), _text(b"".join(err)))
                    if idle is not None:
                        if now - heard >= idle:
                            _stop_group(proc)
                            raise NodeSilentError(f"local command stopped answering: nothing received for {idle:g}s "
                                                  "(command_timeout)")
                        remaining = min(remaining, idle - (now - heard))
                    for key, _ in selector.select(min(remaining, 0.5)):
                        chunk = os.read(key.fd, 65536)
                        if not chunk:
                            selector.unregister(key.fileobj)
                            continue
                        heard = time.monotonic()
                        sinks[key.fileobj](chunk)  # type: ignore[index]
            proc.wait()
        finally:
            self._procs.discard(proc)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        return CommandResult(command, proc.returncode, _text(b"".join(out)), _text(b"".join(err)), time.monotonic() - started)

    def spawn(self, command: str, *, stdin: bytes | None = None) -> "LocalSpawned":
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self._procs.add(proc)
        if stdin is not None and proc.stdin is not None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        return LocalSpawned(proc, self._procs)

    def put(self, local: Path, remote: str) -> None:
        shutil.copyfile(local, os.path.expanduser(remote))

    def get(self, remote: str, local: Path) -> None:
        shutil.copyfile(os.path.expanduser(remote), local)

    def close(self) -> None:
        for proc in list(self._procs):
            _kill_group(proc)


READ_LIMIT = 4 * 1024 * 1024  # bytes a LocalSpawned.read returns at most (the rest stays readable)


class LocalSpawned:
    """A local command's stdout, read without blocking."""

    def __init__(self, proc: subprocess.Popen[bytes], owner: set[subprocess.Popen[bytes]]) -> None:
        assert proc.stdout is not None
        self._proc = proc
        self._owner = owner
        self._fd = proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._eof = False

    def fileno(self) -> int:
        return self._fd

    def read(self) -> bytes:
        chunks: list[bytes] = []
        size = 0
        # at most READ_LIMIT a call: a command that writes as fast as we read (cat of a big log) would keep the pipe
        # from ever running dry, and one read would then hold all of its output
        while not self._eof and size < READ_LIMIT:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self._eof = True
                break
            if not chunk:
                self._eof = True
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)

    def finished(self) -> bool:
        return self._eof and self._proc.poll() is not None

    def close(self) -> None:
        if self._proc.poll() is None:
            _kill_group(self._proc)
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._owner.discard(self._proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """TERM everything the command started, KILL it after KILL_GRACE seconds (as a remote node's stop does)."""
    _signal_session(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc)  # the leader may be gone while others ignore TERM
    proc.wait()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    _signal_session(proc.pid, signal.SIGKILL)


def _signal_session(sid: int, sig: signal.Signals) -> None:
    """Signal every process of session `sid` (the command was started in a new session with that id).

    By session, not process group: a command may make groups of its own (`timeout` does), and those
    must not outlive it.
    """
    targets = {sid}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile, or not Linux procfs
        if len(fields) > 4 and fields[4] == str(sid):  # after "pid (comm)": state ppid pgrp session
            targets.add(int(stat.parent.name))
    for pid in targets:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(sid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
