"""The report's attempts section: a row per attempt of a job run with `launch --restarts` (jobs/restart.py).

Every attempt is a job record of its own (`attempt`, `restart_of`: the first attempt's id, `decision`: what was decided
after it, and why); the rows come from those records: the ones kept in this machine's state directory, and the one a
bundle holds (`job.json`), which is used where the state directory has no record of it. Pure apart from reading the
job records. Must not import typer or rich.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ascendctl.jobs.record import JobRecord, RecordShapeError, read_jobs
from ascendctl.nodeset import fold

if TYPE_CHECKING:
    from ascendctl.jobs.record import JobListing


@dataclass(frozen=True, slots=True)
class AttemptRow:
    """One attempt as the page shows it."""

    attempt: int
    job: str
    nodes: str  # folded
    node_count: int
    start: str  # UTC, `2026-11-26 23:10:05Z`
    end: str  # "" while it runs
    status: str  # succeeded | failed | ...
    verdict: str  # the blame engine's headline, "" when there is none
    decision: str  # done | restart | replace | no_restart | give_up; "" when none was recorded
    why: str


@dataclass(frozen=True, slots=True)
class AttemptsView:
    """Every attempt of one job, first to last, and what could not be shown."""

    first: str  # the first attempt's job id: what `restart_of` names
    rows: tuple[AttemptRow, ...]
    notes: tuple[str, ...]


def _utc(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def attempt_row(record: JobRecord) -> AttemptRow:
    """One attempt's row from its record (the decision recorded as `<decision>: <why>`)."""
    decision, why = record.decided
    failure = record.first_failure
    verdict = (failure.headline or failure.category or failure.reason) if failure is not None else ""
    names = [n.name for n in record.nodes]
    return AttemptRow(record.attempt, record.id, fold(names), len(names), _utc(record.started), _utc(record.ended),
                      record.status.value, verdict or "", decision or "", why or "")


def chain_of(record: JobRecord, records: Sequence[JobRecord]) -> list[JobRecord]:
    """`record` and every other attempt of its job among `records` (one per job id; `record` wins for its own id), in
    attempt order."""
    first = record.restart_of or record.id
    found = {r.id: r for r in records if r.id == first or r.restart_of == first}
    found[record.id] = found.get(record.id, record)
    return sorted(found.values(), key=lambda r: (r.attempt, r.started))


def attempts_view(record: JobRecord, listing: JobListing | None = None) -> AttemptsView | None:
    """The attempts of `record`'s job (records from `listing`, else this machine's state directory); None when the job
    was not run with restarts (one attempt and no decision recorded)."""
    if record.decision is None and record.attempt == 1 and record.restart_of is None:
        return None  # every attempt of a restarted job records its decision: this job was launched without --restarts
    listing = read_jobs() if listing is None else listing
    chain = chain_of(record, listing.records)
    notes = []
    seen = {r.attempt for r in chain}
    missing = [n for n in range(1, max(seen) + 1) if n not in seen]
    if missing:
        notes.append(f"attempt{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of job "
                     f"{record.restart_of or record.id}: no record on this machine nor in the bundle (a bundle collected "
                     "before bundles carried attempts.json; `ascendctl report JOB` where the job was launched shows "
                     "every one)")
    return AttemptsView(record.restart_of or record.id, tuple(attempt_row(r) for r in chain), tuple(notes))


def record_of(data: Mapping[str, Any] | None) -> JobRecord | None:
    """A bundle's job.json as a record; None when it has none or it is not one."""
    if data is None:
        return None
    try:
        return JobRecord.from_dict(dict(data))
    except RecordShapeError:
        return None


__all__ = ["AttemptRow", "AttemptsView", "attempt_row", "attempts_view", "chain_of", "record_of"]
