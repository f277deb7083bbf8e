"""The one exception tree and the exit codes.

Exceptions mean "ascendctl cannot proceed at all"; a single node's failure is a
result (see models.NodeResult), never an exception that stops the others.
Imports nothing from the rest of the package.
"""

from __future__ import annotations

import json
import signal
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Process exit codes; documented in README.md and tested one by one."""

    OK = 0
    ERROR = 1  # ascendctl could not do the job
    USAGE = 2  # bad command line or bad inventory
    CHECKS_FAILED = 3  # checks (or the remote command) ran and failed, or could not be evaluated, on some node
    NODES_UNREACHABLE = 4  # connect, auth, host key or timeout failures on some node
    JOB_FAILED = 5  # the training job ran and failed (launch, status, logs -f)
    DO_NOT_REQUEUE = 6  # launch --restarts: the job failed on its own error (a restart, or a requeue, fails the same way)
    HANGUP = 129  # SIGHUP (128 + 1): the terminal or session went away
    INTERRUPTED = 130  # Ctrl-C: SIGINT (128 + 2)
    TERMINATED = 143  # SIGTERM (128 + 15): timeout, CI cancellation, systemd


# When several codes apply, the one earliest in this tuple wins.
EXIT_CODE_PRIORITY: tuple[ExitCode, ...] = (
    ExitCode.INTERRUPTED,
    ExitCode.TERMINATED,
    ExitCode.HANGUP,
    ExitCode.ERROR,
    ExitCode.USAGE,
    ExitCode.NODES_UNREACHABLE,
    ExitCode.DO_NOT_REQUEUE,
    ExitCode.JOB_FAILED,
    ExitCode.CHECKS_FAILED,
    ExitCode.OK,
)


def worst_exit_code(codes: "list[ExitCode] | tuple[ExitCode, ...]") -> ExitCode:
    """Return the highest-priority code among `codes` (OK when empty)."""
    present = set(codes)
    for code in EXIT_CODE_PRIORITY:
        if code in present:
            return code
    return ExitCode.OK


class AscendctlError(Exception):
    """Base of every error ascendctl reports to the user."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str | None = None, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code


class InventoryError(AscendctlError):
    """The inventory cannot be read; carries every problem found, one per line."""

    exit_code = ExitCode.USAGE

    def __init__(self, problems: list[str], *, hint: str | None = None) -> None:
        super().__init__("\n".join(problems), hint=hint)
        self.problems = problems


class UsageError(AscendctlError):
    """A command-line value is wrong in a way Typer cannot see."""

    exit_code = ExitCode.USAGE


class NothingToDo(AscendctlError):
    """There is nothing for the command to do (`--rerun-failed` after a clean run): a notice, exit 0."""

    exit_code = ExitCode.OK


class PathEscapeError(AscendctlError):
    """A name that would become a path is not one plain component under its directory (paths.child)."""

    exit_code = ExitCode.USAGE


class TemplateError(AscendctlError):
    """A text template is missing or references an unknown variable."""


# The signals that ask ascendctl to stop and tear down what it started (interrupts.py installs their handlers).
STOP_SIGNALS: tuple[str, ...] = ("SIGINT", "SIGTERM", "SIGHUP")


def stop_exit_code(signame: str) -> ExitCode:
    """The shell's convention, 128 + the signal's number: 130 SIGINT, 143 SIGTERM, 129 SIGHUP."""
    return ExitCode(128 + signal.Signals[signame]) if signame in STOP_SIGNALS else ExitCode.INTERRUPTED


class StopSignal(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP reached ascendctl: every `except KeyboardInterrupt` path (teardown) handles all three."""

    def __init__(self, signame: str = "SIGINT") -> None:
        super().__init__(signame)
        self.signame = signame


def signal_name(exc: BaseException) -> str:
    """The stop signal behind a KeyboardInterrupt (a plain one is Ctrl-C)."""
    return exc.signame if isinstance(exc, (StopSignal, Interrupted)) else "SIGINT"


class Interrupted(AscendctlError):
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP) during a fan-out: carries the nodes that did not complete."""

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, incomplete: list[str], message: str = "interrupted", *, signame: str = "SIGINT") -> None:
        super().__init__(message)
        self.incomplete = incomplete
        self.signame = signame
        self.exit_code = stop_exit_code(signame)


class TransportError(AscendctlError):
    """A node could not be reached or talked to; `status` says how."""

    status = "unreachable"
    exit_code = ExitCode.NODES_UNREACHABLE


class ConnectError(TransportError):
    """TCP connect or SSH handshake failed (refused, no route, timed out, reset)."""

    status = "unreachable"


class TransientConnectError(ConnectError):
    """A connection dropped before the banner: worth retrying (sshd MaxStartups)."""


class SSHProtocolError(ConnectError):
    """TCP connected but the peer does not speak SSH (no banner, another protocol) or the key exchange failed."""


class AuthError(TransportError):
    """The node refused every key we offered."""

    status = "auth_failed"


class HostKeyError(TransportError):
    """The node's host key is unknown or has changed, or the known_hosts file cannot be used."""

    status = "host_key"


class CommandTimeoutError(TransportError):
    """A remote command ran past the command timeout."""

    status = "timeout"

    def __init__(self, message: str, *, timeout: float, stdout: str = "", stderr: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.timeout = timeout
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    def after(cls, limit: float, stdout: str = "", stderr: str = "") -> "CommandTimeoutError":
        """The error every transport raises when a command outlives `limit` seconds (it was stopped on the node)."""
        return cls(f"command timed out after {limit:g}s (stopped on the node)", timeout=limit, stdout=stdout, stderr=stderr,
                   hint="raise command_timeout in the inventory or --command-timeout")


class NodeSilentError(ConnectError):
    """The node stopped answering in the middle of a command: no output and no exit status past every limit."""


def parse_json(data: str | bytes) -> Any:
    """json.loads for what comes from outside (a bundle, a node, a file given on the command line, a state file).

    Deep nesting (`[[[[...` a few thousand levels) makes the stdlib parser raise RecursionError, which no caller
    expects; it is a ValueError here like any other malformed JSON, so each caller's own message applies.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
