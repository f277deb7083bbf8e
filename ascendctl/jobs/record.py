"""Job records: what `ascendctl launch` started where and how it ended, kept in $XDG_STATE_HOME/ascendctl/jobs/<id>.json.

`jobs`, `status`, `logs`, `stop`, `collect` and `triage` read them. Records are typed here and written
atomically; environment values in them are redacted (redact.py). Must not import typer or rich.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import time
import types
from enum import Enum
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from ascendctl.errors import AscendctlError, ExitCode, parse_json
from ascendctl.outcome import Outcome, exit_code_for
from ascendctl.paths import name_problem, write_atomic
from ascendctl.paths import state_dir as state_dir  # re-exported: the job modules and the CLI import it from here
from ascendctl.triage.model import Victim

JOB_SCHEMA = 1
T = TypeVar("T")


class JobError(AscendctlError):
    """A job record is missing or unreadable."""

    exit_code = ExitCode.USAGE


class JobRecordError(JobError):
    """A job record file that is not a readable job record (damaged, truncated, wrong shape or types); exit 1.

    The message names the file and every problem found in it, each with its key path.
    """

    exit_code = ExitCode.ERROR

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: unreadable job record: {problem}",
                         hint=f"ascendctl writes its records whole: this one was damaged or changed outside it; "
                              f"move it out of {path.parent} (the other jobs' records are not affected)")
        self.path = path
        self.problem = problem


class RecordShapeError(ValueError):
    """Data that is not a job record: every problem, each with its key path (`nodes[1].pid: expected ...`)."""

    def __init__(self, problems: list[str]) -> None:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        super().__init__("; ".join(shown) + (f"; and {more} more" if more else ""))
        self.problems = problems


MAX_PROBLEMS_SHOWN = 5


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


class JobState(str, Enum):
    """Where a job is in its life. A str, so records, JSON and comparisons read the plain word."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"  # every node's launcher exited 0
    FAILED = "failed"  # a launcher exited non-zero, was lost, or a node could not start it
    STOPPED = "stopped"  # `ascendctl stop`
    INTERRUPTED = "interrupted"  # ascendctl itself was stopped (SIGINT, SIGTERM, SIGHUP) and tore the job down

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


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
    def from_dict(cls, data: Any) -> "NodeJob":
        """A node entry as stored; RecordShapeError lists what is missing or of the wrong type (unknown keys are ignored)."""
        return _from_data(cls, data)


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
    victims: tuple[Victim, ...] = ()  # the triage engine's own record of each
    launcher_blamed: str | None = None
    hints: tuple[str, ...] = ()
    oom_kind: str | None = None  # OOM: "device" or "host" (what a restart decides on, jobs/restart.py)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["victims"] = [asdict(v) for v in self.victims]
        data["hints"] = list(self.hints)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> "FirstFailure":
        """A verdict as stored; RecordShapeError lists what is of the wrong type (unknown keys are ignored)."""
        return _from_data(cls, data)

    @staticmethod
    def upgrade(data: dict[str, Any]) -> dict[str, Any]:
        """The stored object as this version reads it (from_dict calls it before checking types): records of older
        versions kept an epoch in `time`, victims without `how`, and no `reason`."""
        data = dict(data)
        if not isinstance(data.get("time"), (str, type(None))):
            data["time"] = None
        data.setdefault("reason", "")
        victims = data.get("victims")
        if victims is None or isinstance(victims, list):
            data["victims"] = [{"node": v.get("node"), "rank": v.get("rank"), "how": str(v.get("how", ""))}
                               for v in victims or () if isinstance(v, dict)]
        hints = data.get("hints")
        if hints is None or isinstance(hints, list):
            data["hints"] = [str(h) for h in hints or ()]
        return data


@dataclass(frozen=True, slots=True)
class Supervisor:
    """The process on the control host that looks after a detached job (jobs/detached.py): it follows every node, tears
    the job down at its first failure and records the verdict, as a foreground launch does."""

    pid: int
    host: str  # the control host it runs on: its pid means nothing on another machine
    started: float
    log: str  # its own messages (what it did, why it stopped), on the control host
    options: list[str] = field(default_factory=list)  # its command-line options (grace, silence limit, timeouts): a restart reuses them
    loop: bool = False  # it runs the restart loop of `launch --detach --restarts N` (jobs/restart.py): attempts after this one


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
    status: JobState = JobState.RUNNING
    first_failure: FirstFailure | None = None  # the triage engine's verdict when the job failed
    teardown_started: float | None = None  # epoch seconds when ascendctl began stopping the other nodes
    stopped_by: str | None = None  # SIGINT, SIGTERM or SIGHUP when ascendctl was told to stop (status "interrupted")
    schema: int = JOB_SCHEMA

    runner: str = "ssh"  # the Runner that started it (jobs/runner.py)
    slurm_job: str | None = None  # slurm runner: the allocation (or submitted job) it ran in
    slurm_step: str | None = None  # slurm runner: JOB.STEP of the launch step
    slurm_submitted: bool = False  # the Slurm job was submitted by `launch --backend slurm`: stop cancels all of it
    supervisor: Supervisor | None = None  # a detached job's supervisor (None: followed in the foreground, or none yet)
    stop_requested: float | None = None  # epoch seconds when `stop` was asked: from then on the record is stop's to finish
    attempt: int = 1  # launch --restarts: which attempt of the job this record is (jobs/restart.py)
    restart_of: str | None = None  # launch --restarts: the first attempt's job id (None: this is the first)
    decision: str | None = None  # launch --restarts: what was decided after this attempt, and why
    restart_at: float | None = None  # launch --restarts: when the next attempt was due (the loop waited in its backoff)
    restarts: int = 0  # launch --restarts N: the budget of the job this is an attempt of (0: no restarts)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes"] = [asdict(node) for node in self.nodes]
        data["first_failure"] = self.first_failure.to_dict() if self.first_failure else None
        return data

    @classmethod
    def from_dict(cls, data: Any) -> "JobRecord":
        """A record as stored; RecordShapeError lists every key that is missing or of the wrong type, with its path
        (unknown keys are ignored: a newer ascendctl may add some)."""
        if not isinstance(data, dict):
            raise RecordShapeError([f"expected an object at the top, got {_describe(data)}"])
        problems: list[str] = []
        record = _build(cls, data, "", problems)
        # the id names files (<id>.json, <id>.reserve) and node names are node-set words: both must be plain names
        named = [("id", data.get("id"))]
        if isinstance(data.get("nodes"), list):
            named += [(f"nodes[{i}].name", n.get("name")) for i, n in enumerate(data["nodes"]) if isinstance(n, dict)]
        problems += [f"{where}: {why}" for where, value in named if isinstance(value, str) and (why := name_problem(value))]
        if problems:
            raise RecordShapeError(problems)
        return cast(JobRecord, record)

    @property
    def decided(self) -> tuple[str | None, str | None]:
        """`decision` ("restart: OOM ... restarted in place") as (what was decided, why); (None, None) when none."""
        word, _, why = (self.decision or "").partition(": ")
        return word or None, why or None

    def node(self, name: str) -> NodeJob:
        """One node's entry (KeyError when the job has no such node)."""
        for entry in self.nodes:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def with_node(self, node: NodeJob) -> "JobRecord":
        """A copy with one node's entry replaced."""
        return replace(self, nodes=tuple(node if n.name == node.name else n for n in self.nodes))


# -- reading records back: every field checked against its type, every problem named with its key path ----
EPOCH_FIELDS = frozenset({"started", "ended", "teardown_started", "stop_requested", "restart_at"})  # epoch seconds, shown as dates
LAST_EPOCH = 253402300799  # 9999-12-31T23:59:59Z: later cannot be shown as a date


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _describe(value: Any) -> str:
    """A JSON value as a problem names it: its kind, and the value itself when it is short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)  # NaN, Infinity: Python's json reads them, JSON has no such numbers
    text = repr(value)
    kind = "a string" if isinstance(value, str) else "a number"
    return f"{kind} {text}" if len(text) <= 40 else kind


def _expected(hint: Any) -> str:
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_expected(a) for a in args if a is not type(None)) + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"a list of {_expected(args[0]).removeprefix('a ').removeprefix('an ')}s"
    if origin is dict:
        return "an object of strings"
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "one of " + ", ".join(str(member.value) for member in hint)
    if is_dataclass(hint):
        return "an object"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(hint, str(hint))


def _convert(value: Any, hint: Any, path: str, problems: list[str]) -> Any:
    """`value` read as `hint` (tuples from lists, dataclasses from objects); a problem appended when it is not one."""
    origin, args = get_origin(hint), get_args(hint)
    inner = hint
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        origin, args = get_origin(inner), get_args(inner)
    if isinstance(inner, type) and issubclass(inner, Enum):
        if value in {member.value for member in inner}:
            return inner(value)
    elif is_dataclass(inner) and isinstance(inner, type):
        if isinstance(value, dict):
            return _build(inner, value, path, problems)
    elif origin in (list, tuple):
        if isinstance(value, list):
            items = [_convert(item, args[0], f"{path}[{i}]", problems) for i, item in enumerate(value)]
            return tuple(items) if origin is tuple else items
    elif origin is dict:
        if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return dict(value)
    elif inner is bool:
        if isinstance(value, bool):
            return value
    elif inner is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif inner is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value
    elif inner is str:
        if isinstance(value, str):
            return value
    problems.append(f"{path}: expected {_expected(hint)}, got {_describe(value)}")
    return None


def _build(cls: type, data: dict[str, Any], path: str, problems: list[str]) -> Any:
    """An instance of dataclass `cls` from a JSON object: required keys present, every known key of its type."""
    upgrade = getattr(cls, "upgrade", None)
    if upgrade is not None:
        data = upgrade(data)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    before = len(problems)
    missing = [spec.name for spec in fields(cls)
               if spec.name not in data and spec.default is MISSING and spec.default_factory is MISSING]
    if missing:
        keys = "required keys missing: " if len(missing) > 1 else "required key missing: "
        problems.append(f"{path + ': ' if path else ''}{keys}{', '.join(missing)}")
    for spec in fields(cls):
        where = f"{path}.{spec.name}" if path else spec.name
        if spec.name not in data:
            continue
        value = _convert(data[spec.name], hints[spec.name], where, problems)
        if spec.name in EPOCH_FIELDS and isinstance(value, (int, float)) and not 0 <= value <= LAST_EPOCH:
            problems.append(f"{where}: expected epoch seconds (0 to {LAST_EPOCH}), got {value!r}")
        values[spec.name] = value
    return cls(**values) if len(problems) == before else None


def _from_data(cls: type[T], data: Any) -> T:
    """An instance of dataclass `cls` from JSON data; RecordShapeError with every problem when it is not one."""
    if not isinstance(data, dict):
        raise RecordShapeError([f"expected an object at the top, got {_describe(data)}"])
    problems: list[str] = []
    built = _build(cls, data, "", problems)
    if problems:
        raise RecordShapeError(problems)
    return cast(T, built)


def read_job(path: Path) -> JobRecord:
    """The record stored in `path`; JobRecordError names the file and what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise JobRecordError(path, f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})") from None
    except OSError as exc:
        raise JobRecordError(path, f"cannot read it: {os.strerror(exc.errno) if exc.errno else exc}") from None
    if not text.strip():
        raise JobRecordError(path, "the file is empty")
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        cut = "; it ends early: truncated?" if not text.rstrip().endswith(("}", "]")) else ""
        raise JobRecordError(path, f"not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno}){cut}") from None
    except ValueError as exc:  # nested thousands deep; an integer of thousands of digits
        raise JobRecordError(path, f"not valid JSON ({exc})") from None
    problems: list[str] = []
    stored_id = data.get("id") if isinstance(data, dict) else None
    if isinstance(stored_id, str) and stored_id != path.stem:  # saved as <id>.json: saving it would write another file
        problems.append(f"id: {stored_id!r} is not the file's name ({path.stem!r})")
    try:
        record = JobRecord.from_dict(data)
    except RecordShapeError as exc:
        problems += exc.problems
    if problems:
        raise JobRecordError(path, str(RecordShapeError(problems)))
    return record


@dataclass(frozen=True, slots=True)
class JobListing:
    """Every job record: those read (oldest first) and the files that could not be read as one, each named."""

    records: tuple[JobRecord, ...]
    unreadable: tuple[JobRecordError, ...] = ()

    @property
    def exit_code(self) -> ExitCode:
        """0, or 1 when some record could not be read (the listing is incomplete)."""
        return exit_code_for([Outcome.ERROR for _ in self.unreadable])


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
    write_atomic(path, text)


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
        if record.status == JobState.RUNNING or exc.errno != errno.ENOSPC or not reserve.exists():
            raise StateWriteError(path, exc) from None
        try:
            reserve.unlink()
            _write(path, text)
        except OSError:
            raise StateWriteError(path, exc) from None
        raise StateWriteError(path, exc, saved=True) from None
    try:
        if record.status == JobState.RUNNING and not reserve.exists():
            with open(reserve, "wb") as handle:
                handle.write(bytes(max(RESERVE_MIN, 4 * len(text))))
        elif record.status != JobState.RUNNING:
            reserve.unlink(missing_ok=True)
    except OSError as exc:
        reserve.unlink(missing_ok=True)
        raise StateWriteError(reserve, exc) from None
    return path


def _loop_stop_path(first_id: str) -> Path:
    return jobs_dir() / f"{first_id}.stop"


def request_loop_stop(first_id: str) -> None:
    """Mark the restart loop of job `first_id` (its first attempt's id) stopped: `stop` writes it, the loop reads it
    (before each relaunch, and while it waits) and starts no attempt after it. A file of its own, written by `stop`
    only: the attempts' records are the loop's to write."""
    path = _loop_stop_path(first_id)
    try:
        jobs_dir().mkdir(parents=True, exist_ok=True)
        if not path.exists():
            write_atomic(path, f"{time.time()}\n")
    except OSError as exc:
        raise StateWriteError(path, exc) from None


def loop_stop_requested(first_id: str) -> float | None:
    """When `stop` stopped the restart loop of job `first_id` (epoch seconds), or None."""
    try:
        return float(_loop_stop_path(first_id).read_text(encoding="utf-8").strip() or 0)
    except (OSError, ValueError):
        return None


def load_job(job_id: str | None = None) -> JobRecord:
    """The record of `job_id` (a unique prefix is enough), or the newest job when None.

    JobError (exit 2) when there is no such job; JobRecordError (exit 1) naming the file when its record is unreadable.
    """
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
    return read_job(chosen)  # an unreadable one is an error naming it (JobRecordError), never another job


def read_jobs() -> JobListing:
    """Every job record, oldest first, and each file in the jobs directory that is not a readable record."""
    directory = jobs_dir()
    records, unreadable = [], []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            records.append(read_job(path))
        except JobRecordError as exc:
            unreadable.append(exc)
    return JobListing(tuple(records), tuple(unreadable))


def loop_of(record: JobRecord) -> str | None:
    """The first attempt's id when `record` is an attempt of a job run with `launch --restarts` (None: a plain job)."""
    if record.restart_of:
        return record.restart_of
    looping = record.restarts > 0 or record.decision is not None or (record.supervisor is not None and record.supervisor.loop)
    return record.id if looping else None


def job_attempts(first_id: str) -> tuple[JobRecord, ...]:
    """Every readable attempt of the job whose first attempt is `first_id`, first to last."""
    found = [r for r in read_jobs().records if r.id == first_id or r.restart_of == first_id]
    return tuple(sorted(found, key=lambda r: (r.attempt, r.started)))


def list_jobs() -> list[JobRecord]:
    """Every readable job record, oldest first (`read_jobs` also names the files that are not)."""
    return list(read_jobs().records)
