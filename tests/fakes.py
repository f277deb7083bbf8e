"""FakeTransport: canned command results per node, with injected delays and failures."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Union

from ascendctl.errors import CommandTimeoutError, TransportError
from ascendctl.inventory import Inventory, Node
from ascendctl.models import CommandResult
from ascendctl.transport import Transport, TransportFactory

Reply = Union[CommandResult, TransportError, Callable[[str], CommandResult]]


@dataclass
class FakeTransport:
    """Answers `run` from rules: (regex, reply) pairs tried in order, per node."""

    node: Node
    rules: list[tuple[str, Reply]]
    delay: float = 0.0
    calls: list[str] = field(default_factory=list)
    closed: bool = False

    def run(self, command: str, *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        self.calls.append(command)
        limit = self.node.command_timeout if timeout is None else timeout
        if self.delay:
            end = time.monotonic() + self.delay
            while time.monotonic() < end:
                if self.closed:
                    raise TransportError("connection closed")
                if time.monotonic() - (end - self.delay) > limit:
                    raise CommandTimeoutError(f"command timed out after {limit:g}s", timeout=limit)
                time.sleep(0.005)
        for pattern, reply in self.rules:
            if re.search(pattern, command):
                if isinstance(reply, TransportError):
                    raise reply
                if callable(reply) and not isinstance(reply, CommandResult):
                    return reply(command)
                return CommandResult(command, reply.exit_code, reply.stdout, reply.stderr, reply.duration)
        return CommandResult(command, 127, "", f"sh: {command}: not found\n", 0.0)

    def stream(
        self,
        command: str,
        *,
        on_stdout: Callable[[bytes], None] | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        result = self.run(command, timeout=timeout, stdin=stdin)
        if on_stdout and result.stdout:
            on_stdout(result.stdout.encode())
        if on_stderr and result.stderr:
            on_stderr(result.stderr.encode())
        return result

    def put(self, local: Path, remote: str) -> None:
        self.calls.append(f"put {local} {remote}")

    def get(self, remote: str, local: Path) -> None:
        self.calls.append(f"get {remote} {local}")

    def close(self) -> None:
        self.closed = True


class FakeFactory(TransportFactory):
    """A TransportFactory whose nodes are FakeTransports; `connect_errors` fail the connect itself."""

    def __init__(
        self,
        inventory: Inventory,
        rules: dict[str, list[tuple[str, Reply]]] | None = None,
        *,
        default: list[tuple[str, Reply]] | None = None,
        connect_errors: dict[str, TransportError] | None = None,
        delays: dict[str, float] | None = None,
    ) -> None:
        super().__init__(inventory)
        self.rules = rules or {}
        self.default = default or []
        self.connect_errors = connect_errors or {}
        self.delays = delays or {}
        self.transports: dict[str, FakeTransport] = {}
        self.active = 0
        self.max_active = 0
        self._count_lock = threading.Lock()

    def open(self, node: Node) -> Transport:
        if node.name in self.connect_errors:
            raise self.connect_errors[node.name]
        transport = FakeTransport(node, self.rules.get(node.name, self.default), self.delays.get(node.name, 0.0))
        self.transports[node.name] = transport
        with self._count_lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        with self._lock:
            self._open.append(transport)
        return transport

    def release(self, transport: Transport) -> None:
        with self._count_lock:
            self.active -= 1
        super().release(transport)


def ok(stdout: str = "", exit_code: int = 0, stderr: str = "") -> CommandResult:
    return CommandResult("", exit_code, stdout, stderr, 0.0)
