"""A group of nodes that owns its connections: one transport per node for a command's lifetime, bounded fan-out over them.

Callers ask the group to run work on nodes; nobody passes a dict of open transports around. The
phases of one command (preflight's probe, its cross-node round, launch's start and follow) reuse the
same connection per node; a connection that broke is dropped and reopened once on the next use.
Nodes of a Slurm allocation (`inventory.allocation`) have no connection of their own: each `run` is one srun
step over every node (transport/slurm.py), with the same results, statuses and errors.
Must not import typer or rich.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TypeVar

from .errors import TransportError
from .fanout import fanout
from .inventory import Inventory, Node
from .models import EventSink, NodeResults
from .transport import Transport, TransportFactory

if TYPE_CHECKING:
    from .transport.slurm import SlurmSteps

T = TypeVar("T")


class NodeGroup:
    """The nodes of an inventory and one open connection per node, opened on first use."""

    def __init__(self, inventory: Inventory, *, factory: TransportFactory | None = None, keep: bool = True) -> None:
        """`keep`: connections stay open between runs (several phases on the same nodes); else each node's is closed
        when its work is done, so a one-phase fan-out never holds more than `fanout` connections."""
        self.inventory = inventory
        self.keep = keep
        self.factory = factory or TransportFactory(inventory)
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._open: dict[str, Transport] = {}
        self._steps: SlurmSteps | None = None
        if inventory.allocation is not None:
            from .transport.slurm import SlurmSteps

            self._steps = SlurmSteps(inventory)

    def __enter__(self) -> "NodeGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transport(self, node: Node) -> Transport:
        """The node's connection, opened now if it is not open yet (one connect per node, even from many threads)."""
        with self._lock:
            lock = self._node_locks.setdefault(node.name, threading.Lock())
        with lock:
            existing = self._open.get(node.name)
            if existing is not None:
                return existing
            transport: Transport
            if self._steps is not None:
                from .transport.slurm import SlurmNodeTransport

                transport = SlurmNodeTransport(node, self._steps)
            else:
                transport = self.factory.open(node)
            self._open[node.name] = transport
            return transport

    def is_open(self, node: Node) -> bool:
        return node.name in self._open

    def drop(self, node: Node) -> None:
        """Close a node's connection (it broke, or is no longer needed); the next use opens a new one."""
        transport = self._open.pop(node.name, None)
        if transport is not None:
            self.factory.release(transport)

    def call(self, node: Node, work: Callable[[Node, Transport], T], *, retry: bool = True) -> T:
        """`work(node, transport)` on the node's connection; when that connection broke, reconnect once and retry."""
        try:
            return work(node, self.transport(node))
        except TransportError:
            if not retry or not self.is_open(node):
                raise
            self.drop(node)
            return work(node, self.transport(node))

    def run(
        self,
        work: Callable[[Node, Transport], T],
        *,
        nodes: Sequence[Node] | None = None,
        on_event: EventSink | None = None,
        retry: bool = False,
    ) -> NodeResults[T]:
        """Run `work` on every node (or `nodes`), at most `fanout` at once; a node's failure is its result."""
        targets = list(self.inventory.nodes if nodes is None else nodes)
        if self._steps is not None:
            return self._run_as_step(work, targets, on_event)

        def one(node: Node) -> T:
            try:
                return self.call(node, work, retry=retry)
            finally:
                if not self.keep:
                    self.drop(node)

        return fanout(targets, one, max_workers=self.inventory.fanout, on_event=on_event, on_interrupt=self.close)

    def _run_as_step(self, work: Callable[[Node, Transport], T], targets: list[Node], on_event: EventSink | None) -> NodeResults[T]:
        """Every node's work at once (no bound: a round waits for all of them), its asks gathered into shared srun steps."""
        steps = self._steps
        assert steps is not None
        down = steps.unavailable()
        steps.begin([n.name for n in targets if n.name not in down])

        def one(node: Node) -> T:
            steps.member(node.name)
            try:
                return work(node, self.transport(node))
            finally:
                steps.leave(node.name)

        return fanout(targets, one, max_workers=len(targets), on_event=on_event, on_interrupt=self.close)

    def nodes(self, names: Iterable[str]) -> list[Node]:
        """The inventory's nodes with these names, in inventory order."""
        wanted = set(names)
        return [node for node in self.inventory.nodes if node.name in wanted]

    def close(self) -> None:
        """Close every connection (also unblocks threads stuck in reads)."""
        self._open.clear()
        if self._steps is not None:
            self._steps.close()
        self.factory.close_all()
