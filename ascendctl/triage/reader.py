"""Reading for triage: bundles (archive members as streams), directories, plain and gzip files, each read once.

Owns the prefilter (`grep -E` over the signature triggers: over batches of plain files, or fed a long stream through
a pipe; a pure-Python pass for short streams and when grep is missing or fails), the line-length cap, the bound on how
far compressed input may expand, the tail kept for progress, what is never opened (FIFOs, devices, sockets, links),
what could not be read, and which of collect's own records (the job record, facts, summary) feed the facts rather than
the signatures. Archives are walked by bundle/layout.py's reader under bundle/archive.py's one safe-member policy and
caps; the bundle's file names are layout.py's. Must not import typer or rich.
"""

from __future__ import annotations

import errno
import fcntl
import gzip
import io
import logging
import os
import re
import resource
import shutil
import stat
import subprocess
import tarfile
import tempfile
import threading
import zlib
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, IO, Any, Callable, Iterator, Protocol

from ascendctl.bundle.archive import COMPRESSED_MAGIC, ArchiveCapError
from ascendctl.bundle.layout import (CSV_SUFFIX, FACTS, JOB, MANIFEST, META_MAX_BYTES, MSPROF_OUTPUT, SUMMARY_NAMES,
                                     BundleArchive, is_archive_name)
from ascendctl.errors import parse_json
from ascendctl.ranktable import NAME_RX, rank_places
from ascendctl.stacks.incident import MAX_FILE_BYTES as STACK_FILE_BYTES, capture_member
from ascendctl.triage.signatures import TRIGGERS, trigger_pattern
from ascendctl.triage.extract import attribute_path_full
from ascendctl.triage.model import Source
from ascendctl.models import MAX_LINE

if TYPE_CHECKING:
    from ascendctl.triage.extract import Extraction

log = logging.getLogger(__name__)

CHUNK = 1 << 20
TAIL = 64 * 1024  # bytes of each file's end kept to find its last training step
MAX_STACK_FILES = 8192  # files of stacks captures kept (each at most STACK_FILE_BYTES): 2048 ranks' dumps, tables
GREP_BATCH = 256  # plain files per grep process
GREP_MEMORY = 1 << 30  # address-space cap of a grep child; past it grep fails and Python reads the files instead
# Python's regex over the ~160 triggers reads about 3 MB/s, whatever the text (a GB of empty lines too); grep reads
# hundreds. A stream longer than this goes to a grep child (one costs ~3 ms to start: Python reads ~10 KB in that time).
GREP_STREAM = 32 * 1024
# Decompression bombs: 1 MB of gzip expands to 1 GB of newlines (deflate's limit is ~1032:1; bz2 and xz go far past it).
# A compressed file, archive or member gives at most MAX_EXPANSION bytes per byte it holds; deflate's fastest level
# tops out near 230:1 and logs compress 5-30:1, so only repeated content gets near it. Past its own share a stream draws
# on one EXPANSION_ALLOWANCE for the whole run (a small file of one repeated line), so many small members cannot
# multiply it; when that is spent the stream stops and is named as not read in full.
MAX_EXPANSION = 256
EXPANSION_ALLOWANCE = 64 << 20


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


_TRIGGER_BYTES = re.compile(trigger_pattern().encode())
_GREP = shutil.which("grep")


def _grep_regex(trigger: str) -> str:
    # grep -E has no \d (GNU grep does have \b); the Python triggers use no other escape.
    return trigger.replace(r"\d", "[0-9]")


GREP_TRIGGERS = tuple(_grep_regex(t) for t in TRIGGERS)


def candidate_lines_python(stream: _Readable, first: bytes, tail: bytearray | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, line) for lines holding a trigger; lines are cut at MAX_LINE bytes."""
    carry = first
    lineno = 1
    skipping = False  # inside a line longer than MAX_LINE whose start was already handled
    while True:
        chunk = stream.read(CHUNK)
        if tail is not None and chunk:
            _keep_tail(tail, chunk)
        buf = carry + chunk
        if not chunk:
            end = len(buf)
        else:
            end = buf.rfind(b"\n") + 1
            if end == 0:
                if len(buf) > MAX_LINE:  # one enormous line: match its start once, drop the rest until its newline
                    if not skipping and _TRIGGER_BYTES.search(buf, 0, MAX_LINE):
                        yield lineno, buf[:MAX_LINE]
                    skipping = True
                    carry = b""
                else:
                    carry = buf
                continue
        counted = 0
        pos = 0
        if skipping:
            first_nl = buf.find(b"\n", 0, end)
            if first_nl < 0:  # the file ended inside the huge line
                return
            lineno += 1
            pos = counted = first_nl + 1
            skipping = False
        while pos < end:
            m = _TRIGGER_BYTES.search(buf, pos, end)
            if m is None:
                break
            start = buf.rfind(b"\n", 0, m.start()) + 1
            stop = buf.find(b"\n", m.end(), end)
            stop = end if stop < 0 else stop
            lineno += buf.count(b"\n", counted, start)
            counted = start
            yield lineno, buf[start:min(stop, start + MAX_LINE)]
            pos = stop + 1
        lineno += buf.count(b"\n", counted, end)
        carry = buf[end:]
        if not chunk:
            return


def _keep_tail(tail: bytearray, chunk: bytes) -> None:
    tail.extend(chunk[-TAIL:])
    if len(tail) > TAIL:
        del tail[: len(tail) - TAIL]


class LineCutter:
    """Cuts every line of a stream passing through to `limit` bytes, keeping its start and its newline.

    What grep is fed: its memory stays small whatever the line lengths, and line numbers hold. The work is linear in the
    bytes and not per line: a line longer than `limit` holds a whole window of `limit // 2` bytes without a newline on
    a grid of that step, and each window costs one `bytes.find` (which stops at the first newline).
    """

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self.run = 0  # bytes of the unfinished line already passed on (at most `limit`)

    def cut(self, data: bytes) -> bytes:
        limit, step = self.limit, max(1, self.limit // 2)
        first = data.find(b"\n")
        if first < 0:  # the unfinished line goes on
            keep = max(0, min(len(data), limit - self.run))
            self.run += keep
            return data[:keep]
        out = [data[:max(0, min(first, limit - self.run))]]
        pos = first  # data[pos:] still to be passed on; it starts at a newline
        last = data.rfind(b"\n")
        window = first + 1
        while window + step <= last:
            if data.find(b"\n", window, window + step) >= 0:
                window += step
                continue
            start = data.rfind(b"\n", 0, window) + 1
            end = data.find(b"\n", window + step)  # found: `last` is a newline past the window
            if end - start > limit:
                out.append(data[pos:start + limit])
                pos = end
            window = end + 1
        self.run = min(len(data) - last - 1, limit)
        out.append(data[pos:last + 1 + self.run])
        return b"".join(out)


def candidate_lines_grep(stream: _Readable, first: bytes, tail: bytearray) -> Iterator[tuple[int, bytes]]:
    """candidate_lines_python's lines, from a grep child that a thread feeds `first` and the rest of `stream`.

    The feed is cut into lines of at most MAX_LINE (LineCutter), so grep's memory stays bounded. `tail` gets what is
    read after `first`. An error reading the stream (a corrupt gzip, the expansion bound) is raised once grep has
    printed what came before it; grep failing is an OSError naming it (the stream cannot be read again).
    """
    assert _GREP is not None
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: grep never blocks on what it says
        proc = subprocess.Popen(_grep_args(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                                env={**os.environ, "LC_ALL": "C"}, preexec_fn=_limit_memory)
        assert proc.stdin is not None and proc.stdout is not None
        failed: list[BaseException] = []

        def feed(sink: IO[bytes]) -> None:
            cutter = LineCutter()
            try:
                data = first
                while data:
                    sink.write(cutter.cut(data))
                    data = stream.read(CHUNK)
                    _keep_tail(tail, data)
            except BrokenPipeError:
                pass  # grep is gone: its exit status says why
            except BaseException as exc:  # handed to the reading thread, which raises it
                failed.append(exc)
            finally:
                try:
                    sink.close()
                except BrokenPipeError:
                    pass

        feeder = threading.Thread(target=feed, args=(proc.stdin,), name="triage-grep-feed", daemon=True)
        feeder.start()
        done = False
        try:
            for raw in _bounded_lines(proc.stdout, MAX_LINE + 32):  # lines come in cut: room for the number
                number, _, text = raw.partition(b":")
                if number.isdigit():
                    yield int(number), text.rstrip(b"\n")[:MAX_LINE]
            done = True
        finally:
            if not done:  # the reader stopped early (an error, Ctrl-C): the feeder's next write fails, it stops
                proc.kill()
            proc.stdout.close()
            feeder.join()
            code = proc.wait()
        if failed:
            raise failed[0]
        if code not in (0, 1):
            errors.seek(0)
            said = errors.read(200).decode(errors="replace").strip()
            raise OSError(errno.EIO, f"grep failed (exit {code}{': ' + said if said else ''})")


def _limit_memory() -> None:  # runs in the grep child before exec
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = GREP_MEMORY if hard == resource.RLIM_INFINITY else min(GREP_MEMORY, hard)  # never above a cap we run under
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _grep_args(*extra: str) -> list[str]:
    assert _GREP is not None
    # -D skip: a path that became a FIFO, device or socket since we looked at it is not opened
    return [_GREP, "-a", "-n", "-D", "skip", *extra, "-E", "-e", "|".join(f"({t})" for t in GREP_TRIGGERS)]


_KINDS = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
          (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symbolic link, not followed"))


def special_kind(mode: int) -> str:
    """Why a path that is neither a regular file nor a directory is not read: `FIFO`, `socket`, ..."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


class NotRegularError(OSError):
    """The path turned out not to be a regular file when opened (it changed since it was listed)."""


def open_regular(path: Path, *, follow: bool = True) -> IO[bytes]:
    """Open a regular file for reading without ever blocking on a FIFO or device, nor following a link when not `follow`."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise NotRegularError(errno.ELOOP, "symbolic link, not followed") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularError(errno.EINVAL, special_kind(mode))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Reader:
    """Feeds every candidate line and every file tail of the given paths into one Extraction."""

    def __init__(self, ex: Extraction) -> None:
        self.ex = ex
        self.pending: list[tuple[str, Source, int]] = []  # plain files for the next grep batch, with their sizes
        self.use_grep = _GREP is not None
        self.allowance = _Allowance(EXPANSION_ALLOWANCE)

    # ------------------------------------------------------------------------------ entry point

    def read(self, paths: list[str | os.PathLike[str]]) -> None:
        for given in paths:
            path = Path(given)
            try:
                st = path.stat()  # a path given by the user: a link to a log is followed
            except OSError as exc:
                self.ex.cannot_read(f"{path}: {exc.strerror or exc}")
                continue
            try:
                if stat.S_ISDIR(st.st_mode):
                    self._dir(path)
                elif not stat.S_ISREG(st.st_mode):  # never opened: a FIFO would block, a device never end
                    self.ex.skip(f"{path}: {special_kind(st.st_mode)}")
                elif is_archive_name(path.name) and self._tar(path, follow=True):
                    continue
                else:
                    if self._record(PurePosixPath(path.name), lambda: open_regular(path), top=True):
                        continue
                    _, rank, local, device, pid = attribute_path_full(PurePosixPath(path.name), bundle=False)
                    self._file(path, self._source(str(path), None, rank, local, device, pid), follow=True)
            except NotRegularError as exc:
                self.ex.skip(f"{path}: {exc.strerror}")
            except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
                self.ex.cannot_read(f"{path}: {_why(exc)}")
        self._flush()

    def _source(self, file: str, node: str | None, rank: int | None, local: int | None, device: int | None,
                pid: int | None) -> Source:
        self.ex.order += 1
        return Source(file, node, rank, device, pid, local_rank=local, order=self.ex.order)

    # ------------------------------------------------------------------------------ containers

    def _dir(self, root: Path) -> None:
        def walk_error(exc: OSError) -> None:  # a subdirectory we cannot list may hold the answer
            self.ex.cannot_read(f"{exc.filename}: {exc.strerror or exc}")

        for dirpath, dirnames, filenames in os.walk(root, onerror=walk_error):  # never follows links to directories
            dirnames.sort()
            for filename in sorted(filenames):
                full = Path(dirpath) / filename
                try:
                    mode = full.lstat().st_mode
                except OSError as exc:
                    self.ex.cannot_read(f"{full}: {exc.strerror or exc}")
                    continue
                if not stat.S_ISREG(mode):  # FIFOs, sockets and devices would block or never end; links may leave the tree
                    self.ex.skip(f"{full}: {special_kind(mode)}")
                    continue
                rel = PurePosixPath(full.relative_to(root).as_posix())
                try:
                    if self._record(rel, lambda: open_regular(full, follow=False), top=len(rel.parts) == 1):
                        continue
                    if is_archive_name(filename) and self._tar(full, follow=False):
                        continue
                except NotRegularError as exc:
                    self.ex.skip(f"{full}: {exc.strerror}")
                    continue
                except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
                    self.ex.cannot_read(f"{full}: {_why(exc)}")
                    continue
                node, rank, local, device, pid = attribute_path_full(rel, bundle=True)
                self._file(full, self._source(str(full), node, rank, local, device, pid), follow=False)

    def _tar(self, path: Path, *, follow: bool) -> bool:
        """One streaming pass over an archive: each member read once, in order, nothing extracted, no seeking back.

        False when the file is no archive after all but may be a log (a gzipped log named .tgz, text): read it as a
        file. A compressed or binary file that is no readable archive is named as unreadable. Members are walked by
        layout.py's reader (archive.py's safe-member policy and caps; the archive's top folder dropped when it is named
        like the archive); what the policy refuses is named as skipped.
        """
        stem = path.name.split(".")[0]
        with open_regular(path, follow=follow) as raw:
            magic = raw.read(8192)
            raw.seek(0)
            if not tarfile.is_tarfile(raw):
                if magic.startswith(b"\x1f\x8b") or b"\0" not in magic and not magic.startswith(COMPRESSED_MAGIC):
                    return False
                self.ex.cannot_read(f"{path}: not a readable archive (truncated or corrupt)")
                return True
            raw.seek(0)
            size = os.fstat(raw.fileno()).st_size
            bounds: list[_Capped] = []  # the bound on the archive's decompressed stream, when it is compressed

            def bound(stream: io.BufferedIOBase) -> _Capped:
                bounds.append(_Capped(stream, size, self.allowance))
                return bounds[-1]

            archive = BundleArchive(raw, top=stem, wrap=bound,
                                    on_refused=lambda name, reason: self.ex.skip(f"{path.name}:{name}: {reason}"))
            try:
                for entry in archive:
                    rel = PurePosixPath(entry.path)
                    if self._record(rel, lambda: entry.stream, top=len(rel.parts) == 1):
                        continue
                    node, rank, local, device, pid = attribute_path_full(rel, bundle=True)
                    with entry.stream as fileobj:
                        self._stream(fileobj, self._source(f"{path.name}:{rel}", node, rank, local, device, pid),
                                     size=entry.size)
            except ArchiveCapError as exc:
                self.ex.cannot_read(f"{path}: {exc}")
                return True
            except _Expanded as exc:
                if not bounds or exc.stream is not bounds[0]:
                    raise
                self.ex.cannot_read(f"{path}: {exc}")
                return True
            if archive.problem:
                self.ex.cannot_read(f"{path}: {archive.problem}: the rest was not read")
        return True

    def _record(self, rel: PurePosixPath, opener: Callable[[], IO[bytes] | None], *, top: bool) -> bool:
        """collect's records feed the facts: job.json (exits, addresses), facts.json (addresses), summary.json (notes), a rank
        table (where each rank ran)."""
        name = rel.name
        if name == MANIFEST or (name.endswith(CSV_SUFFIX) and MSPROF_OUTPUT in rel.parts):
            return True
        member = capture_member(rel.parts)
        if member is not None:  # a stacks capture: judged whole at the end (engine), never scanned line by line
            if len(self.ex.stack_files) < MAX_STACK_FILES and (fileobj := opener()) is not None:
                with fileobj:
                    data = fileobj.read(STACK_FILE_BYTES + 1)
                node = attribute_path_full(rel, bundle=True)[0] if len(rel.parts) > 3 else None
                self.ex.stack_files.append((node or "-", member[0], member[1],
                                            data[:STACK_FILE_BYTES].decode("utf-8", "replace"), len(data), str(rel)))
            return True
        table = NAME_RX.search(name) is not None  # a rank table (the job's RANK_TABLE_FILE): where each rank ran, no log
        if not table and (name not in (JOB, FACTS, *SUMMARY_NAMES) or name in SUMMARY_NAMES and not top):
            return False
        fileobj = opener()
        if fileobj is None:
            return True
        with fileobj:
            data = fileobj.read(META_MAX_BYTES)
        try:
            doc = parse_json(data)
        except ValueError:
            doc = None
        if table:
            places = rank_places(doc)
            if places:
                self.ex.rank_places.extend(places)
            else:
                self.ex.notes.append(f"{rel}: named like a rank table, but no rank table was read from it")
        elif doc is None:
            self.ex.notes.append(f"{rel}: unreadable JSON")
        elif isinstance(doc, dict):
            if name == JOB and isinstance(doc.get("nodes"), list):
                self.ex.job = doc
            elif name == FACTS:
                _facts_addresses(self.ex, doc, rel.parts[0] if len(rel.parts) > 1 else None)
            elif name in SUMMARY_NAMES:
                self.ex.notes.extend(summary_notes(doc))
        return True

    # ------------------------------------------------------------------------------ files

    def _file(self, path: Path, src: Source, *, follow: bool) -> None:
        try:
            with open_regular(path, follow=follow) as raw:
                head = raw.read(2)
                if head == b"\x1f\x8b":
                    raw.seek(0)
                    self._stream(raw, src, size=os.fstat(raw.fileno()).st_size)
                    return
                first = head + raw.read(8190)
                if b"\0" in first:
                    return
                size = os.fstat(raw.fileno()).st_size
                raw.seek(max(0, size - TAIL))
                self.ex.tail(src, raw.read(TAIL))
                self.ex.files += 1
                self.ex.bytes_read += size
                if not self.use_grep:
                    raw.seek(0)
                    self._lines(src, candidate_lines_python(raw, b""))
                    return
        except NotRegularError as exc:
            self.ex.skip(f"{path}: {exc.strerror}")
            return
        except OSError as exc:
            self.ex.cannot_read(f"{path}: {exc.strerror or exc}")
            return
        # Plain files on disk go to grep in batches: one process per file would cost more than the scan itself.
        self.pending.append((str(path), src, size))
        if len(self.pending) >= GREP_BATCH:
            self._flush()

    def _stream(self, raw: IO[bytes], src: Source, *, size: int) -> None:
        """A file or member of `size` bytes read once as a stream: gunzipped within the expansion bound when it is gzip,
        its candidate lines from grep when it is long (Python's regex when short), its tail kept."""
        head = raw.read(2)
        stream: _Readable = raw
        capped = None
        if head == b"\x1f\x8b":
            stream = capped = _Capped(gzip.GzipFile(fileobj=_Prefixed(head, raw)), size, self.allowance)
            head = b""
        counter = _Counting(stream)
        try:
            first = head + stream.read(8192)
            if b"\0" in first:
                return
            self.ex.files += 1
            tail = bytearray()
            _keep_tail(tail, first)
            try:
                self._lines(src, self._candidates(counter, first, tail))
            finally:
                self.ex.bytes_read += len(first) + counter.count
                self.ex.tail(src, bytes(tail))
        except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
            self.ex.cannot_read(f"{src.file}: {_why(exc)}")
        except _Expanded as exc:
            if exc.stream is not capped:  # the archive around this member ran out: _tar names it
                raise
            self.ex.cannot_read(f"{src.file}: {exc}")

    def _candidates(self, stream: _Readable, first: bytes, tail: bytearray) -> Iterator[tuple[int, bytes]]:
        """Candidate lines of a stream: a short one through Python's regex, a long one through grep."""
        if not self.use_grep:
            return candidate_lines_python(stream, first, tail)
        more = stream.read(GREP_STREAM)
        _keep_tail(tail, more)
        if len(more) < GREP_STREAM:  # the whole stream is in hand (buffered reads return less only at its end)
            return candidate_lines_python(io.BytesIO(), first + more)
        return candidate_lines_grep(stream, first + more, tail)

    def _lines(self, src: Source, lines: Iterator[tuple[int, bytes]]) -> None:
        for number, data in lines:
            self.ex.line(src, number, data.decode("utf-8", "replace"))
        self.ex.flush_torchrun(src)

    def _flush(self) -> None:
        """The batched plain files through grep: split by size among up to one grep per core, run at once, their
        lines taken in batch order (`-Z`: the name ends at a NUL, so any name parses)."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        found: dict[bytes, list[tuple[int, str]]] = {}
        failed: list[tuple[str, Source]] = []
        greps = [_BatchGrep([path for path, _, _ in part]) for part in _by_size(batch, _grep_workers(batch))]
        readers = [threading.Thread(target=g.read, daemon=True) for g in greps[1:]]  # each pipe drained at once
        for reader in readers:
            reader.start()
        greps[0].read()
        for reader in readers:
            reader.join()
        sources = {path: src for path, src, _ in batch}
        for grep in greps:
            if grep.code in (0, 1):
                found.update(grep.seen)
                continue
            # grep failed (a line too long for its memory cap, an I/O error): read its files in Python, so that
            # "could not read" never turns into a clean verdict
            log.info("grep exited %s (%s); reading %d file(s) in Python", grep.code, grep.error.strip()[:200],
                     len(grep.paths))
            failed.extend((path, sources[path]) for path in grep.paths)
        unread = {path for path, _ in failed}
        for path, src, _ in batch:
            if path in unread:
                try:
                    with open_regular(Path(path)) as raw_file:
                        self._lines(src, candidate_lines_python(raw_file, b""))
                except OSError as exc:
                    self.ex.cannot_read(f"{path}: {exc.strerror or exc}")
                continue
            for lineno, line in found.get(path.encode(), ()):
                self.ex.line(src, lineno, line)
            self.ex.flush_torchrun(src)


GREP_SPLIT = 16 << 20  # bytes of a batch below which one grep reads it all (a second process would cost more than it saves)


def _grep_workers(batch: list[tuple[str, Source, int]]) -> int:
    """How many greps read a batch: one per core this process may run on, while each gets GREP_SPLIT bytes."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    total = sum(size for _, _, size in batch)
    return max(1, min(cores, len(batch), total // GREP_SPLIT))


def _by_size(batch: list[tuple[str, Source, int]], parts: int) -> list[list[tuple[str, Source, int]]]:
    """`batch` in `parts` groups of about equal bytes (largest first, each to the lightest group); none empty."""
    groups: list[list[tuple[str, Source, int]]] = [[] for _ in range(parts)]
    loads = [0] * parts
    for item in sorted(batch, key=lambda item: -item[2]):
        lightest = loads.index(min(loads))
        groups[lightest].append(item)
        loads[lightest] += item[2]
    return [group for group in groups if group]


class _BatchGrep:
    """One grep child over some files of a batch: its candidate lines by file name, its exit code and what it said."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.seen: dict[bytes, list[tuple[int, str]]] = {}
        self.code: int | None = None
        self.error = ""

    def read(self) -> None:
        names = {path.encode() for path in self.paths}
        args = [*_grep_args("-H", "-Z"), "--", *self.paths]
        with tempfile.TemporaryFile() as errors:  # a file, not a pipe: grep never blocks on what it says
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=errors,
                                    env={**os.environ, "LC_ALL": "C"}, preexec_fn=_limit_memory)
            assert proc.stdout is not None
            try:
                for raw in _bounded_lines(proc.stdout, MAX_LINE + 8192):  # room for the name and the line number
                    name, _, rest = raw.partition(b"\0")
                    number, _, text = rest.partition(b":")
                    if name not in names or not number.isdigit():
                        continue
                    self.seen.setdefault(name, []).append(
                        (int(number), text.rstrip(b"\n")[:MAX_LINE].decode("utf-8", "replace")))
            finally:
                proc.stdout.close()
                self.code = proc.wait()
            errors.seek(0)
            self.error = errors.read(4096).decode(errors="replace")


def _bounded_lines(stream: IO[bytes], limit: int) -> Iterator[bytes]:
    """Lines of `stream`, each cut at `limit` bytes (the rest of a longer line is read and dropped): bounded memory."""
    while True:
        line = stream.readline(limit)
        if not line:
            return
        if not line.endswith(b"\n"):
            rest = line
            while rest and not rest.endswith(b"\n"):
                rest = stream.readline(CHUNK)
        yield line


def _why(exc: BaseException) -> str:
    """An exception as a reader's reason: `Permission denied`, `Not a gzipped file (b'xx')`, `unexpected end of data`."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _facts_addresses(ex: Extraction, doc: dict[str, Any], node_dir: str | None) -> None:
    """A node's names and addresses from collect's facts.json, to map peers named by address to nodes."""
    node = doc.get("name") if isinstance(doc.get("name"), str) else node_dir
    if not node:
        return
    for key in ("host", "hostname"):
        value = doc.get(key)
        if isinstance(value, str) and value:
            ex.addresses.setdefault(value, node)
    for value in doc.get("addresses") or []:
        if isinstance(value, str):
            ex.addresses.setdefault(value, node)
    env = doc.get("job_env")
    if isinstance(env, dict):
        for key in ("HCCL_IF_IP", "NCCL_IF_IP"):
            if isinstance(env.get(key), str):
                ex.addresses.setdefault(env[key], node)


def summary_notes(doc: dict[str, Any]) -> list[str]:
    """Notes from collect's `summary.json`: topology outliers and msprof stragglers / communication-heavy ranks."""
    notes = []
    for topo in doc.get("topology") or []:
        if not isinstance(topo, dict):
            continue
        for outlier in topo.get("outliers") or []:
            if not isinstance(outlier, dict):
                continue
            cells = outlier.get("cells") or []
            notes.append(f"topology ({topo.get('tool')}): {outlier.get('node')} differs from the majority in {len(cells)} link(s)")
    msprof = doc.get("msprof")
    if isinstance(msprof, dict):
        if msprof.get("stragglers"):
            limit, rule = msprof.get("straggler_limit_us"), msprof.get("straggler_rule")
            if isinstance(limit, (int, float)) and isinstance(rule, dict):  # outliers.py's rule (summaries.STRAGGLER_RULE)
                spreads = rule.get("spreads")
                shown = f"{spreads:g}" if isinstance(spreads, (int, float)) else str(spreads)
                why = (f"step time above {limit / 1000:.2f} ms in both halves of their steps: {msprof.get('straggler_factor')}x "
                       f"and {shown} spreads over the healthy ranks' median")
            else:  # a summary.json of an older ascendctl: one factor over the median
                why = f"step time above {msprof.get('straggler_factor')}x the median"
            notes.append(f"msprof: straggler rank(s) {msprof['stragglers']} ({why})")
        if msprof.get("comm_flagged"):
            notes.append(f"msprof: rank(s) {msprof['comm_flagged']} spend more than {msprof.get('comm_limit')} of a step communicating")
    return notes


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


class _Counting:
    """Counts the bytes read through it (for throughput figures)."""

    def __init__(self, stream: _Readable) -> None:
        self._stream = stream
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        return data


class _Allowance:
    """The run's one EXPANSION_ALLOWANCE: bytes that compressed streams may expand past their own share."""

    def __init__(self, left: int) -> None:
        self.left = left


class _Expanded(Exception):
    """A compressed stream expanded past its bound (MAX_EXPANSION times its size, then the run's allowance)."""

    def __init__(self, stream: "_Capped") -> None:
        super().__init__(f"expands more than {MAX_EXPANSION}-fold (a decompression bomb?): stopped after {stream.count:,} "
                         f"bytes from {stream.size:,} compressed: the rest was not read")
        self.stream = stream


class _Capped:
    """A decompressed stream that raises _Expanded once it has given more than its bound (reads must name a size)."""

    def __init__(self, stream: _Readable, size: int, allowance: _Allowance) -> None:
        self._stream = stream
        self.size = size
        self._share = MAX_EXPANSION * size
        self._allowance = allowance
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        if size < 0:  # read(-1) would decompress everything before the bound is looked at
            raise ValueError("a capped stream is read in pieces of a given size")
        data = self._stream.read(size)
        past = self.count + len(data) - max(self.count, self._share)  # what this read takes beyond the stream's own share
        if past > 0:
            if past > self._allowance.left:
                self._allowance.left = 0
                raise _Expanded(self)  # this piece is dropped: `count` is what was given
            self._allowance.left -= past
        self.count += len(data)
        return data

