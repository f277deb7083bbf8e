"""The collect bundle's format, named once: every path and metadata file of a bundle, and the one reader of it.

A bundle is a directory, or that directory packed into an archive (ARCHIVE_SUFFIXES) under its own name:

    manifest.json              MANIFEST: per node: status, commands run (exit code or "absent"), files kept
                               (remote path, category, bytes, truncated), files dropped by the caps, files the node
                               refused to read (a control character in the path, a link, not a regular file),
                               archive members refused, errors; unreachable nodes with their error
    summary.json               SUMMARY: topology majority diff and msprof per-rank summary (bundle/summaries.py)
    job.json                   JOB: the job record collected for, when a JOB was given
    <node>/facts.json          FACTS: hostname, versions, the job's HCCL_/ASCEND_/NCCL_/GLOO_ env (secrets redacted)
    <node>/commands/<name>.txt COMMANDS, command_file(): output of the CMD_* commands (npu-smi.info, npu-smi.topo,
                               npu-smi.health.<N>, hccn_tool.link.<N>, hccn_tool.net_health.<N>, hccn_tool.ip.<N>,
                               nvidia-smi, nvidia-smi.topo, nvidia-smi.ecc, kernel: dmesg -T / journalctl -k)
    <node>/files/<abs path>    FILES, files_path(): plogs, device logs, launcher logs (with JOB_DIR_ENTRIES of the
                               job's directory: exit_code, pid, stacks/), msprof summary CSVs (under MSPROF_DIRS), at
                               their node path without the leading "/"; a truncated file holds its newest bytes
    <node>/.meta/              STAGING: what the node's collection script says of its work (STATUS_TSV,
                               SELECTION_TSV, REFUSED_LIST, REFUSED_MORE); read while the node is described, then removed

Readers: `iter_bundle` yields (node, relative path, stream, size) from a bundle directory or archive, an archive read
once as a stream under archive.py's one safe-member policy; `read_bundle_meta` reads the small metadata files;
`open_bundle` unpacks an archive; `is_bundle` tells what may be a bundle. Imports only foundation modules and
bundle/archive.py (which does too): triage/, below bundle/collect.py, reads bundles through it. Must not import typer
or rich.
"""

from __future__ import annotations

import errno
import io
import lzma
import os
import stat
import tarfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO, Callable, Iterator, NamedTuple

from ascendctl.bundle.archive import ArchiveCapError, ArchiveLimits, ArchiveMembers, unpack_tar_stream
from ascendctl.errors import UsageError

# --- names --------------------------------------------------------------------------------------------

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
JOB = "job.json"
ATTEMPTS = "attempts.json"  # launch --restarts: the records of the job's other attempts (redacted, as job.json)
TOP_META = (MANIFEST, SUMMARY, JOB, ATTEMPTS)  # the bundle's own metadata files, at its top
SUMMARY_NAMES = (SUMMARY, "summaries.json")  # the summary, and an older name for it that triage still reads
FACTS = "facts.json"  # <node>/facts.json
COMMANDS = "commands"  # <node>/commands/<name>.txt
COMMAND_SUFFIX = ".txt"
FILES = "files"  # <node>/files/<the node's absolute path, without its leading "/">
STAGING = ".meta"  # <node>/.meta/: the collection script's own records, removed once the node is described
STATUS_TSV = "status.tsv"  # NAME<tab>exit status or "absent"<tab>TOOL, one line per command
SELECTION_TSV = "selection.tsv"  # keep|tail|drop<tab>...<tab>PATH, one line per file chosen
REFUSED_LIST = "refused"  # CATEGORY<tab>REASON<tab>PATH records, each ended by a NUL
REFUSED_MORE = "refused.more"  # how many more files were refused than listed
PROFILE_LEFT = "profile_left"  # MTIME<tab>PATH lines: the profiles of older tasks that `collect --profile` left out
PROFILE_LEFT_MORE = "profile_left.more"  # how many more were left out than listed

# command outputs: <node>/commands/<name>.txt; the per-device ones are named per_device(name, npu)
CMD_NPU_INFO = "npu-smi.info"
CMD_NPU_TOPO = "npu-smi.topo"
CMD_NPU_HEALTH = "npu-smi.health"
CMD_HCCN_LINK = "hccn_tool.link"
CMD_HCCN_NET_HEALTH = "hccn_tool.net_health"
CMD_HCCN_IP = "hccn_tool.ip"
CMD_NVIDIA = "nvidia-smi"
CMD_NVIDIA_TOPO = "nvidia-smi.topo"
CMD_NVIDIA_ECC = "nvidia-smi.ecc"
CMD_KERNEL = "kernel"

# what collect takes of a job's directory on a node (beside its launcher log), found under <node>/files/
JOB_EXIT_CODE = "exit_code"
JOB_PID = "pid"
JOB_STACKS = "stacks"  # every rank's stack taken by `ascendctl stacks`, or before a stop
JOB_DIR_ENTRIES = (JOB_EXIT_CODE, JOB_PID, JOB_STACKS)

# msprof's exports under <node>/files/: the folders of its summary CSVs (newer and older msprof), a profile's folder
MSPROF_OUTPUT = "mindstudio_profiler_output"
MSPROF_SUMMARY = "summary"
MSPROF_DIRS = (MSPROF_OUTPUT, MSPROF_SUMMARY)
MSPROF_PROFILE = "PROF_"  # prefix of a profile's folder name
CSV_SUFFIX = ".csv"

# archives a bundle (or a directory of logs) may be packed in: every one the readers read; collect -o packs gzip
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.xz", ".tar.bz2")
PACKED_SUFFIXES = ARCHIVE_SUFFIXES[:2]

META_MAX_BYTES = 16 * 1024**2  # a manifest, facts or one command's output larger than this is not what collect writes


def node_path(node: str, *parts: str) -> str:
    """A bundle-relative path under a node's folder: node_path("n1", FACTS) -> "n1/facts.json"."""
    return "/".join((node, *parts))


def command_file(name: str) -> str:
    """The file a command's output is kept in, in <node>/commands/: "npu-smi.info" -> "npu-smi.info.txt"."""
    return f"{name}{COMMAND_SUFFIX}"


def command_path(name: str) -> str:
    """A command output's path relative to its node's folder: "commands/npu-smi.info.txt"."""
    return f"{COMMANDS}/{command_file(name)}"


def command_name(node_relative: str) -> str | None:
    """The command whose output a node-relative path holds ("commands/hccn_tool.link.0.txt" -> "hccn_tool.link.0"),
    None when the path is not in commands/."""
    prefix = f"{COMMANDS}/"
    return node_relative[len(prefix):].removesuffix(COMMAND_SUFFIX) if node_relative.startswith(prefix) else None


def per_device(name: str, npu: int | str) -> str:
    """The name of a per-device command's output: per_device(CMD_HCCN_LINK, 3) -> "hccn_tool.link.3"."""
    return f"{name}.{npu}"


def device_of(command: str, name: str) -> str | None:
    """The device a per-device command's output is for (device_of("hccn_tool.link.3", CMD_HCCN_LINK) -> "3"; "" when
    the output names none), None when it is not an output of `name`."""
    rest = command.removeprefix(name)
    if rest == command or (rest and not rest.startswith(".")):
        return None
    return rest[1:]


def files_path(remote: str) -> str:
    """Where a node's file is kept, relative to its node's folder: "/var/log/x" -> "files/var/log/x"."""
    return f"{FILES}/{remote.lstrip('/')}"


def split_node(relative: str) -> tuple[str | None, str]:
    """(node, path in its folder) of a bundle-relative path; (None, path) for a file at the bundle's top."""
    node, sep, rest = relative.partition("/")
    return (node, rest) if sep else (None, relative)


def is_archive_name(name: str) -> bool:
    """Whether a file name is one of the archives a bundle may be packed in (ARCHIVE_SUFFIXES)."""
    return name.endswith(ARCHIVE_SUFFIXES)


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """Whether a path may be a collect bundle (a directory with a manifest, or an archive)."""
    p = Path(path)
    return (p / MANIFEST).is_file() if p.is_dir() else is_archive_name(p.name)


def bundle_directory(output: Path) -> Path:
    """The directory collect writes for `-o output`: OUTPUT without its archive suffix when it is packed, else OUTPUT."""
    name = output.name
    for suffix in PACKED_SUFFIXES:
        if name.endswith(suffix):
            return output.with_name(name[: -len(suffix)])
    return output


def is_meta_member(relative: str, commands: tuple[str, ...] = ("",)) -> bool:
    """Whether a bundle path (relative to its top directory) is a small metadata file: the manifest, summary,
    job record, a node's facts.json or one of its commands/ outputs whose name starts with one of `commands`
    (never the collected log files)."""
    parts = PurePosixPath(relative).parts
    if len(parts) == 1:
        return parts[0] in TOP_META
    return (len(parts) == 2 and parts[1] == FACTS) or (len(parts) == 3 and parts[1] == COMMANDS
                                                         and parts[2].startswith(commands))


def msprof_kind(path: PurePosixPath) -> str | None:
    """'step_trace' or 'comm' for a msprof summary CSV name (both naming generations), else None."""
    name = path.name
    if name.startswith("step_trace") and name.endswith(CSV_SUFFIX) and not name.startswith("step_trace_time"):
        return "step_trace"
    if name.startswith(("communication_statistic", "hccl_statistic")) and name.endswith(CSV_SUFFIX):
        return "comm"
    return None


# --- reading ------------------------------------------------------------------------------------------

Want = Callable[[str, bool], bool]  # (bundle-relative path, is a directory) -> read it / go into it


class BundleEntry(NamedTuple):
    """One regular file of a bundle: its node (None at the top), its bundle-relative path, its data and size.

    `stream` is open only until the next entry is asked for (an archive is read once, in order)."""

    node: str | None
    path: str
    stream: IO[bytes]
    size: int


def iter_bundle(path: Path, *, want: Want | None = None, top: str | None = None,
                on_refused: Callable[[str, str], None] | None = None,
                limits: ArchiveLimits | None = None) -> Iterator[BundleEntry]:
    """Every regular file of a bundle directory or archive that `want` takes, in name order for a directory and archive
    order for an archive; links, devices and FIFOs are never opened. See `BundleDirectory` and `BundleArchive`."""
    if path.is_dir():
        yield from BundleDirectory(path, want=want)
        return
    with open(path, "rb") as raw:
        yield from BundleArchive(raw, want=want, top=top, on_refused=on_refused, limits=limits)


class BundleDirectory:
    """The regular files of a bundle directory, each opened without following a link; a directory is gone into only
    when `want(path, True)`, a file opened only when `want(path, False)` (all of them without `want`)."""

    def __init__(self, root: Path, *, want: Want | None = None) -> None:
        self.root = root
        self.want = want

    def __iter__(self) -> Iterator[BundleEntry]:
        return self._walk(str(self.root), "")

    def _walk(self, directory: str, prefix: str) -> Iterator[BundleEntry]:
        # os.scandir, not Path.rglob: a 1,024-node bundle has tens of thousands of command outputs
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if self.want is None or self.want(rel, True):
                    yield from self._walk(entry.path, rel + "/")
            elif entry.is_file(follow_symlinks=False) and (self.want is None or self.want(rel, False)):
                stream = _open_regular(entry.path)
                if stream is not None:
                    with stream:
                        yield BundleEntry(split_node(rel)[0], rel, stream, os.fstat(stream.fileno()).st_size)


def _open_regular(path: str) -> IO[bytes] | None:
    """A regular file opened for reading, never through a link nor blocking on a FIFO; None when it is not one (any
    more: it changed since it was listed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


class BundleArchive:
    """The regular files of a bundle archive read once as a stream (archive.ArchiveMembers: the one safe-member policy
    and caps), each named relative to the bundle's top.

    `top` None: collect packs the bundle under its directory name, so every member's first component is that directory
    and is dropped (a member beside it names nothing). `top` a name: the first component is dropped only when it is that
    name (an archive of logs need not hold a bundle). `want(path, False)` picks the files. `problem`, once iterated:
    how the archive ended when it was not whole. ArchiveCapError past a cap.
    """

    def __init__(self, raw: IO[bytes], *, want: Want | None = None, top: str | None = None,
                 on_refused: Callable[[str, str], None] | None = None,
                 wrap: Callable[[io.BufferedIOBase], object] | None = None, limits: ArchiveLimits | None = None) -> None:
        self.want = want
        self.top = top
        self.members = ArchiveMembers(raw, limits=limits, on_refused=on_refused, wrap=wrap)

    @property
    def problem(self) -> str | None:
        return self.members.problem

    def relative(self, name: str) -> str | None:
        """A member's bundle-relative path, None when it names nothing inside the bundle."""
        parts = PurePosixPath(name.lstrip("./") or name).parts
        if self.top is None or (len(parts) > 1 and parts[0] == self.top):
            parts = parts[1:]
        return "/".join(parts) or None

    def __iter__(self) -> Iterator[BundleEntry]:
        for member, data in self.members:
            rel = self.relative(member.name)
            if rel is not None and (self.want is None or self.want(rel, False)):
                yield BundleEntry(split_node(rel)[0], rel, data, member.size)


# what reading an archive may raise beyond ArchiveCapError (a tarfile.TarError): a broken stream or a corrupt one
READ_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError)


def read_bundle_meta(path: Path, *, commands: tuple[str, ...] = ("",), max_bytes: int = META_MAX_BYTES) -> dict[str, bytes]:
    """The metadata files of a bundle (directory or archive) by bundle-relative path, read without unpacking anything.

    `commands` are the name prefixes of the command outputs wanted (all of them by default; the kernel log
    can be 16 MB a node). Only regular files pass; links, devices, members the safe-member policy refuses and files
    over `max_bytes` are left out. Raises UsageError naming the file when it is neither a directory nor a readable
    archive, or when the archive goes past a cap.
    """

    def want(rel: str, is_dir: bool) -> bool:
        if is_dir:  # node folders and their commands/
            parts = rel.split("/")
            return len(parts) == 1 or (len(parts) == 2 and parts[1] == COMMANDS)
        return is_meta_member(rel, commands)

    def take() -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for entry in iter_bundle(path, want=want):
            if entry.size <= max_bytes:
                found[entry.path] = entry.stream.read(max_bytes + 1)[:max_bytes]
        return found

    if path.is_dir():
        return take()
    try:
        return take()
    except ArchiveCapError as exc:
        raise UsageError(f"{path}: {exc}") from None
    except READ_ERRORS as exc:
        raise UsageError(f"{path}: not a bundle directory or a readable .tar.gz ({exc})") from None


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
