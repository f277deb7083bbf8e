"""Hostile inputs to `ascendctl triage` (issues #13, #30): huge lines, FIFOs, devices, sockets, archives of many
files, inputs that cannot be read, hostile archive members, decompression bombs. Every hostile file is made here,
small on disk.

Subprocess runs carry a generous `timeout` as a hang guard only (a FIFO opened for reading blocks forever);
nothing here asserts a speed: bench/triage_inputs.py measures that.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Any

import pytest

import ascendctl.bundle.archive as archive_policy
import ascendctl.triage.reader as reader
from ascendctl.errors import AscendctlError, ExitCode
from ascendctl.triage.signatures import Category
from ascendctl.triage import triage
from ascendctl.triage.extract import LISTED

HANG_GUARD = 300  # seconds; only there so that a hang fails the test instead of the whole run
OOM = "[rank{r}]: RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB 2024-01-01 12:00:0{s}"
TIMEOUT = "[rank{r}]: RuntimeError: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)"


def run_triage(*paths: Path | str, memory: int | None = None, user: int | None = None,
               timeout: float = HANG_GUARD) -> tuple[int, dict[str, Any], str]:
    """`python -m ascendctl triage --json PATHS` in a child, optionally under an address-space cap or as another user."""
    argv = [sys.executable, "-m", "ascendctl", "triage", "--json", *map(str, paths)]
    if memory is not None:
        argv = ["prlimit", f"--as={memory}", "--", *argv]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, doc, proc.stderr


def rank_log(path: Path, rank: int, *, oom: bool) -> Path:
    lines = [f"[rank{rank}]: iteration {i} | lm loss: 2.1 2024-01-01 11:00:0{i}" for i in range(5)]
    lines.append(OOM.format(r=rank, s=1) if oom else TIMEOUT.format(r=rank))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def job_dir(root: Path) -> Path:
    """A two-node job where rank 1 on n1 runs out of device memory and rank 0 on n0 times out."""
    rank_log(root / "n0" / "rank0.log", 0, oom=False)
    rank_log(root / "n1" / "rank1.log", 1, oom=True)
    return root


def gzip_of_one_huge_line(path: Path, start: bytes, size: int) -> None:
    """A gzip holding `start`, then `size` bytes of one line: a few MB on disk for a GB line."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: gzip framing
    block = b"x" * (1 << 20)
    with path.open("wb") as out:
        out.write(comp.compress(start))
        for _ in range(size >> 20):
            out.write(comp.compress(block))
        out.write(comp.compress(b"\n[rank0]: iteration 9 | lm loss: 2.0\n"))
        out.write(comp.flush())


# ------------------------------------------------------------------------------------------ huge lines


def test_a_gigabyte_line_in_a_gzip_gives_the_verdict_of_its_start_under_a_memory_cap(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log.gz"
    gzip_of_one_huge_line(path, OOM.format(r=0, s=1).encode() + b" ", 5 << 28)  # 1.25 GiB line > the 1 GiB cap
    assert path.stat().st_size < 8 << 20
    code, doc, err = run_triage(path, memory=1 << 30)
    assert code == 0, err
    assert doc["category"] == "OOM" and doc["first_failure"]["line"] == 1, doc
    assert doc["first_failure"]["signature"] == "device.oom"
    assert len(doc["first_failure"]["text"]) < 64 * 1024
    assert doc["bytes_read"] > 5 << 28 and doc["unreadable"] == []


def test_a_huge_plain_line_that_grep_prints_whole_is_cut_and_grep_stays_under_our_cap(tmp_path: Path) -> None:
    # grep sees the plain file; its 96 MiB matching line comes back through the pipe and must be cut, and the
    # grep child's own 1 GiB cap must not be set above the 512 MiB we run under (setrlimit would refuse).
    path = tmp_path / "rank0.log"
    with path.open("wb") as out:
        out.write(b"[rank0]: iteration 3 | lm loss: 2.1\n" + OOM.format(r=0, s=1).encode() + b" ")
        for _ in range(96):
            out.write(b"y" * (1 << 20))
        out.write(b"\n")
    code, doc, err = run_triage(path, memory=512 << 20)
    assert code == 0, err
    assert doc["category"] == "OOM" and doc["first_failure"]["line"] == 2, doc
    assert len(doc["first_failure"]["text"]) < 64 * 1024


# ---------------------------------------------------------------------------------- decompression bombs

BOMB_GUARD = 60  # seconds: generous for what the bound lets through (seconds of grep), far below the old minutes


def gzip_of(unit: bytes, size: int, level: int = 9) -> bytes:
    """`size` bytes of `unit` repeated, gzipped: a 1 GiB of newlines is about 1 MB (deflate's 1032:1 at its limit)."""
    comp = zlib.compressobj(level, zlib.DEFLATED, 31)
    block = unit * ((1 << 20) // len(unit))
    out = [comp.compress(block) for _ in range(size // len(block))]
    return b"".join(out) + comp.flush()


def test_a_gzip_bomb_of_empty_lines_is_read_to_its_bound_in_bounded_time_and_named(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log.gz"
    path.write_bytes(gzip_of(b"\n", 1 << 30))  # 1 GiB of empty lines
    size = path.stat().st_size
    assert size < 2 << 20
    code, doc, err = run_triage(path, timeout=BOMB_GUARD)
    assert code == ExitCode.CHECKS_FAILED, err
    (unread,) = doc["unreadable"]
    assert unread.startswith(f"{path}: expands more than {reader.MAX_EXPANSION}-fold")
    assert unread.endswith("the rest was not read")
    assert doc["bytes_read"] <= reader.MAX_EXPANSION * size + reader.EXPANSION_ALLOWANCE
    assert doc["category"] == "UNKNOWN" and doc["files_read"] == 1


def test_a_bomb_member_stops_its_archive_and_names_it_after_what_came_before(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    with archive.open("wb") as out:  # the tar stream gzipped by hand: a 512 MiB member costs no memory to build
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)
        oom = (OOM.format(r=1, s=1) + "\n").encode()
        first = tarfile.TarInfo("bundle/n1/rank1.log")
        first.size = len(oom)
        bomb = tarfile.TarInfo("bundle/n0/rank0.log")
        bomb.size = 512 << 20
        out.write(comp.compress(first.tobuf() + oom + b"\0" * (-len(oom) % 512) + bomb.tobuf()))
        block = b"\n" * (1 << 20)
        for _ in range(bomb.size >> 20):
            out.write(comp.compress(block))
        out.write(comp.compress(b"\0" * 1024) + comp.flush())  # the end-of-archive blocks
    code, doc, err = run_triage(archive, timeout=BOMB_GUARD)
    assert code == ExitCode.CHECKS_FAILED, err
    assert doc["category"] == "OOM" and doc["first_failure"]["rank"] == 1
    (unread,) = doc["unreadable"]
    assert unread.startswith(f"{archive}: expands more than {reader.MAX_EXPANSION}-fold"), unread


def test_many_small_bombs_share_one_allowance_and_each_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "EXPANSION_ALLOWANCE", 8 << 20, raising=False)
    archive = tmp_path / "bombs.tar"
    bomb = gzip_of(b"\n", 2 << 20)  # 2 MiB from ~2 KB: its own share is 256 times that, the rest from the allowance
    with tarfile.open(archive, "w") as tar:
        _member(tar, "bombs/n0/rank0.log", (TIMEOUT.format(r=0) + "\n").encode())
        for i in range(20):
            _member(tar, f"bombs/n0/part{i:02d}.log.gz", bomb)
    report = triage([archive])
    assert report.category is Category.COMM_TIMEOUT and report.exit_code == ExitCode.CHECKS_FAILED
    assert report.unreadable and all(u.startswith("bombs.tar:n0/part") and "expands more than 256-fold" in u
                                     for u in report.unreadable)
    assert report.bytes_read <= 256 * archive.stat().st_size + (8 << 20)  # not 20 x 2 MiB
    assert len(report.unreadable) >= 15


def test_gzip_as_dense_as_deflates_fastest_level_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real log never reaches the bound: even one repeated line at gzip -1 (about 230:1) is read to its end."""
    monkeypatch.setattr(reader, "EXPANSION_ALLOWANCE", 0, raising=False)  # the file's own share alone
    unit = b"[rank0]: iteration 1 | lm loss: 2.1 | nothing to see here\n"
    path = tmp_path / "rank0.log.gz"
    path.write_bytes(gzip_of(unit, 64 << 20, level=1)
                     + gzip.compress((OOM.format(r=0, s=1) + "\n").encode()))  # a second gzip member, as `cat a.gz b.gz`
    lines = (64 << 20) // ((1 << 20) // len(unit) * len(unit)) * ((1 << 20) // len(unit))
    report = triage([path])
    assert report.unreadable == () and report.category is Category.OOM
    assert report.first_failure is not None and report.first_failure.line == lines + 1


def test_a_flood_of_one_candidate_line_is_matched_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ascendctl.triage.extract as extract

    calls = 0
    match_line = extract.match_line

    def counting(text: str) -> Any:
        nonlocal calls
        calls += 1
        return match_line(text)

    monkeypatch.setattr(extract, "match_line", counting)
    path = tmp_path / "rank0.log"
    path.write_text("Error: retrying\n" * 200_000 + OOM.format(r=0, s=1) + "\n")
    report = triage([path])
    assert report.category is Category.OOM and report.first_failure is not None
    assert report.first_failure.line == 200_001
    assert calls < 10  # not 200,000 times the whole signature table


# -------------------------------------------------------------------------------- long streams go to grep


def _reference_cut(data: bytes, limit: int) -> bytes:
    return b"\n".join(line[:limit] for line in data.split(b"\n"))


def test_the_line_cutter_grep_is_fed_through_cuts_lines_wherever_the_pieces_end() -> None:
    import random

    rng = random.Random(30)
    for _ in range(2000):
        limit = rng.choice([1, 2, 3, 8, 64])
        pieces = [rng.choice([b"\n" * rng.randint(1, 4), b"x" * rng.randint(0, limit * 4)]) for _ in range(rng.randint(0, 30))]
        data = b"".join(pieces)
        cutter, out, pos = reader.LineCutter(limit), [], 0
        while pos < len(data):
            step = rng.randint(1, limit * 3)
            out.append(cutter.cut(data[pos:pos + step]))
            pos += step
        assert b"".join(out) == _reference_cut(data, limit), (limit, data)


def test_a_long_gzip_stream_gives_the_same_lines_through_grep_as_through_python(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [f"[rank{i % 8}]: iteration {i} | lm loss: 2.1" for i in range(40_000)]
    lines[31_337] = OOM.format(r=5, s=1)
    lines[12_000] = TIMEOUT.format(r=2) + " " + "y" * 200_000  # a line past the 64 KiB cut
    path = tmp_path / "rank.log.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    through_grep = triage([path]).to_dict()
    monkeypatch.setattr(reader, "_GREP", None)
    assert triage([path]).to_dict() == through_grep
    assert through_grep["first_failure"]["line"] == 31_338


# ------------------------------------------------------------------------------ FIFOs, devices, sockets


def test_a_fifo_in_a_directory_and_given_directly_is_skipped_never_opened(tmp_path: Path) -> None:
    root = job_dir(tmp_path / "job")
    os.mkfifo(root / "n0" / "pipe.log")
    os.mkfifo(tmp_path / "direct.fifo")
    code, doc, err = run_triage(root, tmp_path / "direct.fifo")
    assert code == 0, err
    assert doc["category"] == "OOM" and doc["first_failure"]["rank"] == 1
    assert f"{root / 'n0' / 'pipe.log'}: FIFO" in doc["skipped"]
    assert f"{tmp_path / 'direct.fifo'}: FIFO" in doc["skipped"]


def test_character_devices_given_directly_are_skipped(tmp_path: Path) -> None:
    root = job_dir(tmp_path / "job")
    code, doc, err = run_triage(root, "/dev/zero", "/dev/null")  # /dev/zero would never end
    assert code == 0, err
    assert doc["skipped"] == ["/dev/zero: character device", "/dev/null: character device"]
    assert doc["category"] == "OOM"


def test_a_socket_in_a_directory_and_given_directly_is_skipped(tmp_path: Path) -> None:
    root = job_dir(tmp_path / "job")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "n1" / "agent.sock"))
        code, doc, err = run_triage(root, root / "n1" / "agent.sock")
    assert code == 0, err
    assert doc["skipped"].count(f"{root / 'n1' / 'agent.sock'}: socket") == 2
    assert doc["category"] == "OOM"


def test_only_special_files_is_an_error_that_names_them_and_prints_no_category(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "only.fifo")
    code, doc, err = run_triage(tmp_path / "only.fifo", "/dev/zero")
    assert code == ExitCode.ERROR
    assert "nothing could be read" in err and "only.fifo: FIFO" in err and "/dev/zero: character device" in err
    assert "category" not in doc


def test_symlinks_inside_a_directory_are_not_followed(tmp_path: Path) -> None:
    outside = rank_log(tmp_path / "outside" / "rank5.log", 5, oom=True)
    root = tmp_path / "job"
    rank_log(root / "n0" / "rank0.log", 0, oom=False)
    (root / "n0" / "rank5.log").symlink_to(outside)
    report = triage([root])
    assert report.category is Category.COMM_TIMEOUT
    assert f"{root / 'n0' / 'rank5.log'}: symbolic link, not followed" in report.skipped


def test_skipped_inputs_past_the_listing_cap_are_counted(tmp_path: Path) -> None:
    root = job_dir(tmp_path / "job")
    for i in range(LISTED + 7):
        os.mkfifo(root / f"p{i:03d}")
    report = triage([root])
    assert len(report.skipped) == LISTED + 1 and report.skipped[-1] == "... and 7 more"


# ------------------------------------------------------------------------------------- many small files


def test_a_tar_gz_of_20000_small_files_gives_the_same_verdict_as_the_directory(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    for i in range(20_000):
        node = f"n{i % 8}"
        path = root / node / f"w{i}" / "worker.log"
        path.parent.mkdir(parents=True)
        if i == 12_345:
            rank_log(path, 3, oom=True)
        else:
            path.write_text(f"[rank{i % 8}]: iteration {i} | lm loss: 2.1\n" + (TIMEOUT.format(r=i % 8) + "\n" if i % 997 == 0 else ""))
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(root, arcname="bundle")
    from_dir, from_tar = triage([root]), triage([archive])
    assert from_dir.files_read == from_tar.files_read == 20_000
    assert (from_tar.category, from_tar.rule, from_tar.culprit_node, from_tar.culprit_rank) == \
        (from_dir.category, from_dir.rule, from_dir.culprit_node, from_dir.culprit_rank) == (Category.OOM, "own_error", "n1", 3)
    assert from_tar.first_failure is not None and from_dir.first_failure is not None
    assert from_tar.first_failure.text == from_dir.first_failure.text and from_tar.first_failure.line == from_dir.first_failure.line
    assert len(from_tar.findings) == len(from_dir.findings)
    assert from_tar.unreadable == from_dir.unreadable == ()


# ------------------------------------------------------------------------------------ could not be read


def test_a_corrupt_gzip_beside_good_logs_is_named_and_exits_3(tmp_path: Path) -> None:
    root = job_dir(tmp_path / "job")
    good = gzip.compress(b"[rank2]: iteration 1\n" * 1000)
    (root / "n1" / "rank2.log.gz").write_bytes(good[:40] + b"\xff" * 64 + good[104:])
    code, doc, err = run_triage(root)
    assert code == ExitCode.CHECKS_FAILED, err
    assert doc["category"] == "OOM" and doc["status"] == "partial"
    assert [u.split(":")[0] for u in doc["unreadable"]] == [str(root / "n1" / "rank2.log.gz")]
    assert doc["errors"][0]["code"] == "unreadable"
    assert "could not be read" in doc["hints"][0]


def test_only_a_corrupt_gzip_is_exit_1_with_no_category(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"not deflate data at all")
    code, doc, err = run_triage(path)
    assert code == ExitCode.ERROR
    assert "nothing could be read" in err and "rank0.log.gz" in err
    assert "category" not in doc


def _tar_bytes(root: Path, compress: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=f"w:{compress}") as tar:
        tar.add(root, arcname="bundle")
    return buf.getvalue()


@pytest.mark.parametrize("compress", ["gz", "xz", "bz2"])
def test_a_truncated_compressed_tar_is_named_and_exits_3(tmp_path: Path, compress: str) -> None:
    root = job_dir(tmp_path / "job")
    for i in range(40):  # incompressible filler, so that the cut lands after the first members
        (root / "n0" / f"filler{i:02d}.log").write_bytes(os.urandom(4096).hex().encode())
    data = _tar_bytes(root, compress)
    archive = tmp_path / f"bundle.tar.{compress}"
    archive.write_bytes(data[: len(data) * 2 // 3])
    code, doc, err = run_triage(archive)
    if compress == "bz2":  # one 900 kB bz2 block holds the whole archive: cut, nothing of it can be decompressed
        assert code == ExitCode.ERROR and f"{archive}: not a readable archive" in err and "category" not in doc
        return
    assert code == ExitCode.CHECKS_FAILED, err
    assert len(doc["unreadable"]) >= 1 and all(u.startswith(str(archive)) or u.startswith(archive.name) for u in doc["unreadable"])
    assert doc["files_read"] >= 1


@pytest.mark.parametrize("cut", ["member boundary", "inside a header", "inside member data"])
def test_a_truncated_plain_tar_is_named_and_exits_3(tmp_path: Path, cut: str) -> None:
    root = job_dir(tmp_path / "job")
    data = _tar_bytes(root, "")
    # members: dirs bundle, bundle/n0, file n0/rank0.log, bundle/n1, file n1/rank1.log; each file is 512 + 512
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        offsets = [m.offset for m in tar.getmembers()]
    end = {"member boundary": offsets[-1], "inside a header": offsets[-1] + 100, "inside member data": offsets[-2] + 600}[cut]
    archive = tmp_path / "bundle.tar"
    archive.write_bytes(data[:end])
    code, doc, err = run_triage(archive)
    assert code == ExitCode.CHECKS_FAILED, err
    assert [u.split(":")[0] for u in doc["unreadable"]] == [str(archive)], doc["unreadable"]


def test_a_file_we_may_not_read_is_named_and_exits_3(tmp_path: Path) -> None:
    shared = Path(tempfile.mkdtemp(prefix="asct-triage-perm-"))  # pytest's tmp_path is closed to other users
    try:
        shared.chmod(0o755)
        root = job_dir(shared / "job")
        for directory in (root, root / "n0", root / "n1"):
            directory.chmod(0o755)
        for log in root.rglob("*.log"):
            log.chmod(0o644)
        secret = rank_log(root / "n0" / "rank7.log", 7, oom=True)
        secret.chmod(0o600)  # root's: `nobody` may not read it
        code, doc, err = run_triage(root, user=65534)
        assert code == ExitCode.CHECKS_FAILED, err
        assert doc["unreadable"] == [f"{secret}: Permission denied"]
        assert doc["category"] == "OOM" and doc["first_failure"]["rank"] == 1
    finally:
        shutil.rmtree(shared)


def test_grep_dying_falls_back_to_python_and_the_verdict_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = job_dir(tmp_path / "job")
    expected = triage([root]).to_dict()
    dying = tmp_path / "grep"
    dying.write_text("#!/bin/sh\nkill -KILL $$\n")
    dying.chmod(0o755)
    monkeypatch.setattr(reader, "_GREP", str(dying))
    assert triage([root]).to_dict() == expected


def test_grep_dying_on_a_long_stream_names_the_stream_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = job_dir(tmp_path / "job")  # plain files: read again in Python when grep fails
    stream = root / "n0" / "rank4.log.gz"  # a stream cannot be read twice: named, never a clean verdict
    stream.write_bytes(gzip.compress("".join(f"[rank4]: iteration {i}\n" for i in range(20_000)).encode()))
    dying = tmp_path / "grep"
    dying.write_text("#!/bin/sh\nkill -KILL $$\n")
    dying.chmod(0o755)
    monkeypatch.setattr(reader, "_GREP", str(dying))
    report = triage([root])
    assert report.unreadable == (f"{stream}: grep failed (exit -9)",)
    assert report.category is Category.OOM and report.exit_code == ExitCode.CHECKS_FAILED


def test_an_unlistable_directory_is_named(tmp_path: Path) -> None:
    shared = Path(tempfile.mkdtemp(prefix="asct-triage-perm-"))
    try:
        shared.chmod(0o755)
        root = job_dir(shared / "job")
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (root / "n1").chmod(0o700)
        code, doc, err = run_triage(root, user=65534)
        assert code == ExitCode.CHECKS_FAILED, err
        assert doc["unreadable"] == [f"{root / 'n1'}: Permission denied"]
        assert doc["category"] == "COMM_TIMEOUT"
    finally:
        shutil.rmtree(shared)


# ----------------------------------------------------------------------------------- hostile archives


def _member(tar: tarfile.TarFile, name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, len(data)
    tar.addfile(info, io.BytesIO(data) if data else None)


def test_hostile_archive_members_are_skipped_with_their_reason_and_never_followed(tmp_path: Path) -> None:
    oom = (OOM.format(r=9, s=0) + "\n").encode()
    archive = tmp_path / "bundle.tar.gz"
    work = tmp_path / "work"
    work.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        _member(tar, "bundle/n0/rank0.log", (TIMEOUT.format(r=0) + "\n").encode())
        _member(tar, "/etc/rank9.log", oom)
        _member(tar, "bundle/../../escape/rank9.log", oom)
        _member(tar, "bundle/n0/passwd.log", kind=tarfile.SYMTYPE, link="/etc/passwd")
        _member(tar, "bundle/n0/hard.log", kind=tarfile.LNKTYPE, link="/etc/shadow")
        _member(tar, "bundle/n0/fifo.log", kind=tarfile.FIFOTYPE)
        _member(tar, "bundle/n0/zero.log", kind=tarfile.CHRTYPE)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    report = triage([archive])
    assert report.category is Category.COMM_TIMEOUT  # the OOM lines live only in members that were not read
    assert set(report.skipped) == {
        "bundle.tar.gz:/etc/rank9.log: absolute path",
        "bundle.tar.gz:bundle/../../escape/rank9.log: name leads outside the bundle (..)",
        "bundle.tar.gz:bundle/n0/passwd.log: link to '/etc/passwd', not followed",
        "bundle.tar.gz:bundle/n0/hard.log: link to '/etc/shadow', not followed",
        "bundle.tar.gz:bundle/n0/fifo.log: special file",
        "bundle.tar.gz:bundle/n0/zero.log: special file",
    }
    assert report.exit_code == ExitCode.OK and report.files_read == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written anywhere


def test_an_archive_past_the_member_cap_is_read_up_to_it_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "many.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        _member(tar, "many/n0/rank0.log", (TIMEOUT.format(r=0) + "\n").encode())
        for i in range(150):
            _member(tar, f"many/n0/empty{i}.log")
    monkeypatch.setattr(archive_policy, "MAX_MEMBERS", 100)  # the one cap, in bundle/archive.py
    report = triage([archive])
    assert report.unreadable == (f"{archive}: more than 100 archive members: the rest was not read",)
    assert report.exit_code == ExitCode.CHECKS_FAILED and report.category is Category.COMM_TIMEOUT


def test_a_gzipped_log_named_like_an_archive_is_read_as_a_log(tmp_path: Path) -> None:
    path = tmp_path / "rank1.tgz"
    path.write_bytes(gzip.compress((OOM.format(r=1, s=1) + "\n").encode()))
    report = triage([path])
    assert report.category is Category.OOM and report.unreadable == ()


def test_nothing_readable_raises_rather_than_a_verdict(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(AscendctlError, match="nothing could be read"):
        triage([tmp_path])
    assert stat.S_ISFIFO((tmp_path / "p").stat().st_mode)


# ------------------------------------------------------------------------------ one grep per core


def test_a_batch_split_among_greps_gives_the_verdict_one_grep_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain files go to up to one grep per core, split by size: the same findings, in the same order, as one grep."""
    root = job_dir(tmp_path / "job")
    for i in range(2, 7):
        rank_log(root / f"n{i % 2}" / f"rank{i}.log", i, oom=False)
    monkeypatch.setattr(reader, "GREP_SPLIT", 1 << 40)
    one = triage([root]).to_dict()
    started: list[int] = []
    real = reader._BatchGrep.read

    def counted(self: Any) -> None:
        started.append(len(self.paths))
        real(self)

    monkeypatch.setattr(reader._BatchGrep, "read", counted)
    monkeypatch.setattr(reader, "GREP_SPLIT", 1)
    monkeypatch.setattr(reader.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert triage([root]).to_dict() == one
    assert sorted(started) == [2, 2, 3]  # 7 files, 3 greps


def test_the_files_of_a_grep_that_died_are_read_in_python_and_the_others_kept(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = job_dir(tmp_path / "job")
    expected = triage([root]).to_dict()
    monkeypatch.setattr(reader, "GREP_SPLIT", 1)
    monkeypatch.setattr(reader.os, "sched_getaffinity", lambda pid: {0, 1})
    real = reader._BatchGrep.read

    def one_dies(self: Any) -> None:
        if any(path.endswith("rank1.log") for path in self.paths):  # the grep holding the OOM: as if killed
            self.code, self.error = -9, ""
            return
        real(self)

    monkeypatch.setattr(reader._BatchGrep, "read", one_dies)
    assert triage([root]).to_dict() == expected


def test_a_batch_is_split_by_bytes_largest_first() -> None:
    src = reader.Source("f", None, None, None, None)
    batch = [(name, src, size) for name, size in (("a", 5), ("b", 1), ("c", 4), ("d", 2), ("e", 2))]
    groups = reader._by_size(batch, 2)
    assert [[name for name, _, _ in group] for group in groups] == [["a", "e"], ["c", "d", "b"]]  # 7 bytes each
    assert reader._by_size(batch[:1], 3) == [batch[:1]]  # no empty group
