"""Collect a triage bundle from every node: vendor-tool state, kernel messages, logs, facts.

Owns the pure remote command builders, the streaming fetch (one remote `tar` per node read
chunk by chunk over the channel, never whole in memory, written by archive.py's safe unpacker), the
packer and the manifest. The bundle's layout (a directory, packed into BUNDLE.tar.gz with the directory
name as top level) is named in layout.py, the one owner of its paths and file names; this module only
writes it. Must not import typer or rich.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
import shutil
import tarfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, IO, Any, Mapping, Sequence, cast

from ascendctl.bundle.archive import CHUNK, Refused, SafeUnpacker, UnpackResult
# re-exported: `ascendctl.unpack_tar_stream` and the callers of collect's unpacker know them by this module
from ascendctl.bundle.layout import (CMD_HCCN_IP, CMD_HCCN_LINK, CMD_HCCN_NET_HEALTH, CMD_KERNEL, CMD_NPU_HEALTH,
                                     CMD_NPU_INFO, CMD_NPU_TOPO, CMD_NVIDIA, CMD_NVIDIA_ECC, CMD_NVIDIA_TOPO, COMMANDS,
                                     ATTEMPTS, FACTS, FILES, JOB, JOB_DIR_ENTRIES, MANIFEST, PROFILE_LEFT, PROFILE_LEFT_MORE,
                                     REFUSED_LIST, REFUSED_MORE,
                                     SELECTION_TSV, STAGING, STATUS_TSV, SUMMARY, bundle_directory,
                                     command_path, files_path, node_path, per_device)
from ascendctl.remote.probe import TOOL_PATH, ask
from ascendctl.errors import TransportError, UsageError
from ascendctl.remote.fanout import node_error
from ascendctl.remote.group import NodeGroup
from ascendctl.models import NodeError, NodeStatus
from ascendctl.outcome import exit_code_for, node_outcome
from ascendctl.paths import child
from ascendctl.redact import redact_document, redact_env
from ascendctl.remote.scripts import remote

if TYPE_CHECKING:
    from ascendctl.errors import ExitCode
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.jobs.record import JobRecord, NodeJob
    from ascendctl.models import EventSink
    from ascendctl.outcome import Outcome
    from ascendctl.remote.transport.base import Transport

log = logging.getLogger(__name__)

MANIFEST_SCHEMA = 1
DEFAULT_NODE_CAP = 200 * 1024**2
DEFAULT_WINDOW = 24 * 3600.0  # without a job or --since: logs of the last day
WINDOW_MARGIN = 60.0  # seconds added on both sides of a job's window (clock skew, buffered writes)
MIN_TAIL = 64 * 1024  # a file that does not fit keeps its newest bytes when at least this much budget is left
PROFILE_TASK_GAP = 300  # s: per-rank profiles written further apart than this are of different tasks (--profile)
ENV_PREFIXES = ("HCCL_", "ASCEND_", "NCCL_", "GLOO_")


# --- records ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CollectOptions:
    """What to collect and the limits; built by the CLI, passed to `collect_bundle`."""

    output: Path
    job: JobRecord | None = None
    attempts: tuple[JobRecord, ...] = ()  # launch --restarts: the job's other attempts, kept beside its record
    since: float | None = None  # epoch seconds; overrides the job's start
    until: float | None = None
    msprof_dir: str | None = None
    profile_dir: str | None = None  # --profile: the newest profiling task's per-rank profiles under it
    max_node_size: int = DEFAULT_NODE_CAP
    max_total_size: int | None = None
    section_timeout: float = 30.0
    comm_limit: float = 0.15
    max_streams: int = 8  # nodes sending their archive at once; bounds memory (SSH windows, buffers) at any node count


@dataclass(frozen=True, slots=True)
class NodeCollectPlan:
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
    silence: float = 60.0  # seconds the node may send nothing (its command_timeout): then it is lost, and its tar stopped
    profile_dir: str | None = None
    task_gap: int = PROFILE_TASK_GAP


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
    category: str  # plog | device_log | launcher | msprof | profile
    size: int  # on the node
    mtime: float
    bytes: int  # in the bundle
    truncated: bool
    reason: str | None = None  # why not all: "node cap", "stream cut at cap", "node lost", "not received", "changed while read"
    file: str | None = None  # bundle-relative path, None when dropped

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "category": self.category, "size": self.size, "mtime": self.mtime,
                "bytes": self.bytes, "truncated": self.truncated, "reason": self.reason, "file": self.file}


@dataclass(frozen=True, slots=True)
class RefusedFile:
    """A file the node found but would not read: its path has a control character, it is a link, it is not a
    regular file, or it changed or named a place outside the searched directories before it was read."""

    path: str  # on the node (bytes that are not UTF-8 kept as surrogate escapes)
    category: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "category": self.category, "reason": self.reason}


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
    refused_files: tuple[RefusedFile, ...] = ()
    bytes: int = 0
    capped: bool = False
    warnings: tuple[str, ...] = ()
    profiles_left_out: tuple[str, ...] = ()  # --profile: older tasks' profiles on the node, newest first
    profiles_left_more: int = 0  # and how many more than listed

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
            "refused_files": [r.to_dict() for r in self.refused_files],
            "warnings": list(self.warnings),
            "profiles_left_out": list(self.profiles_left_out),
            "profiles_left_more": self.profiles_left_more,
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


KERNEL_LOG_DENIED = 77  # the kernel command's exit when the node's user may not read the kernel log (EX_NOPERM)


def command_sections(npu_ids: Sequence[int], since: float | None) -> list[tuple[str, str, str]]:
    """(name, tool, command) of every node-state command the collection script runs."""
    sections = [(CMD_NPU_TOPO, "npu-smi", "npu-smi info -t topo")]
    for npu in npu_ids:
        sections.append((per_device(CMD_NPU_HEALTH, npu), "npu-smi", f"npu-smi info -t health -i {npu}"))
    for npu in npu_ids:
        sections += [
            (per_device(CMD_HCCN_LINK, npu), "hccn_tool", f"hccn_tool -i {npu} -link -g"),
            (per_device(CMD_HCCN_NET_HEALTH, npu), "hccn_tool", f"hccn_tool -i {npu} -net_health -g"),
            (per_device(CMD_HCCN_IP, npu), "hccn_tool", f"hccn_tool -i {npu} -ip -g"),
        ]
    sections += [
        (CMD_NVIDIA, "nvidia-smi", "nvidia-smi"),
        (CMD_NVIDIA_TOPO, "nvidia-smi", "nvidia-smi topo -m"),
        (CMD_NVIDIA_ECC, "nvidia-smi", "nvidia-smi -q -d ECC"),
    ]
    if since is not None:
        stamp = f"@{int(since)}"
        # util-linux dmesg rejects "@epoch" ("invalid time value"); it takes a local "YYYY-MM-DD HH:MM:SS"
        kernel = (f"dmesg -T --since \"$(date -d {stamp} '+%Y-%m-%d %H:%M:%S')\" 2>/dev/null "
                  f"|| journalctl -k --no-pager --since {stamp} 2>/dev/null || dmesg -T")
    else:
        kernel = "dmesg -T 2>/dev/null || journalctl -k --no-pager"
    # a user other than root reads neither dmesg (kernel.dmesg_restrict=1) nor the kernel's journal (journalctl says
    # "-- No entries --" and exits 0) unless in adm or systemd-journal: say so rather than keep an empty kernel log
    denied = ('if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/kernel/dmesg_restrict 2>/dev/null)" = 1 ] && '
              '! id -nG | grep -qwE "adm|systemd-journal"; then echo "the kernel log is not readable as user $(id -un): '
              f'kernel.dmesg_restrict=1 and the user is in neither adm nor systemd-journal"; exit {KERNEL_LOG_DENIED}; fi; ')
    # the kernel ring buffer is bounded, the journal is not
    sections.append((CMD_KERNEL, "dmesg", f"{denied}{{ {kernel}; }} | tail -c 16777216"))
    return sections


def collect_command(plan: NodeCollectPlan) -> tuple[str, bytes]:
    """(command, stdin) that runs ascendctl/sh/collect_node.sh for this plan: commands, files by priority in budget, tar out.

    Member names: `<nonce>/...` is the staging dir (commands, .meta, tails of truncated
    files under files/), anything else is a whole file relative to `/`.
    """
    silence = max(1, math.ceil(plan.silence))  # whole seconds: the node's watchdog counts them
    args: list[object] = [plan.nonce, TOOL_PATH, f"{plan.section_timeout:g}", silence, plan.budget, MIN_TAIL,
                          "" if plan.since is None else int(plan.since), "" if plan.until is None else int(plan.until),
                          plan.log_base.rstrip("/"), plan.msprof_dir or "", plan.profile_dir or "", plan.task_gap]
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
    return node_path(FILES, name)  # as named: an absolute name is refused by the unpacker, not made relative


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


def _fetch(transport: Transport, plan: NodeCollectPlan, node_dir: Path, cap: int, total: _Budget,
           unpacker: SafeUnpacker) -> tuple[bool, str]:
    """Run the collection script and write its tar stream into the node's directory as it arrives.

    The unpacker runs in the reading thread on each chunk as the transport hands it over: no pipe, no
    second thread, no copy of the data. The transfer has no total limit, only `plan.silence`: the node must keep
    sending (data, or the script's heartbeat while it works), else it is lost (NodeSilentError). Returns
    (capped, stderr tail); a transport error (the node lost) is raised with what arrived left in `unpacker`.
    """
    received = 0
    capped = False
    stderr = bytearray()

    def on_stdout(chunk: bytes) -> None:
        nonlocal received, capped
        received += len(chunk)
        if received > cap + stream_slack(cap) or not total.take(len(chunk)):
            capped = True
            raise _CapReached()
        unpacker.feed(chunk)  # after an error (a refused stream, a full disk) it ignores the rest

    def on_stderr(chunk: bytes) -> None:
        stderr.extend(chunk.replace(b"\0", b""))  # NUL bytes are the script's heartbeat
        del stderr[:-8192]

    try:
        command, script = collect_command(plan)
        transport.stream(command, on_stdout=on_stdout, on_stderr=on_stderr, timeout=float("inf"), idle=plan.silence,
                         stdin=script)
    except _CapReached:
        log.info("%s: stopped reading at the cap (%d bytes)", node_dir.name, received)
    return capped, stderr.decode("utf-8", "replace")


def _read_records(path: Path, end: bytes) -> list[str]:
    """The records of a list the node wrote, each ended by `end` (b"\\n" or b"\\0") and nothing else: not
    str.splitlines, which also ends a line at \\r, \\x1c-\\x1e, \\x85, U+2028 and U+2029, all of which a file
    name may hold. Bytes that are not UTF-8 are kept as surrogate escapes (as the unpacker names files)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return [record.decode("utf-8", "surrogateescape") for record in data.split(end) if record]


def _read_tsv(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in _read_records(path, b"\n")]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_COUNT = re.compile(r"[0-9]+")
_MTIME = re.compile(r"-?[0-9]+(?:\.[0-9]*)?")  # find's %T@ (before 1970: negative)
MAX_REFUSED_FILES = 1000  # refused files listed per node (collect_node.sh sends as many, and counts the rest)


def _selection_row(row: list[str]) -> tuple[str, int, float, str, str] | None:
    """(action, size, mtime, category, path) of a selection.tsv row; None when it is not a row the script
    writes (the script lists no path with a control character or a ".." component)."""
    if (len(row) != 6 or row[0] not in ("keep", "tail", "drop") or not _COUNT.fullmatch(row[1])
            or not _COUNT.fullmatch(row[2]) or not _MTIME.fullmatch(row[3])):
        return None
    path = row[5]
    if not path.startswith("/") or _CONTROL.search(path) or ".." in path.split("/"):
        return None
    return row[0], int(row[2]), float(row[3]), row[4], path


def _refused_files(meta: Path) -> tuple[tuple[RefusedFile, ...], int]:
    """The node's refused list (NUL-ended "category<tab>reason<tab>path" records, at most MAX_REFUSED_FILES of
    them) and how many more the node refused without listing them."""
    refused: list[RefusedFile] = []
    more = 0
    for record in _read_records(meta / REFUSED_LIST, b"\0"):
        category, sep1, rest = record.partition("\t")
        reason, sep2, path = rest.partition("\t")
        if not (sep1 and sep2):
            continue
        if len(refused) < MAX_REFUSED_FILES:
            refused.append(RefusedFile(path, category, reason))
        else:
            more += 1
    try:
        more += int((meta / REFUSED_MORE).read_text(encoding="ascii").strip() or 0)
    except (OSError, ValueError):
        pass
    return tuple(refused), more


def _profiles_left(meta: Path) -> tuple[tuple[str, ...], int]:
    """The profiles of older tasks the node left out (`--profile`), newest first, and how many more it did not list."""
    left = [line.partition("\t")[2] for line in _read_records(meta / PROFILE_LEFT, b"\n") if "\t" in line]
    try:
        more = int((meta / PROFILE_LEFT_MORE).read_text(encoding="ascii").strip() or 0)
    except (OSError, ValueError):
        more = 0
    return tuple(left), more


def collect_node(node: Node, transport: Transport, options: CollectOptions, directory: Path, *,
                 node_budget: int, total: _Budget, now: float, streams: threading.Semaphore | None = None) -> NodeBundle:
    """Collect one node into `directory/<node>/` and describe what arrived."""
    node_dir = child(directory, node.name)
    node_dir.mkdir(parents=True, exist_ok=True)
    nonce = secrets.token_hex(6)
    sections = ask(transport, facts_probe(), section_timeout=options.section_timeout, timeout=node.command_timeout).sections
    session_env = parse_env(sections["env"].output if "env" in sections else "")
    job_node = next((n for n in options.job.nodes if n.name == node.name), None) if options.job else None
    job_env = dict(job_node.env) if job_node else {}
    home = (sections["home"].output.strip() if "home" in sections else "") or "/root"
    commands: list[CommandEntry] = []
    npu_ids: tuple[int, ...] = ()
    info = sections.get("npu_info")
    (node_dir / COMMANDS).mkdir(exist_ok=True)
    if info is not None and info.exit_code != 127:
        (node_dir / command_path(CMD_NPU_INFO)).write_text(info.output + "\n", encoding="utf-8")
        try:
            from ascendctl.facts.parsers.npu_smi import parse_npu_info

            npu_ids = parse_npu_info(info.output).npu_ids
        except Exception as exc:  # unparseable output still gets collected, just without per-device commands
            log.info("%s: npu-smi info unparseable: %s", node.name, exc)
        status = "ok" if info.exit_code == 0 else "failed"
        commands.append(CommandEntry(CMD_NPU_INFO, "npu-smi", status, info.exit_code,
                                     node_path(node.name, command_path(CMD_NPU_INFO)), len(info.output) + 1))
    else:
        commands.append(CommandEntry(CMD_NPU_INFO, "npu-smi", "absent", None, "", 0))
    facts = {
        "name": node.name,
        "host": node.host,
        "hostname": sections["hostname"].output.strip() if "hostname" in sections else None,
        "versions": sections["versions"].output if "versions" in sections else None,
        "npu_ids": list(npu_ids),
        "job_env": device_env(job_env),
        "session_env": device_env(session_env),
    }
    (node_dir / FACTS).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    log_base = job_env.get("ASCEND_PROCESS_LOG_PATH") or session_env.get("ASCEND_PROCESS_LOG_PATH") or f"{home}/ascend/log"
    launcher = launcher_paths(job_node, home)
    since, until = job_window(options.job, options.since, now=now)
    if options.until is not None:
        until = options.until
    plan = NodeCollectPlan(nonce=nonce, since=since, until=until, npu_ids=npu_ids, log_base=_absolute(log_base, home),
                    launcher_paths=launcher, msprof_dir=_absolute(options.msprof_dir, home) if options.msprof_dir else None,
                    budget=node_budget, section_timeout=options.section_timeout, silence=node.command_timeout,
                    profile_dir=_absolute(options.profile_dir, home) if options.profile_dir else None)
    unpacker = SafeUnpacker(node_dir, rename=lambda name: member_target(name, nonce))
    lost: NodeError | None = None
    with streams or threading.Semaphore():
        try:
            capped, stderr = _fetch(transport, plan, node_dir, node_budget, total, unpacker)
        except TransportError as exc:  # lost mid-transfer: what arrived is kept and described, the node is not ok
            lost, capped, stderr = node_error(exc), False, ""
    return _describe(node, node_dir, unpacker.result(), capped, stderr, commands, lost=lost)


def launcher_paths(job_node: NodeJob | None, home: str) -> tuple[str, ...]:
    """What collect takes of a job on a node: the launcher log, the exit_code and pid files beside it (what triage
    cannot do without), the stacks captures beside them, the launcher's log directory (each rank's log) and the job's
    rank table (RANK_TABLE_FILE); absolute, relative ones under `home`."""
    if job_node is None:
        return ()
    paths = []
    if job_node.log:
        log_file = _absolute(job_node.log, home)
        directory = log_file.rsplit("/", 1)[0]  # NodeJob.dir: launcher.log and layout's JOB_DIR_ENTRIES: exit_code,
        # pid, stacks/ (every rank's stack taken by `ascendctl stacks`, or before a stop: a hang's culprit)
        paths += [log_file, *(f"{directory}/{entry}" for entry in JOB_DIR_ENTRIES)]
    if job_node.log_dir:
        paths.append(_absolute(job_node.log_dir, home))
    if job_node.env.get("RANK_TABLE_FILE"):  # where each rank ran, by device: triage attributes a plog's device with it
        paths.append(_absolute(job_node.env["RANK_TABLE_FILE"], home))
    return tuple(paths)


def _absolute(path: str, home: str) -> str:
    if path.startswith("~/"):
        return f"{home}/{path[2:]}"
    return path if path.startswith("/") else f"{home}/{path}"


def _describe(node: Node, node_dir: Path, unpacked: UnpackResult, capped: bool, stderr: str,
              commands: list[CommandEntry], *, lost: NodeError | None = None) -> NodeBundle:
    meta = node_dir / STAGING
    warnings = []
    for row in _read_tsv(meta / STATUS_TSV):
        if len(row) < 3:
            continue
        name, code, tool = row[0], row[1], row[2]
        out = node_dir / command_path(name)
        if code == "absent":
            commands.append(CommandEntry(name, tool, "absent", None, "", 0))
            continue
        present = out.is_file()
        if name == CMD_KERNEL and code == str(KERNEL_LOG_DENIED):
            warnings.append(f"kernel log not collected: not readable as user {node.user or 'the login user'} on this node "
                            "(kernel.dmesg_restrict=1): collect as root, or add the user to adm or systemd-journal")
        commands.append(CommandEntry(name, tool, ("ok" if code == "0" else "failed") if present else "missing",
                                     int(code) if _COUNT.fullmatch(code) else None,
                                     node_path(node.name, command_path(name)) if present else "",
                                     out.stat().st_size if present else 0))
    files = []
    odd: list[str] = []
    for row in _read_tsv(meta / SELECTION_TSV):
        parsed = _selection_row(row)
        if parsed is None:
            odd.append("\t".join(row)[:300])
            continue
        action, size, mtime, category, path = parsed
        local = node_dir / files_path(path)
        have = local.stat().st_size if local.is_file() and not local.is_symlink() else None
        rel = node_path(node.name, files_path(path))
        cut = "stream cut at cap" if capped else "node lost" if lost else None
        if action == "drop" or have is None:
            reason = "node cap" if action == "drop" else (cut or "not received")
            files.append(FileEntry(path, category, size, mtime, 0, True, reason, None))
        elif action == "tail" or have < size:
            reason = "node cap" if action == "tail" else (cut or "changed while read")
            files.append(FileEntry(path, category, size, mtime, have, True, reason, rel))
        else:
            files.append(FileEntry(path, category, size, mtime, have, False, None, rel))
    if odd:
        warnings.append(f"ignored {len(odd)} selection rows the collection script does not write (first: {odd[0]!r})")
    left, left_more = _profiles_left(meta)
    if left:
        warnings.append(f"profiles: kept the newest profiling task only; left out {len(left) + left_more} older "
                        f"profile(s): {', '.join(left[:3])}{' ...' if len(left) + left_more > 3 else ''}")
    refused_files, more = _refused_files(meta)
    if more:
        warnings.append(f"{more} more files refused on the node, not listed")
    if not (meta / STATUS_TSV).exists() and lost is None:
        warnings.append("no collection metadata received" + (f": {stderr.strip()[-300:]}" if stderr.strip() else ""))
    if unpacked.error and not capped and lost is None:  # a lost node's error says why its stream broke off
        warnings.append(unpacked.error + (f" ({stderr.strip()[-300:]})" if stderr.strip() else ""))
    shutil.rmtree(meta, ignore_errors=True)
    size = sum(p.stat().st_size for p in node_dir.rglob("*") if p.is_file() and not p.is_symlink())
    return NodeBundle(node.name, node.host, lost.status if lost else NodeStatus.OK,
                      error=lost.message if lost else None, hint=lost.hint if lost else None,
                      commands=tuple(commands), files=tuple(files), refused=unpacked.refused, refused_files=refused_files,
                      bytes=size, capped=capped, warnings=tuple(warnings), profiles_left_out=left,
                      profiles_left_more=left_more)


def collect_bundle(inventory: Inventory, options: CollectOptions, *, on_event: EventSink | None = None) -> CollectReport:
    """Collect every node in parallel into a bundle directory (packed to .tar.gz when asked), with manifest and summaries."""
    from ascendctl.bundle.summaries import summarize_bundle

    directory = bundle_directory(options.output)
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

    packer = BundlePacker(directory, options.output) if directory != options.output else None

    def work(node: Node, transport: Transport) -> NodeBundle:
        bundle = collect_node(node, transport, options, directory, node_budget=node_budget, total=total, now=now,
                              streams=streams)
        if packer is not None:
            packer.add(child(directory, node.name))  # compressed while the other nodes are still sending
        return bundle

    try:
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
            (directory / JOB).write_text(json.dumps(redact_document(options.job.to_dict()), indent=2) + "\n",
                                                encoding="utf-8")
        if options.attempts:
            (directory / ATTEMPTS).write_text(json.dumps([redact_document(r.to_dict()) for r in options.attempts],
                                                         indent=2) + "\n", encoding="utf-8")
        summary = summarize_bundle(directory, [b.name for b in bundles], comm_limit=options.comm_limit)
        (directory / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        report = CollectReport(options.output, directory, tuple(bundles), options.job.id if options.job else None,
                               since, options.until if options.until is not None else until, summary,
                               sum(b.bytes for b in bundles))
        (directory / MANIFEST).write_text(json.dumps(report.manifest(), indent=2) + "\n", encoding="utf-8")
    except BaseException:  # interrupted, or the metadata could not be written: no half-written OUTPUT.part left
        if packer is not None:
            packer.abort()
        raise
    if packer is not None:
        packer.finish()  # what no node's work added: the metadata, and the directories of nodes that failed
        shutil.rmtree(directory)
    return report


class BundlePacker:
    """Packs a bundle directory into OUTPUT.tar.gz entry by entry, in a thread of its own.

    Node directories are added as each node's collection ends, so compression overlaps the other nodes'
    transfers (zlib works outside the GIL); `finish` adds what is left (metadata, failed nodes' directories)
    and moves the finished archive into place; `abort` removes the partial one. Links are kept as links.
    """

    def __init__(self, directory: Path, output: Path) -> None:
        import queue

        self.directory = directory
        self.output = output
        self._tmp = output.with_name(output.name + ".part")
        self._file = open(self._tmp, "wb")
        self._gzip = ParallelGzipWriter(self._file)
        self._archive = tarfile.open(fileobj=cast(IO[bytes], self._gzip), mode="w|", bufsize=CHUNK)
        self._archive.add(directory, arcname=directory.name, recursive=False)
        self._added: set[str] = set()
        self._queue: queue.Queue[Path | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="pack-bundle", daemon=True)
        self._thread.start()

    def add(self, path: Path) -> None:
        """Pack `path` (a top-level entry of the bundle directory) once the entries queued before it are packed."""
        self._queue.put(path)

    def _run(self) -> None:
        while (path := self._queue.get()) is not None:
            if self._error is None and path.name not in self._added and os.path.lexists(path):
                try:
                    self._archive.add(path, arcname=f"{self.directory.name}/{path.name}")
                    self._added.add(path.name)
                except BaseException as exc:  # a full disk: said by finish(), in the caller's thread
                    self._error = exc

    def finish(self) -> None:
        for entry in sorted(os.listdir(self.directory)):
            self._queue.put(self.directory / entry)  # skipped when already packed
        self._queue.put(None)
        self._thread.join()
        try:
            self._archive.close()
            self._gzip.close()
            self._file.close()
        except OSError as exc:
            self._error = self._error or exc
        if self._error is not None:
            self._tmp.unlink(missing_ok=True)
            raise self._error
        os.replace(self._tmp, self.output)

    def abort(self) -> None:
        self._queue.put(None)
        self._thread.join()
        try:
            self._gzip.discard()
            self._file.close()
        finally:
            self._tmp.unlink(missing_ok=True)


class ParallelGzipWriter:
    """A write-only file object producing one gzip member, its blocks deflated by a pool of threads (like pigz).

    The stream is cut into blocks; each is deflated on its own and ended with a sync flush (byte-aligned, not
    final), so the pieces written in order form one valid deflate stream; close() ends it with an empty final
    block and the gzip trailer (CRC-32 and length of everything written). zlib works outside the GIL, so the
    blocks use every core. One member, not several: tarfile's own "r|gz" reader stops after a first member.
    """

    BLOCK = 1024 * 1024

    def __init__(self, raw: IO[bytes], *, level: int = 1, workers: int | None = None) -> None:
        from collections import deque
        from concurrent.futures import Future, ThreadPoolExecutor

        self._raw = raw
        self._level = level
        self._workers = max(1, workers or min(8, os.cpu_count() or 1))
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="gzip")
        self._pending: deque[Future[bytes]] = deque()
        self._buffer = bytearray()
        self._crc = 0
        self._size = 0
        self._closed = False
        raw.write(b"\x1f\x8b\x08\x00" + int(time.time()).to_bytes(4, "little") + b"\x00\xff")

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._buffer += data
        while len(self._buffer) >= self.BLOCK:
            block = bytes(self._buffer[:self.BLOCK])
            del self._buffer[:self.BLOCK]
            self._submit(block)
        return len(data)

    def _submit(self, block: bytes) -> None:
        self._pending.append(self._pool.submit(_deflate_block, block, self._level))
        while len(self._pending) > 2 * self._workers:  # bounded memory: a few blocks per worker in flight
            self._raw.write(self._pending.popleft().result())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._buffer:
            self._submit(bytes(self._buffer))
            self._buffer.clear()
        while self._pending:
            self._raw.write(self._pending.popleft().result())
        self._pool.shutdown()
        self._raw.write(zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS).flush(zlib.Z_FINISH))
        self._raw.write((self._crc & 0xFFFFFFFF).to_bytes(4, "little") + (self._size & 0xFFFFFFFF).to_bytes(4, "little"))

    def discard(self) -> None:
        """Stop without finishing the stream (an aborted archive)."""
        self._closed = True
        self._pool.shutdown(cancel_futures=True)


def _deflate_block(block: bytes, level: int) -> bytes:
    deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return deflate.compress(block) + deflate.flush(zlib.Z_SYNC_FLUSH)
