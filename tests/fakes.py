"""FakeTransport: canned command results per node, with injected delays and failures."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Union

from ascendctl.errors import CommandTimeoutError, TransportError
from ascendctl.inventory.load import Inventory, Node
from ascendctl.models import CommandResult
from ascendctl.remote.transport.base import Transport
from ascendctl.remote.transport.factory import TransportFactory

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
        idle: float | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        result = self.run(command, timeout=timeout, stdin=stdin)
        if on_stdout and result.stdout:
            on_stdout(result.stdout.encode())
        if on_stderr and result.stderr:
            on_stderr(result.stderr.encode())
        return result

    def spawn(self, command: str, *, stdin: bytes | None = None) -> "FakeSpawned":
        return FakeSpawned(self.run(command, stdin=stdin).stdout.encode())

    def put(self, local: Path, remote: str) -> None:
        self.calls.append(f"put {local} {remote}")

    def get(self, remote: str, local: Path) -> None:
        self.calls.append(f"get {remote} {local}")

    def close(self) -> None:
        self.closed = True


class FakeSpawned:
    """A finished command's output behind a real pipe, so selectors work on it."""

    def __init__(self, data: bytes) -> None:
        import os

        self._r, w = os.pipe()
        os.write(w, data)
        os.close(w)
        os.set_blocking(self._r, False)
        self._eof = False

    def fileno(self) -> int:
        return self._r

    def read(self) -> bytes:
        import os

        try:
            data = os.read(self._r, 1 << 20)
        except BlockingIOError:
            return b""
        if not data:
            self._eof = True
        return data

    def finished(self) -> bool:
        return self._eof

    def close(self) -> None:
        import os

        try:
            os.close(self._r)
        except OSError:
            pass


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


def probe_reply(outputs: dict[str, str], exit_codes: dict[str, int] | None = None) -> Callable[[str], CommandResult]:
    """A reply to the framed probe (ascendctl.remote.probe): each section the probe asks for gets `outputs[name]` (or nothing)."""
    codes = exit_codes or {}

    def reply(command: str) -> CommandResult:
        nonce_match = re.search(r"@@(\w+) begin (\S+)@@", command)
        assert nonce_match is not None, command[:200]
        nonce = nonce_match.group(1)
        names = re.findall(rf"@@{nonce} begin (\S+)@@", command)
        out = "".join(f"\n@@{nonce} begin {name}@@\n{outputs.get(name, '')}\n@@{nonce} end {name} {codes.get(name, 0)}@@\n"
                      for name in names)
        return CommandResult(command, 0, out, "", 0.0)

    return reply


def ip_sections(ifname: str, address: str, mtu: int = 9000) -> dict[str, str]:
    """`ip` output of a node whose cluster interface `ifname` has `address` (and eth-mgmt is its management NIC)."""
    return {
        "net.links": ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\"
                      "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n"
                      f"2: {ifname}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {mtu} qdisc mq state UP mode DEFAULT group default "
                      "qlen 1000\\    link/ether 5e:1c:d4:8d:b8:95 brd ff:ff:ff:ff:ff:ff\n"),
        "net.addrs": f"2: {ifname}    inet {address}/24 brd 0.0.0.0 scope global {ifname}\\       valid_lft forever preferred_lft forever\n",
        "net.route": f"10.0.0.11 dev {ifname} src {address} uid 0 \\    cache \n",
    }
