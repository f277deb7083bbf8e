"""Bounded fan-out: run one function per node in a thread pool; a node's failure is a result.

Results come back in inventory order. Ctrl-C (or SIGTERM/SIGHUP, see interrupts.py) cancels what has not started, closes
open connections so blocked reads return, and raises Interrupted naming the nodes
that did not complete. Must not import typer or rich.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

from ascendctl.errors import AscendctlError, CommandTimeoutError, Interrupted, TransportError, signal_name
from ascendctl.models import NodeError, NodeEvent, NodeResult, NodeResults, NodeStatus

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node
    from ascendctl.models import EventSink

log = logging.getLogger(__name__)
T = TypeVar("T")


def fanout(
    nodes: Sequence[Node],
    work: Callable[[Node], T],
    *,
    max_workers: int = 64,
    on_event: EventSink | None = None,
    on_interrupt: Callable[[], None] | None = None,
) -> NodeResults[T]:
    """Run `work(node)` for every node, at most `max_workers` at once."""
    total = len(nodes)
    results: dict[str, NodeResult[T]] = {}
    if not nodes:
        return NodeResults(())

    def guarded(node: Node) -> NodeResult[T]:
        if on_event:
            on_event(NodeEvent("started", node.name, total))
        started = time.monotonic()
        try:
            value = work(node)
        except TransportError as exc:
            return NodeResult(node.name, error=node_error(exc), duration=time.monotonic() - started)
        except AscendctlError as exc:  # ascendctl judged this node unusable (no address, garbage output): say why
            error = NodeError(NodeStatus.ERROR, exc.message, exc.hint)
            return NodeResult(node.name, error=error, duration=time.monotonic() - started)
        except Exception as exc:  # a bug or garbage on one node must not stop the others
            log.debug("%s: unexpected error", node.name, exc_info=True)
            error = NodeError(NodeStatus.ERROR, f"{type(exc).__name__}: {exc}")
            return NodeResult(node.name, error=error, duration=time.monotonic() - started)
        return NodeResult(node.name, value=value, duration=time.monotonic() - started)

    executor = ThreadPoolExecutor(max_workers=max(1, min(max_workers, total)), thread_name_prefix="fanout")
    futures: dict[Future[NodeResult[T]], Node] = {executor.submit(guarded, node): node for node in nodes}
    pending = set(futures)
    try:
        while pending:
            # A timed wait keeps the main thread responsive to Ctrl-C.
            done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                results[result.node] = result
                if on_event:
                    on_event(NodeEvent("finished", result.node, total, result))
    except KeyboardInterrupt as stop:
        for future in pending:
            future.cancel()
        if on_interrupt:
            on_interrupt()
        executor.shutdown(wait=False, cancel_futures=True)
        incomplete = [node.name for node in nodes if node.name not in results]
        raise Interrupted(incomplete, signame=signal_name(stop)) from None
    executor.shutdown(wait=True)
    return NodeResults(tuple(results[node.name] for node in nodes))


def node_error(exc: TransportError) -> NodeError:
    """Turn a transport exception into the data a report carries."""
    if isinstance(exc, CommandTimeoutError):
        return NodeError(NodeStatus.TIMEOUT, exc.message, exc.hint, stdout=exc.stdout, stderr=exc.stderr)
    return NodeError(NodeStatus(exc.status), exc.message, exc.hint)
