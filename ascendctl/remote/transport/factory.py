"""TransportFactory: the one place that picks a node's transport (local, SSH over one connector, a Slurm step)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.remote.transport.base import Transport


class TransportFactory:
    """Opens transports for an inventory's nodes and closes every one of them on demand.

    Shared state (parsed known_hosts, loaded keys, ssh config, jump-host connections)
    lives here so that a fan-out over 1,000 nodes parses each file once.
    """

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._lock = threading.Lock()
        self._open: list[Transport] = []
        self._ssh: object | None = None  # ssh.SSHConnector, created on first SSH node
        self._closed = False

    def open(self, node: Node) -> Transport:
        """Connect to `node` (with retries for transient failures) and return its transport."""
        transport: Transport
        if node.transport == "local":
            from ascendctl.remote.transport.local import LocalTransport

            transport = LocalTransport(node)
        else:
            transport = self._connector().connect(node)
        with self._lock:
            if self._closed:
                transport.close()
                raise RuntimeError("transport factory closed")
            self._open.append(transport)
        return transport

    def _connector(self) -> "SSHConnectorType":
        from ascendctl.remote.transport.ssh import SSHConnector

        with self._lock:
            if self._ssh is None:
                self._ssh = SSHConnector(self.inventory)
            return self._ssh  # type: ignore[return-value]

    def close_all(self) -> None:
        """Close every transport opened so far (unblocks threads stuck in reads)."""
        with self._lock:
            self._closed = True
            transports, self._open = self._open, []
            connector = self._ssh
        for transport in transports:
            transport.close()
        if connector is not None:
            connector.close()  # type: ignore[attr-defined]

    def release(self, transport: Transport) -> None:
        """Close one transport that its caller is done with."""
        transport.close()
        with self._lock:
            if transport in self._open:
                self._open.remove(transport)


if TYPE_CHECKING:
    from ascendctl.remote.transport.ssh import SSHConnector as SSHConnectorType
