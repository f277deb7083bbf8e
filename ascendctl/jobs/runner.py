"""The Runner seam: how a planned job is started, followed, asked about and stopped on its nodes.

A plan (plan.py) is pure and printable; a Runner carries it out. `SSHRunner` (ssh_runner.py) starts each
node's launcher detached under `setsid` over the node's transport (SSH, or the local transport). A Slurm
runner goes beside it (`jobs/slurm_runner.py`: one `srun` step whose task per node runs the same
per-node launcher), implementing the same protocol; `supervise` and the commands do not change.
Must not import typer or rich.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Protocol, Sequence

if TYPE_CHECKING:
    from ascendctl.models import NodeEnd, NodeResults
    from ascendctl.jobs.plan import LaunchPlan
    from ascendctl.jobs.record import JobRecord


LineSink = Callable[[str, str], None]  # (node name, one line of output without the newline)
NoticeSink = Callable[[str], None]
TeardownSink = Callable[[Optional[str]], None]  # told when a teardown begins: the failing node (None: a stop signal)


@dataclass(frozen=True, slots=True)
class NodeEnded:
    """A node's launcher ended (exit code and node-side time), or the runner lost it (`lost` says why)."""

    node: str
    exit_code: int | None
    when: float  # epoch seconds
    lost: str | None = None


class NodeStream(Protocol):
    """One node's launcher output while it runs, read by one event loop for every node (no thread per node)."""

    node: str

    def fileno(self) -> int:
        """Readable when there is something to pump."""
        ...

    def pump(self) -> tuple[list[str], NodeEnded | None]:
        """The complete lines that arrived (as written to the launcher log, stamps included), and the end once reached.

        Also called when nothing is readable (every poll), so a stream can end a node that went silent.
        """
        ...

    def close(self) -> None:
        ...


class Runner(Protocol):
    """Starts, follows, describes and stops a job's launchers on its nodes."""

    name: str

    def start(self, plan: LaunchPlan, record: JobRecord, *, notice: NoticeSink) -> JobRecord:
        """Start every node's launcher; returns the record with pids (or errors, after stopping what started); the caller saves it."""
        ...

    def follow(self, record: JobRecord, node: str, *, silence: float | None = None) -> NodeStream:
        """Follow a started node's launcher log until it ends; with `silence`, a node that sends nothing that long is lost."""
        ...

    def stop(self, record: JobRecord, nodes: Sequence[str], *, grace: float) -> NodeResults[str]:
        """TERM every process of the job on these nodes, KILL what is left after `grace`; per node: term, kill or none."""
        ...

    def states(self, record: JobRecord, nodes: Sequence[str]) -> NodeResults[NodeEnd]:
        """Per node: exited (with its code and when), running, or gone (with why, where the runner knows)."""
        ...

    def leftovers(self, record: JobRecord, nodes: Sequence[str]) -> NodeResults[tuple[int, ...]]:
        """Per node: the pids of every process of the job still there (after a teardown that could not reach it)."""
        ...

    def log_lines(self, record: JobRecord, node: str, path: str | None = None) -> Iterator[str]:
        """One node's launcher log so far (or `path`, another file of the job there), line by line as it is read (stamps
        included; lines cut at MAX_LINE bytes with a note): memory stays bounded whatever the log's size. Nothing for a
        file that is not there. Raises AscendctlError when the node cannot be read."""
        ...

    def artifacts(self, record: JobRecord, node: str) -> tuple[str, ...]:
        """Paths on the node that a bundle of this job should hold (launcher log, per-rank logs)."""
        ...

    def close(self) -> None:
        ...
