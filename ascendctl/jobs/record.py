"""Job records: what `ascendctl launch` started where and how it ended, kept in $XDG_STATE_HOME/ascendctl/jobs/<id>.json.

`jobs`, `status`, `logs`, `stop`, `collect` and `triage` read them. Records are typed here and written
atomically; environment values in them are redacted (redact.py). Must not import typer or rich.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import AscendctlError, ExitCode
from ..paths import state_dir as state_dir  # re-exported: the job modules and the CLI import it from here

JOB_SCHEMA = 1


class JobError(AscendctlError):
    """A job record is missing or unreadable."""

    exit_code = ExitCode.USAGE


class StateWriteError(AscendctlError):
    """A job record could not be written (full disk, read-only or unwritable state directory); exit 1.

    `saved` is True when the record was still written, from the space reserved for it when the job started.
    """

    exit_code = ExitCode.ERROR

    def __init__(self, path: Path, exc: OSError, *, saved: bool = False) -> None:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        code = f" ({errno.errorcode[exc.errno]})" if exc.errno is not None and exc.errno in errno.errorcode else ""
        super().__init__(f"cannot write the job record {path}: {why}{code}",
                         hint=f"free space in (or make writable) {path.parent}, or point XDG_STATE_HOME elsewhere")
        self.path = path
        self.saved = saved


@dataclass(frozen=True, slots=True)
class NodeJob:
    """One node's part of a job: its launcher process and where it logs."""

    name: str
    host: str
    rank: int  # node rank (inventory order)
    command: str  # the exact launcher command line run on the node
    env: dict[str, str] = field(default_factory=dict)  # exported variables (secrets redacted)
    log: str = ""  # launcher output on the node (stdout+stderr)
    log_dir: str = ""  # the launcher's own log directory on the node (msrun --log_dir, torchrun --log-dir)
    pid: int | None = None  # launcher pid == its process group and session id on the node
    exit_code: int | None = None  # None while running or when unknown
    signal: str | None = None  # e.g. "SIGTERM" when ascendctl tore it down
    started: float | None = None  # epoch seconds
    ended: float | None = None
    error: str | None = None  # why ascendctl lost track (unreachable, ...)
    teardown_error: str | None = None  # why the teardown could not reach this node (`status` asks it again later)
    workers: int | None = None  # ranks started on this node
    first_rank: int | None = None  # global rank of its local rank 0 (None when a rendezvous assigns ranks)
    address: str | None = None  # the node's cluster address (HCCL_IF_IP): peers name it in their errors
    utc_offset: int | None = None  # seconds east of UTC on the node, to read its log times against epoch times

    @property
    def dir(self) -> str:
        """This node's directory of the job (launcher.log, exit_code, pid, workers/)."""
        return self.log.rsplit("/", 1)[0]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "NodeJob":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class FailureVictim:
    """A rank (or node) that failed because of the culprit, and how."""

    node: str | None
    rank: int | None
    how: str


@dataclass(frozen=True, slots=True)
class FirstFailure:
    """Where a job's failure started (the triage verdict), or why nothing was started."""

    reason: str
    node: str | None = None
    rank: int | None = None
    category: str | None = None
    headline: str | None = None
    rule: str | None = None
    confidence: str | None = None
    single_culprit: bool = True
    time: str | None = None  # node-local time of the evidence
    file: str | None = None
    line: int | None = None
    text: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    victims: tuple[FailureVictim, ...] = ()
    launcher_blamed: str | None = None
    hints: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["victims"] = [asdict(v) for v in self.victims]
        data["hints"] = list(self.hints)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FirstFailure":
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["victims"] = tuple(FailureVictim(v.get("node"), v.get("rank"), str(v.get("how", "")))
                                  for v in data.get("victims") or () if isinstance(v, dict))
        fields["hints"] = tuple(str(h) for h in data.get("hints") or ())
        fields.setdefault("reason", "")
        if not isinstance(fields.get("time"), (str, type(None))):
            fields["time"] = None  # records of older versions kept an epoch here
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A launched job across every node."""

    id: str
    launcher: str  # msrun | torchrun
    inventory: str
    script: list[str]
    master_addr: str
    master_port: int
    log_dir: str  # per-node base directory of this job's logs (same path on every node)
    nodes: tuple[NodeJob, ...]
    started: float
    ended: float | None = None
    status: str = "running"  # running | succeeded | failed | stopped | interrupted
    first_failure: FirstFailure | None = None  # the triage engine's verdict when the job failed
    teardown_started: float | None = None  # epoch seconds when ascendctl began stopping the other nodes
    stopped_by: str | None = None  # SIGINT, SIGTERM or SIGHUP when ascendctl was told to stop (status "interrupted")
    schema: int = JOB_SCHEMA

    runner: str = "ssh"  # the Runner that started it (jobs/runner.py)
    slurm_job: str | None = None  # slurm runner: the allocation (or submitted job) it ran in
    slurm_step: str | None = None  # slurm runner: JOB.STEP of the launch step
    slurm_submitted: bool = False  # the Slurm job was submitted by `launch --backend slurm`: stop cancels all of it

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes"] = [asdict(node) for node in self.nodes]
        data["first_failure"] = self.first_failure.to_dict() if self.first_failure else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobRecord":
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["nodes"] = tuple(NodeJob.from_dict(node) for node in data.get("nodes", []))
        first = data.get("first_failure")
        fields["first_failure"] = FirstFailure.from_dict(first) if isinstance(first, dict) else None
        return cls(**fields)

    def node(self, name: str) -> NodeJob:
        """One node's entry (KeyError when the job has no such node)."""
        for entry in self.nodes:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def with_node(self, node: NodeJob) -> "JobRecord":
        """A copy with one node's entry replaced."""
        return replace(self, nodes=tuple(node if n.name == node.name else n for n in self.nodes))


def jobs_dir() -> Path:
    return state_dir() / "jobs"


def new_job_id(now: float | None = None) -> str:
    """Sortable and unique: 20261122-193000-ab12."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    return f"{stamp}-{secrets.token_hex(2)}"


RESERVE_MIN = 64 * 1024  # bytes kept free per running job, so that its final record fits on a full disk


def _reserve_path(record: JobRecord) -> Path:
    return jobs_dir() / f"{record.id}.reserve"


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a half-written temporary holds the space the retry needs
        raise


def save_job(record: JobRecord) -> Path:
    """Write the record atomically (a reader never sees half a file); StateWriteError names the path when it cannot.

    While the job runs, a reserve file keeps room for its final record: when the disk fills mid-job, the
    final write gives the reserve back and retries (the record is saved, StateWriteError(saved=True) still says so).
    """
    directory = jobs_dir()
    path = directory / f"{record.id}.json"
    text = json.dumps(record.to_dict(), indent=2) + "\n"
    reserve = _reserve_path(record)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write(path, text)
    except OSError as exc:
        if record.status == "running" or exc.errno != errno.ENOSPC or not reserve.exists():
            raise StateWriteError(path, exc) from None
        try:
            reserve.unlink()
            _write(path, text)
        except OSError:
            raise StateWriteError(path, exc) from None
        raise StateWriteError(path, exc, saved=True) from None
    try:
        if record.status == "running" and not reserve.exists():
            with open(reserve, "wb") as handle:
                handle.write(bytes(max(RESERVE_MIN, 4 * len(text))))
        elif record.status != "running":
            reserve.unlink(missing_ok=True)
    except OSError as exc:
        reserve.unlink(missing_ok=True)
        raise StateWriteError(reserve, exc) from None
    return path


def load_job(job_id: str | None = None) -> JobRecord:
    """The record of `job_id` (a unique prefix is enough), or the newest job when None."""
    directory = jobs_dir()
    paths = sorted(directory.glob("*.json")) if directory.is_dir() else []
    if not paths:
        raise JobError("no jobs recorded yet", hint=f"start one with `ascendctl launch`; records live in {directory}")
    if job_id is None:
        chosen = paths[-1]
    else:
        matches = [p for p in paths if p.stem == job_id] or [p for p in paths if p.stem.startswith(job_id)]
        if not matches:
            raise JobError(f"no job {job_id!r}", hint="`ascendctl jobs` lists them")
        if len(matches) > 1:
            raise JobError(f"job id {job_id!r} is ambiguous: {', '.join(p.stem for p in matches)}")
        chosen = matches[0]
    try:
        return JobRecord.from_dict(json.loads(chosen.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:
        raise JobError(f"{chosen}: unreadable job record: {exc}") from None


def list_jobs() -> list[JobRecord]:
    """Every readable job record, oldest first."""
    directory = jobs_dir()
    records = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            records.append(JobRecord.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError):
            continue
    return records
