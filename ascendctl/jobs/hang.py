"""What ascendctl does about a hang: every rank's stack, taken while the job still hangs, and the verdict they give
(HANG, the rank that is not waiting while the others wait). Used before a stop (`stop`, Ctrl-C) and by the hang
policy of `launch --hang-timeout` (foreground and detached)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ascendctl.errors import AscendctlError
from ascendctl.jobs.record import FirstFailure, JobState
from ascendctl.triage.signatures import Category

if TYPE_CHECKING:
    from ascendctl.jobs.record import JobRecord
    from ascendctl.jobs.runner import NoticeSink
    from ascendctl.remote.group import NodeGroup
    from ascendctl.stacks.model import StacksReport


def with_stacks(record: JobRecord, group: NodeGroup, notice: NoticeSink, stopping: bool = True) -> JobRecord:
    """Every rank's stack taken before a stop (a hang is most often stopped by hand, and its culprit is only visible
    while it hangs): the capture stays on the nodes (`<node dir>/stacks/<stamp>/`, collected with the job), and a
    suspect rank becomes the record's verdict (HANG) unless the job already has one. Never fails the stop.
    `stopping` False: a hang only reported (`--on-hang report`): the same capture, said as such; the job runs on."""
    from ascendctl.stacks.capture import take_stacks

    if record.status != JobState.RUNNING or not any(n.pid is not None and n.exit_code is None for n in record.nodes):
        return record
    try:
        report = take_stacks(record, group=group)
    except AscendctlError as exc:
        notice(f"no stacks taken{' before the stop' if stopping else ''}: {exc.message}")
        return record
    notice(f"stacks of {len(report.stacked)} ranks taken{' before the stop' if stopping else ''} "
           f"(<node dir>/stacks/{report.stamp}): "
           f"{report.verdict.message}")
    return replace(record, first_failure=record.first_failure or hang_failure(report))


def hang_failure(report: "StacksReport") -> FirstFailure | None:
    """The record's verdict from a stacks capture that names a suspect, as the blame engine gives it (triage of a
    bundle holding this capture gives the same): HANG, the ranks not waiting while the others wait."""
    from ascendctl.jobs.supervise import first_failure
    from ascendctl.stacks.incident import CaptureJudgement
    from ascendctl.triage.engine import report as blame
    from ascendctl.triage.extract import Extraction

    verdict = blame(Extraction(), capture=CaptureJudgement(report.stamp, report.ranks, report.classes, report.verdict, ()))
    return first_failure(verdict) if verdict.category == Category.HANG else None
