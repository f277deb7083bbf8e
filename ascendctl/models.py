"""Frozen records that cross module boundaries: command results and per-node outcomes.

Owns no I/O. Must not import typer, rich, paramiko or any other ascendctl module
except errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class NodeStatus(str, Enum):
    """How talking to one node ended."""

    OK = "ok"
    FAILED = "failed"  # the command ran and exited non-zero
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth_failed"
    HOST_KEY = "host_key"
    TIMEOUT = "timeout"
    ERROR = "error"  # ascendctl could not evaluate this node (unexpected failure)

    @property
    def reached(self) -> bool:
        """True when the node answered (ok, failed, or its command stopped there at its limit), False for transport failures."""
        return self in (NodeStatus.OK, NodeStatus.FAILED, NodeStatus.TIMEOUT)


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command did on one node."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "duration": round(self.duration, 6),
        }


@dataclass(frozen=True, slots=True)
class NodeError:
    """Why a node produced no value: a transport failure kept as data."""

    status: NodeStatus
    message: str
    hint: str | None = None
    stdout: str = ""  # partial output, e.g. before a command timed out
    stderr: str = ""


@dataclass(frozen=True, slots=True)
class NodeResult(Generic[T]):
    """The outcome of running one function against one node."""

    node: str
    value: T | None = None
    error: NodeError | None = None
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class NodeResults(Generic[T]):
    """Per-node results, always in inventory order."""

    results: tuple[NodeResult[T], ...]

    def __iter__(self) -> Iterator[NodeResult[T]]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def succeeded(self) -> list[NodeResult[T]]:
        return [r for r in self.results if r.ok]

    @property
    def failed(self) -> list[NodeResult[T]]:
        return [r for r in self.results if not r.ok]

    def by_node(self) -> dict[str, NodeResult[T]]:
        return {r.node: r for r in self.results}

    def map(self, fn: Callable[[T], U]) -> "NodeResults[U]":
        """The same results with each value passed through `fn` (errors kept as they are)."""
        return NodeResults(tuple(NodeResult(r.node, fn(r.value) if r.value is not None else None, r.error, r.duration)
                                 for r in self.results))


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """Progress notification from a fan-out: `started` or `finished` for one node."""

    kind: str
    node: str
    total: int
    result: NodeResult[Any] | None = None


EventSink = Callable[[NodeEvent], None]


@dataclass(frozen=True, slots=True)
class Resolved:
    """A setting's effective value and where it came from."""

    value: Any
    source: str  # default | inventory | node | env | flag | ssh_config


# The longest line any reader keeps (a job's output, a log in a bundle): longer ones are cut, their start still
# matched by triage, and memory stays bounded.
MAX_LINE = 64 * 1024


class EndKind(str, Enum):
    """How far one node's part of a job got."""

    RUNNING = "running"  # its launcher (or a process of the job) still runs
    EXITED = "exited"  # its launcher wrote an exit status
    GONE = "gone"  # nothing of it is left, and no exit status was written
    LOST = "lost"  # ascendctl lost track of it: the node could not be reached, or sent nothing for too long
    NOT_STARTED = "not started"  # its launcher could not be started


# The words ascendctl puts in front of a node's recorded `error`; NodeEnd.of_recorded reads them back.
NOT_STARTED = "not started"
UNREACHABLE = "unreachable"
LOST_TRACK = "lost track of the launcher"


@dataclass(frozen=True, slots=True)
class NodeEnd:
    """One node's end of a job, typed: the one reading of a node's job-state answer (`Runner.states`) and of a
    recorded node (job records, job.json in bundles, triage)."""

    kind: EndKind
    code: int | None = None  # the exit status, when EXITED (a negative one is the signal's number, as Python reports)
    when: float | None = None  # epoch seconds the node wrote it, where known
    why: str | None = None  # GONE, LOST, NOT_STARTED: what is known of why

    @classmethod
    def from_state(cls, line: str) -> "NodeEnd":
        """A node's answer (sh/job_state.sh's first line, or a runner's own word): `exit RC [WHEN]`, `running`,
        `gone` or `gone: WHY`; anything else is GONE with the text as its why."""
        words = line.split()
        if words[:1] == ["exit"]:
            code = words[1] if len(words) > 1 else ""
            when = words[2] if len(words) > 2 else ""
            return cls(EndKind.EXITED, int(code) if code.lstrip("-").isdigit() else None, float(when) if when.isdigit() else None)
        if line.strip() == "running":
            return cls(EndKind.RUNNING)
        head, _, why = line.partition(": ")
        if head.strip() == "gone":
            return cls(EndKind.GONE, why=why.strip() or None)
        return cls(EndKind.GONE, why=line.strip() or None)

    @classmethod
    def of_recorded(cls, exit_code: object, error: object) -> "NodeEnd":
        """A recorded node's end from its `exit_code` and `error` (as stored: any JSON value)."""
        if isinstance(exit_code, int) and not isinstance(exit_code, bool):
            return cls(EndKind.EXITED, exit_code)
        if isinstance(error, str) and error:
            if error.startswith(NOT_STARTED):
                return cls(EndKind.NOT_STARTED, why=error)
            if error.startswith((UNREACHABLE, LOST_TRACK)):
                return cls(EndKind.LOST, why=error)
            return cls(EndKind.GONE, why=error)
        return cls(EndKind.RUNNING)
