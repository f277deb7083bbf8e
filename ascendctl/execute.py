"""`ascendctl exec`: run one shell command on every node and report each node's outcome.

Must not import typer or rich.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ascendctl.remote.group import NodeGroup
from ascendctl.outcome import exit_code_for, node_outcome
from ascendctl.models import NodeStatus
from ascendctl.nodeset import generic, group_by, hint_with_fingerprints

if TYPE_CHECKING:
    from ascendctl.errors import ExitCode
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.outcome import Outcome
    from ascendctl.models import CommandResult, EventSink
    from ascendctl.remote.transport.base import Transport
    from ascendctl.remote.transport.factory import TransportFactory


@dataclass(frozen=True, slots=True)
class NodeExec:
    """One node's outcome of `exec`."""

    name: str
    host: str
    status: NodeStatus
    exit_code: int | None
    stdout: str
    stderr: str
    error: str | None = None
    hint: str | None = None
    duration: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "host": self.host,
            "status": self.status.value,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "error": self.error,
            "hint": self.hint,
            "duration": round(self.duration, 3),
        }


@dataclass(frozen=True, slots=True)
class ExecReport:
    """Every node's outcome, in inventory order."""

    command: str
    nodes: tuple[NodeExec, ...]

    @property
    def exit_code(self) -> ExitCode:
        """4 when some node was not reached, else 3 when the command failed (or could not be judged) somewhere, else 0."""
        return exit_code_for(node_outcome(node.status) for node in self.nodes)

    @property
    def node_outcomes(self) -> list[tuple[str, Outcome]]:
        """Each node's outcome, in inventory order (what `--rerun-failed` remembers)."""
        return [(node.name, node_outcome(node.status)) for node in self.nodes]

    def groups(self) -> list[tuple[list[str], NodeExec]]:
        """Nodes with identical outcomes, in first-appearance order: [(names, sample outcome)].

        Errors that differ only by the node's own address fold together; the sample then says `<host>`.
        """
        by_name = {node.name: node for node in self.nodes}
        grouped = group_by(
            self.nodes,
            key=lambda n: (n.status, n.exit_code, n.stdout, n.stderr, generic(n.error, n.host), generic(n.hint, n.host)),
            name=lambda n: n.name,
        )
        out = []
        for _, names in grouped:
            sample = by_name[names[0]]
            if len(names) > 1:
                folded = generic(sample.error, sample.host)
                hint = hint_with_fingerprints(generic(sample.hint, sample.host), folded, ((n, by_name[n].error) for n in names))
                sample = replace(sample, error=folded, hint=hint)
            out.append((names, sample))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"remote_command": self.command, "nodes": [node.to_dict() for node in self.nodes]}


def run_command(
    inventory: Inventory,
    command: str,
    *,
    timeout: float | None = None,
    on_event: EventSink | None = None,
    factory: TransportFactory | None = None,
) -> ExecReport:
    """Run `command` with /bin/sh on every node in parallel."""

    def work(node: Node, transport: Transport) -> CommandResult:
        return transport.run(command, timeout=timeout)

    with NodeGroup(inventory, factory=factory, keep=False) as group:
        results = group.run(work, on_event=on_event)
    hosts = {node.name: node.host for node in inventory.nodes}
    outcomes: list[NodeExec] = []
    for result in results:
        host = hosts[result.node]
        if result.value is not None:
            value = result.value
            status = NodeStatus.OK if value.ok else NodeStatus.FAILED
            outcomes.append(NodeExec(result.node, host, status, value.exit_code, value.stdout, value.stderr, duration=value.duration))
        else:
            assert result.error is not None
            err = result.error
            outcomes.append(
                NodeExec(result.node, host, err.status, None, err.stdout, err.stderr, err.message, err.hint, result.duration)
            )
    return ExecReport(command, tuple(outcomes))
