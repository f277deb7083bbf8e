"""Local transport: the same protocol as SSH, run on this machine with subprocess.

Used by the built-in one-node inventory and `transport: local` nodes. Must not
import typer, rich or paramiko.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..errors import CommandTimeoutError
from ..inventory import Node
from ..models import CommandResult


class LocalTransport:
    """Runs commands with /bin/sh in their own process group, so a timeout kills them all."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._procs: set[subprocess.Popen[bytes]] = set()

    def run(self, command: str, *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
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
        try:
            out, err = proc.communicate(stdin, timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise CommandTimeoutError(
                f"command timed out after {limit:g}s",
                timeout=limit,
                stdout=_text(out),
                stderr=_text(err),
                hint="raise command_timeout in the inventory or --command-timeout",
            ) from None
        finally:
            self._procs.discard(proc)
        return CommandResult(command, proc.returncode, _text(out), _text(err), time.monotonic() - started)

    def put(self, local: Path, remote: str) -> None:
        shutil.copyfile(local, os.path.expanduser(remote))

    def get(self, remote: str, local: Path) -> None:
        shutil.copyfile(os.path.expanduser(remote), local)

    def close(self) -> None:
        for proc in list(self._procs):
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")
