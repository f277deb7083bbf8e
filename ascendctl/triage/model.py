"""Records of a triage run: findings (matched lines), exits, per-rank summaries, the verdict.

Frozen dataclasses that cross module boundaries (reader -> facts -> rules -> ui/launch).
Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ascendctl.errors import ExitCode
from ascendctl.outcome import Outcome, exit_code_for
from ascendctl.triage.signatures import Category

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}
# A process ended by one of these was stopped by someone else (its launcher, ascendctl, the scheduler, a user).
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
# The words a shell's job report or Slurm prints for the signal that ended a process (a signature's `signal_word`
# group): bash's "Killed" (and its Chinese translation), "Terminated", "Aborted", "Segmentation fault".
SIGNAL_WORDS = {"Killed": "SIGKILL", "已杀死": "SIGKILL", "Terminated": "SIGTERM", "Aborted": "SIGABRT",
                "Segmentation fault": "SIGSEGV"}


def signal_of(code: int | None) -> str | None:
    """The signal an exit code stands for: -9 (Python's form), 137 (a shell's 128+9)."""
    if code is None:
        return None
    if code < 0:
        return SIGNALS.get(-code, f"signal {-code}")
    if 128 < code < 160:
        return SIGNALS.get(code - 128, f"signal {code - 128}")
    return None


@dataclass(frozen=True, slots=True)
class Finding:
    """One matched line, attributed to a node, rank, device and time where the evidence allows."""

    category: Category
    signature: str
    node: str | None
    rank: int | None
    device: int | None
    time: str | None
    file: str
    line: int
    text: str
    pid: int | None = None
    role: str = "error"  # error | generic | report | stop (see signatures.py)
    local_rank: int | None = None
    peer_rank: int | None = None  # the rank this line names as the other side (remote rank, heartbeat lost, ...)
    peer_addr: str | None = None  # the address this line names as the other side (gloo/NCCL peer, HCCL remote IP)
    exit_code: int | None = None
    signal: str | None = None
    time_source: str = "line"  # line | stamp | report | job | inherited | none
    kind: str = ""  # OOM: device | host; COMM_TIMEOUT/HARDWARE: fabric (NIC, link, RDMA transport)
    absent: tuple[int, ...] = ()  # the ranks this line says never arrived (a monitor's list: monitoredBarrier's rank 0)
    monitor: int | None = None  # the rank this line says is watching the barrier ("check rank 0 logs"): alive, not absent

    @property
    def weak(self) -> bool:
        return self.role != "error"

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category.value, "signature": self.signature, "node": self.node, "rank": self.rank,
                "local_rank": self.local_rank, "device": self.device, "time": self.time, "file": self.file, "line": self.line,
                "text": self.text, "role": self.role, "peer_rank": self.peer_rank, "peer_addr": self.peer_addr,
                "exit_code": self.exit_code, "signal": self.signal}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], node: str | None = None, rank: int | None = None) -> "Finding":
        """A finding from `to_dict` (or a rank summary's brief form, whose node and rank are given); ValueError on garbage."""
        get = data.get
        return cls(Category(data["category"]), _text(get("signature")), _opt_text(get("node", node)), _int(get("rank", rank)),
                   _int(get("device")), _opt_text(get("time")), _text(get("file")), _int(get("line")) or 0, _text(get("text")),
                   pid=_int(get("pid")), role=_text(get("role") or "error"), local_rank=_int(get("local_rank")),
                   peer_rank=_int(get("peer_rank")), peer_addr=_opt_text(get("peer_addr")), exit_code=_int(get("exit_code")),
                   signal=_opt_text(get("signal")))


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_text(value: Any) -> str | None:
    return None if value is None else _text(value)


@dataclass(frozen=True, slots=True)
class RankSummary:
    """What is known of one rank (or of one node's launcher when `rank` is None), and its part in the failure."""

    node: str | None
    rank: int | None
    role: str  # culprit | victim | co-failed | stopped | ok | unknown
    first_error: Finding | None = None  # its first own error (not a communication symptom)
    first_comm_error: Finding | None = None
    peer: str | None = None  # who its communication error names: "rank 3" or "node h02" or an address
    exit_code: int | None = None
    signal: str | None = None
    exit_time: str | None = None
    last_step: int | None = None
    last_progress_time: str | None = None

    def to_dict(self) -> dict[str, Any]:
        def brief(f: Finding | None) -> dict[str, Any] | None:
            return None if f is None else {"signature": f.signature, "category": f.category.value, "time": f.time,
                                           "file": f.file, "line": f.line, "text": f.text}
        return {"node": self.node, "rank": self.rank, "role": self.role, "first_error": brief(self.first_error),
                "first_comm_error": brief(self.first_comm_error), "peer": self.peer, "exit_code": self.exit_code,
                "signal": self.signal, "exit_time": self.exit_time, "last_step": self.last_step,
                "last_progress_time": self.last_progress_time}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RankSummary":
        """A rank summary from `to_dict`; its brief findings take the rank's node and rank."""
        node, rank = _opt_text(data.get("node")), _int(data.get("rank"))

        def finding(value: Any) -> Finding | None:
            return None if value is None else Finding.from_dict(value, node=node, rank=rank)
        return cls(node, rank, _text(data.get("role") or "unknown"), finding(data.get("first_error")),
                   finding(data.get("first_comm_error")), _opt_text(data.get("peer")), _int(data.get("exit_code")),
                   _opt_text(data.get("signal")), _opt_text(data.get("exit_time")), _int(data.get("last_step")),
                   _opt_text(data.get("last_progress_time")))


@dataclass(frozen=True, slots=True)
class Victim:
    """A rank (or node) that failed because of the culprit, and how."""

    node: str | None
    rank: int | None
    how: str  # e.g. "communication error naming node h02", "stopped by its launcher (SIGTERM)"

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "rank": self.rank, "how": self.how}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Victim":
        return cls(_opt_text(data.get("node")), _int(data.get("rank")), _text(data.get("how")))


@dataclass(frozen=True, slots=True)
class TriageReport:
    """The verdict: category, first failure (None when no single culprit), why, victims, evidence, hints, what was read."""

    category: Category | None
    first_failure: Finding | None
    findings: tuple[Finding, ...]
    hints: tuple[str, ...]
    reason: str
    files_read: int
    bytes_read: int
    suppressed: int = 0
    notes: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    rule: str = "none"  # the culprit rule that fired (rules.RULES)
    confidence: str = "low"  # high | medium | low
    victims: tuple[Victim, ...] = ()
    ranks: tuple[RankSummary, ...] = ()
    oom_kind: str | None = None  # device | host, for OOM
    single_culprit: bool = True
    launcher_blamed: str | None = None  # what a launcher's report named first, when that differs from the verdict
    skipped: tuple[str, ...] = ()  # inputs not read on purpose: FIFOs, devices, sockets, links, unsafe archive members
    stacks: Mapping[str, Any] | None = None  # the newest `stacks` capture in the inputs, judged (CaptureJudgement.to_dict)
    fabric: bool = False  # the first failure is a NIC, link or RDMA transport fault (a signature of kind "fabric")

    @property
    def outcome(self) -> Outcome:
        """A file we could not read may have held the answer: the verdict is then not evaluated, never clean."""
        return Outcome.UNEVALUATED if self.unreadable else Outcome.OK

    @property
    def exit_code(self) -> ExitCode:
        if not self.files_read:  # nothing read at all: triage() raises before any verdict is printed
            return ExitCode.ERROR
        return exit_code_for([self.outcome])

    @property
    def culprit_node(self) -> str | None:
        return self.first_failure.node if self.first_failure else None

    @property
    def culprit_rank(self) -> int | None:
        return self.first_failure.rank if self.first_failure else None

    def headline(self) -> str:
        """`EXCEPTION on node h02, rank 3` or `COMM_TIMEOUT, no single culprit`: what launch and triage both print."""
        category = self.category.value if self.category else "UNKNOWN"
        if self.category is not None and self.oom_kind:
            category += f" ({self.oom_kind} memory)"
        if self.category is not None and self.fabric:
            category += " (fabric: NIC or link)"
        f = self.first_failure
        if f is None:
            return f"{category}, no single culprit" if not self.single_culprit else f"{category}, no culprit found"
        parts = [f"node {f.node}" if f.node else "", f"rank {f.rank}" if f.rank is not None else "",
                 f"local rank {f.local_rank}" if f.rank is None and f.local_rank is not None else "",
                 f"device {f.device}" if f.device is not None else ""]
        where = ", ".join(p for p in parts if p)
        return f"{category} on {where}" if where else category

    def folded_victims(self) -> list[tuple[str, str]]:
        """Victims grouped by how they failed: (`node[01-03] ranks 0-5`, how); see fold_victims."""
        return fold_victims((v.node, v.rank, v.how) for v in self.victims)

    def timeline(self) -> tuple[RankSummary, ...]:
        """Ranks that failed, in the order their first error (own or communication) or exit happened."""
        def when(r: RankSummary) -> str:
            first = r.first_error or r.first_comm_error
            return (first.time if first and first.time else None) or r.exit_time or "9999"
        return tuple(sorted((r for r in self.ranks if r.role != "ok"), key=when))

    def to_dict(self) -> dict[str, Any]:
        ff = None
        if self.first_failure is not None:
            f = self.first_failure
            ff = {"node": f.node, "rank": f.rank, "device": f.device, "time": f.time, "file": f.file, "line": f.line,
                  "text": f.text, "signature": f.signature}
        return {"category": self.category.value if self.category else None, "first_failure": ff,
                "single_culprit": self.single_culprit, "reason": self.reason, "culprit_reason": self.rule,
                "confidence": self.confidence, "oom_kind": self.oom_kind,
                "victims": [v.to_dict() for v in self.victims], "ranks": [r.to_dict() for r in self.ranks],
                "launcher_blamed": self.launcher_blamed,
                "findings": [f.to_dict() for f in self.findings], "hints": list(self.hints),
                "files_read": self.files_read, "bytes_read": self.bytes_read, "suppressed_findings": self.suppressed,
                "notes": list(self.notes), "unreadable": list(self.unreadable), "skipped": list(self.skipped),
                "stacks": dict(self.stacks) if self.stacks is not None else None, "fabric": self.fabric}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TriageReport":
        """The verdict back from a `triage --json` document (`to_dict` plus the envelope); KeyError/ValueError/TypeError on garbage."""
        ff = data["first_failure"]
        first = None if ff is None else Finding.from_dict({"category": data["category"] or "UNKNOWN", **ff})
        category = data["category"]

        def texts(key: str) -> tuple[str, ...]:
            return tuple(_text(x) for x in data.get(key) or ())
        return cls(Category(category) if category is not None else None, first,
                   tuple(Finding.from_dict(f) for f in data.get("findings") or ()), texts("hints"), _text(data.get("reason")),
                   _int(data.get("files_read")) or 0, _int(data.get("bytes_read")) or 0, _int(data.get("suppressed_findings")) or 0,
                   texts("notes"), texts("unreadable"), _text(data.get("culprit_reason") or "none"),
                   _text(data.get("confidence") or "low"), tuple(Victim.from_dict(v) for v in data.get("victims") or ()),
                   tuple(RankSummary.from_dict(r) for r in data.get("ranks") or ()), _opt_text(data.get("oom_kind")),
                   bool(data.get("single_culprit", True)), _opt_text(data.get("launcher_blamed")), texts("skipped"),
                   _mapping(data.get("stacks")), data.get("fabric") is True)


@dataclass(slots=True)
class Source:
    """What a file's path says about its lines, updated by context lines as the file is read (private to a run)."""

    file: str
    node: str | None
    rank: int | None
    device: int | None
    pid: int | None
    local_rank: int | None = None
    torchrun: dict[str, str] = field(default_factory=dict)
    torchrun_root: bool = False
    torchrun_at: int = 0
    order: int = 0  # the order in which files were read
    block: tuple[int, int | None, int | None, int | None, int] | None = None  # (line, rank, device, pid, lines it covers)
    mpi_first: tuple[int, int] | None = None  # mpirun's "The first process to do so was:": (line, rank) until its exit code



def _mapping(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError("expected an object")
    return value


_VICTIM_NUMBERS = re.compile(r"0[xX][0-9a-fA-F]+|\d+")


def fold_victims(victims: Iterable[tuple[str | None, int | None, str]]) -> list[tuple[str, str]]:
    """(node, rank, how) victims grouped by how they failed, numbers aside (each victim's pid, rank or port differs: at
    1,000 nodes a line each said one thing 999 times): [(`node[01-03] ranks 0-5`, how the first of them said it)]."""
    from ascendctl.nodeset import fold, fold_numbers

    groups: dict[str, tuple[str, list[tuple[str | None, int | None]], set[str]]] = {}
    for node, rank, how in victims:
        first, members, said = groups.setdefault(_VICTIM_NUMBERS.sub("#", how), (how, [], set()))
        members.append((node, rank))
        said.add(how)
    out = []
    for first, members, said in groups.values():
        nodes = [node for node, _ in members if node]
        ranks = [rank for _, rank in members if rank is not None]
        who = " ".join(x for x in (fold(dict.fromkeys(nodes)) if nodes else "",
                                   f"rank{'s' if len(ranks) > 1 else ''} {fold_numbers(ranks)}" if ranks else "") if x)
        out.append((who or "?", first + (" (its numbers differ from victim to victim)" if len(said) > 1 else "")))
    return out
