"""Reading for triage: bundles (.tar.gz members as streams), directories, plain and gzip files, each read once.

Owns the prefilter (`grep -E` over the signature triggers, a pure-Python pass when grep is
missing or fails), the line-length cap, the tail kept for progress, and collect's own records
(job.json, facts.json, summary.json) that feed the facts rather than the signatures.
Must not import typer or rich.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import re
import resource
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO, Any, Callable, Iterator, Protocol

from ..signatures import TRIGGERS, trigger_pattern
from .extract import Extraction, attribute_path_full
from .model import Source

log = logging.getLogger(__name__)

CHUNK = 1 << 20
MAX_LINE = 64 * 1024  # longer lines are cut: their start is still matched, and memory stays bounded
TAIL = 64 * 1024  # bytes of each file's end kept to find its last training step
GREP_BATCH = 256  # plain files per grep process
GREP_MEMORY = 1 << 30  # address-space cap of a grep child; past it grep fails and Python reads the files instead


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


def _limit_memory() -> None:  # runs in the grep child before exec
    resource.setrlimit(resource.RLIMIT_AS, (GREP_MEMORY, GREP_MEMORY))


def _grep_args(*extra: str) -> list[str]:
    assert _GREP is not None
    return [_GREP, "-a", "-n", *extra, "-E", "-e", "|".join(f"({t})" for t in GREP_TRIGGERS)]


class Reader:
    """Feeds every candidate line and every file tail of the given paths into one Extraction."""

    def __init__(self, ex: Extraction) -> None:
        self.ex = ex
        self.pending: list[tuple[str, Source]] = []
        self.use_grep = _GREP is not None

    # ------------------------------------------------------------------------------ entry point

    def read(self, paths: list[str | os.PathLike[str]]) -> None:
        for given in paths:
            path = Path(given)
            try:
                st = path.stat()
            except OSError as exc:
                self.ex.unreadable.append(f"{path}: {exc.strerror or exc}")
                continue
            try:
                if stat.S_ISDIR(st.st_mode):
                    self._dir(path)
                elif not stat.S_ISREG(st.st_mode):
                    self.ex.skipped.append(f"{path}: not a regular file")
                elif path.name.endswith((".tar.gz", ".tgz", ".tar", ".tar.xz", ".tar.bz2")) and tarfile.is_tarfile(path):
                    self._tar(path)
                else:
                    if self._record(PurePosixPath(path.name), lambda: path.open("rb"), top=True):
                        continue
                    _, rank, local, device, pid = attribute_path_full(PurePosixPath(path.name), bundle=False)
                    self._file(path, self._source(str(path), None, rank, local, device, pid))
            except (OSError, tarfile.TarError, EOFError) as exc:
                self.ex.unreadable.append(f"{path}: {exc}")
        self._flush()

    def _source(self, file: str, node: str | None, rank: int | None, local: int | None, device: int | None,
                pid: int | None) -> Source:
        self.ex.order += 1
        return Source(file, node, rank, device, pid, local_rank=local, order=self.ex.order)

    # ------------------------------------------------------------------------------ containers

    def _dir(self, root: Path) -> None:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for filename in sorted(filenames):
                full = Path(dirpath) / filename
                try:
                    mode = full.lstat().st_mode
                except OSError as exc:
                    self.ex.unreadable.append(f"{full}: {exc.strerror or exc}")
                    continue
                if not stat.S_ISREG(mode):  # FIFOs, sockets and devices would block or never end; links may leave the tree
                    if not stat.S_ISLNK(mode):
                        self.ex.skipped.append(f"{full}: not a regular file")
                    continue
                rel = PurePosixPath(full.relative_to(root).as_posix())
                if self._record(rel, lambda: full.open("rb"), top=len(rel.parts) == 1):
                    continue
                if filename.endswith((".tar.gz", ".tgz", ".tar")):
                    try:
                        self._tar(full)
                    except (OSError, tarfile.TarError, EOFError) as exc:
                        self.ex.unreadable.append(f"{full}: {exc}")
                    continue
                node, rank, local, device, pid = attribute_path_full(rel, bundle=True)
                self._file(full, self._source(str(full), node, rank, local, device, pid))

    def _tar(self, path: Path) -> None:
        stem = path.name.split(".")[0]
        with tarfile.open(path, mode="r|*") as tar:  # stream mode: each member read once, nothing extracted
            for member in tar:
                if not member.isfile():
                    continue
                rel = PurePosixPath(member.name.lstrip("./") or member.name)
                if len(rel.parts) > 1 and rel.parts[0] == stem:
                    rel = PurePosixPath(*rel.parts[1:])
                if self._record(rel, lambda: tar.extractfile(member), top=len(rel.parts) == 1):
                    continue
                node, rank, local, device, pid = attribute_path_full(rel, bundle=True)
                fileobj = tar.extractfile(member)
                if fileobj is None:
                    continue
                with fileobj:
                    self._stream(fileobj, self._source(f"{path.name}:{rel}", node, rank, local, device, pid))

    def _record(self, rel: PurePosixPath, opener: Callable[[], IO[bytes] | None], *, top: bool) -> bool:
        """collect's records feed the facts: job.json (exits, addresses), facts.json (addresses), summary.json (notes)."""
        name = rel.name
        if name == "manifest.json" or (name.endswith(".csv") and "mindstudio_profiler_output" in rel.parts):
            return True
        if name not in ("job.json", "facts.json", "summary.json", "summaries.json"):
            return False
        if name in ("summary.json", "summaries.json") and not top:
            return False
        fileobj = opener()
        if fileobj is None:
            return True
        with fileobj:
            data = fileobj.read(16 << 20)
        try:
            doc = json.loads(data)
        except ValueError:
            self.ex.notes.append(f"{rel}: unreadable JSON")
            return True
        if not isinstance(doc, dict):
            return True
        if name == "job.json" and isinstance(doc.get("nodes"), list):
            self.ex.job = doc
        elif name == "facts.json":
            _facts_addresses(self.ex, doc, rel.parts[0] if len(rel.parts) > 1 else None)
        elif name in ("summary.json", "summaries.json"):
            self.ex.notes.extend(summary_notes(doc))
        return True

    # ------------------------------------------------------------------------------ files

    def _file(self, path: Path, src: Source) -> None:
        try:
            with path.open("rb") as raw:
                head = raw.read(2)
                if head == b"\x1f\x8b":
                    raw.seek(0)
                    self._stream(raw, src)
                    return
                first = head + raw.read(8190)
                if b"\0" in first:
                    return
                size = os.fstat(raw.fileno()).st_size
                raw.seek(max(0, size - TAIL))
                self.ex.tail(src, raw.read(TAIL))
        except OSError as exc:
            self.ex.unreadable.append(f"{path}: {exc.strerror or exc}")
            return
        self.ex.files += 1
        self.ex.bytes_read += size
        if not self.use_grep:
            with path.open("rb") as raw:
                self._lines(src, candidate_lines_python(raw, b""))
            return
        # Plain files on disk go to grep in batches: one process per file would cost more than the scan itself.
        self.pending.append((str(path), src))
        if len(self.pending) >= GREP_BATCH:
            self._flush()

    def _stream(self, raw: IO[bytes], src: Source) -> None:
        head = raw.read(2)
        stream: IO[bytes] = raw
        if head == b"\x1f\x8b":
            stream = gzip.GzipFile(fileobj=_Prefixed(head, raw))  # type: ignore[assignment]
            head = b""
        try:
            first = head + stream.read(8192)
        except (OSError, EOFError) as exc:
            self.ex.unreadable.append(f"{src.file}: {exc}")
            return
        if b"\0" in first:
            return
        self.ex.files += 1
        tail = bytearray()
        _keep_tail(tail, first)
        counter = _Counting(stream)
        try:
            self._lines(src, candidate_lines_python(counter, first, tail))
        except (OSError, EOFError, tarfile.TarError) as exc:
            self.ex.unreadable.append(f"{src.file}: {exc}")
        self.ex.bytes_read += len(first) + counter.count
        self.ex.tail(src, bytes(tail))

    def _lines(self, src: Source, lines: Iterator[tuple[int, bytes]]) -> None:
        for number, data in lines:
            self.ex.line(src, number, data.decode("utf-8", "replace"))
        self.ex.flush_torchrun(src)

    def _flush(self) -> None:
        """One grep over the batched plain files (`-Z`: the name ends at a NUL, so any name parses)."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        contexts = {path.encode(): src for path, src in batch}
        args = [*_grep_args("-H", "-Z"), "--", *(p for p, _ in batch)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env={**os.environ, "LC_ALL": "C"}, preexec_fn=_limit_memory)
        assert proc.stdout is not None and proc.stderr is not None
        seen: dict[bytes, list[tuple[int, str]]] = {}
        err = b""
        try:
            for raw in proc.stdout:
                name, _, rest = raw.partition(b"\0")
                number, _, text = rest.partition(b":")
                if name not in contexts or not number.isdigit():
                    continue
                seen.setdefault(name, []).append((int(number), text.rstrip(b"\n")[:MAX_LINE].decode("utf-8", "replace")))
        finally:
            proc.stdout.close()
            err = proc.stderr.read()
            proc.stderr.close()
            code = proc.wait()
        if code not in (0, 1):
            # grep failed (a line too long for its memory cap, an I/O error): read every file of the batch in Python,
            # so that "could not read" never turns into a clean verdict
            log.info("grep exited %s (%s); reading %d file(s) in Python", code, err.decode(errors="replace").strip()[:200],
                     len(batch))
            for path, src in batch:
                try:
                    with open(path, "rb") as raw_file:
                        self._lines(src, candidate_lines_python(raw_file, b""))
                except OSError as exc:
                    self.ex.unreadable.append(f"{path}: {exc.strerror or exc}")
            return
        for path, src in batch:
            for lineno, line in seen.get(path.encode(), ()):
                self.ex.line(src, lineno, line)
            self.ex.flush_torchrun(src)


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
            notes.append(f"msprof: straggler rank(s) {msprof['stragglers']} (step time above "
                         f"{msprof.get('straggler_factor')}x the median)")
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

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        return data

