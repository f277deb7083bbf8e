"""The records of a stacks capture: frames, threads, each rank's stack, each node's answer, the merged report.

Frozen dataclasses with `to_dict` for `stacks --json` (ascendctl/schemas/stacks.schema.json). Pure; must not import
typer or rich.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ascendctl.nodeset import fold, fold_numbers
from ascendctl.outcome import Outcome, exit_code_for

if TYPE_CHECKING:
    from ascendctl.errors import ExitCode
    from ascendctl.stacks.flight import FlightReport


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: a Python function at a line, or a native one (py-spy --native; `line` None when unknown)."""

    file: str
    line: int | None
    function: str
    native: bool = False

    @property
    def where(self) -> str:
        """`file:line in function`, as a person reads it."""
        return f"{self.file}:{self.line} in {self.function}" if self.line else f"{self.file} in {self.function}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "native": self.native}


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """One thread's frames, outermost first (the order of the merged tree; both dump formats print innermost first)."""

    ident: int | None  # Python's thread id (the pthread id) as faulthandler and py-spy print it
    frames: tuple[Frame, ...]
    name: str | None = None  # py-spy names threads; faulthandler does not
    current: bool = False  # faulthandler: the thread that ran the signal handler
    truncated: bool = False  # faulthandler stops at 100 frames (and 100 threads)

    def to_dict(self) -> dict[str, Any]:
        return {"ident": f"0x{self.ident:016x}" if self.ident is not None else None, "name": self.name,
                "current": self.current, "truncated": self.truncated, "frames": [f.to_dict() for f in self.frames]}


@dataclass(frozen=True, slots=True)
class Dump:
    """One dump file read back: its threads and which one is the main thread (None when none can be told)."""

    threads: tuple[ThreadStack, ...]
    main: int | None = None
    header: dict[str, str] = field(default_factory=dict)  # the hook's first line: rank, local_rank, pid, main_thread, ...

    @property
    def main_thread(self) -> ThreadStack | None:
        return self.threads[self.main] if self.main is not None else None


# How each rank answered (stacks_node.sh's STATUS word, and what it means)
RANK_STATUSES = {
    "dumped": "dumped its stacks",
    "timeout": "signalled, but wrote no stacks in time",
    "exited": "exited before it could answer",
    "nohook": "has no stacks hook (not started by this ascendctl's launch, or Python ran with -S/-I)",
    "nohandler": "its stacks handler was replaced or removed by the job",
}


@dataclass(frozen=True, slots=True)
class RankStack:
    """One rank's answer. Rank, local rank, node and pid come from its environment and the job record, never guessed."""

    rank: int
    node: str
    pid: int
    local_rank: int | None
    launcher: str  # torchrun or msrun: whose variables named the rank
    status: str  # a key of RANK_STATUSES
    source: str | None = None  # "faulthandler" or "py-spy": the dump its main stack comes from
    threads: tuple[ThreadStack, ...] = ()
    main: ThreadStack | None = None
    files: tuple[str, ...] = ()  # the files of this capture on the node
    notes: tuple[str, ...] = ()  # what went wrong on the way (a py-spy error, a cut file)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "node": self.node, "pid": self.pid, "local_rank": self.local_rank,
                "launcher": self.launcher, "status": self.status, "source": self.source,
                "main_thread": self.main.to_dict() if self.main is not None else None,
                "threads": [t.to_dict() for t in self.threads], "files": list(self.files), "notes": list(self.notes)}


@dataclass(frozen=True, slots=True)
class NodeCapture:
    """One node's part of the capture, or why the node could not be asked."""

    node: str
    incident: str | None = None  # the folder of this capture on the node (None: nothing of the job was there)
    signalled: float | None = None  # the node's clock (epoch seconds) when it signalled its ranks
    py_spy: bool = False  # py-spy is on the node's PATH
    ranks: tuple[RankStack, ...] = ()
    error: str | None = None
    unreachable: bool = False  # the error is a transport failure (connect, auth, timeout)
    expected: tuple[int, ...] | None = None  # the ranks the job record puts on this node (None: a rendezvous decides)

    @property
    def missing(self) -> tuple[int, ...]:
        """Ranks the record puts here that no process of the job answered for (unknown when the node was not asked)."""
        if self.expected is None or self.error is not None:
            return ()
        seen = {r.rank for r in self.ranks}
        return tuple(r for r in self.expected if r not in seen)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.node, "status": "ok" if self.error is None else ("unreachable" if self.unreachable else "error"),
                "message": self.error, "incident": self.incident, "signalled": self.signalled, "py_spy": self.py_spy,
                "ranks": [r.rank for r in self.ranks], "missing": list(self.missing)}


@dataclass(frozen=True, slots=True)
class StackClass:
    """Ranks whose main threads are at the same place (the same frames): an equivalence class."""

    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    frames: tuple[Frame, ...]  # outermost first
    waiting: Frame | None  # the frame that is a collective, barrier or store wait (None: the class is not waiting)
    suspect: bool = False

    @property
    def label(self) -> str:
        """`rank 4` or `ranks 0-3,5`."""
        return ranks_label(self.ranks)

    @property
    def innermost(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": list(self.ranks), "ranks_folded": fold_numbers(self.ranks), "nodes": list(self.nodes),
                "nodes_folded": fold(self.nodes), "waiting": self.waiting is not None,
                "wait_frame": self.waiting.to_dict() if self.waiting else None,
                "innermost": self.innermost.to_dict() if self.innermost else None, "suspect": self.suspect,
                "frames": [f.to_dict() for f in self.frames]}


@dataclass(frozen=True, slots=True)
class TreeNode:
    """A node of the merged prefix tree: a frame (None at the root) and the ranks whose stacks pass through it."""

    frame: Frame | None
    ranks: tuple[int, ...]
    children: tuple["TreeNode", ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"frame": self.frame.to_dict() if self.frame else None, "ranks": list(self.ranks),
                "ranks_folded": fold_numbers(self.ranks), "children": [c.to_dict() for c in self.children]}


@dataclass(frozen=True, slots=True)
class StacksVerdict:
    """What the classes say: a suspect, or plainly that there is none and why."""

    kind: str  # suspect | same_place | all_waiting | busy | no_stacks
    message: str
    suspects: tuple[int, ...] = ()  # the suspect ranks (kind "suspect")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "suspects": list(self.suspects)}


@dataclass(frozen=True, slots=True)
class StacksReport:
    """Every rank's stack of a running job, merged: the tree, the classes, the verdict, and each node's answer."""

    job: str
    stamp: str  # the capture's folder name on every node (`<node dir>/stacks/<stamp>`; `-2`... when taken)
    nodes: tuple[NodeCapture, ...]
    tree: TreeNode
    classes: tuple[StackClass, ...]
    verdict: StacksVerdict
    took: float = 0.0  # seconds, this machine's clock, from the first connection to the last answer
    flight: FlightReport | None = None  # launch --flight-recorder: the ranks' Flight Recorder dumps lined up

    @property
    def ranks(self) -> tuple[RankStack, ...]:
        """Every rank that answered, by rank."""
        return tuple(sorted((r for n in self.nodes for r in n.ranks), key=lambda r: (r.rank, r.node, r.pid)))

    @property
    def stacked(self) -> tuple[RankStack, ...]:
        """The ranks with a main-thread stack."""
        return tuple(r for r in self.ranks if r.main is not None)

    @property
    def spread(self) -> float | None:
        """Seconds between the first and the last node signalling its ranks (nodes' clocks: preflight checks their skew)."""
        times = [n.signalled for n in self.nodes if n.signalled is not None and n.ranks]
        return max(times) - min(times) if times else None

    @property
    def missing(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(node, ranks) the job record puts on a node that answered without them."""
        return tuple((n.node, n.missing) for n in self.nodes if n.missing)

    @property
    def outcomes(self) -> list[Outcome]:
        """A node that could not be asked; ascendctl's own failure on a node, or no rank's stack at all (1)."""
        outcomes = [Outcome.UNREACHABLE if n.unreachable else Outcome.ERROR for n in self.nodes if n.error is not None]
        if not self.stacked:
            outcomes.append(Outcome.ERROR)
        return outcomes or [Outcome.OK]

    @property
    def exit_code(self) -> ExitCode:
        """0 stacks taken, 4 a node could not be asked, 1 no rank answered (or ascendctl failed on a node)."""
        return exit_code_for(self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "stamp": self.stamp, "took": round(self.took, 3),
                "spread": round(self.spread, 3) if self.spread is not None else None,
                "verdict": self.verdict.to_dict(), "classes": [c.to_dict() for c in self.classes],
                "tree": self.tree.to_dict(), "nodes": [n.to_dict() for n in self.nodes],
                "ranks": [r.to_dict() for r in self.ranks],
                "flight_recorder": self.flight.to_dict() if self.flight is not None else None}


def ranks_label(ranks: tuple[int, ...] | list[int]) -> str:
    """`rank 4`, `ranks 0-3,5`."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {fold_numbers(ranks)}"
