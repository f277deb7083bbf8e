"""What ascendctl does about a hang: every rank's stack, taken while the job still hangs, and the verdict they give
(HANG, the rank that is not waiting while the others wait). Used before a stop (`stop`, Ctrl-C) and by the hang
policy of `launch --hang-timeout` (foreground and detached)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ascendctl.errors import AscendctlError
from ascendctl.jobs.record import FirstFailure, JobState
from ascendctl.triage.model import Victim
from ascendctl.triage.signatures import Category

if TYPE_CHECKING:
    from ascendctl.jobs.record import JobRecord
    from ascendctl.jobs.runner import NoticeSink
    from ascendctl.remote.group import NodeGroup
    from ascendctl.stacks.model import StacksReport


def with_stacks(record: JobRecord, group: NodeGroup, notice: NoticeSink) -> JobRecord:
    """Every rank's stack taken before a stop (a hang is most often stopped by hand, and its culprit is only visible
    while it hangs): the capture stays on the nodes (`<node dir>/stacks/<stamp>/`, collected with the job), and a
    suspect rank becomes the record's verdict (HANG) unless the job already has one. Never fails the stop."""
    from ascendctl.stacks.capture import take_stacks

    if record.status != JobState.RUNNING or not any(n.pid is not None and n.exit_code is None for n in record.nodes):
        return record
    try:
        report = take_stacks(record, group=group)
    except AscendctlError as exc:
        notice(f"no stacks taken before the stop: {exc.message}")
        return record
    notice(f"stacks of {len(report.stacked)} ranks taken before the stop (<node dir>/stacks/{report.stamp}): "
           f"{report.verdict.message}")
    return replace(record, first_failure=record.first_failure or hang_failure(report))


def hang_failure(report: "StacksReport") -> FirstFailure | None:
    """The record's verdict from a stacks capture that names a suspect: the ranks not waiting while the others wait."""
    suspects = [c for c in report.classes if c.suspect]
    if report.verdict.kind != "suspect" or not suspects:
        return None
    first = suspects[0]
    frame = first.innermost
    victims = tuple(Victim(c.nodes[0] if len(c.nodes) == 1 else None, c.ranks[0] if len(c.ranks) == 1 else None,
                                  f"waiting at {c.waiting.where}" if c.waiting else "waiting")
                    for c in report.classes if not c.suspect and c.waiting is not None)
    node = first.nodes[0] if len(first.nodes) == 1 else None
    rank = first.ranks[0] if len(first.ranks) == 1 else None
    return FirstFailure(
        reason=report.verdict.message, node=node, rank=rank, category=Category.HANG.value,
        headline=f"HANG: {first.label} not in a collective" + (f" on node {node}" if node else ""), rule="stacks",
        confidence="medium", single_culprit=len(first.ranks) == 1, file=frame.file if frame else None,
        line=frame.line if frame else None, text=f"{first.label} at {frame.where}" if frame else None, victims=victims,
        hints=(f"every rank's stack: ascendctl stacks output kept on each node under <node dir>/stacks/{report.stamp}/",))
