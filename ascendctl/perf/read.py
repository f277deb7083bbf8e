"""Read every rank's profile under the paths given: PyTorch profiler Chrome traces (`*.pt.trace.json`, `.gz`) and the
Ascend profiler's text output (`step_trace_time.csv`, `communication.json`, `communication_matrix.json`), from
directories, collect bundles or archives (bundle.layout.iter_bundle: the one safe-member policy). Every file is read
to a cap; a file that cannot be used becomes a PerfProblem naming it, never an exception. Pure: no nodes, no typer.
"""

from __future__ import annotations

import bisect
import csv
import gc
import gzip
import io
import multiprocessing
import os
import re
import threading
import zlib
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields
from itertools import islice
from operator import attrgetter
from pathlib import Path, PurePosixPath
from typing import IO, Any, Callable, Iterable, Iterator

from ascendctl.collector import gc_paused
from ascendctl.bundle.layout import READ_ERRORS, iter_bundle
from ascendctl.errors import parse_json
from ascendctl.perf.model import CommCall, LinkSample, MixedTasksError, PerfProblem, RankInput, StepTimes

TRACE_MAX_BYTES = 256 * 1024**2  # a Chrome trace (uncompressed) larger than this is refused: parsed, it would take gigabytes
TEXT_MAX_BYTES = 64 * 1024**2  # a step_trace_time.csv or communication*.json larger than this is not a profiler's
MAX_EVENTS = 5_000_000  # trace events read at most from one trace
TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
STEP_TRACE = "step_trace_time.csv"
COMM_JSON = "communication.json"
MATRIX_JSON = "communication_matrix.json"
ASCEND_NAMES = (STEP_TRACE, COMM_JSON, MATRIX_JSON)
PROFILER_INFO = re.compile(r"^profiler_info_(\d+)\.json$")  # torch_npu writes it beside ASCEND_PROFILER_OUTPUT/
RANK_IN_PATH = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)", re.I)
# what marks a trace event as a collective: c10d's record_param_comms (its "Collective name" arg), or a backend's
# own range (gloo:all_reduce, nccl:all_reduce, hccl:allreduce / HcclAllreduce)
COLLECTIVE_NAME = re.compile(r"^(?:gloo|nccl|hccl)[:_]", re.I)
NCCL_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")  # ncclDevKernel_AllReduce_Sum_f32_RING_LL(...) on a GPU stream
KERNEL, RANGE, PARAM = 0, 1, 2  # where a collective was seen, best first: its GPU kernel, the backend's range, c10d's record
PARAM_COMMS = "record_param_comms"
KERNEL_SPANS = "(gpu kernels)"
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
PLAIN_NUMBERS = frozenset((int, float))  # not bool (a subclass of int), which JSON's true and false become
COLLECTIVE_HEADS = frozenset(("gloo", "nccl", "hccl", PARAM_COMMS[:4]))  # how every name _collective_op takes begins
# what parse_trace does with an X event (_action): skip it, a step, a collective, c10d's record of one, a receive, a GPU
# kernel, a range on a thread
_SKIP, _STEPPED, _CALL, _RECORD, _RECV, _KERNEL, _THREAD = range(7)
NO_THREAD = "an event's thread id (tid) is a list or an object"
# Point-to-point calls: no collective, so they do not vote (the ranks' times are of different pairs, not of one call),
# but a receive names its link. c10d's receive op carries its peer (its third input, with record_shapes=True); the
# backend's range that it starts times the transfer and carries the tensor's shape and type.
P2P_OPS = frozenset(("send", "recv", "sendrecv", "recv_any_source"))  # op names (lower case) of p2p ranges and kernels
RECV_OP = "c10d::recv_"
DTYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
               "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16}
# Files are parsed in reader processes, one per core (at most WORKERS_MAX), which send back each rank's steps and calls,
# never its events; the first POOL_AFTER files are parsed here (on a few files a pool costs more than it saves). At most
# IN_FLIGHT_BYTES of file bytes wait for a reader (a larger file goes alone), and at most 2 x readers files.
WORKERS_MAX = 8
POOL_AFTER = 8
IN_FLIGHT_BYTES = 64 * 1024**2


@dataclass(slots=True)
class _File:
    path: str  # shown to the user: the PATH given, then the member inside it
    rel: str  # relative to the directory or archive given
    data: bytes
    gz: bool = False  # data is still gzip: the reader decompresses it, to the cap


class _Refused(Exception):
    """A file over its cap, or one that does not decompress."""


def _read_capped(stream: IO[bytes], cap: int, *, gz: bool) -> bytes:
    raw: IO[bytes] = gzip.GzipFile(fileobj=stream) if gz else stream  # type: ignore[assignment]  # GzipFile is an IO[bytes]
    try:
        data = raw.read(cap + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise _Refused(f"cannot decompress: {exc}") from None
    if len(data) > cap:
        size = f"{cap // 1024**2} MiB" if cap >= 1024**2 else f"{cap} bytes"
        raise _Refused(f"larger than {size}{' uncompressed' if gz else ''}: not read (the cap of ascendctl perf)")
    return data


def _kind(name: str) -> str | None:
    if name.endswith(TRACE_SUFFIXES):
        return "trace"
    if name in ASCEND_NAMES:
        return "ascend"
    if PROFILER_INFO.match(name):
        return "info"
    return None


def _want(rel: str, is_dir: bool) -> bool:
    return is_dir or _kind(PurePosixPath(rel).name) is not None


def _cap(name: str) -> int:
    return TRACE_MAX_BYTES if _kind(name) == "trace" else TEXT_MAX_BYTES


def gather(paths: Iterable[Path], problems: list[PerfProblem], found: list[int]) -> Iterator[_File]:
    """Every profile file under `paths` (files, directories, bundle archives), read to its cap, one at a time; a gzip
    trace is read as it is (to the cap, compressed) and decompressed by its reader (_parse_file), to the cap again;
    unreadable ones go to `problems`; `found[0]` counts the profile files met."""
    for path in paths:
        if not path.exists():
            problems.append(PerfProblem(str(path), "no such file or directory"))
            continue
        if path.is_file() and _kind(path.name) is not None:
            found[0] += 1
            try:
                with open(path, "rb") as stream:
                    data = _read_capped(stream, _cap(path.name), gz=False)
            except (_Refused, OSError) as exc:
                problems.append(PerfProblem(str(path), str(exc)))
                continue
            yield _File(str(path), path.name, data, path.name.endswith(".gz"))
            continue
        try:
            for entry in iter_bundle(path, want=_want):
                name = PurePosixPath(entry.path).name
                shown = f"{path}/{entry.path}" if path.is_dir() else f"{path}:{entry.path}"
                if _kind(name) == "info":
                    yield _File(shown, entry.path, b"")
                    continue
                found[0] += 1
                try:
                    data = _read_capped(entry.stream, _cap(name), gz=False)
                except _Refused as exc:
                    problems.append(PerfProblem(shown, str(exc)))
                    continue
                yield _File(shown, entry.path, data, name.endswith(".gz"))
        except READ_ERRORS as exc:
            problems.append(PerfProblem(str(path), f"cannot read it as a directory or archive: {exc}"))


def holds_profiles(path: Path) -> bool:
    """Whether a directory or archive holds a profile file of a kind `ascendctl perf` reads (none is parsed)."""
    try:
        return any(_kind(PurePosixPath(e.path).name) in ("trace", "ascend") for e in iter_bundle(path, want=_want))
    except READ_ERRORS:
        return False


# --- PyTorch profiler Chrome traces ---------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value else None


# The interval arithmetic below runs once per step of every rank (51,200 steps of 1,024 ranks): comparisons written out
# rather than max() and min() calls, each choosing as max(a, b) and min(a, b) do (a unless b is strictly beyond), so
# every sum adds the same floats in the same order.
def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    last = (0.0, 0.0)
    for start, end in sorted(intervals):
        if merged and start <= last[1]:
            if end > last[1]:
                last = merged[-1] = (last[0], end)
        else:
            last = (start, end)
            merged.append(last)
    return merged


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum([end - start for start, end in intervals])


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total, i, j, na, nb = 0.0, 0, 0, len(a), len(b)
    while i < na and j < nb:
        a0, a1 = a[i]
        b0, b1 = b[j]
        gap = (b1 if b1 < a1 else a1) - (b0 if b0 > a0 else a0)
        if gap > 0.0:  # max(0.0, gap) adds 0.0 otherwise: the same total
            total += gap
        if a1 < b1:
            i += 1
        else:
            j += 1
    return total


def _clip(merged: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The parts of sorted, disjoint intervals inside [start, end)."""
    first = bisect.bisect_right(merged, (start, float("inf"))) - 1  # the last interval starting at or before `start`
    found = []
    for s, e in islice(merged, max(0, first), None):  # not a copy of the rest of the list, once per step
        if s >= end:
            break
        if e > start:
            found.append((start if start > s else s, end if end < e else e))
    return found


def _args(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _collective_op(event: dict[str, Any]) -> tuple[str, int] | None:
    """The collective an event is (`all_reduce`) and where it was seen (KERNEL, RANGE, PARAM), or None."""
    name = event.get("name")
    if not isinstance(name, str):
        return None
    if name == PARAM_COMMS:
        op = _args(event).get("Collective name")
        return (op, PARAM) if isinstance(op, str) and op and op not in ("init", "barrier_init") else None
    kernel = NCCL_KERNEL.match(name)
    if kernel and event.get("cat") == "kernel":
        return kernel.group(1), KERNEL
    if COLLECTIVE_NAME.match(name):
        op = COLLECTIVE_NAME.sub("", name)
        return (op, RANGE) if op else None
    return None


def _trace_rank(document: dict[str, Any], rel: str) -> int | None:
    info = document.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and not isinstance(info.get("rank"), bool):
        return int(info["rank"])
    found = RANK_IN_PATH.search(PurePosixPath(rel).name) or RANK_IN_PATH.search(rel)
    return int(found.group(1)) if found else None


def _trace_world(document: dict[str, Any]) -> int | None:
    """The job's world size a trace states (distributedInfo.world_size), or None."""
    info = document.get("distributedInfo")
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if type(size) is int and size > 0 else None


def _action(name: Any, cat: Any) -> tuple[Any, ...]:
    """What parse_trace does with an X event of this name and category: (_STEPPED, N) for ProfilerStep#N, (_CALL, op,
    where, backend of a receive range or None) for a collective known by its name, (_RECORD,) for c10d's record (its op
    is in its args), (_RECV,) for c10d's receive, else (_KERNEL,) for a GPU kernel, (_THREAD,) for another range on a
    thread, (_SKIP,) for the rest. A function of the two only: parse_trace asks once per pair."""
    if isinstance(name, str):
        if name.startswith("ProfilerStep#"):
            step = STEP_NAME.match(name)
            if step:
                return _STEPPED, int(step.group(1))
        elif name == RECV_OP:
            return (_RECV,)
        elif name == PARAM_COMMS:
            return (_RECORD,)
        elif name[:4].lower() in COLLECTIVE_HEADS:  # only such a name goes to the regular expressions
            found = _collective_op({"name": name, "cat": cat})
            if found is not None:
                recv = found[1] == RANGE and found[0].lower() == "recv"
                return _CALL, found[0], found[1], name[:4].lower() if recv else None
    if cat == "kernel":
        return (_KERNEL,)
    return (_THREAD,) if name != PARAM_COMMS and cat in ("cpu_op", "user_annotation") else (_SKIP,)


def parse_trace(data: bytes, rel: str, shown: str) -> RankInput:
    """A Chrome trace (torch.profiler export_chrome_trace / tensorboard_trace_handler) as one rank's profile.

    Steps are the ProfilerStep#N ranges; collectives are record_param_comms events (their "Collective name", "Seq")
    backend ranges (`gloo:all_reduce`, `nccl:all_reduce`) and NCCL kernels on a GPU stream, the best of them kept (the
    kernel, else the range, else the record); without a sequence number a call is the n-th of its op in its step.
    Per step: communication = the union of the collective ranges, compute = the union of the other ranges on the step's
    thread (on a GPU: of the other kernels), free = what neither covers. Point-to-point calls (send, recv) count as
    communication but are no calls of the vote; each receive whose peer and size the trace gives is a link sample
    (_received). Raises ValueError with what is wrong.
    """
    return _rank_input(shown, _trace_parts(data, rel))


# what a reader process sends back of one trace: (rank, its steps as StepTimes fields, its calls as CommCall fields,
# its link samples as LinkSample fields), plain tuples (they pickle several times faster than the records), never the events
StepRow = tuple[int, float, float, float, float, float]
CallRow = tuple[str, str, "int | None", float, None]
LinkRow = tuple[int, int, str, str, float, float]  # LinkSample's fields
# ..., the world size it states, whether compute is its GPU's kernels
TraceParts = tuple[int, list[StepRow], list[CallRow], list[LinkRow], "int | None", bool]


def _rank_input(shown: str, parts: TraceParts, names: dict[str, str] | None = None) -> RankInput:
    """The RankInput of a trace's parts; `names` shares one string per call key over all ranks (1,024 ranks name the
    same 1,000 calls: 70 MB less)."""
    rank, steps, calls, received, world, on_gpu = parts
    same = names if names is not None else {}
    make = CommCall._make
    return RankInput(rank, "torch", (shown,), tuple([StepTimes(*row) for row in steps]),
                     tuple([make((same.setdefault(key, key), op, step, ms, wait)) for key, op, step, ms, wait in calls]),
                     tuple([LinkSample(*row) for row in received]), world, on_gpu)


def _trace_parts(data: bytes, rel: str) -> TraceParts:
    """parse_trace's reading, as plain tuples."""
    try:
        document = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if isinstance(document, list):
        document = {"traceEvents": document}
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise ValueError("not a Chrome trace (no traceEvents list)")
    rank = _trace_rank(document, rel)
    if rank is None:
        raise ValueError("no rank: neither distributedInfo.rank nor `rank<N>` in the file name")
    events = document["traceEvents"]
    if len(events) > MAX_EVENTS:
        raise ValueError(f"more than {MAX_EVENTS} events: not read")
    steps: list[tuple[int, float, float, Any]] = []
    collectives: list[tuple[float, float, str, int | None, int]] = []
    spans: dict[Any, list[tuple[float, float]]] = {}  # by thread; GPU kernels under the key KERNEL_SPANS
    receives: list[tuple[float, float, Any, int | None]] = []  # c10d::recv_: start, end, thread, peer
    ranges: list[tuple[float, float, Any, str, int | None]] = []  # backends' recv ranges: start, end, thread, backend, bytes
    actions: dict[tuple[Any, Any], tuple[Any, ...]] = {}  # _action of an event's (name, cat): once per pair met
    for event in events:  # every event of every rank: each test once, the cheapest first
        if type(event) is not dict or event.get("ph") != "X":
            continue
        ts: Any = event.get("ts")  # _number, inline
        length: Any = event.get("dur")
        if type(ts) not in PLAIN_NUMBERS or type(length) not in PLAIN_NUMBERS or ts != ts or not length >= 0:
            continue
        named = (event.get("name"), event.get("cat"))
        try:
            action = actions[named]
        except KeyError:
            action = actions[named] = _action(*named)
        except TypeError:  # a name or category that is a list or an object
            action = _action(*named)
        what = action[0]
        if what == _SKIP:
            continue
        try:
            start = float(ts)
            end = start + float(length)
        except OverflowError:  # an integer too large for a float: no time
            continue
        if what == _THREAD or what == _RECV:
            tid = event.get("tid")
            try:
                spans[tid].append((start, end))
            except KeyError:
                spans[tid] = [(start, end)]
            except TypeError:
                raise ValueError(NO_THREAD) from None
            if what == _RECV:
                receives.append((start, end, tid, _peer(event)))
        elif what == _CALL or what == _RECORD:
            found = action[1:3] if what == _CALL else _collective_op(event)
            if found is None:  # c10d's record of no collective (init)
                if event.get("cat") == "kernel":
                    spans.setdefault(KERNEL_SPANS, []).append((start, end))
                continue
            args = event.get("args")
            seq = args.get("Seq") if type(args) is dict else None
            collectives.append((start, end, found[0], seq if type(seq) is int else None, found[1]))
            if what == _CALL and action[3] is not None:
                ranges.append((start, end, event.get("tid"), action[3], _tensor_bytes(event)))
        elif what == _STEPPED:
            steps.append((action[1], start, end, event.get("tid")))
        else:  # _KERNEL
            try:
                spans[KERNEL_SPANS].append((start, end))
            except KeyError:
                spans[KERNEL_SPANS] = [(start, end)]
    if not steps and not collectives:
        raise ValueError("no ProfilerStep#N ranges and no collectives: nothing to compare")
    # one collective can appear three times (c10d's record, the backend's CPU range, the GPU kernel): keep the best seen;
    # on a GPU the kernel's time is what the rank spent, and compute is the other kernels
    best = min((c[4] for c in collectives), default=PARAM)
    collectives = sorted(c for c in collectives if c[4] == best)
    on_gpu = best == KERNEL or KERNEL_SPANS in spans
    numbered: dict[tuple[str, int | None], int] = {}
    calls: list[CallRow] = []
    comm_intervals = _union([(s, e) for s, e, *_ in collectives])
    steps.sort(key=lambda s: s[1])
    step_starts = [s[1] for s in steps]  # ProfilerSteps do not overlap: the last one starting before a call owns it
    for start, end, op, seq, _ in collectives:
        if op.lower() in P2P_OPS:  # communication time, but no vote: see P2P_OPS
            continue
        at = bisect.bisect_right(step_starts, start) - 1
        owner = steps[at][0] if at >= 0 and start < steps[at][2] else None
        if seq is not None:
            key = f"{op}#{seq}"
        else:  # the n-th call of this op in step N: the same call on every rank even when the traces start apart
            index = numbered.get((op, owner), 0)
            numbered[(op, owner)] = index + 1
            key = f"{op}@step{owner}#{index}" if owner is not None else f"{op}#{index}"
        calls.append((key, op, owner, (end - start) / 1000.0, None))
    step_times: list[StepRow] = []
    merged = {key: _union(found) for key, found in spans.items()}  # sorted, apart: a step's part is found by bisection
    for number, start, end, tid in steps:
        inside = _clip(comm_intervals, start, end)
        try:
            busy = _clip(merged.get(KERNEL_SPANS if on_gpu else tid, []), start, end)
        except TypeError:  # a ProfilerStep's tid that is a list or an object
            raise ValueError(NO_THREAD) from None
        comm = _length(inside)
        compute = _length(busy) - _overlap(busy, inside)
        free = max(0.0, (end - start) - _length(_union(busy + inside)))
        step_times.append((number, (end - start) / 1000.0, compute / 1000.0, comm / 1000.0, comm / 1000.0,
                           free / 1000.0))
    pgs = document["distributedInfo"].get("pg_config") if isinstance(document.get("distributedInfo"), dict) else None
    one_group = not isinstance(pgs, list) or len(pgs) <= 1  # a peer is a group rank: the global rank in the only group
    found_links = [] if on_gpu or not one_group else _received(rank, receives, ranges, steps, step_starts)
    return rank, step_times, calls, found_links, _trace_world(document), on_gpu


def _tensor_bytes(event: dict[str, Any]) -> int | None:
    """The bytes of the one tensor a backend's range carries (record_shapes: its Input Dims and Input type), or None."""
    args = _args(event)
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not (isinstance(dims, list) and isinstance(types, list) and dims and types and isinstance(dims[0], list)):
        return None
    size = DTYPE_BYTES.get(types[0]) if isinstance(types[0], str) else None
    for extent in dims[0]:
        if size is None or type(extent) is not int or extent < 0:
            return None
        size *= extent
    return size


def _peer(event: dict[str, Any]) -> int | None:
    """The peer of a c10d::recv_ (its inputs: tensors, group, peer, tag; with record_shapes), or None."""
    inputs = _args(event).get("Concrete Inputs")
    peer = inputs[2] if isinstance(inputs, list) and len(inputs) > 2 else None
    return int(peer) if isinstance(peer, str) and peer.isdigit() else None


def _received(rank: int, receives: list[tuple[float, float, Any, int | None]],
              ranges: list[tuple[float, float, Any, str, int | None]], steps: list[tuple[int, float, float, Any]],
              step_starts: list[float]) -> list[LinkRow]:
    """One link sample per receive whose peer and size are known: peer -> this rank, timed by the backend's recv range
    that the c10d::recv_ op started (on its thread, beginning inside the op), keyed by step, pair and order in the
    step so the key is the same however many steps a trace holds."""
    found: list[LinkRow] = []
    taken: set[int] = set()
    numbered: dict[tuple[int | None, int], int] = {}
    ranges = sorted(ranges, key=lambda r: r[0])
    starts = [r[0] for r in ranges]
    for start, end, tid, peer in sorted(receives, key=lambda r: r[0]):
        i = bisect.bisect_left(starts, start)
        while i < len(ranges) and ranges[i][0] <= end and (i in taken or ranges[i][2] != tid):
            i += 1
        if i >= len(ranges) or ranges[i][0] > end:
            continue
        taken.add(i)
        r_start, r_end, _, backend, size = ranges[i]
        if peer is None or size is None or peer == rank:
            continue
        at = bisect.bisect_right(step_starts, r_start) - 1
        owner = steps[at][0] if at >= 0 and r_start < steps[at][2] else None
        index = numbered.get((owner, peer), 0)
        numbered[(owner, peer)] = index + 1
        found.append((peer, rank, backend, f"step{owner}/recv {peer}->{rank}#{index}", size / 1e6,
                      (r_end - r_start) / 1000.0))
    return found


# --- Ascend profiler text output --------------------------------------------------------------------------------------

STEP_COLUMNS = {"Computing": "compute", "Communication(Not Overlapped)": "comm_not_overlapped",
                "Communication": "comm", "Free": "free"}


def _cell(row: dict[str, str], column: str, shown: str, line: int) -> float | None:
    value = (row.get(column) or "").strip()
    if value in ("", "N/A", "NA", "-"):
        return None
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"line {line}: column {column!r} is not a number: {value[:40]!r}") from None
    if number != number or number < 0:
        raise ValueError(f"line {line}: column {column!r} is not a duration: {value[:40]!r}")
    return number


def parse_step_trace(data: bytes, shown: str) -> dict[int | None, list[StepTimes]]:
    """step_trace_time.csv (torch_npu ASCEND_PROFILER_OUTPUT/, times in us) as StepTimes in ms, by rank: None for a
    per-rank file, the `Index` of each `Type` = rank row for msprof-analyze's cluster file. Raises ValueError."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    if "Step" not in header or "Computing" not in header:
        raise ValueError(f"not a step_trace_time.csv: header {','.join(header)[:120]!r} lacks Step and Computing")
    found: dict[int | None, list[StepTimes]] = {}
    for line, row in enumerate(reader, start=2):
        if None in row:
            raise ValueError(f"line {line}: more cells than the header has columns")
        kind = (row.get("Type") or "rank").strip().lower()
        if kind != "rank":
            continue
        step_text = (row.get("Step") or "").strip()
        try:
            step = int(float(step_text)) if step_text else 0
        except ValueError:
            raise ValueError(f"line {line}: Step is not a number: {step_text[:40]!r}") from None
        values = {key: _cell(row, column, shown, line) for column, key in STEP_COLUMNS.items()}
        parts = [v for v in (values["compute"], values["comm_not_overlapped"], values["free"]) if v is not None]
        total = sum(parts) if parts else None
        rank: int | None = None
        if "Index" in header:
            index = _cell(row, "Index", shown, line)
            rank = None if index is None else int(index)
        found.setdefault(rank, []).append(StepTimes(step, _ms(total), _ms(values["compute"]), _ms(values["comm"]),
                                                    _ms(values["comm_not_overlapped"]), _ms(values["free"])))
    if not found:
        raise ValueError("no step rows")
    return found


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def _step_number(key: str) -> int | None:
    found = re.search(r"(\d+)$", key)
    return int(found.group(1)) if found else None


def _op_kind(name: str) -> str:
    """`hcom_allReduce__184_1_1@123` -> `allReduce`; other names are kept up to their `@group`."""
    base = name.split("@", 1)[0]
    found = re.match(r"^hcom_([A-Za-z0-9]+)_", base)
    return found.group(1) if found else base


def _steps_of(document: Any, what: str) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(document, dict):
        raise ValueError(f"not a {what}: the top level is not an object of steps")
    steps = [(str(k), v) for k, v in document.items() if isinstance(v, dict)]
    if not steps and document:
        raise ValueError(f"not a {what}: no step holds an object")
    return steps


def parse_communication(data: bytes) -> list[CommCall]:
    """communication.json (step -> p2p|collective -> op -> "Communication Time Info") as CommCalls, times in ms."""
    try:
        document = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    calls: list[CommCall] = []
    for step_key, groups in _steps_of(document, "communication.json"):
        step = _step_number(step_key)
        for group_name, ops in groups.items():
            if not isinstance(ops, dict):
                continue
            for op_name, info in ops.items():
                if op_name == "Total Op Info" or not isinstance(info, dict):
                    continue
                times = info.get("Communication Time Info")
                if not isinstance(times, dict):
                    continue
                elapse = _number(times.get("Elapse Time(ms)"))
                if elapse is None:
                    raise ValueError(f"{step_key}/{group_name}/{op_name[:60]}: no numeric \"Elapse Time(ms)\"")
                calls.append(CommCall(f"{step_key}/{op_name}", _op_kind(op_name), step, elapse,
                                      _number(times.get("Wait Time(ms)"))))
    return calls


LINK_KEY = re.compile(r"^(\d+)-(\d+)$")


def parse_matrix(data: bytes) -> list[LinkSample]:
    """communication_matrix.json (step -> p2p|collective -> op -> "SRC-DST" -> transport, size, time) as LinkSamples."""
    try:
        document = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    links: list[LinkSample] = []
    for step_key, groups in _steps_of(document, "communication_matrix.json"):
        for ops in groups.values():
            if not isinstance(ops, dict):
                continue
            for op_name, pairs in ops.items():
                if not isinstance(pairs, dict):
                    continue
                for pair, info in pairs.items():
                    found = LINK_KEY.match(str(pair))
                    if not found or not isinstance(info, dict):
                        continue
                    size, time = _number(info.get("Transit Size(MB)")), _number(info.get("Transit Time(ms)"))
                    transport = info.get("Transport Type")
                    if size is None or time is None or not isinstance(transport, str):
                        raise ValueError(f"{step_key}/{op_name[:60]}/{pair}: needs \"Transport Type\", "
                                         "\"Transit Size(MB)\" and \"Transit Time(ms)\"")
                    src, dst = int(found.group(1)), int(found.group(2))
                    if src != dst and transport not in ("LOCAL", "INVALID_TYPE"):
                        links.append(LinkSample(src, dst, transport, f"{step_key}/{op_name}", size, time))
    return links


def _ascend_rank(rel: str, infos: dict[str, int]) -> int | None:
    """The rank of an Ascend output file: profiler_info_<rank>.json in its profile directory (the parent of
    ASCEND_PROFILER_OUTPUT/), else `rank<N>` in its path."""
    path = PurePosixPath(rel)
    for parent in path.parents:
        if str(parent) in infos:
            return infos[str(parent)]
    found = RANK_IN_PATH.search(rel)
    return int(found.group(1)) if found else None


def mixed_tasks(twice: list[tuple[int, str, str]]) -> MixedTasksError:
    """The refusal of profiles of several tasks: the ranks met twice, where."""
    shown = "; ".join(f"rank {rank} in {a} and in {b}" for rank, a, b in sorted(twice)[:3])
    more = f" (and {len(twice) - 3} more)" if len(twice) > 3 else ""
    return MixedTasksError(
        f"profiles of more than one profiling task: {shown}{more}; not judged",
        hint="give one run's profiles (msprof-analyze's rule: one task per analysis): move the older ones away, or "
             "`ascendctl collect --profile DIR` (it takes the newest task only)")


def _as_rows(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    return attrgetter(*(f.name for f in fields(cls)))


STEP_ROW, LINK_ROW = _as_rows(StepTimes), _as_rows(LinkSample)


def _parse_file(name: str, rel: str, shown: str, data: bytes, gz: bool, cap: int) -> tuple[str, Any]:
    """One profile file parsed, in a reader process or in this one: ("trace", TraceParts), ("ascend", its records as
    rows: {rank: [StepTimes fields]} for step_trace_time.csv, [CommCall fields], [LinkSample fields]) or ("problem",
    what is wrong). A gzip file is decompressed here, to `cap` (given by the caller: its cap holds in the readers)."""
    with gc_paused():
        try:
            if gz:
                data = _read_capped(io.BytesIO(data), cap, gz=True)
            if _kind(name) == "trace":
                return "trace", _trace_parts(data, rel)
            if name == STEP_TRACE:
                return "ascend", {rank: [STEP_ROW(s) for s in steps]
                                  for rank, steps in parse_step_trace(data, shown).items()}
            if name == COMM_JSON:
                return "ascend", [tuple(c) for c in parse_communication(data)]
            return "ascend", [LINK_ROW(link) for link in parse_matrix(data)]
        except (_Refused, ValueError) as exc:
            return "problem", str(exc)


def _records(name: str, rows: Any) -> Any:
    """_parse_file's rows of an Ascend file as records again."""
    if name == STEP_TRACE:
        return {rank: [StepTimes(*row) for row in found] for rank, found in rows.items()}
    return [CommCall._make(row) if name == COMM_JSON else LinkSample(*row) for row in rows]


def reader_count() -> int:
    """How many reader processes: one per core this process may run on, at most WORKERS_MAX."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, WORKERS_MAX))


Parsed = tuple[list[PerfProblem], "_File | None", Any]


def _parsed_in_order(files: Iterator[_File], met: list[PerfProblem], readers: int) -> Iterator[Parsed]:
    """Each file of `files` with its parse (None for a profiler_info file), in the order given, and before it the
    problems `gather` met on the way to it (into `met`): the same answer, in the same order, however many readers.
    Parsed in `readers` processes past the first POOL_AFTER files, where a fork is safe; a pool that breaks (a reader
    killed) leaves the rest to this process."""
    window: deque[tuple[list[PerfProblem], _File, Any]] = deque()  # Future, or the parse already made
    pool: ProcessPoolExecutor | None = None
    # forked, as spawned readers would run the caller's __main__ again (a script without its `if __name__` guard);
    # only while this process has one thread: a fork copies the locks other threads hold (collect's SSH sessions)
    forkable = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    broken, held, parsed = readers <= 1 or not forkable, 0, 0

    def here(f: _File) -> tuple[str, Any]:
        return _parse_file(PurePosixPath(f.rel).name, f.rel, f.path, f.data, f.gz, _cap(PurePosixPath(f.rel).name))

    def first() -> Parsed:
        nonlocal held, broken
        before, f, result = window.popleft()
        if isinstance(result, Future):
            held -= len(f.data)
            try:
                result = result.result()
            except BrokenProcessPool:
                broken, result = True, here(f)
        return before, f, result

    try:
        for f in files:
            before = met[:]
            met.clear()
            name = PurePosixPath(f.rel).name
            if _kind(name) == "info":
                window.append((before, f, None))
            elif broken or parsed < POOL_AFTER:
                parsed += 1
                window.append((before, f, here(f)))
            else:
                while window and (len(window) >= 2 * readers or held + len(f.data) > IN_FLIGHT_BYTES):
                    yield first()
                if pool is None:
                    # a reader forks with the collector paused (read_profiles): it collects between files again
                    pool = ProcessPoolExecutor(readers, multiprocessing.get_context("fork"), initializer=gc.enable)
                held += len(f.data)
                window.append((before, f, pool.submit(_parse_file, name, f.rel, f.path, f.data, f.gz, _cap(name))))
            while window and not isinstance(window[0][2], Future):
                yield first()
        while window:
            yield first()
        yield met[:], None, None
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def read_profiles(paths: Iterable[Path], readers: int | None = None) -> tuple[list[RankInput], list[PerfProblem], int]:
    """Every rank's profile under `paths`, the problems met and how many profile files were found. Each file is parsed
    as soon as it is read; an Ascend file's rank is settled at the end (its profiler_info may come later). Profiles of
    more than one task (a rank met twice: two traces, or two profile directories) raise MixedTasksError. `readers`:
    how many processes parse the files (default reader_count(); 1: this one only), with the same answer."""
    with gc_paused():
        return _read_profiles(paths, reader_count() if readers is None else readers)


def _read_profiles(paths: Iterable[Path], readers: int) -> tuple[list[RankInput], list[PerfProblem], int]:
    problems: list[PerfProblem] = []
    met: list[PerfProblem] = []  # what gather meets, put in order by _parsed_in_order
    names: dict[str, str] = {}  # one string per call key, over every rank
    found = [0]
    infos: dict[str, int] = {}
    torch: dict[int, RankInput] = {}
    pending: list[tuple[_File, str, Any]] = []  # Ascend files parsed: (file without its bytes, name, records)
    homes: dict[int, list[str]] = {}  # rank -> the profile directories (of profiler_info_<rank>.json) naming it
    twice: list[tuple[int, str, str]] = []  # a rank met again: (rank, first place, second place)
    for before, f, result in _parsed_in_order(gather(paths, met, found), met, readers):
        problems.extend(before)
        if f is None:
            continue
        name = PurePosixPath(f.rel).name
        kind = _kind(name)
        if kind == "info":
            match = PROFILER_INFO.match(name)
            if match:
                infos[str(PurePosixPath(f.rel).parent)] = int(match.group(1))
                homes.setdefault(int(match.group(1)), []).append(str(PurePosixPath(f.path).parent))
        elif result[0] == "problem":
            problems.append(PerfProblem(f.path, result[1]))
        elif kind == "trace":
            profile = _rank_input(f.path, result[1], names)
            if profile.rank in torch:
                twice.append((profile.rank, torch[profile.rank].sources[0], f.path))
            else:
                torch[profile.rank] = profile
        else:
            pending.append((_File(f.path, f.rel, b""), name, _records(name, result[1])))
    twice += [(rank, places[0], places[1]) for rank, places in sorted(homes.items()) if len(places) > 1]
    if twice:
        raise mixed_tasks(twice)
    ascend: dict[int, dict[str, list[Any]]] = {}
    for f, name, parsed in pending:
        by_rank = parsed if name == STEP_TRACE else {None: parsed}
        for rank, records in by_rank.items():
            rank = rank if rank is not None else _ascend_rank(f.rel, infos)
            if rank is None:
                problems.append(PerfProblem(f.path, "no rank: no profiler_info_<rank>.json beside it and no `rank<N>` "
                                                    "in its path"))
                break
            slot = ascend.setdefault(rank, {"sources": [], "steps": [], "calls": [], "links": []})
            slot["sources"].append(f.path)
            slot["steps" if name == STEP_TRACE else "calls" if name == COMM_JSON else "links"].extend(records)
    profiles = list(torch.values())
    for rank, slot in ascend.items():
        if rank in torch:
            problems.append(PerfProblem(slot["sources"][0], f"rank {rank} has a Chrome trace too: the trace is used"))
            continue
        profiles.append(RankInput(rank, "ascend", tuple(slot["sources"]), tuple(slot["steps"]), tuple(slot["calls"]),
                                  tuple(slot["links"]), device_timeline=True))  # the step trace is the NPU's
    return sorted(profiles, key=lambda p: p.rank), problems, found[0]
