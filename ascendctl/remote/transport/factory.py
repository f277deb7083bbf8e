"""TransportFactory: the one place that picks a node's transport (local, SSH over one connector, a Slurm step).

SSH nodes go through Paramiko (`ssh.py`) unless the inventory says `transport: openssh` or, with no transport named,
the user's ssh config needs what only the system ssh does (`openssh.py`: GSSAPI, PKCS#11, FIDO keys, a site
ControlPath); that choice is said once per reason.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.remote.transport.base import Transport
    from ascendctl.remote.transport.openssh import OpenSSHConnector

log = logging.getLogger(__name__)


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
        self._openssh: OpenSSHConnector | None = None  # created on first node that the system ssh reaches
        self._said: set[str] = set()
        self._closed = False

    def open(self, node: Node) -> Transport:
        """Connect to `node` (with retries for transient failures) and return its transport."""
        transport: Transport
        if node.transport == "local":
            from ascendctl.remote.transport.local import LocalTransport

            transport = LocalTransport(node)
        elif self.uses_openssh(node):
            transport = self._openssh_connector().connect(node)
        else:
            transport = self._connector().connect(node)
        with self._lock:
            if self._closed:
                transport.close()
                raise RuntimeError("transport factory closed")
            self._open.append(transport)
        return transport

    def uses_openssh(self, node: Node) -> bool:
        """`transport: openssh`, or no transport named and an ssh config that needs the system ssh (said once)."""
        if node.transport == "openssh":
            return True
        if node.transport != "ssh" or node.sources.get("transport", "default") != "default":
            return False
        reason = self._openssh_connector().reason(node)
        if reason is None:
            return False
        with self._lock:
            first = reason not in self._said
            self._said.add(reason)
        if first:
            log.warning("%s: reached with the system ssh (transport openssh; said once): the ssh config sets %s, which "
                        "Paramiko cannot do; `transport: openssh` in the inventory says so, `transport: ssh` forbids it",
                        node.name, reason)
        return True

    def _openssh_connector(self) -> OpenSSHConnector:
        from ascendctl.remote.transport.openssh import OpenSSHConnector

        with self._lock:
            if self._openssh is None:
                self._openssh = OpenSSHConnector(self.inventory)
            return self._openssh

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
            openssh = self._openssh
        for transport in transports:
            transport.close()
        if connector is not None:
            connector.close()  # type: ignore[attr-defined]
        if openssh is not None:
            openssh.close()

    def release(self, transport: Transport) -> None:
        """Close one transport that its caller is done with."""
        transport.close()
        with self._lock:
            if transport in self._open:
                self._open.remove(transport)


if TYPE_CHECKING:
    from ascendctl.remote.transport.ssh import SSHConnector as SSHConnectorType
