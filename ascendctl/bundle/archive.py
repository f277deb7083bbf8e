"""The one safe-member policy for collect bundles packed as tar archives, and the two ways they are read.

A member is judged by one rule whether it is written to disk (`SafeUnpacker`, `unpack_tar_stream`: collect's
per-node streams, `open_bundle`) or only read as a stream (`ArchiveMembers`: triage, the report's metadata reader):

  - `member_refusal`, on the header alone: an absolute name (``/x``, ``C:x``, ``\\x``), a hard link, a device or FIFO
    ("special file"); a stream read with no destination also refuses symbolic links (never followed) and a name with
    a ``..`` component, which nothing could be resolved against;
  - `destination_member`, when unpacking: tarfile's "data" extraction filter (PEP 706) judges the name and any
    symbolic link target against the real destination (nothing lands or links outside it, no setuid bits);
  - one set of caps (`ArchiveLimits`): at most MAX_MEMBERS members (a few MB of .tar.gz can hold millions of empty
    files), at most MAX_UNPACKED bytes of file content written (a small .tar.gz of zeros must not fill the disk), no GNU
    long name or pax header over META_LIMIT (tar writes none that large; read whole, it would fill the memory).

What each reader cannot handle is its own: the unpacker writes no GNU sparse file, a stream has nothing to read in a
member that is not a regular file. Imports only the standard library and ascendctl.errors (foundation): triage/,
which sits below bundle/collect.py, imports it. Must not import typer or rich.
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import gzip
import io
import logging
import lzma
import os
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterator, cast

from ascendctl.errors import UsageError

log = logging.getLogger(__name__)

MAX_MEMBERS = 1_000_000  # members read or unpacked at most: a hostile bundle of empty files must not fill the inode table
MAX_UNPACKED = 64 * 1024**3  # bytes of file content unpacked at most: nor a small .tar.gz of zeros the disk
META_LIMIT = 1024 * 1024  # a GNU long name or pax header larger than this is not what tar writes
BLOCK = tarfile.BLOCKSIZE
CHUNK = 256 * 1024  # read/copy buffer of a stream being unpacked
TAR_BUFFER = 64 * 1024  # tarfile copies what is left of its buffer on every read: 1 MiB made small members quadratic
_EXTENDED = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE)
_DRIVE = re.compile(r"^[A-Za-z]:")

# How a compressed archive starts, and what reads it: our own decompressors, not tarfile's "r|gz" (gzip, bz2 and lzma
# raise on a truncated or corrupt stream, where tarfile's stream reader ends quietly).
DECOMPRESSORS: tuple[tuple[bytes, Callable[[IO[bytes]], io.BufferedIOBase]], ...] = (
    (b"\x1f\x8b", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    (b"BZh", lambda raw: bz2.BZ2File(raw)),
    (b"\xfd7zXZ", lambda raw: lzma.LZMAFile(raw)),
)
COMPRESSED_MAGIC = tuple(prefix for prefix, _ in DECOMPRESSORS)


def decompressor(head: bytes) -> Callable[[IO[bytes]], io.BufferedIOBase] | None:
    """The decompressor for a stream starting with `head`, or None when it is not compressed (as far as we read)."""
    return next((open_ for prefix, open_ in DECOMPRESSORS if head.startswith(prefix)), None)


# --- the policy ---------------------------------------------------------------------------------------


def _member_cap() -> int:
    return MAX_MEMBERS  # read when the limits are made, so that a test may lower the module's cap


def _content_cap() -> int:
    return MAX_UNPACKED


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """The caps on one archive: its member count (read or unpacked) and the total bytes of file content unpacked."""

    members: int = field(default_factory=_member_cap)
    bytes: int = field(default_factory=_content_cap)


UnpackLimits = ArchiveLimits  # the name collect's callers know


class ArchiveCapError(tarfile.TarError):
    """A streamed archive went past a cap (its member count, an extended header's size): the rest is not read."""


def too_many_members(limit: int) -> str:
    return f"more than {limit} archive members"


def member_refusal(member: tarfile.TarInfo, *, unpacking: bool) -> str | None:
    """Why `member` is refused, on its header alone (before its data is touched), or None.

    Both readers: an absolute name, a hard link, a device or FIFO. A stream read with no destination (`unpacking`
    False) also refuses every symbolic link (never followed) and any name with a ".." component; when unpacking, both
    are left to `destination_member`, which resolves them against the real destination.
    """
    name = member.name.replace("\\", "/")
    if name.startswith("/") or _DRIVE.match(name):
        return "absolute path"
    if member.islnk() or (member.issym() and not unpacking):
        return "hard link" if unpacking else f"link to {member.linkname!r}, not followed"
    if member.ischr() or member.isblk() or member.isfifo():
        return "special file"
    if not unpacking and ".." in name.split("/"):
        return "name leads outside the bundle (..)"
    return None


# tarfile's "data" extraction filter (PEP 706) judges every member; these name its refusals for the manifest
_FILTER_REASONS = (
    ("AbsolutePathError", "absolute path"),
    ("OutsideDestinationError", "outside the destination"),
    ("AbsoluteLinkError", "link to an absolute path"),
    ("LinkOutsideDestinationError", "link pointing outside"),
    ("SpecialFileError", "special file"),
)


def _filter_reason(exc: Exception, member: tarfile.TarInfo) -> str:
    for name, reason in _FILTER_REASONS:
        if type(exc).__name__ == name:
            return f"{reason} ({member.linkname})" if member.issym() else reason
    return str(exc)


def destination_member(member: tarfile.TarInfo, target: str, root: str) -> tuple[tarfile.TarInfo | None, str | None]:
    """The member as it may be written at `target` under `root` (tarfile's "data" filter: nothing lands or links
    outside `root`, no setuid bits), or why it may not: (member, None) or (None, reason)."""
    try:
        return tarfile.data_filter(member.replace(name=target, deep=False), root), None
    except tarfile.FilterError as exc:
        return None, _filter_reason(exc, member)
    except ValueError as exc:  # a name no path can hold (a NUL byte from a pax record)
        return None, f"unusable name ({exc})"


# --- unpacking ----------------------------------------------------------------------------------------


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


class SafeUnpacker:
    """Writes a tar stream handed over chunk by chunk into `dest`: no thread, no pipe, no copy of the data.

    Headers are parsed by the standard library (tarfile.TarInfo.frombuf: checksums, GNU base-256 sizes; GNU
    long names and pax records are applied here) and every member is judged by tarfile's "data" extraction
    filter (PEP 706), the same rules `tarfile.extract(filter="data")` applies: nothing lands or links outside
    `dest`, no absolute links, no special files, no setuid bits; before it, `member_refusal` (the rule streamed reads
    apply too) refuses absolute member names, hard links and special files. Files are opened with O_NOFOLLOW, and the
    unpacking stops at `limits` (the caps streamed reads apply too). Feeding after an error (a broken stream or a cap)
    is a no-op; `result()` says what was written and refused and why the stream stopped, if it did.
    """

    def __init__(self, dest: Path, *, rename: Callable[[str], str | None] = lambda name: name,
                 on_file: Callable[[str, int], None] | None = None, limits: ArchiveLimits | None = None) -> None:
        if not hasattr(tarfile, "data_filter"):  # Python < 3.10.12 / 3.11.4: no extraction filters
            raise UsageError("this Python has no tarfile extraction filters; use Python >= 3.11.4 (or 3.10.12)")
        dest.mkdir(parents=True, exist_ok=True)
        self._root = os.path.realpath(dest)
        self.rename = rename
        self.on_file = on_file
        self.limits = limits or ArchiveLimits()
        self.written: list[str] = []
        self.refused: list[Refused] = []
        self.error: str | None = None
        self.finished = False  # the end-of-archive block was seen
        self._members = 0
        self._content = 0
        self._header = bytearray()
        self._left = 0  # bytes of the current member's data still to come
        self._pad = 0  # padding after it
        self._fd: int | None = None  # where they go (None: skipped)
        self._meta: bytearray | None = None  # a GNU long name or pax header being read
        self._meta_kind = b""
        self._long: dict[str, str] = {}  # path / linkpath (and size, mtime) for the next member
        self._current: tarfile.TarInfo | None = None  # the file being written (its name relative to the root)

    def feed(self, chunk: bytes | memoryview) -> None:
        view = memoryview(chunk)
        try:
            while view and self.error is None and not self.finished:
                if self._left:
                    take = min(self._left, len(view))
                    self._data(view[:take])
                    self._left -= take
                    view = view[take:]
                    if not self._left:
                        self._end_of_data()
                elif self._pad:
                    take = min(self._pad, len(view))
                    self._pad -= take
                    view = view[take:]
                else:
                    take = min(BLOCK - len(self._header), len(view))
                    self._header += view[:take]
                    view = view[take:]
                    if len(self._header) == BLOCK:
                        block = bytes(self._header)
                        self._header.clear()
                        self._on_header(block)
        except OSError as exc:
            self.stop(f"cannot write the bundle: {exc.strerror or exc}")

    def result(self) -> UnpackResult:
        """What was written; a stream that ended inside a member (or without one) is reported as broken off."""
        if self.error is None and not self.finished and (self._left or self._pad or self._header or self._meta is not None):
            self.stop("archive stream broken off: unexpected end of data")
        self._close_file()
        return UnpackResult(tuple(self.written), tuple(self.refused), self.error)

    # -- states

    def stop(self, why: str) -> None:
        """End the unpacking here (a broken stream, a cap, a full disk): what follows is ignored."""
        if self.error is None:
            self.error = why
        self._close_file()

    def _data(self, piece: memoryview) -> None:
        if self._meta is not None:
            self._meta += piece
        elif self._fd is not None:
            while piece:
                piece = piece[os.write(self._fd, piece):]

    def _end_of_data(self) -> None:
        if self._meta is not None:
            self._apply_meta(bytes(self._meta))
            self._meta = None
            return
        self._close_file()

    def _close_file(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.close(fd)
        if self._current is not None:
            member, self._current = self._current, None
            path = os.path.join(self._root, member.name)
            try:
                os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)
            except OSError:
                pass
            if self._left == 0:
                self.written.append(member.name)
                if self.on_file:
                    self.on_file(member.name, os.stat(path, follow_symlinks=False).st_size)

    def _skip(self, size: int) -> None:
        self._left, self._pad = size, -size % BLOCK
        if not size:
            self._end_of_data()

    def _on_header(self, block: bytes) -> None:
        if not block.strip(b"\0"):
            self.finished = True  # end-of-archive marker (two zero blocks; the first is enough)
            return
        try:
            info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        except tarfile.HeaderError as exc:
            self.stop(f"archive stream broken off: bad header ({exc})")
            return
        if info.type in _EXTENDED:
            if info.size > META_LIMIT:
                self.stop(f"archive stream broken off: a {info.size}-byte extended header")
                return
            self._meta, self._meta_kind = bytearray(), info.type
            self._skip(info.size)
            return
        self._member(info)

    def _apply_meta(self, data: bytes) -> None:
        kind = self._meta_kind
        if kind == tarfile.GNUTYPE_LONGNAME:
            self._long["path"] = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        elif kind == tarfile.GNUTYPE_LONGLINK:
            self._long["linkpath"] = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        elif kind == tarfile.XHDTYPE:
            for key, value in _pax_records(data):
                if key in ("path", "linkpath", "size", "mtime"):
                    self._long[key] = value

    def _member(self, info: tarfile.TarInfo) -> None:
        overrides, self._long = self._long, {}
        try:
            if "path" in overrides:
                info.name = overrides["path"]
            if "linkpath" in overrides:
                info.linkname = overrides["linkpath"]
            if "size" in overrides:
                info.size = int(overrides["size"])
            if "mtime" in overrides:
                info.mtime = float(overrides["mtime"])
        except ValueError:
            self.stop(f"archive stream broken off: bad pax record for {info.name!r}")
            return
        # links, directories and devices carry no data whatever their size field says
        size = 0 if info.type in (tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE,
                                  tarfile.FIFOTYPE) else info.size
        self._members += 1
        if self._members > self.limits.members:
            self.stop(f"{too_many_members(self.limits.members)}: stopped there")
            return
        target = self.rename(info.name)
        if target is None:
            self._skip(size)
            return
        problem = member_refusal(info, unpacking=True) or _unwritable(info)
        if problem is None and info.isfile():
            self._content += info.size
            if self._content > self.limits.bytes:
                self.stop(f"archive content passes {self.limits.bytes} bytes: stopped at {info.name!r}")
                return
        if problem is None:
            filtered, problem = destination_member(info, target, self._root)
            if filtered is not None:
                try:
                    problem = self._create(filtered)
                except ValueError as exc:  # a name no path can hold (a NUL byte from a pax record)
                    problem = f"unusable name ({exc})"
        if problem is not None:
            log.warning("refused archive member %r: %s", info.name, problem)
            self.refused.append(Refused(info.name, problem))
        self._skip(size)  # into the open file, or past a refused member's data

    def _create(self, member: tarfile.TarInfo) -> str | None:
        """Make the member (directory, link, or an open file for its data); a reason when it cannot be made."""
        path = os.path.join(self._root, member.name)
        try:
            if member.isdir():
                os.makedirs(path, exist_ok=True)
                return None
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if member.issym():
                os.symlink(member.linkname, path)
                return None
            mode = (member.mode or 0o644) & 0o777
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
            self._current = member
        except (FileExistsError, IsADirectoryError, NotADirectoryError) as exc:
            return f"clashes with what is already there ({exc.strerror})"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "clashes with what is already there (a link)"
            raise
        return None


def _unwritable(info: tarfile.TarInfo) -> str | None:
    """What the unpacker cannot make (not a safety rule: GNU sparse maps are not applied here)."""
    if info.type == tarfile.GNUTYPE_SPARSE:
        return "unsupported member type (GNU sparse)"
    if info.type not in (*tarfile.REGULAR_TYPES, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE,
                         tarfile.FIFOTYPE):
        return "unsupported member type"
    return None


def _pax_records(data: bytes) -> list[tuple[str, str]]:
    """`LEN key=value\\n` records of a pax extended header (values as UTF-8, undecodable bytes kept)."""
    records = []
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0 or not data[pos:space].isdigit():
            break
        length = int(data[pos:space])
        record = data[space + 1:pos + length - 1]  # without the trailing newline
        key, sep, value = record.partition(b"=")
        if not sep or length <= 0:
            break
        records.append((key.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape")))
        pos += length
    return records


def unpack_tar_stream(
    fileobj: IO[bytes],
    dest: Path,
    *,
    rename: Callable[[str], str | None] = lambda name: name,
    on_file: Callable[[str, int], None] | None = None,
    limits: ArchiveLimits | None = None,
) -> UnpackResult:
    """Unpack a tar stream read from `fileobj` into `dest` (SafeUnpacker's rules), never all in memory.

    A broken stream, or one past `limits`, stops the unpacking and is reported in `error`, with what was
    written so far.
    """
    unpacker = SafeUnpacker(dest, rename=rename, on_file=on_file, limits=limits)
    try:
        while unpacker.error is None and not unpacker.finished:
            chunk = fileobj.read(CHUNK)
            if not chunk:
                break
            unpacker.feed(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        unpacker.stop(f"archive stream broken off: {exc}")
    return unpacker.result()


# --- streamed reading ---------------------------------------------------------------------------------


class _HeaderWatch:
    """Tells how a streamed archive ended (tarfile stops quietly at a truncated or garbled header, we must not), and
    stops at an extended header past META_LIMIT before tarfile reads it whole into memory."""

    def __init__(self) -> None:
        self.problem: str | None = None
        watch = self

        class Info(tarfile.TarInfo):
            @classmethod
            def frombuf(cls, buf: bytes | bytearray, encoding: str, errors: str) -> Info:
                info = super().frombuf(buf, encoding, errors)
                if info.type in _EXTENDED and info.size > META_LIMIT:
                    raise ArchiveCapError(f"a {info.size}-byte extended header (tar writes none over {META_LIMIT}): "
                                          "the rest was not read")
                return info

            @classmethod
            def fromtarfile(cls, tar: tarfile.TarFile) -> Info:
                try:
                    return super().fromtarfile(tar)
                except tarfile.HeaderError as exc:  # its subclasses are not public: told apart by name
                    kind = type(exc).__name__
                    if kind == "EOFHeaderError":  # the end-of-archive block: a whole archive
                        watch.problem = None
                    elif kind == "EmptyHeaderError":
                        watch.problem = "archive truncated (no end-of-archive block)"
                    else:
                        watch.problem = f"archive truncated or corrupt at byte {tar.offset} ({exc})"
                    raise

        self.info = Info


class ArchiveMembers:
    """One streaming pass over a tar archive (plain, gzip, bz2 or xz): each member once, in order, nothing extracted,
    no seeking back, every member judged by `member_refusal` and the count capped by `limits`.

    Iterating yields (member, data stream) for each regular file that passes, the stream readable until the next one
    is asked for. A member refused is told to `on_refused(name, reason)` and skipped; directories are skipped
    silently. Past a cap, ArchiveCapError (a tarfile.TarError) is raised with what was read before it yielded; a
    truncated or corrupt archive ends the iteration quietly and says so in `problem`. `raw` must be seekable (its
    first bytes are sniffed for the compression); `wrap`, when given, is put between the decompressor and the tar
    reader of a compressed archive (triage's bound on how far it may expand).
    """

    def __init__(self, raw: IO[bytes], *, limits: ArchiveLimits | None = None,
                 on_refused: Callable[[str, str], None] | None = None,
                 wrap: Callable[[io.BufferedIOBase], object] | None = None) -> None:
        self.raw = raw
        self.limits = limits or ArchiveLimits()
        self.on_refused = on_refused or (lambda name, reason: log.info("archive member %r not read: %s", name, reason))
        self.wrap = wrap
        self._watch = _HeaderWatch()

    @property
    def problem(self) -> str | None:
        """How the archive ended when it was not whole (truncated, a garbled header), once iterated."""
        return self._watch.problem

    def __iter__(self) -> Iterator[tuple[tarfile.TarInfo, IO[bytes]]]:
        start = self.raw.tell()
        head = self.raw.read(8)
        self.raw.seek(start)
        opener = decompressor(head)
        decompressed = opener(self.raw) if opener is not None else None
        source: object = self.raw
        if decompressed is not None:
            source = self.wrap(decompressed) if self.wrap is not None else decompressed
        # tarfile's stream mode only reads; typeshed's protocol for its fileobj asks for write, seek and tell too
        with decompressed or contextlib.nullcontext(), tarfile.open(fileobj=cast(IO[bytes], source), mode="r|",
                                                                    bufsize=TAR_BUFFER, tarinfo=self._watch.info) as tar:
            count = 0
            for member in tar:
                # stream mode keeps every header it has seen (memory grows with the member count); we never look back.
                # typeshed does not declare the attribute, tarfile.__iter__ copes with the list being emptied
                tar.members = []  # type: ignore[attr-defined]
                count += 1
                if count > self.limits.members:
                    raise ArchiveCapError(f"{too_many_members(self.limits.members)}: the rest was not read")
                if member.isdir():
                    continue
                problem = member_refusal(member, unpacking=False) or (None if member.isfile() else "not a regular file")
                if problem is not None:
                    self.on_refused(member.name, problem)
                    continue
                data = tar.extractfile(member)
                if data is not None:
                    yield member, data
