"""PyTorch Flight Recorder dumps of a hung job, lined up: which ranks never joined collective #k of which group. Pure.

Why: a stack says *where* each rank waits, not *which* collective. torch's Flight Recorder keeps, per rank, a ring of
the last collectives it enqueued, each with its process group, its sequence number in that group
(`collective_seq_id`, counted from 1 on every member alike), its op and tensor sizes. Lined up across ranks, the
member whose last number is k-1 while the others are at k is the one that never called collective #k: the culprit
of a hang, named with the op and sizes, where stacks only say "everyone else waits in all_reduce".

What is read (`read_dump`): the JSON torch writes (`torch._C._distributed_c10d._dump_fr_trace_json`, torch_npu's
`_dump_hccl_trace_json`), the pickle torch writes on a watchdog timeout (TORCH_FR_DUMP_TEMP_FILE<rank>), and the
wrapper `launch --flight-recorder`'s hook writes (`{"ascendctl_flight_recorder": 1, "rank", "pid", "dumps": {"torch",
"hccl"}, "errors"}`). The files come from the job's processes: a pickle is read by an Unpickler that resolves no global
at all (torch's dumps hold only dicts, lists, tuples, strings, numbers, booleans and None), so a hostile file is a
FlightDumpError, never code run; any other malformation is a FlightDumpError too, never a traceback.

What is not trusted: `pg_config`. Under gloo torch 2.13 keys it by '' (not by the group's name, `process_group[0]`
of each entry) and a later group overwrites it (ranks '[]'), which is what makes torch's own `torchfrtrace` fail on
gloo dumps. So a group's members come from pg_config only when its key names the group and lists ranks; the default
group (`default_pg`) is every rank that dumped; any other group is the ranks whose dumps mention it. Point-to-point
entries (their own `p2p_seq_id`) are not lined up. Must not import typer or rich; imports nothing of ascendctl
above the foundation.
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ascendctl.errors import parse_json

MAX_DUMP_BYTES = 64 * 1024 * 1024  # a dump of 2000 entries is about 1 MiB of JSON; anything this big is not one
WRAPPER_KEY = "ascendctl_flight_recorder"  # the hook's document (stacks/sitecustomize.py)
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.\d+)?(?:\.fr)?(?:\.json|\.pkl|\.pickle)?$")


class FlightDumpError(ValueError):
    """A dump that cannot be read: not JSON or a plain pickle, a pickle that names a global, or not torch's shape."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds only what the pickle opcodes build by themselves (dict, list, tuple, str, bytes, int, float, bool, None).

    Every way to reach a callable (GLOBAL, STACK_GLOBAL, EXT*, and so REDUCE, BUILD, NEWOBJ, INST, OBJ) goes through
    find_class, and persistent ids through persistent_load: both refuse."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the pickle names a global ({module[:80]}.{name[:80]})")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused: the pickle has a persistent id")


def read_dump(data: bytes) -> dict[str, Any]:
    """A dump's document: JSON (torch's, or the hook's wrapper) or torch's pickle, read safely; FlightDumpError else."""
    if len(data) > MAX_DUMP_BYTES:
        raise FlightDumpError(f"{len(data)} bytes: larger than any Flight Recorder dump ({MAX_DUMP_BYTES})")
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            document = parse_json(data)
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise FlightDumpError(f"not valid JSON: {exc}") from None
    elif data[:1] == b"\x80":
        try:
            document = _PlainUnpickler(io.BytesIO(data)).load()
        except Exception as exc:  # noqa: BLE001 - a malformed pickle raises many kinds; all mean "unreadable"
            raise FlightDumpError(f"not a plain pickle: {type(exc).__name__}: {str(exc)[:200]}") from None
    else:
        raise FlightDumpError("neither JSON nor a pickle")
    if not isinstance(document, dict):
        raise FlightDumpError(f"expected a mapping, found {type(document).__name__}")
    return document


@dataclass(frozen=True, slots=True)
class FlightEntry:
    """One collective a rank enqueued: its group, its number in the group, what it was."""

    source: str  # torch | hccl: whose recorder (their groups' numbers are counted apart)
    pg: str  # the group's name (`process_group[0]`: "0" is the default group)
    pg_desc: str  # its description (`default_pg`, `undefined`, a user's name)
    seq: int  # collective_seq_id: the same number on every member for the same collective
    op: str  # profiling_name, e.g. gloo:all_reduce, nccl:all_gather
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    state: str  # scheduled | started | completed, as far as the backend tracks it (gloo: always scheduled)
    retired: bool  # the work object finished (gloo marks it; the newest entry of a hung collective is not retired)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "pg": self.pg, "pg_desc": self.pg_desc, "seq": self.seq, "op": self.op,
                "input_sizes": [list(s) for s in self.input_sizes], "output_sizes": [list(s) for s in self.output_sizes],
                "dtypes": list(self.dtypes), "state": self.state, "retired": self.retired}


@dataclass(frozen=True, slots=True)
class RankDump:
    """One rank's dumps read back: its collectives, each group's last number, the members its pg_config names."""

    rank: int
    entries: tuple[FlightEntry, ...]
    positions: tuple[tuple[tuple[str, str], int], ...]  # ((source, pg), the last collective number it enqueued)
    members: tuple[tuple[tuple[str, str], tuple[int, ...]], ...]  # ((source, pg), ranks) where pg_config names the group
    notes: tuple[str, ...] = ()  # the hook's own errors (torch not imported, no dump API)


def rank_from_name(name: str) -> int | None:
    """The rank in a dump's file name: `rank-3.1234.fr.json`, `fr-rank-3.1234.json`, torch's `<prefix>3`."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def load_rank(data: bytes, rank: int | None = None) -> RankDump:
    """One file as a RankDump. `rank`: from its name, for torch's own files (the hook's wrapper names its rank)."""
    document = read_dump(data)
    notes: list[str] = []
    if WRAPPER_KEY in document:
        if isinstance(document.get("rank"), int) and not isinstance(document.get("rank"), bool):
            rank = document["rank"]
        dumps = document.get("dumps")
        if not isinstance(dumps, dict) or not all(isinstance(v, dict) for v in dumps.values()):
            raise FlightDumpError("the hook's document has no `dumps` mapping")
        errors = document.get("errors")
        notes += [str(e)[:300] for e in errors] if isinstance(errors, list) else []
        parts = [(str(k), v) for k, v in dumps.items()]
    else:
        parts = [("torch", document)]
    entries: list[FlightEntry] = []
    positions: dict[tuple[str, str], int] = {}
    members: dict[tuple[str, str], tuple[int, ...]] = {}
    for source, dump in parts:
        raw = dump.get("entries", [])
        if not isinstance(raw, list):
            raise FlightDumpError(f"{source}: `entries` is not a list")
        ids: dict[str, str] = {}  # pg_id -> pg name, to read pg_status (keyed by pg_id)
        for item in raw:
            entry, pg_id = _entry(source, item)
            if entry is None:
                continue
            entries.append(entry)
            key = (source, entry.pg)
            positions[key] = max(positions.get(key, 0), entry.seq)
            if pg_id is not None:
                ids[pg_id] = entry.pg
        status = dump.get("pg_status")
        for pg_id, value in (status.items() if isinstance(status, dict) else ()):
            last = _int(value.get("last_enqueued_collective")) if isinstance(value, dict) else None
            if str(pg_id) in ids and last is not None and last > 0:
                key = (source, ids[str(pg_id)])
                positions[key] = max(positions.get(key, 0), last)
        config = dump.get("pg_config")
        for name, value in (config.items() if isinstance(config, dict) else ()):
            ranks = _ranks(value.get("ranks")) if isinstance(value, dict) else None
            if name and ranks:  # gloo's '' key names no group (module docstring)
                members[(source, str(name))] = ranks
    if rank is None or rank < 0:
        raise FlightDumpError("no rank: neither the document nor the file name names one")
    return RankDump(rank, tuple(entries), tuple(sorted(positions.items())), tuple(sorted(members.items())), tuple(notes))


def _entry(source: str, item: Any) -> tuple[FlightEntry | None, str | None]:
    """A collective entry (None for point-to-point or unreadable ones) and its pg_id."""
    if not isinstance(item, dict) or item.get("is_p2p") is True:
        return None, None
    group, seq = item.get("process_group"), _int(item.get("collective_seq_id"))
    if not isinstance(group, (list, tuple)) or not group or seq is None or seq <= 0:
        return None, None
    pg_id = _int(item.get("pg_id"))
    entry = FlightEntry(source, str(group[0]), str(group[1]) if len(group) > 1 else "", seq,
                        str(item.get("profiling_name", "?")), _sizes(item.get("input_sizes")),
                        _sizes(item.get("output_sizes")), tuple(str(d) for d in item.get("input_dtypes") or () if d),
                        str(item.get("state", "")), item.get("retired") is True)
    return entry, str(pg_id) if pg_id is not None else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value):
        return int(value)
    return None


def _ranks(value: Any) -> tuple[int, ...] | None:
    """pg_config's ranks: a list, or its text `[0, 1, 2]` as torch writes it."""
    if isinstance(value, str):
        value = re.findall(r"\d+", value) if re.fullmatch(r"\[[\d,\s]*\]", value.strip()) else None
    if not isinstance(value, (list, tuple)):
        return None
    ranks = [_int(v) for v in value]
    return tuple(sorted({r for r in ranks if r is not None and r >= 0})) or None


def _sizes(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(tuple(d for d in (_int(x) for x in s) if d is not None) for s in value if isinstance(s, (list, tuple)))


@dataclass(frozen=True, slots=True)
class GroupState:
    """One process group lined up across its members: where each is, and what the newest collective is."""

    source: str
    pg: str
    pg_desc: str
    members: tuple[int, ...]
    members_from: str  # pg_config | default_pg (every rank that dumped) | entries (the ranks whose dumps name it)
    positions: tuple[tuple[int, int], ...]  # (rank, its last collective number) for every member with a dump
    frontier: int  # the highest number any member reached
    collective: FlightEntry | None  # collective #frontier as a member that joined it recorded it
    absent: tuple[int, ...]  # members with a dump that never joined #frontier
    no_dump: tuple[int, ...]  # members without a dump: where they are is unknown
    finished: bool  # every member that joined #frontier has it retired or completed
    mismatched: tuple[tuple[int, str], ...] = ()  # (rank, its op and sizes) where #frontier differs from `collective`

    @property
    def label(self) -> str:
        """`process group 0 (default_pg)`, `HCCL process group 3 (tp)`."""
        kind = "process group" if self.source == "torch" else f"{self.source.upper()} process group"
        return f"{kind} {self.pg or repr(self.pg)}" + (f" ({self.pg_desc})" if self.pg_desc else "")

    @property
    def message(self) -> str | None:
        """One line when the group is stuck: who never joined #k, or that all joined and #k never finished."""
        what = _describe(self.collective)
        if self.absent:
            where = ", ".join(f"rank {r} at #{p}" for r, p in self.positions if r in self.absent)
            joined = [r for r, p in self.positions if p >= self.frontier]
            return (f"{_ranks_text(self.absent)} never joined collective #{self.frontier} of {self.label}: {what} "
                    f"({where}; {_ranks_text(joined)} joined it)")
        if self.mismatched:
            seen = "; ".join(f"rank {r}: {text}" for r, text in self.mismatched)
            return f"collective #{self.frontier} of {self.label} differs between ranks: {what} vs {seen}"
        if not self.finished and self.collective is not None:
            return f"every member joined collective #{self.frontier} of {self.label} and it has not finished: {what}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "pg": self.pg, "pg_desc": self.pg_desc, "members": list(self.members),
                "members_from": self.members_from, "positions": {str(r): p for r, p in self.positions},
                "frontier": self.frontier, "collective": self.collective.to_dict() if self.collective else None,
                "absent": list(self.absent), "no_dump": list(self.no_dump), "finished": self.finished,
                "mismatched": [{"rank": r, "collective": t} for r, t in self.mismatched], "message": self.message}


@dataclass(frozen=True, slots=True)
class FlightReport:
    """Every group lined up, the ranks with no readable dump, and what could not be read."""

    ranks: tuple[int, ...]  # the ranks with a dump
    groups: tuple[GroupState, ...]
    missing: tuple[int, ...] = ()  # expected ranks without a dump
    errors: tuple[tuple[str, str], ...] = ()  # (file or rank, why it could not be read)
    notes: tuple[tuple[int, str], ...] = ()  # (rank, what its hook said)

    @property
    def stuck(self) -> tuple[GroupState, ...]:
        """The groups with something to say, the ones with absent ranks first."""
        found = [g for g in self.groups if g.message is not None]
        return tuple(sorted(found, key=lambda g: (not g.absent, g.source, g.pg)))

    @property
    def culprits(self) -> tuple[int, ...]:
        """The ranks that never joined some group's newest collective."""
        return tuple(sorted({r for g in self.groups for r in g.absent}))

    def lines(self) -> list[str]:
        """The text: the stuck groups, else that every group agrees; then the missing ranks, errors and notes."""
        lines = [g.message for g in self.stuck if g.message is not None]
        if not lines and self.groups:
            lines.append(f"every rank with a dump is at the same collective in each of {len(self.groups)} group(s)")
        elif not self.groups:
            lines.append("no collective recorded in the dumps")
        if self.missing:
            lines.append(f"no dump from {_ranks_text(self.missing)}")
        lines += [f"unreadable dump {where}: {why}" for where, why in self.errors]
        lines += [f"rank {rank}: {note}" for rank, note in self.notes]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": list(self.ranks), "culprits": list(self.culprits), "messages": self.lines(),
                "groups": [g.to_dict() for g in self.groups], "missing": list(self.missing),
                "errors": [{"file": w, "message": m} for w, m in self.errors],
                "notes": [{"rank": r, "message": m} for r, m in self.notes]}


def match_dumps(dumps: Iterable[RankDump], expected: Iterable[int] | None = None,
                errors: Iterable[tuple[str, str]] = ()) -> FlightReport:
    """Line up every group's collective numbers across the ranks' dumps (the module docstring says how).

    `expected`: the job's ranks (the job record's), to name the ones without a dump; `errors`: files that could not
    be read, carried into the report. A rank dumped twice keeps its furthest position."""
    by_rank: dict[int, RankDump] = {}
    for dump in dumps:
        if dump.rank not in by_rank or _reach(dump) > _reach(by_rank[dump.rank]):
            by_rank[dump.rank] = dump
    ranks = tuple(sorted(by_rank))
    keys = sorted({key for d in by_rank.values() for key, _ in d.positions})
    groups = [_group(key, by_rank) for key in keys]
    missing = tuple(sorted(set(expected or ()) - set(ranks)))
    notes = tuple((r, n) for r in ranks for n in by_rank[r].notes)
    return FlightReport(ranks, tuple(groups), missing, tuple(errors), notes)


def _reach(dump: RankDump) -> int:
    return sum(p for _, p in dump.positions)


def _group(key: tuple[str, str], by_rank: Mapping[int, RankDump]) -> GroupState:
    source, pg = key
    entries = {r: [e for e in d.entries if (e.source, e.pg) == key] for r, d in by_rank.items()}
    desc = next((e.pg_desc for es in entries.values() for e in es), "")
    configured = sorted({m for d in by_rank.values() for k, ms in d.members if k == key for m in ms})
    if configured:
        members, members_from = tuple(configured), "pg_config"
    elif desc == "default_pg":
        members, members_from = tuple(sorted(by_rank)), "default_pg"
    else:
        members, members_from = tuple(r for r in sorted(by_rank) if dict(by_rank[r].positions).get(key)), "entries"
    positions = tuple((r, dict(by_rank[r].positions).get(key, 0)) for r in members if r in by_rank)
    frontier = max((p for _, p in positions), default=0)
    joined = [r for r, p in positions if p >= frontier]
    at_frontier = {r: next((e for e in entries[r] if e.seq == frontier), None) for r in joined}
    recorded = [(r, e) for r, e in at_frontier.items() if e is not None]
    collective = recorded[0][1] if recorded else None
    mismatched = tuple((r, _describe(e)) for r, e in recorded[1:]
                       if collective is not None and (e.op, e.input_sizes) != (collective.op, collective.input_sizes))
    finished = bool(recorded) and all(e.retired or e.state == "completed" for _, e in recorded)
    return GroupState(source, pg, desc, members, members_from, positions, frontier, collective,
                      tuple(r for r, p in positions if p < frontier), tuple(r for r in members if r not in by_rank),
                      finished, mismatched)


def _describe(entry: FlightEntry | None) -> str:
    """`gloo:all_reduce, input sizes [[4, 8]] Float` or `op not recorded` (the ring buffer dropped it)."""
    if entry is None:
        return "op not recorded"
    sizes = ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in entry.input_sizes)
    dtypes = f" {','.join(sorted(set(entry.dtypes)))}" if entry.dtypes else ""
    return f"{entry.op}, input sizes [{sizes}]{dtypes}"


def _ranks_text(ranks: Iterable[int]) -> str:
    items = sorted(ranks)
    return f"rank {items[0]}" if len(items) == 1 else "ranks " + ",".join(str(r) for r in items)


def match_files(files: Iterable[tuple[str, bytes]], expected: Iterable[int] | None = None) -> FlightReport:
    """match_dumps over files given as (name, bytes): each one's rank from its document or its name; a file that
    cannot be read is an error of the report, named, and the others still give an answer."""
    dumps: list[RankDump] = []
    errors: list[tuple[str, str]] = []
    for name, data in files:
        try:
            dumps.append(load_rank(data, rank_from_name(name)))
        except FlightDumpError as exc:
            errors.append((name, str(exc)))
    return match_dumps(dumps, expected, errors)
