"""Triage: read collected logs once, match the signature table, and name the root cause and the first failing rank.

Owns the streaming reader (bundle .tar.gz members, directories, plain or gzip files), attribution
(node, rank, device, pid, time), and the verdict that puts root causes before their symptoms.
The table itself is data in `signatures.py`. Must not import typer or rich.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import re
import shutil
import subprocess
import tarfile
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import IO, Any, Callable, Iterable, Iterator, Protocol

from .errors import AscendctlError, ExitCode
from .signatures import SIGNATURES, TRIGGERS, Category, Signature, trigger_pattern

log = logging.getLogger(__name__)


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...

CHUNK = 1 << 20
MAX_TEXT = 400
GREP_BATCH = 256  # plain files per grep process
KEEP_PER_KEY = 5  # findings kept per (node, rank, signature); the rest are only counted
# Which categories win a tie at the same timestamp: causes before their usual consequences.
PRIORITY = (Category.OOM, Category.HARDWARE, Category.NAN, Category.LAUNCH, Category.UNKNOWN, Category.COMM_TIMEOUT)
SIGNAL_EXIT_CODES = {-9: "SIGKILL", -15: "SIGTERM", -6: "SIGABRT", -11: "SIGSEGV", 137: "SIGKILL", 143: "SIGTERM"}
NOT_NODE_DIRS = {"plog", "debug", "run", "process_log", "launcher", "log", "logs", "device_log", "slog", "ascend"}
HINTS = {
    Category.COMM_TIMEOUT: (
        "start from the first failing rank named above: the timeouts on the other ranks are usually its victims",
        "check the MTU on every hop (`ascendctl preflight --only mtu,path_mtu`) and that no firewall drops traffic between nodes",
        "raise HCCL_CONNECT_TIMEOUT (link setup) or HCCL_EXEC_TIMEOUT (collectives) only if some ranks are just slow to arrive",
    ),
    Category.OOM: (
        "enable recompute (activation checkpointing) to trade compute for memory",
        "lower micro_batch_num / the micro batch size, or the global batch size",
        "shard more: ZeRO stage, tensor/pipeline parallel size; for host OOM lower dataloader workers",
    ),
    Category.NAN: (
        "check the mixed-precision config: prefer bf16, or keep fp16 with a dynamic loss scale and a sane minimum",
        "check the loss scale history and lower the learning rate or enable gradient clipping",
        "look for bad samples in the batch the first NaN step read",
    ),
    Category.HARDWARE: (
        "drain the node named above and check it: `npu-smi info -t health`, `hccn_tool -i N -link -g`, dmesg",
        "rerun without that node; report the device for replacement if the error repeats",
    ),
    Category.LAUNCH: (
        "fix the launch environment on the node named above (ports, Python modules, rank table) and relaunch",
        "`ascendctl preflight` checks ports, versions and the rank table before a launch",
    ),
    Category.UNKNOWN: ("read the evidence line and the traceback before it on that rank",),
}


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
    culprit: int | None = None  # the rank this line blames (remote rank, heartbeat lost, ...)
    weak: bool = False  # a launcher summary or a generic error: evidence of an exit, not of its cause
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category.value, "signature": self.signature, "node": self.node, "rank": self.rank,
                "device": self.device, "time": self.time, "file": self.file, "line": self.line, "text": self.text}


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """The first strong error seen on one node, and whether it is a victim of the verdict."""

    node: str
    category: Category
    victim: bool
    time: str | None


@dataclass(frozen=True, slots=True)
class TriageReport:
    """The verdict: category, first failure, every finding kept, hints, and what was read."""

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

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.files_read else ExitCode.ERROR

    def timeline(self) -> tuple[NodeSummary, ...]:
        """Each node's first strong error (by time), in order of that time."""
        first: dict[str, Finding] = {}
        for f in sorted(self.findings, key=_order_key):
            if f.node is not None and not f.weak:
                first.setdefault(f.node, f)
        cause = self.first_failure
        out = []
        for node, f in first.items():
            victim = (cause is not None and f.category == Category.COMM_TIMEOUT and self.category != Category.COMM_TIMEOUT) or (
                cause is not None and self.category == Category.COMM_TIMEOUT and node != cause.node)
            out.append(NodeSummary(node, f.category, victim, f.time))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        ff = None
        if self.first_failure is not None:
            f = self.first_failure
            ff = {"node": f.node, "rank": f.rank, "device": f.device, "time": f.time, "file": f.file, "line": f.line,
                  "text": f.text}
        return {"category": self.category.value if self.category else None, "first_failure": ff, "reason": self.reason,
                "findings": [f.to_dict() for f in self.findings], "hints": list(self.hints),
                "files_read": self.files_read, "bytes_read": self.bytes_read, "suppressed_findings": self.suppressed,
                "notes": list(self.notes), "unreadable": list(self.unreadable)}


# ---------------------------------------------------------------------------------------------- time

_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_TIME_RX = re.compile(
    r"(?P<py>\d{4})-(?P<pm>\d\d)-(?P<pd>\d\d)-(?P<pH>\d\d):(?P<pM>\d\d):(?P<pS>\d\d)\.(?P<pms>\d{3})\.(?P<pus>\d{3})"
    r"|(?P<iy>\d{4})-(?P<im>\d\d)-(?P<id>\d\d)[T _](?P<iH>\d\d):(?P<iM>\d\d):(?P<iS>\d\d)(?:[.,](?P<ifr>\d{1,6}))?"
    r"|\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<dmon>[A-Z][a-z]{2}) +(?P<dd>\d{1,2}) (?P<dH>\d\d):(?P<dM>\d\d):(?P<dS>\d\d) (?P<dy>\d{4})\]"
    r"|^(?P<smon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<sd>\d{1,2}) (?P<sH>\d\d):(?P<sM>\d\d):(?P<sS>\d\d)\b"
)
NO_YEAR = "0000"


def parse_time(line: str) -> str | None:
    """The first timestamp in a line, normalised to `YYYY-MM-DDTHH:MM:SS.ffffff` (syslog lines get year 0000)."""
    m = _TIME_RX.search(line)
    if m is None:
        return None
    g = m.groupdict()
    if g["py"]:
        return f"{g['py']}-{g['pm']}-{g['pd']}T{g['pH']}:{g['pM']}:{g['pS']}.{g['pms']}{g['pus']}"
    if g["iy"]:
        return f"{g['iy']}-{g['im']}-{g['id']}T{g['iH']}:{g['iM']}:{g['iS']}.{(g['ifr'] or '').ljust(6, '0')}"
    if g["dy"]:
        return f"{g['dy']}-{_MONTHS[g['dmon']]:02d}-{int(g['dd']):02d}T{g['dH']}:{g['dM']}:{g['dS']}.000000"
    return f"{NO_YEAR}-{_MONTHS[g['smon']]:02d}-{int(g['sd']):02d}T{g['sH']}:{g['sM']}:{g['sS']}.000000"


# ---------------------------------------------------------------------------------------------- attribution

_RANK_RXS = (
    re.compile(r"^\[(?:rank|default|trainer|worker)(\d+)\]:"),
    re.compile(r"RankID:\s*(\d+)"),
    re.compile(r"\[Rank (\d+)\]"),
    re.compile(r"\b(?:userRank|rankId|localRank|rank)\[(\d+)\]"),
    re.compile(r"\bRank (\d+)\b(?! Skipping)"),
    re.compile(r"\brank[ =:](\d+)\b"),
)
_DEVICE_RXS = (
    re.compile(r"\bDevice:\s*(\d+)"),
    re.compile(r"\((?:NPU|GPU|CUDA|XPU) (\d+);"),
    re.compile(r"\bdevice(?:LogicId|Id|_id)?[\[=:]\s*(\d+)\b"),
    re.compile(r"\bdevice\((?:chipId:)?(\d+)"),
    re.compile(r"\blogicDevi?d?:?\[?(\d+)"),
    re.compile(r"\bdevid=(\d+)"),
)
_PID_RX = re.compile(r"^\[?[A-Z]+\]? ?[A-Z_]+\((\d+),|\[PID: ?(\d+)\]|\bPID:\s*(\d+)")
_CULPRIT_RXS = (
    re.compile(r"Cluster Exception Location\[IP/ID\]:\[[^/\]]*/(\d+)\]"),
    re.compile(r"crimer rank \[[^/\]]*/(\d+)\]"),
    re.compile(r"[Rr]emote[ _]?[Rr]ank\W{0,4}(\d+)"),
    re.compile(r"^[^|]*\|\s*[\w.:]+\((\d+)\)\s*\|.*\|\s*(?:time out|no connect)\s*\|"),
    re.compile(r"[Tt]he node:? (\d+) is timed? ?out"),
    re.compile(r"\bdst_rank\[(\d+)\]"),
)
_FILE_RANK_RX = re.compile(r"(?:^|[^a-z])(?:rank|worker|default)[_-]?(\d+)(?:\D|$)", re.IGNORECASE)
_FILE_DEVICE_RX = re.compile(r"(?:^|[^a-z])(?:device|dev|npu)[_-]?(\d+)(?:\D|$)", re.IGNORECASE)
_FILE_PID_RX = re.compile(r"\b(?:plog|device)-(\d+)_\d+")
_CONTEXT_RX = re.compile(
    r"hcom init by file success.*?rank\[(?P<r1>\d+)\].*?device\[(?P<d1>\d+)\]"
    r"|SetupAgent rankNum\[\d+\], rank\[(?P<r2>\d+)\].*?logicDevId\[(?P<d2>\d+)\]"
    r"|Entry-HcclCommInitRootInfo\w*:ranks\[\d+\], rank\[(?P<r3>\d+)\].*?deviceLogicId\[(?P<d3>\d+)\]"
    r"|\[LocalRank Key Info\]userRank\[(?P<r4>\d+)\].*?devicePhyId\[(?P<d4>\d+)\]"
)
_TORCHRUN_FIELD_RX = re.compile(r"^\s*(time|host|rank|exitcode|traceback)\s+: (.*)$")


def _first_int(rxs: Iterable[re.Pattern[str]], text: str) -> int | None:
    for rx in rxs:
        m = rx.search(text)
        if m:
            for group in m.groups():
                if group is not None:
                    return int(group)
    return None


def _culprit(text: str) -> int | None:
    value = _first_int(_CULPRIT_RXS, text)
    return None if value is not None and value >= 4294967295 else value


@dataclass(slots=True)
class _FileContext:
    """What a file's path says about its lines, updated by context lines as the file is read."""

    file: str
    node: str | None
    rank: int | None
    device: int | None
    pid: int | None
    torchrun: dict[str, str] = field(default_factory=dict)
    torchrun_root: bool = False
    torchrun_at: int = 0


def attribute_path(rel: PurePosixPath, *, bundle: bool) -> tuple[str | None, int | None, int | None, int | None]:
    """Node, rank, device and pid implied by a path inside a bundle or directory."""
    parts = list(rel.parts)
    node = None
    if bundle and len(parts) >= 2 and parts[0].lower() not in NOT_NODE_DIRS and not _FILE_DEVICE_RX.fullmatch(parts[0]):
        node = parts[0]
        parts = parts[1:]
    rank = device = pid = None
    for part in reversed(parts):
        if (m := _FILE_PID_RX.search(part)) is not None:  # plog-<pid>_<ts>, device-<pid>_<ts>: a pid, not a device
            pid = int(m.group(1)) if pid is None else pid
            continue
        if rank is None and (m := _FILE_RANK_RX.search(part)):
            rank = int(m.group(1))
        if device is None and (m := _FILE_DEVICE_RX.search(part)):
            device = int(m.group(1))
    return node, rank, device, pid


# ---------------------------------------------------------------------------------------------- reading

_TRIGGER_BYTES = re.compile(trigger_pattern().encode())
_GREP = shutil.which("grep")


@dataclass(slots=True)
class _Scan:
    """Mutable accumulator of one triage run (kept private; the result is a frozen TriageReport)."""

    findings: list[Finding] = field(default_factory=list)
    kept: Counter[tuple[str | None, int | None, str]] = field(default_factory=Counter)
    suppressed: int = 0
    pid_ranks: dict[tuple[str | None, int], tuple[int | None, int | None]] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    pending: list[tuple[str, _FileContext]] = field(default_factory=list)

    def add(self, finding: Finding) -> None:
        key = (finding.node, finding.rank, finding.signature)
        self.kept[key] += 1
        if self.kept[key] > KEEP_PER_KEY:
            self.suppressed += 1
            return
        self.findings.append(finding)


def _candidate_lines_python(stream: _Readable, first: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, line) for lines holding a trigger; pure-Python fallback when grep is missing."""
    carry = first
    lineno = 1
    while True:
        chunk = stream.read(CHUNK)
        buf = carry + chunk
        if not chunk:
            end = len(buf)
        else:
            end = buf.rfind(b"\n") + 1
            if end == 0:
                carry = buf
                continue
        counted = 0
        pos = 0
        while pos < end:
            m = _TRIGGER_BYTES.search(buf, pos, end)
            if m is None:
                break
            start = buf.rfind(b"\n", 0, m.start()) + 1
            stop = buf.find(b"\n", m.end(), end)
            stop = end if stop < 0 else stop
            lineno += buf.count(b"\n", counted, start)
            counted = start
            yield lineno, buf[start:stop]
            pos = stop + 1
        lineno += buf.count(b"\n", counted, end)
        carry = buf[end:]
        if not chunk:
            return


def _candidate_lines_grep(path: str | None, stream: _Readable | None, first: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, line) for lines holding a trigger, letting grep's DFA do the scanning."""
    assert _GREP is not None
    args = [_GREP, "-a", "-n", "-E", "-e", "|".join(f"({t})" for t in _GREP_TRIGGERS)]
    env = {**os.environ, "LC_ALL": "C"}
    if path is not None:
        proc = subprocess.Popen([*args, "--", path], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
        feeder = None
    else:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.PIPE, env=env)
        feeder = threading.Thread(target=_feed, args=(proc.stdin, stream, first), daemon=True)
        feeder.start()
    assert proc.stdout is not None
    try:
        for raw in proc.stdout:
            number, _, text = raw.partition(b":")
            yield int(number), text.rstrip(b"\n")
    finally:
        proc.stdout.close()
        if feeder is not None:
            feeder.join()
        proc.wait()


def _feed(sink: IO[bytes] | None, source: _Readable | None, first: bytes) -> None:
    assert sink is not None and source is not None
    try:
        sink.write(first)
        while chunk := source.read(CHUNK):
            sink.write(chunk)
    except (BrokenPipeError, OSError, EOFError, tarfile.TarError) as exc:
        log.warning("stopped reading a stream: %s", exc)
    finally:
        try:
            sink.close()
        except OSError:
            pass


def _grep_regex(trigger: str) -> str:
    # grep -E has no \d (GNU grep does have \b); the Python triggers use no other escape.
    return trigger.replace(r"\d", "[0-9]")


_GREP_TRIGGERS = tuple(_grep_regex(t) for t in TRIGGERS)


def _open_stream(raw: IO[bytes]) -> tuple[IO[bytes], bytes] | None:
    """Wrap gzip data; return the stream and its first bytes, or None for binary files."""
    head = raw.read(2)
    stream: IO[bytes] = raw
    if head == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=_Prefixed(head, raw))  # type: ignore[assignment]
        head = b""
    first = head + stream.read(8192)
    if b"\0" in first:
        return None
    return stream, first


class _Prefixed(io.RawIOBase):
    """A stream that yields `prefix` and then the rest of `raw`, so a sniffed header is not lost."""

    def __init__(self, prefix: bytes, raw: IO[bytes]) -> None:
        self._prefix = prefix
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _scan_stream(scan: _Scan, raw: IO[bytes], ctx: _FileContext, path_on_disk: str | None) -> None:
    opened = _open_stream(raw)
    if opened is None:
        log.debug("%s: binary, skipped", ctx.file)
        return
    stream, first = opened
    scan.files += 1
    counter = _Counting(stream)
    gz = stream is not raw
    if _GREP is not None and path_on_disk is not None and not gz:
        # Plain files on disk go to grep in batches: one process per file would cost more than the scan itself.
        try:
            scan.bytes += os.path.getsize(path_on_disk)
        except OSError:
            pass
        scan.pending.append((path_on_disk, ctx))
        if len(scan.pending) >= GREP_BATCH:
            _scan_pending(scan)
        return
    if _GREP is not None:
        lines = _candidate_lines_grep(None, counter, first)
        scan.bytes += len(first)
    else:
        lines = _candidate_lines_python(counter, first)
        scan.bytes += len(first)
    for number, data in lines:
        _scan_line(scan, ctx, number, data.decode("utf-8", "replace"))
    scan.bytes += counter.count
    _flush_torchrun(scan, ctx)


def _scan_pending(scan: _Scan) -> None:
    """Run one grep over the batched plain files (`-Z`: the name ends at a NUL, so any name parses)."""
    batch, scan.pending = scan.pending, []
    if not batch:
        return
    assert _GREP is not None
    contexts = {path.encode(): ctx for path, ctx in batch}
    args = [_GREP, "-a", "-n", "-H", "-Z", "-E", "-e", "|".join(f"({t})" for t in _GREP_TRIGGERS), "--", *(p for p, _ in batch)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    assert proc.stdout is not None
    current: _FileContext | None = None
    try:
        for raw in proc.stdout:
            name, _, rest = raw.partition(b"\0")
            number, _, text = rest.partition(b":")
            ctx = contexts.get(name)
            if ctx is None or not number.isdigit():
                continue
            if ctx is not current:
                if current is not None:
                    _flush_torchrun(scan, current)
                current = ctx
            _scan_line(scan, ctx, int(number), text.rstrip(b"\n").decode("utf-8", "replace"))
    finally:
        proc.stdout.close()
        proc.wait()
    if current is not None:
        _flush_torchrun(scan, current)


class _Counting:
    """Counts the bytes read through it (for throughput figures)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        return data


def _scan_line(scan: _Scan, ctx: _FileContext, number: int, text: str) -> None:
    if _torchrun_line(scan, ctx, number, text):
        return
    m = _CONTEXT_RX.search(text)
    if m is not None:
        ctx_rank = next(int(g) for g in (m["r1"], m["r2"], m["r3"], m["r4"]) if g is not None)
        ctx_device = next(int(g) for g in (m["d1"], m["d2"], m["d3"], m["d4"]) if g is not None)
        ctx_pid = _line_pid(text) or ctx.pid
        if ctx_pid is None or ctx_pid == ctx.pid:
            ctx.rank, ctx.device = ctx_rank, ctx_device
        if ctx_pid is not None:
            scan.pid_ranks[(ctx.node, ctx_pid)] = (ctx_rank, ctx_device)
        return
    sig = match_line(text)
    if sig is None:
        return
    pid = _line_pid(text) or ctx.pid
    rank = _first_int(_RANK_RXS, text)
    device = _first_int(_DEVICE_RXS, text)
    if rank is None and pid is not None and (ctx.node, pid) in scan.pid_ranks:
        rank, dev = scan.pid_ranks[(ctx.node, pid)]
        device = device if device is not None else dev
    groups = sig.regex.search(text)
    sig_pid = None
    if groups is not None and "pid" in sig.regex.groupindex and groups["pid"]:
        sig_pid = int(groups["pid"])
    code = None
    if groups is not None and "code" in sig.regex.groupindex and groups["code"]:
        code = int(groups["code"])
    if sig.id == "torchrun.child_failed" and groups is not None and groups["local_rank"]:
        rank = None  # this line names a local rank only; the pid joins it to the report's global rank
    scan.add(Finding(
        category=sig.category, signature=sig.id, node=ctx.node,
        rank=rank if rank is not None else ctx.rank,
        device=device if device is not None else ctx.device,
        time=parse_time(text), file=ctx.file, line=number, text=text.strip()[:MAX_TEXT],
        pid=sig_pid if sig_pid is not None else pid,
        culprit=_culprit(text) if sig.category == Category.COMM_TIMEOUT else None,
        weak=sig.report, exit_code=code,
    ))


def _line_pid(text: str) -> int | None:
    m = _PID_RX.search(text)
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


def match_line(text: str) -> Signature | None:
    """The first signature of the table that matches this line, if any."""
    for sig in SIGNATURES:
        if sig.regex.search(text):
            return sig
    return None


def _torchrun_line(scan: _Scan, ctx: _FileContext, number: int, text: str) -> bool:
    """Parse torchrun's ChildFailedError report (`Failures:` / `Root Cause (first observed failure):` blocks)."""
    if "Root Cause (first observed failure)" in text:
        _flush_torchrun(scan, ctx)
        ctx.torchrun_root = True
        return True
    if text.strip() == "Failures:":
        _flush_torchrun(scan, ctx)
        ctx.torchrun_root = False
        return True
    m = _TORCHRUN_FIELD_RX.match(text)
    if m is None:
        return False
    key, value = m.group(1), m.group(2).strip()
    if key == "time":
        _flush_torchrun(scan, ctx)
        ctx.torchrun_at = number
    ctx.torchrun[key] = value
    return True


def _flush_torchrun(scan: _Scan, ctx: _FileContext) -> None:
    entry, ctx.torchrun = ctx.torchrun, {}
    if "exitcode" not in entry:
        return
    m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", entry["exitcode"])
    code = int(m.group(1)) if m else None
    pid = int(m.group(2)) if m and m.group(2) else None
    rm = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", entry.get("rank", ""))
    rank = int(rm.group(1)) if rm else None
    traceback = entry.get("traceback", "")
    sm = re.search(r"Signal (\d+)", traceback)
    if sm and code is not None and code >= 0:
        code = -int(sm.group(1))
    host = entry.get("host") or None
    node = ctx.node if ctx.node is not None else host
    if pid is not None:
        scan.pid_ranks[(node, pid)] = (rank, int(rm.group(2)) if rm and rm.group(2) else None)
        if host and host != node:
            scan.pid_ranks[(host, pid)] = scan.pid_ranks[(node, pid)]
    label = "root cause" if ctx.torchrun_root else "failure"
    text = f"torchrun {label}: host {host} rank {rank} exitcode {code} (pid {pid}) {traceback}".strip()
    scan.add(Finding(Category.UNKNOWN, "torchrun.root_cause" if ctx.torchrun_root else "torchrun.failure", node, rank, None,
                     _torchrun_time(entry.get("time", "")), ctx.file, ctx.torchrun_at, text[:MAX_TEXT], pid=pid, weak=True,
                     exit_code=code))


def _torchrun_time(value: str) -> str | None:
    return parse_time(value.replace("_", " ", 1)) if value else None


# ---------------------------------------------------------------------------------------------- sources


def _iter_tar(scan: _Scan, path: Path, on_file: Callable[[IO[bytes], _FileContext, str | None], None]) -> None:
    stem = path.name.split(".")[0]
    with tarfile.open(path, mode="r|*") as tar:  # stream mode: each member read once, nothing extracted
        for member in tar:
            if not member.isfile():
                continue
            rel = PurePosixPath(member.name.lstrip("./") or member.name)
            if len(rel.parts) > 1 and rel.parts[0] == stem:
                rel = PurePosixPath(*rel.parts[1:])
            if _summary_file(scan, rel, lambda: tar.extractfile(member)):
                continue
            node, rank, device, pid = attribute_path(rel, bundle=True)
            fileobj = tar.extractfile(member)
            if fileobj is None:
                continue
            with fileobj:
                on_file(fileobj, _FileContext(f"{path.name}:{rel}", node, rank, device, pid), None)


def _summary_file(scan: _Scan, rel: PurePosixPath, opener: Callable[[], IO[bytes] | None]) -> bool:
    """Collect's own records become notes, not log lines: `summary.json` (topology and msprof, see collect.py)."""
    name = rel.name
    if name in ("manifest.json", "job.json", "facts.json") or (name.endswith(".csv") and "mindstudio_profiler_output" in rel.parts):
        return True
    if name in ("summary.json", "summaries.json") and len(rel.parts) == 1:
        fileobj = opener()
        if fileobj is None:
            return True
        with fileobj:
            scan.notes.extend(summary_notes(fileobj.read(16 << 20)))
        return True
    return False


def summary_notes(data: bytes) -> list[str]:
    """Notes from collect's `summary.json`: topology outliers and msprof stragglers / communication-heavy ranks."""
    try:
        doc = json.loads(data)
    except ValueError:
        return ["summary.json: unreadable JSON"]
    if not isinstance(doc, dict):
        return []
    notes = []
    for topo in doc.get("topology") or []:
        if not isinstance(topo, dict):
            continue
        for outlier in topo.get("outliers") or []:
            cells = outlier.get("cells") or []
            notes.append(f"topology ({topo.get('tool')}): {outlier.get('node')} differs from the majority in {len(cells)} link(s)")
    msprof = doc.get("msprof")
    if isinstance(msprof, dict):
        if msprof.get("stragglers"):
            notes.append(f"msprof: straggler rank(s) {msprof['stragglers']} (step time above "
                         f"{msprof.get('straggler_factor')}x the median)")
        if msprof.get("comm_flagged"):
            notes.append(f"msprof: rank(s) {msprof['comm_flagged']} spend more than {msprof.get('comm_limit')} of a step communicating")
    return notes


def _iter_dir(scan: _Scan, root: Path, on_file: Callable[[IO[bytes], _FileContext, str | None], None]) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            rel = PurePosixPath(full.relative_to(root).as_posix())
            if _summary_file(scan, rel, lambda: full.open("rb")):
                continue
            if filename.endswith((".tar.gz", ".tgz", ".tar")):
                _iter_tar(scan, full, on_file)
                continue
            node, rank, device, pid = attribute_path(rel, bundle=True)
            _read_file(scan, full, _FileContext(str(full), node, rank, device, pid), on_file)


def _read_file(scan: _Scan, path: Path, ctx: _FileContext, on_file: Callable[[IO[bytes], _FileContext, str | None], None]) -> None:
    try:
        with path.open("rb") as fileobj:
            on_file(fileobj, ctx, str(path))
    except OSError as exc:
        scan.unreadable.append(f"{path}: {exc.strerror or exc}")


def scan_paths(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Finding], dict[str, Any]]:
    """Read every path (bundle, directory or log file) once; return the findings and what was read."""
    scan = _Scan()
    _scan_all(scan, paths)
    return scan.findings, {"files": scan.files, "bytes": scan.bytes}


def _scan_all(scan: _Scan, paths: Iterable[str | os.PathLike[str]]) -> None:
    def on_file(fileobj: IO[bytes], ctx: _FileContext, disk: str | None) -> None:
        _scan_stream(scan, fileobj, ctx, disk)

    for given in paths:
        path = Path(given)
        try:
            if path.is_dir():
                _iter_dir(scan, path, on_file)
            elif path.name.endswith((".tar.gz", ".tgz", ".tar", ".tar.xz", ".tar.bz2")) and tarfile.is_tarfile(path):
                _iter_tar(scan, path, on_file)
            elif path.exists():
                _, rank, device, pid = attribute_path(PurePosixPath(path.name), bundle=False)
                _read_file(scan, path, _FileContext(str(path), None, rank, device, pid), on_file)
            else:
                scan.unreadable.append(f"{path}: no such file or directory")
        except (OSError, tarfile.TarError, EOFError) as exc:
            scan.unreadable.append(f"{path}: {exc}")
    _scan_pending(scan)


# ---------------------------------------------------------------------------------------------- verdict


def _order_key(f: Finding) -> tuple[str, int]:
    return (f.time or "9999", PRIORITY.index(f.category))


def _fill_years(findings: list[Finding]) -> list[Finding]:
    """Give syslog-style times (no year) the latest year seen elsewhere, so they sort with the rest."""
    years = [f.time[:4] for f in findings if f.time and not f.time.startswith(NO_YEAR)]
    if not years:
        return findings
    year = max(years)
    return [replace(f, time=year + f.time[4:]) if f.time and f.time.startswith(NO_YEAR) else f for f in findings]


def _join_pids(findings: list[Finding], pid_ranks: dict[tuple[str | None, int], tuple[int | None, int | None]]) -> list[Finding]:
    """Give kernel OOM kills (and other pid-only findings) the rank of the process they name."""
    by_pid: dict[int, tuple[int | None, int | None]] = {}
    for (_, pid), known in pid_ranks.items():
        if known[0] is not None:
            by_pid.setdefault(pid, known)
    out = []
    for f in findings:
        if f.rank is None and f.pid is not None:
            # pids are per node: a pid seen on another node is a different process, unless the
            # finding's node is unknown (a loose log file rather than a bundle).
            value: tuple[int | None, int | None] | None = pid_ranks.get((f.node, f.pid))
            if value is None and f.node is None:
                value = by_pid.get(f.pid)
            if value is not None and value[0] is not None:
                f = replace(f, rank=value[0], device=f.device if f.device is not None else value[1])
        out.append(f)
    return out


def decide(findings: list[Finding], *, pid_ranks: dict[tuple[str | None, int], tuple[int | None, int | None]] | None = None
           ) -> tuple[Category | None, Finding | None, str]:
    """Name the root cause: the earliest strong non-timeout error, else the rank the timeouts blame, else a launcher's word."""
    findings = _join_pids(_fill_years(findings), pid_ranks or {})
    oom_killed = {(f.node, f.pid) for f in findings if f.signature.startswith("kernel.oom") and f.pid is not None}
    oom_pids_anywhere = {pid for _, pid in oom_killed}
    strong = [f for f in findings if not f.weak and f.category != Category.COMM_TIMEOUT]
    if strong:
        first = min(strong, key=_order_key)
        return first.category, first, "earliest error that is not a timeout; timeouts on other ranks are its victims"
    timeouts = [f for f in findings if f.category == Category.COMM_TIMEOUT]
    exits = [f for f in findings if f.weak and f.signature.startswith(("torchrun.", "msrun."))]
    killed = [f for f in exits if f.exit_code in SIGNAL_EXIT_CODES and f.pid is not None
              and ((f.node, f.pid) in oom_killed or (f.node is None and f.pid in oom_pids_anywhere))]
    raised = [f for f in findings if f.signature == "python.exception" and f.rank is not None]
    if killed:
        first = min(killed, key=_order_key)
        return Category.OOM, first, "the launcher saw this rank SIGKILLed and the kernel OOM-killed its pid"
    if timeouts:
        votes = Counter(f.culprit for f in timeouts if f.culprit is not None)
        if votes:
            rank, _ = votes.most_common(1)[0]
            own = [f for f in findings if f.rank == rank]
            pointer = min((f for f in timeouts if f.culprit == rank), key=_order_key)
            if own:
                first = min(own, key=_order_key)
            else:
                first = replace(pointer, rank=rank, node=None, device=None)
            return Category.COMM_TIMEOUT, first, f"{votes[rank]} timeout line(s) point at rank {rank}"
        timed_out = {(f.node, f.rank) for f in timeouts}
        own_error = [f for f in raised if (f.node, f.rank) not in timed_out]
        if own_error:
            first = min(own_error, key=_order_key)
            return (first.category, first,
                    "this rank raised an error that is not a timeout; timeouts on other ranks are its victims")
        first = min(timeouts, key=_order_key)
        return Category.COMM_TIMEOUT, first, "only timeouts were found; this is the earliest"
    if raised:
        # A launcher's exit report says who ended; a rank's own traceback says why.
        first = min(raised, key=_order_key)
        return first.category, first, "this rank raised an error; the launcher's exit reports follow from it"
    if exits:
        # A launcher's summary names the first rank to exit; a rank killed by a signal was usually stopped by someone else.
        own_exit = [f for f in exits if f.exit_code not in SIGNAL_EXIT_CODES]
        first = min(own_exit or exits, key=_order_key)
        return Category.UNKNOWN, first, "only a launcher's exit report was found"
    weak = [f for f in findings if f.weak]
    if weak:
        first = min(weak, key=_order_key)
        return first.category, first, "only generic errors were found"
    return None, None, "no known failure signature was found"


def triage(paths: Iterable[str | os.PathLike[str]]) -> TriageReport:
    """Read bundles, directories or log files once each and return the verdict with its evidence."""
    scan = _Scan()
    _scan_all(scan, list(paths))
    if not scan.files:
        problems = "; ".join(scan.unreadable) or "no text log files found"
        raise AscendctlError(f"nothing could be read: {problems}", hint="pass a bundle from `ascendctl collect`, a directory or log files")
    findings = _join_pids(_fill_years(scan.findings), scan.pid_ranks)
    category, first, reason = decide(findings, pid_ranks=scan.pid_ranks)
    if category is None:
        category = Category.UNKNOWN
    hints = list(HINTS[category])
    if first is not None and first.category != category:
        hints = list(HINTS[category])
    if first is not None:
        sig_hint = next((s.hint for s in SIGNATURES if s.id == first.signature), None)
        if sig_hint and sig_hint not in hints:
            hints.insert(0, sig_hint)
        where = ", ".join(x for x in (f"node {first.node}" if first.node else "", f"rank {first.rank}" if first.rank is not None else "") if x)
        if where and category == Category.COMM_TIMEOUT:
            hints.insert(0, f"look first at {where}: its log before {first.time or 'the timeouts'}")
    else:
        hints = ["no known failure signature found: read the last lines of each rank's log"]
    findings.sort(key=lambda f: (_order_key(f), f.file, f.line))
    return TriageReport(category, first, tuple(findings), tuple(hints), reason, scan.files, scan.bytes, scan.suppressed,
                        tuple(scan.notes), tuple(scan.unreadable))
