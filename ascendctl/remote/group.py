"""A group of nodes that owns its connections: one transport per node for a command's lifetime, bounded fan-out over them.

Callers ask the group to run work on nodes; nobody passes a dict of open transports around. The
phases of one command (preflight's probe, its cross-node round, launch's start and follow) reuse the
same connection per node; a connection that broke is dropped and reopened once on the next use.
What fits in the file descriptor limit (fds.py) bounds both the fan-out window and the connections kept: past
it, the least recently used idle connection is closed and reopened when its node is needed again.
Nodes of a Slurm allocation (`inventory.allocation`) have no connection of their own: each `run` is one srun
step over every node (transport/slurm.py), with the same results, statuses and errors.
Must not import typer or rich.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TypeVar

from ascendctl.errors import TransportError
from ascendctl.remote.fanout import fanout
from ascendctl.remote.fdlimit import connection_budget, nofile_limit
from ascendctl.remote.transport.factory import TransportFactory

if TYPE_CHECKING:
    from ascendctl.remote.transport.slurm import SlurmSteps
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import EventSink, NodeResults
    from ascendctl.remote.transport.base import Spawned, Transport

T = TypeVar("T")
log = logging.getLogger(__name__)


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
        self._open: OrderedDict[str, Transport] = OrderedDict()  # least recently used first
        self._busy: dict[str, int] = {}  # nodes whose connection a `call` is using now: never closed as idle
        self._pinned: set[str] = set()  # nodes with a spawned command still followed: never closed as idle either
        self.budget = connection_budget()  # connections that may be open at once (file descriptors)
        self._said: set[str] = set()
        self._opening = 0  # connections being opened now: counted against the budget before they exist
        self._closing = 0  # and idle ones being closed, until they are gone
        self._steps: SlurmSteps | None = None
        if inventory.allocation is not None:
            from ascendctl.remote.transport.slurm import SlurmSteps

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
            with self._lock:
                existing = self._open.get(node.name)
                if existing is not None:
                    self._open.move_to_end(node.name)
                    return existing
            transport: Transport
            if self._steps is not None:
                from ascendctl.remote.transport.slurm import SlurmNodeTransport

                transport = SlurmNodeTransport(node, self._steps)
                with self._lock:
                    self._open[node.name] = transport
                return transport
            self._make_room()
            try:
                transport = self.factory.open(node)
            finally:
                with self._lock:
                    self._opening -= 1
            with self._lock:
                self._open[node.name] = transport
            return transport

    def _make_room(self) -> None:
        """Reserve room for one more connection, closing least recently used idle ones to make it."""
        idle: list[Transport] = []
        with self._lock:
            excess = len(self._open) + self._opening + self._closing + 1 - self.budget
            self._opening += 1
            if excess <= 0:
                return
            for name in list(self._open):
                if excess <= 0:
                    break
                if not self._busy.get(name) and name not in self._pinned:
                    idle.append(self._open.pop(name))
                    excess -= 1
            self._closing += len(idle)
        if idle:
            self._say_once("connections", "more nodes than connections that fit in the file descriptor limit (%d): at most %d "
                     "are kept open, idle ones are closed and reopened when needed (raise `ulimit -n` to keep them all)",
                     nofile_limit(), self.budget)
        for transport in idle:
            try:
                self.factory.release(transport)
            finally:
                with self._lock:
                    self._closing -= 1

    def spawn(self, node: Node, command: str, *, stdin: bytes | None = None) -> Spawned:
        """Start `command` on the node's connection, which then stays open while it is followed (until `unpin`)."""
        with self._lock:
            self._pinned.add(node.name)
        return self.transport(node).spawn(command, stdin=stdin)

    def unpin(self, node: Node) -> None:
        """The command spawned on the node is done with: its connection may be closed as idle again."""
        with self._lock:
            self._pinned.discard(node.name)

    def is_open(self, node: Node) -> bool:
        return node.name in self._open

    def drop(self, node: Node) -> None:
        """Close a node's connection (it broke, or is no longer needed); the next use opens a new one."""
        with self._lock:
            transport = self._open.pop(node.name, None)
            self._pinned.discard(node.name)
        if transport is not None:
            self.factory.release(transport)

    def call(self, node: Node, work: Callable[[Node, Transport], T], *, retry: bool = True) -> T:
        """`work(node, transport)` on the node's connection; when that connection broke, reconnect once and retry."""
        with self._lock:
            self._busy[node.name] = self._busy.get(node.name, 0) + 1
        try:
            try:
                return work(node, self.transport(node))
            except TransportError:
                if not retry or not self.is_open(node):
                    raise
                self.drop(node)
                return work(node, self.transport(node))
        finally:
            with self._lock:
                left = self._busy.pop(node.name) - 1
                if left:
                    self._busy[node.name] = left

    def _say_once(self, key: str, message: str, *args: object) -> None:
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        log.warning(message, *args)

    def window(self, targets: int) -> int:
        """How many nodes are worked on at once: `fanout`, unless fewer connections fit in the fd limit (said once)."""
        wanted = min(self.inventory.fanout, targets)
        if wanted > self.budget:
            self._say_once("window", "the file descriptor limit (%d) leaves room for %d connections: working on %d nodes at "
                     "once instead of fanout %d (raise `ulimit -n`)", nofile_limit(), self.budget, self.budget,
                     self.inventory.fanout)
            return self.budget
        return wanted

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

        return fanout(targets, one, max_workers=self.window(len(targets)), on_event=on_event, on_interrupt=self.close)

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
        with self._lock:
            self._open.clear()
        if self._steps is not None:
            self._steps.close()
        self.factory.close_all()
