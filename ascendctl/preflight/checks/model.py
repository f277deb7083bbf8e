"""Preflight check model: results, facts, the two kinds of check (per node, across nodes).

A node check names the facts it needs (shell sections gathered in one probe per node)
and evaluates them with a pure function. A cluster check compares facts across nodes.
Nothing registers itself at import time: ALL_CHECKS is the list. Must not import typer or rich.
"""

from __future__ import annotations


from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ascendctl.errors import UsageError
from ascendctl.launchers import LAUNCHERS, launcher_spec

if TYPE_CHECKING:
    from ascendctl.outcome import Outcome
    from ascendctl.remote.probe import Section
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.inventory.settings import PreflightConfig


class Status(str, Enum):
    """Outcome of one check on one node (or the cluster)."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"  # could not evaluate
    SKIP = "skip"  # not applicable here (tool absent where optional, one node, ...)

    @property
    def outcome(self) -> "Outcome":
        from ascendctl.outcome import Outcome

        return {Status.FAIL: Outcome.FAILED, Status.ERROR: Outcome.UNEVALUATED}.get(self, Outcome.OK)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's verdict: a stable id, a status, a one-line summary and the fix."""

    check: str
    status: Status
    summary: str
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.check, "status": self.status.value, "summary": self.summary, "hint": self.hint}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CheckResult":
        """A result back from `to_dict` (a preflight --json document); KeyError/ValueError on garbage."""
        hint = data.get("hint")
        if not isinstance(data["id"], str) or not isinstance(data["summary"], str) or not isinstance(hint, (str, type(None))):
            raise ValueError(f"check {data['id']!r}: id, summary and hint must be strings")
        return cls(data["id"], Status(data["status"]), data["summary"], hint)


@dataclass(frozen=True, slots=True)
class JobTarget:
    """The job a launch is about to start: its launcher and script must exist on every node (the `launcher` check)."""

    launcher: str  # msrun | torchrun
    script: str | None  # the script as the job will name it (relative to the job's working directory); None: not a file
    log_dir: str | None = None  # the job's log directory on the nodes (launch): it must be creatable there


def job_target(launcher: str | None, script: str | None) -> JobTarget | None:
    """The job `preflight --launcher L --script S` asks about; UsageError for a launcher we do not start."""
    if launcher is None:
        if script is not None:
            raise UsageError(f"--script needs --launcher ({' or '.join(LAUNCHERS)})")
        return None
    return JobTarget(launcher_spec(launcher).name, script)


@dataclass(frozen=True, slots=True)
class ProbeContext:
    """What command builders and evaluators may know besides the node itself."""

    inventory: Inventory
    config: PreflightConfig
    job: JobTarget | None = None  # set by launch (and `preflight --launcher`): checks the launcher and script

    def neighbour(self, node: Node) -> Node | None:
        """The next node in inventory order (ring), or None on a one-node cluster."""
        nodes = self.inventory.nodes
        if len(nodes) < 2:
            return None
        return nodes[(node.index + 1) % len(nodes)]


@dataclass(frozen=True, slots=True)
class NodeCheck:
    """A check evaluated on each node from the probe sections it `needs`."""

    id: str
    title: str
    needs: tuple[str, ...]
    evaluate: Callable[[Node, Mapping[str, Section], ProbeContext], CheckResult]


@dataclass(frozen=True, slots=True)
class ClusterVerdict:
    """A cross-node check's per-node results plus its one-line cluster summary."""

    per_node: Mapping[str, CheckResult]
    summary: CheckResult


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """Everything gathered from one reachable node, for cross-node checks."""

    node: Node
    sections: Mapping[str, Section] = field(default_factory=dict)
    clock_offset: float | None = None  # node clock minus this host's, seconds
    clock_uncertainty: float | None = None  # half the round trip of the measurement
    phase2: Mapping[str, Section] = field(default_factory=dict)  # probe sections of the cross-node round (path, port)
    listener: bool | None = None  # on the master: a test listener ran on master_port
    # the probe sections asked for on this node, per fact (most facts are one section of their own name; some,
    # like device_ips, several); a fact the node's builder skipped (not applicable) is absent
    expected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterCheck:
    """A check that compares facts across nodes (clock skew, path MTU, versions, ...)."""

    id: str
    title: str
    needs: tuple[str, ...]
    evaluate: Callable[[Sequence[NodeFacts], ProbeContext], ClusterVerdict]
    phase2: bool = False  # needs the cross-node round after the probe
    clock: bool = False  # needs the clock measurement


Check = NodeCheck | ClusterCheck


def result(check: str, status: Status, summary: str, hint: str | None = None) -> CheckResult:
    """Shorthand used by evaluators."""
    return CheckResult(check, status, summary, hint)
