"""Collect a triage bundle from every node: vendor-tool state, kernel messages, logs, facts.

Owns the pure remote command builders, the streaming fetch (one remote `tar` per node read
chunk by chunk over the channel, never whole in memory), the safe unpacker and the manifest.
Must not import typer or rich.

Bundle layout (a directory, packed into BUNDLE.tar.gz with the directory name as top level):

    manifest.json              per node: status, commands run (exit code or "absent"), files kept
                               (remote path, category, bytes, truncated), files dropped by the caps,
                               archive members refused, errors; unreachable nodes with their error
    summary.json               topology majority diff and msprof per-rank summary (summaries.py)
    job.json                   the job record collected for, when a JOB was given
    <node>/facts.json          hostname, versions, the job's HCCL_/ASCEND_/NCCL_/GLOO_ env (secrets redacted)
    <node>/commands/<name>.txt output of npu-smi.info, npu-smi.topo, npu-smi.health.<N>,
                               hccn_tool.link.<N>, hccn_tool.net_health.<N>, hccn_tool.ip.<N>,
                               nvidia-smi, nvidia-smi.topo, nvidia-smi.ecc, kernel (dmesg -T / journalctl -k)
    <node>/files/<abs path>    plogs, device logs, launcher logs, msprof summary CSVs, at their node path
                               without the leading "/"; a truncated file holds its newest bytes (its tail)
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import secrets
import shutil
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Callable, Mapping, Sequence

from .probe import TOOL_PATH, ask
from .errors import ExitCode, UsageError
from .group import NodeGroup
from .inventory import Inventory, Node
from .jobs import JobRecord
from .models import EventSink, NodeError, NodeStatus
from .outcome import Outcome, exit_code_for, node_outcome
from .paths import child
from .redact import redact_document, redact_env
from .shell import remote
from .transport import Transport

log = logging.getLogger(__name__)

MANIFEST_SCHEMA = 1
DEFAULT_NODE_CAP = 200 * 1024**2
DEFAULT_WINDOW = 24 * 3600.0  # without a job or --since: logs of the last day
WINDOW_MARGIN = 60.0  # seconds added on both sides of a job's window (clock skew, buffered writes)
MIN_TAIL = 64 * 1024  # a file that does not fit keeps its newest bytes when at least this much budget is left
ENV_PREFIXES = ("HCCL_", "ASCEND_", "NCCL_", "GLOO_")
CHUNK = 256 * 1024  # per-node read/copy buffers: a few of these per node bound our memory at any node count


# --- records ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CollectOptions:
    """What to collect and the limits; built by the CLI, passed to `collect_bundle`."""

    output: Path
    job: JobRecord | None = None
    since: float | None = None  # epoch seconds; overrides the job's start
    until: float | None = None
    msprof_dir: str | None = None
    max_node_size: int = DEFAULT_NODE_CAP
    max_total_size: int | None = None
    section_timeout: float = 30.0
    stream_timeout: float = 1800.0
    comm_limit: float = 0.15
    max_streams: int = 16  # nodes sending their archive at once; bounds memory (SSH windows, buffers) at any node count


@dataclass(frozen=True, slots=True)
class NodePlan:
    """Everything the remote collection script of one node needs; pure data."""

    nonce: str
    since: float | None
    until: float | None
    npu_ids: tuple[int, ...]
    log_base: str  # $ASCEND_PROCESS_LOG_PATH or ~/ascend/log, resolved
    launcher_paths: tuple[str, ...]
    msprof_dir: str | None
    budget: int  # bytes the node may send (commands + files)
    section_timeout: float = 30.0


@dataclass(frozen=True, slots=True)
class CommandEntry:
    """One vendor-tool or kernel command: exit code, or absent when its tool is missing."""

    name: str
    tool: str
    status: str  # ok | failed | absent | missing (output lost to a cap)
    exit_code: int | None
    file: str  # bundle-relative path
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tool": self.tool, "status": self.status, "exit_code": self.exit_code,
                "file": self.file, "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One remote file: kept whole, truncated (newest bytes kept) or dropped by a cap."""

    path: str  # on the node
    category: str  # plog | device_log | launcher | msprof
    size: int  # on the node
    mtime: float
    bytes: int  # in the bundle
    truncated: bool
    reason: str | None = None  # why not all of it: "node cap", "total cap", "stream cut at cap"
    file: str | None = None  # bundle-relative path, None when dropped

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "category": self.category, "size": self.size, "mtime": self.mtime,
                "bytes": self.bytes, "truncated": self.truncated, "reason": self.reason, "file": self.file}


@dataclass(frozen=True, slots=True)
class Refused:
    """An archive member the unpacker would not write."""

    member: str
    reason: str


@dataclass(frozen=True, slots=True)
class UnpackResult:
    """What `unpack_tar_stream` wrote and what it refused; `error` when the stream broke off."""

    written: tuple[str, ...]
    refused: tuple[Refused, ...]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class NodeBundle:
    """One node's part of the bundle, as recorded in the manifest."""

    name: str
    host: str
    status: NodeStatus
    error: str | None = None
    hint: str | None = None
    commands: tuple[CommandEntry, ...] = ()
    files: tuple[FileEntry, ...] = ()
    refused: tuple[Refused, ...] = ()
    bytes: int = 0
    capped: bool = False
    warnings: tuple[str, ...] = ()

    @property
    def truncated(self) -> tuple[FileEntry, ...]:
        return tuple(f for f in self.files if f.truncated)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "host": self.host, "status": self.status.value, "error": self.error, "hint": self.hint,
            "bytes": self.bytes, "capped": self.capped,
            "commands": [c.to_dict() for c in self.commands],
            "absent_tools": sorted({c.tool for c in self.commands if c.status == "absent"}),
            "files": [f.to_dict() for f in self.files if f.file is not None],
            "truncated": [f.to_dict() for f in self.files if f.truncated],
            "refused": [{"member": r.member, "reason": r.reason} for r in self.refused],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class CollectReport:
    """The whole collection: per-node bundles in inventory order, where it was written, summaries."""

    output: Path
    directory: Path
    nodes: tuple[NodeBundle, ...]
    job_id: str | None
    since: float | None
    until: float | None
    summary: dict[str, Any] = field(default_factory=dict)
    total_bytes: int = 0

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for(node_outcome(n.status) for n in self.nodes)

    @property
    def node_outcomes(self) -> list[tuple[str, Outcome]]:
        """Each node's outcome, in inventory order (what `--rerun-failed` remembers)."""
        return [(n.name, node_outcome(n.status)) for n in self.nodes]

    def manifest(self) -> dict[str, Any]:
        return {
            "schema": MANIFEST_SCHEMA,
            "created": time.time(),
            "job": self.job_id,
            "window": {"since": self.since, "until": self.until},
            "total_bytes": self.total_bytes,
            "nodes": [n.to_dict() for n in self.nodes],
            "unreachable": [n.name for n in self.nodes if not n.status.reached],
        }

    def to_dict(self) -> dict[str, Any]:
        return {"bundle": str(self.output), "manifest": self.manifest(), "summary": self.summary}


# --- pure helpers -------------------------------------------------------------------------------------

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)?\s*$", re.IGNORECASE)
_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")


def parse_size(text: str) -> int:
    """'200M' -> 209715200 bytes (K/M/G/T are powers of 1024; a plain number is bytes)."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"size {text!r}: expected a number with an optional K/M/G/T suffix, e.g. 200M")
    power = " KMGT".index(match.group(2).upper() or " ")
    return int(float(match.group(1)) * 1024**power)


def parse_since(text: str, *, now: float | None = None) -> float:
    """'2h', '30m', '1d', epoch seconds or ISO 8601 (local time unless it has an offset) -> epoch seconds."""
    now = time.time() if now is None else now
    text = text.strip()
    rel = _REL.match(text)
    if rel:
        return now - float(rel.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[rel.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    from datetime import datetime

    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"time {text!r}: expected 2h, 30m, 1d, epoch seconds or ISO 8601 (2026-11-22T19:30)") from None


def device_env(env: Mapping[str, str]) -> dict[str, str]:
    """The HCCL_/ASCEND_/NCCL_/GLOO_ variables a triage needs, through the one redaction policy."""
    return redact_env({name: env[name] for name in sorted(env) if name.startswith(ENV_PREFIXES)})


def parse_env(text: str) -> dict[str, str]:
    """`env` output -> mapping (multi-line values keep only their first line)."""
    env = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            env[name] = value
    return env


def job_window(job: JobRecord | None, since: float | None, *, now: float) -> tuple[float | None, float | None]:
    """The time window for logs: --since wins, else the job's start/end with a margin, else the last day."""
    until = None
    if job is not None:
        start = job.started
        if job.ended is not None:
            until = job.ended + WINDOW_MARGIN
        return (since if since is not None else start - WINDOW_MARGIN), until
    return (since if since is not None else now - DEFAULT_WINDOW), until


def facts_probe() -> dict[str, str]:
    """Sections of the first, small probe: identity, environment, npu-smi info, versions."""
    return {
        "hostname": "hostname",
        "home": 'printf "%s\\n" "$HOME"',
        "env": "env",
        "npu_info": "command -v npu-smi >/dev/null 2>&1 || exit 127; npu-smi info",
        "versions": (
            "uname -sr; "
            "for f in /usr/local/Ascend/driver/version.info /usr/local/Ascend/ascend-toolkit/latest/version.cfg "
            "/usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info; do "
            '[ -r "$f" ] && { echo "== $f"; head -n 20 "$f"; }; done; '
            "command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1; "
            "true"
        ),
    }


def command_sections(npu_ids: Sequence[int], since: float | None) -> list[tuple[str, str, str]]:
    """(name, tool, command) of every node-state command the collection script runs."""
    sections = [("npu-smi.topo", "npu-smi", "npu-smi info -t topo")]
    for npu in npu_ids:
        sections.append((f"npu-smi.health.{npu}", "npu-smi", f"npu-smi info -t health -i {npu}"))
    for npu in npu_ids:
        sections += [
            (f"hccn_tool.link.{npu}", "hccn_tool", f"hccn_tool -i {npu} -link -g"),
            (f"hccn_tool.net_health.{npu}", "hccn_tool", f"hccn_tool -i {npu} -net_health -g"),
            (f"hccn_tool.ip.{npu}", "hccn_tool", f"hccn_tool -i {npu} -ip -g"),
        ]
    sections += [
        ("nvidia-smi", "nvidia-smi", "nvidia-smi"),
        ("nvidia-smi.topo", "nvidia-smi", "nvidia-smi topo -m"),
        ("nvidia-smi.ecc", "nvidia-smi", "nvidia-smi -q -d ECC"),
    ]
    if since is not None:
        stamp = f"@{int(since)}"
        # util-linux dmesg rejects "@epoch" ("invalid time value"); it takes a local "YYYY-MM-DD HH:MM:SS"
        kernel = (f"dmesg -T --since \"$(date -d {stamp} '+%Y-%m-%d %H:%M:%S')\" 2>/dev/null "
                  f"|| journalctl -k --no-pager --since {stamp} 2>/dev/null || dmesg -T")
    else:
        kernel = "dmesg -T 2>/dev/null || journalctl -k --no-pager"
    # the kernel ring buffer is bounded, the journal is not
    sections.append(("kernel", "dmesg", f"{{ {kernel}; }} | tail -c 16777216"))
    return sections


def collect_command(plan: NodePlan) -> tuple[str, bytes]:
    """(command, stdin) that runs ascendctl/sh/collect_node.sh for this plan: commands, newest files in budget, tar to stdout.

    Member names: `<nonce>/...` is the staging dir (commands, .meta, tails of truncated
    files under files/), anything else is a whole file relative to `/`.
    """
    args: list[object] = [plan.nonce, TOOL_PATH, f"{plan.section_timeout:g}", plan.budget, MIN_TAIL,
                          "" if plan.since is None else int(plan.since), "" if plan.until is None else int(plan.until),
                          plan.log_base.rstrip("/"), plan.msprof_dir or ""]
    for name, tool, command in command_sections(plan.npu_ids, plan.since):
        args += [name, tool, command]
    args += ["--", *plan.launcher_paths]
    return remote("collect_node.sh", *args)


def member_target(name: str, nonce: str) -> str | None:
    """Bundle path (relative to the node dir) of a member: staging files at the top, node files under files/."""
    name = name.removeprefix("./")
    if name == nonce or name == f"{nonce}/":
        return None
    if name.startswith(f"{nonce}/"):
        return name[len(nonce) + 1:]
    return f"files/{name}"


# --- safe unpacking -----------------------------------------------------------------------------------

# tarfile's "data" extraction filter (PEP 706) judges every member; these name its refusals for the manifest
_FILTER_REASONS = (
    ("AbsolutePathError", "absolute path"),
    ("OutsideDestinationError", "outside the destination"),
    ("AbsoluteLinkError", "link to an absolute path"),
    ("LinkOutsideDestinationError", "link pointing outside"),
    ("SpecialFileError", "special file"),
)
MAX_MEMBERS = 1_000_000  # a hostile bundle of empty files must not fill the inode table
MAX_UNPACKED = 64 * 1024**3  # nor a small .tar.gz of zeros the disk


@dataclass(frozen=True, slots=True)
class UnpackLimits:
    """Caps on what one archive may write: member count and total bytes of file content."""

    members: int = MAX_MEMBERS
    bytes: int = MAX_UNPACKED


def _filter_reason(exc: Exception, member: tarfile.TarInfo) -> str:
    for name, reason in _FILTER_REASONS:
        if type(exc).__name__ == name:
            return f"{reason} ({member.linkname})" if member.issym() else reason
    return str(exc)


def unpack_tar_stream(
    fileobj: IO[bytes],
    dest: Path,
    *,
    rename: Callable[[str], str | None] = lambda name: name,
    on_file: Callable[[str, int], None] | None = None,
    limits: UnpackLimits = UnpackLimits(),
) -> UnpackResult:
    """Unpack a tar stream into `dest` with the standard library's "data" filter and our caps.

    The filter refuses anything that would land (or link) outside `dest`, absolute links and special
    files; we also refuse absolute member names and hard links (the stream cannot seek back to them).
    The stream is read sequentially (tar mode "r|"): never all in memory. A broken stream, or one
    past `limits`, stops the unpacking and is reported in `error`, with what was written so far.
    """
    if not hasattr(tarfile, "data_filter"):  # Python < 3.10.12 / 3.11.4: no extraction filters
        raise UsageError("this Python has no tarfile extraction filters; use Python >= 3.11.4 (or 3.10.12)")
    dest.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    refused: list[Refused] = []
    error = None
    members = content = 0
    try:
        # a large bufsize: the default 10 KiB records make the stream reader spend its time in Python calls
        with tarfile.open(fileobj=fileobj, mode="r|", bufsize=CHUNK) as archive:
            for member in archive:
                members += 1
                if members > limits.members:
                    error = f"more than {limits.members} archive members: stopped there"
                    break
                target = rename(member.name)
                if target is None:
                    continue
                problem = ("absolute path" if member.name.startswith("/") or re.match(r"^[A-Za-z]:", member.name)
                           else "hard link" if member.islnk() else None)
                if problem is None and member.isfile():
                    content += member.size
                    if content > limits.bytes:
                        error = f"archive content passes {limits.bytes} bytes: stopped at {member.name!r}"
                        break
                if problem is None:
                    try:
                        archive.extract(member.replace(name=target, deep=False), dest, filter="data")
                    except tarfile.FilterError as exc:
                        problem = _filter_reason(exc, member)
                    except (FileExistsError, IsADirectoryError, NotADirectoryError) as exc:
                        problem = f"clashes with what is already there ({exc.strerror})"
                if problem is not None:
                    log.warning("refused archive member %r: %s", member.name, problem)
                    refused.append(Refused(member.name, problem))
                elif member.isfile():
                    written.append(target)
                    if on_file:
                        on_file(target, member.size)
    except (tarfile.TarError, OSError, EOFError) as exc:
        error = f"archive stream broken off: {exc}"
    return UnpackResult(tuple(written), tuple(refused), error)


# --- fetching -----------------------------------------------------------------------------------------


class _CapReached(Exception):
    """Raised from the stream callback to stop reading a node past its cap."""


class _Budget:
    """The total cap shared by every node's reader thread."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            self.used += n
            return self.limit is None or self.used <= self.limit


def stream_slack(cap: int) -> int:
    """What our side lets through beyond a node's cap: tar headers, padding, files growing while read."""
    return cap // 10 + 4 * 1024 * 1024


def _fetch(transport: Transport, plan: NodePlan, node_dir: Path, cap: int, total: _Budget,
           timeout: float) -> tuple[UnpackResult, bool, str]:
    """Run the collection script and unpack its stdout as it arrives; returns (unpacked, capped, stderr tail)."""
    read_fd, write_fd = os.pipe()
    try:  # a larger pipe: fewer wake-ups between the SSH reader and the unpacker thread
        fcntl.fcntl(write_fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), CHUNK)
    except OSError:
        pass
    result: list[UnpackResult] = []
    received = 0
    capped = False
    stderr = bytearray()

    def consume() -> None:
        with os.fdopen(read_fd, "rb", buffering=CHUNK) as reader:
            result.append(unpack_tar_stream(reader, node_dir, rename=lambda name: member_target(name, plan.nonce)))
            # keep draining so the writer never blocks on a full pipe after an early stop
            while reader.read(CHUNK):
                pass

    consumer = threading.Thread(target=consume, name=f"unpack-{node_dir.name}", daemon=True)
    consumer.start()

    def on_stdout(chunk: bytes) -> None:
        nonlocal received, capped
        received += len(chunk)
        if received > cap + stream_slack(cap) or not total.take(len(chunk)):
            capped = True
            raise _CapReached()
        view = memoryview(chunk)
        while view:
            view = view[os.write(write_fd, view):]

    def on_stderr(chunk: bytes) -> None:
        stderr.extend(chunk)
        del stderr[:-8192]

    try:
        command, script = collect_command(plan)
        transport.stream(command, on_stdout=on_stdout, on_stderr=on_stderr, timeout=timeout, stdin=script)
    except _CapReached:
        log.info("%s: stopped reading at the cap (%d bytes)", node_dir.name, received)
    finally:
        os.close(write_fd)
        consumer.join()
    unpacked = result[0] if result else UnpackResult((), (), "unpacker died")
    return unpacked, capped, stderr.decode("utf-8", "replace")


def _read_tsv(path: Path) -> list[list[str]]:
    try:
        return [line.split("\t") for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line]
    except OSError:
        return []


def collect_node(node: Node, transport: Transport, options: CollectOptions, directory: Path, *,
                 node_budget: int, total: _Budget, now: float, streams: threading.Semaphore | None = None) -> NodeBundle:
    """Collect one node into `directory/<node>/` and describe what arrived."""
    node_dir = child(directory, node.name)
    node_dir.mkdir(parents=True, exist_ok=True)
    nonce = secrets.token_hex(6)
    sections = ask(transport, facts_probe(), section_timeout=options.section_timeout,
                   timeout=options.section_timeout * 5 + 10).sections
    session_env = parse_env(sections["env"].output if "env" in sections else "")
    job_node = next((n for n in options.job.nodes if n.name == node.name), None) if options.job else None
    job_env = dict(job_node.env) if job_node else {}
    home = (sections["home"].output.strip() if "home" in sections else "") or "/root"
    commands: list[CommandEntry] = []
    npu_ids: tuple[int, ...] = ()
    info = sections.get("npu_info")
    (node_dir / "commands").mkdir(exist_ok=True)
    if info is not None and info.exit_code != 127:
        (node_dir / "commands" / "npu-smi.info.txt").write_text(info.output + "\n", encoding="utf-8")
        try:
            from .parsers.npu_smi import parse_npu_info

            npu_ids = parse_npu_info(info.output).npu_ids
        except Exception as exc:  # unparseable output still gets collected, just without per-device commands
            log.info("%s: npu-smi info unparseable: %s", node.name, exc)
        status = "ok" if info.exit_code == 0 else "failed"
        commands.append(CommandEntry("npu-smi.info", "npu-smi", status, info.exit_code, f"{node.name}/commands/npu-smi.info.txt",
                                     len(info.output) + 1))
    else:
        commands.append(CommandEntry("npu-smi.info", "npu-smi", "absent", None, "", 0))
    facts = {
        "name": node.name,
        "host": node.host,
        "hostname": sections["hostname"].output.strip() if "hostname" in sections else None,
        "versions": sections["versions"].output if "versions" in sections else None,
        "npu_ids": list(npu_ids),
        "job_env": device_env(job_env),
        "session_env": device_env(session_env),
    }
    (node_dir / "facts.json").write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    log_base = job_env.get("ASCEND_PROCESS_LOG_PATH") or session_env.get("ASCEND_PROCESS_LOG_PATH") or f"{home}/ascend/log"
    launcher = tuple(_absolute(p, home) for p in ((job_node.log, job_node.log_dir) if job_node else ()) if p)
    since, until = job_window(options.job, options.since, now=now)
    if options.until is not None:
        until = options.until
    plan = NodePlan(nonce=nonce, since=since, until=until, npu_ids=npu_ids, log_base=_absolute(log_base, home),
                    launcher_paths=launcher, msprof_dir=_absolute(options.msprof_dir, home) if options.msprof_dir else None,
                    budget=node_budget, section_timeout=options.section_timeout)
    with streams or threading.Semaphore():
        unpacked, capped, stderr = _fetch(transport, plan, node_dir, node_budget, total, options.stream_timeout)
    return _describe(node, node_dir, unpacked, capped, stderr, commands)


def _absolute(path: str, home: str) -> str:
    if path.startswith("~/"):
        return f"{home}/{path[2:]}"
    return path if path.startswith("/") else f"{home}/{path}"


def _describe(node: Node, node_dir: Path, unpacked: UnpackResult, capped: bool, stderr: str,
              commands: list[CommandEntry]) -> NodeBundle:
    meta = node_dir / ".meta"
    warnings = []
    for row in _read_tsv(meta / "status.tsv"):
        if len(row) < 3:
            continue
        name, code, tool = row[0], row[1], row[2]
        out = node_dir / "commands" / f"{name}.txt"
        if code == "absent":
            commands.append(CommandEntry(name, tool, "absent", None, "", 0))
            continue
        present = out.is_file()
        commands.append(CommandEntry(name, tool, ("ok" if code == "0" else "failed") if present else "missing",
                                     int(code) if code.isdigit() else None,
                                     f"{node.name}/commands/{name}.txt" if present else "",
                                     out.stat().st_size if present else 0))
    files = []
    for row in _read_tsv(meta / "selection.tsv"):
        if len(row) < 6:
            continue
        action, size, mtime, category, path = row[0], int(row[2] or 0), float(row[3] or 0), row[4], row[5]
        local = node_dir / "files" / path.lstrip("/")
        have = local.stat().st_size if local.is_file() and not local.is_symlink() else None
        rel = f"{node.name}/files/{path.lstrip('/')}"
        if action == "drop" or have is None:
            reason = "node cap" if action == "drop" else ("stream cut at cap" if capped else "not received")
            files.append(FileEntry(path, category, size, mtime, 0, True, reason, None))
        elif action == "tail" or have < size:
            reason = "node cap" if action == "tail" else ("stream cut at cap" if capped else "changed while read")
            files.append(FileEntry(path, category, size, mtime, have, True, reason, rel))
        else:
            files.append(FileEntry(path, category, size, mtime, have, False, None, rel))
    if not (meta / "status.tsv").exists():
        warnings.append("no collection metadata received" + (f": {stderr.strip()[-300:]}" if stderr.strip() else ""))
    if unpacked.error and not capped:
        warnings.append(unpacked.error)
    shutil.rmtree(meta, ignore_errors=True)
    size = sum(p.stat().st_size for p in node_dir.rglob("*") if p.is_file() and not p.is_symlink())
    return NodeBundle(node.name, node.host, NodeStatus.OK, commands=tuple(commands), files=tuple(files),
                      refused=unpacked.refused, bytes=size, capped=capped, warnings=tuple(warnings))


def _bundle_dir(output: Path) -> Path:
    name = output.name
    for suffix in (".tar.gz", ".tgz"):
        if name.endswith(suffix):
            return output.with_name(name[: -len(suffix)])
    return output


def collect_bundle(inventory: Inventory, options: CollectOptions, *, on_event: EventSink | None = None) -> CollectReport:
    """Collect every node in parallel into a bundle directory (packed to .tar.gz when asked), with manifest and summaries."""
    from .summaries import summarize_bundle

    directory = _bundle_dir(options.output)
    if directory.exists() and any(directory.iterdir()):
        raise UsageError(f"{directory}: already exists and is not empty", hint="choose another -o or remove it")
    directory.mkdir(parents=True, exist_ok=True)
    now = time.time()
    nodes = inventory.nodes
    node_budget = options.max_node_size
    if options.max_total_size is not None and nodes:
        node_budget = min(node_budget, options.max_total_size // len(nodes))
    total = _Budget(options.max_total_size)
    streams = threading.Semaphore(max(1, options.max_streams))

    def work(node: Node, transport: Transport) -> NodeBundle:
        return collect_node(node, transport, options, directory, node_budget=node_budget, total=total, now=now,
                            streams=streams)

    with NodeGroup(inventory, keep=False) as group:
        results = group.run(work, on_event=on_event)
    bundles = []
    for result in results:
        node = inventory.node(result.node)
        if result.value is not None:
            bundles.append(result.value)
        else:
            err = result.error or NodeError(NodeStatus.ERROR, "no result")
            bundles.append(NodeBundle(node.name, node.host, err.status, error=err.message, hint=err.hint))
    since, until = job_window(options.job, options.since, now=now)
    if options.job is not None:
        (directory / "job.json").write_text(json.dumps(redact_document(options.job.to_dict()), indent=2) + "\n",
                                            encoding="utf-8")
    summary = summarize_bundle(directory, [b.name for b in bundles], comm_limit=options.comm_limit)
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    report = CollectReport(options.output, directory, tuple(bundles), options.job.id if options.job else None,
                           since, options.until if options.until is not None else until, summary,
                           sum(b.bytes for b in bundles))
    (directory / "manifest.json").write_text(json.dumps(report.manifest(), indent=2) + "\n", encoding="utf-8")
    if directory != options.output:
        pack_bundle(directory, options.output)
        shutil.rmtree(directory)
    return report


def pack_bundle(directory: Path, output: Path) -> None:
    """Pack the bundle directory into a .tar.gz (files streamed, links kept as links)."""
    tmp = output.with_name(output.name + ".part")
    with tarfile.open(tmp, "w:gz", compresslevel=1) as archive:
        archive.add(directory, arcname=directory.name)
    os.replace(tmp, output)


META_MAX_BYTES = 16 * 1024**2  # a manifest, facts or one command's output larger than this is not what collect writes


def is_meta_member(relative: str, commands: tuple[str, ...] = ("",)) -> bool:
    """Whether a bundle path (relative to its top directory) is a small metadata file: the manifest, summary,
    job record, a node's facts.json or one of its commands/ outputs whose name starts with one of `commands`
    (never the collected log files)."""
    parts = PurePosixPath(relative).parts
    if len(parts) == 1:
        return parts[0] in ("manifest.json", "summary.json", "job.json")
    return (len(parts) == 2 and parts[1] == "facts.json") or (len(parts) == 3 and parts[1] == "commands"
                                                               and parts[2].startswith(commands))


def read_bundle_meta(path: Path, *, commands: tuple[str, ...] = ("",), max_bytes: int = META_MAX_BYTES) -> dict[str, bytes]:
    """The metadata files of a bundle (directory or .tar.gz) by bundle-relative path, read without unpacking anything.

    `commands` are the name prefixes of the command outputs wanted (all of them by default; the kernel log
    can be 16 MB a node). Only regular files pass; links, devices and members over `max_bytes` are left out.
    Raises UsageError naming the file when it is neither a directory nor a readable tar archive.
    """
    found: dict[str, bytes] = {}
    if path.is_dir():
        # os.scandir, not Path.rglob: a 1,024-node bundle has tens of thousands of command outputs
        def take(entry: os.DirEntry[str], rel: str) -> None:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_size <= max_bytes:
                with open(entry.path, "rb") as fh:
                    found[rel] = fh.read(max_bytes + 1)[:max_bytes]

        with os.scandir(path) as top:
            for entry in sorted(top, key=lambda e: e.name):
                if not entry.is_dir(follow_symlinks=False):
                    if is_meta_member(entry.name):
                        take(entry, entry.name)
                    continue
                with os.scandir(entry.path) as node:
                    for sub in node:
                        if sub.name == "facts.json":
                            take(sub, f"{entry.name}/facts.json")
                        elif sub.name == "commands" and sub.is_dir(follow_symlinks=False):
                            with os.scandir(sub.path) as listing:
                                for cmd in listing:
                                    if cmd.name.startswith(commands):
                                        take(cmd, f"{entry.name}/commands/{cmd.name}")
        return found
    try:
        with tarfile.open(path, mode="r|*") as archive:
            for member in archive:
                parts = PurePosixPath(member.name.removeprefix("./")).parts
                rel = "/".join(parts[1:])  # collect packs the bundle under its directory name
                if member.isfile() and member.size <= max_bytes and rel and is_meta_member(rel, commands):
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        found[rel] = extracted.read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UsageError(f"{path}: not a bundle directory or a readable .tar.gz ({exc})") from None
    return found


def open_bundle(path: Path, workdir: Path) -> Path:
    """A bundle directory for `path`: the directory itself, or a .tar.gz unpacked safely into `workdir`."""
    if path.is_dir():
        return path
    with open(path, "rb") as raw:
        import gzip

        with gzip.open(raw) as stream:
            result = unpack_tar_stream(stream, workdir)  # type: ignore[arg-type]
    if result.error:
        raise UsageError(f"{path}: {result.error}")
    tops = [p for p in workdir.iterdir() if p.is_dir()]
    return tops[0] if len(tops) == 1 else workdir
