"""collect: pure command builders, the safe unpacker against crafted tar bytes, and a local end-to-end run."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import tarfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.bundle.collect import NodeCollectPlan, collect_command, command_sections, job_window, member_target, parse_env, parse_since, parse_size, device_env
from ascendctl.bundle.archive import unpack_tar_stream, UnpackLimits
from ascendctl.errors import UsageError
from ascendctl.jobs.record import JobRecord

runner = CliRunner()


def crafted(*members: tuple[str, dict[str, Any], bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, attrs, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for key, value in attrs.items():
                setattr(info, key, value)
            archive.addfile(info, io.BytesIO(data) if data else None)
    buffer.seek(0)
    return buffer


def test_parse_size_and_since() -> None:
    assert parse_size("200M") == 200 * 2**20 and parse_size("1G") == 2**30 and parse_size("512") == 512
    assert parse_size("1.5K") == 1536 and parse_size("10MiB") == 10 * 2**20
    with pytest.raises(UsageError):
        parse_size("lots")
    assert parse_since("2h", now=10000.0) == 10000.0 - 7200 and parse_since("30m", now=100.0) == 100.0 - 1800
    assert parse_since("1700000000") == 1700000000.0
    assert parse_since("2026-11-22T19:30:00+00:00") == 1795375800.0
    with pytest.raises(UsageError):
        parse_since("yesterday-ish")


def test_device_env_keeps_job_prefixes_and_hides_secrets() -> None:
    env = {"HCCL_IF_IP": "10.0.0.1", "HCCL_AUTH_TOKEN": "t", "ASCEND_API_KEY": "k", "NCCL_SOCKET_IFNAME": "eth0",
           "GLOO_PASSWORD": "p", "NCCL_SECRET_X": "s", "PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "x"}
    assert device_env(env) == {"ASCEND_API_KEY": "<redacted>", "GLOO_PASSWORD": "<redacted>", "HCCL_AUTH_TOKEN": "<redacted>",
                               "HCCL_IF_IP": "10.0.0.1", "NCCL_SECRET_X": "<redacted>", "NCCL_SOCKET_IFNAME": "eth0"}
    assert parse_env("A=1\nHCCL_X=a=b\n continued\n") == {"A": "1", "HCCL_X": "a=b"}


def test_command_sections_cover_every_tool_per_device() -> None:
    names = [name for name, _, _ in command_sections((0, 1), since=1700000000.0)]
    assert names == ["npu-smi.topo", "npu-smi.health.0", "npu-smi.health.1",
                     "hccn_tool.link.0", "hccn_tool.net_health.0", "hccn_tool.ip.0",
                     "hccn_tool.link.1", "hccn_tool.net_health.1", "hccn_tool.ip.1",
                     "nvidia-smi", "nvidia-smi.topo", "nvidia-smi.ecc", "kernel"]
    commands = dict((name, cmd) for name, _, cmd in command_sections((3,), since=1700000000.0))
    assert commands["hccn_tool.net_health.3"] == "hccn_tool -i 3 -net_health -g"
    assert commands["npu-smi.health.3"] == "npu-smi info -t health -i 3"
    assert "dmesg -T --since \"$(date -d @1700000000 '+%Y-%m-%d %H:%M:%S')\"" in commands["kernel"] and "journalctl -k" in commands["kernel"]


def test_job_window_uses_since_then_job_then_last_day() -> None:
    job = JobRecord("j", "msrun", "inv", [], "a", 1, "/l", (), started=1000.0, ended=2000.0)
    assert job_window(job, None, now=5000.0) == (940.0, 2060.0)
    assert job_window(job, 500.0, now=5000.0) == (500.0, 2060.0)
    assert job_window(None, None, now=100000.0) == (100000.0 - 86400, None)


def test_member_target_maps_staging_and_node_files() -> None:
    assert member_target("n0nce/commands/kernel.txt", "n0nce") == "commands/kernel.txt"
    assert member_target("n0nce/files/root/x.log", "n0nce") == "files/root/x.log"
    assert member_target("root/ascend/log/debug/plog/p.log", "n0nce") == "files/root/ascend/log/debug/plog/p.log"
    assert member_target("n0nce/", "n0nce") is None


def test_unpack_refuses_traversal_absolute_and_links_out(tmp_path: Path) -> None:
    dest = tmp_path / "bundle" / "node"
    stream = crafted(
        ("../../etc/passwd", {}, b"root::0:0\n"),
        ("/etc/evil", {}, b"x\n"),
        ("a/../../b", {}, b"x\n"),
        ("out", {"type": tarfile.SYMTYPE, "linkname": "/etc"}, b""),
        ("sub/out2", {"type": tarfile.SYMTYPE, "linkname": "../../x"}, b""),
        ("hard", {"type": tarfile.LNKTYPE, "linkname": "etc/passwd"}, b""),
        ("fifo", {"type": tarfile.FIFOTYPE}, b""),
        ("inside", {"type": tarfile.SYMTYPE, "linkname": "dir"}, b""),
        ("inside/through", {}, b"x\n"),
        ("dir/ok.txt", {}, b"ok\n"),
    )
    result = unpack_tar_stream(stream, dest)
    assert {r.member: r.reason for r in result.refused} == {
        "../../etc/passwd": "outside the destination",
        "/etc/evil": "absolute path",
        "a/../../b": "outside the destination",
        "out": "link to an absolute path (/etc)",
        "sub/out2": "link pointing outside (../../x)",
        "hard": "hard link",
        "fifo": "special file",
        "inside/through": "clashes with what is already there (File exists)",  # a link to a dir that is not there yet
    }
    assert result.written == ("dir/ok.txt",) and result.error is None
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert written == ["bundle", "bundle/node", "bundle/node/dir", "bundle/node/dir/ok.txt", "bundle/node/inside"]
    assert os.readlink(dest / "inside") == "dir"


def test_unpack_writes_through_a_link_only_inside_the_destination(tmp_path: Path) -> None:
    stream = crafted(
        ("dir/a.txt", {}, b"a\n"),
        ("inside", {"type": tarfile.SYMTYPE, "linkname": "dir"}, b""),
        ("inside/b.txt", {}, b"b\n"),
        ("up", {"type": tarfile.SYMTYPE, "linkname": ".."}, b""),
        ("up/escaped.txt", {}, b"x\n"),
    )
    result = unpack_tar_stream(stream, tmp_path / "d")
    assert (tmp_path / "d/dir/b.txt").read_bytes() == b"b\n"
    assert {r.member: r.reason for r in result.refused} == {"up": "link pointing outside (..)"}
    assert not (tmp_path / "escaped.txt").exists()


def test_unpack_stops_at_the_member_and_byte_caps(tmp_path: Path) -> None:
    many = crafted(*((f"f{i}", {}, b"") for i in range(50)))
    result = unpack_tar_stream(many, tmp_path / "a", limits=UnpackLimits(members=10))
    assert result.error == "more than 10 archive members: stopped there" and len(result.written) == 10
    big = crafted(("one", {}, b"1" * 600), ("two", {}, b"2" * 600))
    result = unpack_tar_stream(big, tmp_path / "b", limits=UnpackLimits(bytes=1000))
    assert result.error == "archive content passes 1000 bytes: stopped at 'two'" and result.written == ("one",)
    assert not (tmp_path / "b/two").exists()


def test_unpack_reports_a_stream_cut_short(tmp_path: Path) -> None:
    data = crafted(("big.log", {}, b"y" * 100000)).getvalue()
    result = unpack_tar_stream(io.BytesIO(data[:30000]), tmp_path)
    assert result.error is not None and "broken off" in result.error


def plant(root: Path, relative: str, content: bytes | int, age: float) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, int):
        with open(path, "wb") as f:
            f.truncate(content)
    else:
        path.write_bytes(content)
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def test_collect_script_keeps_newest_files_within_the_budget(tmp_path: Path) -> None:
    base = tmp_path / "log"
    plant(base, "debug/plog/plog-1_old.log", b"o" * 1000, age=300)
    plant(base, "run/plog/plog-2_big.log", 4 * 2**20, age=200)
    plant(base, "debug/plog/plog-3_new.log", b"n" * 1000, age=100)
    plant(base, "debug/plog/plog-0_ancient.log", b"a", age=90000)
    plant(base, "debug/device-0/device-7_1.log", b"d" * 10, age=100)
    plant(tmp_path, "prof/PROF_1/mindstudio_profiler_output/op_summary_1.csv", b"c", age=0)
    plant(tmp_path, "prof/PROF_1/device_0/data/raw.bin", b"r", age=0)
    plan = NodeCollectPlan("abc123", time.time() - 3600, None, (), str(base), (str(tmp_path / "launch.log"),),
                    str(tmp_path / "prof"), budget=2 * 2**20)
    command, script = collect_command(plan)
    proc = subprocess.run(["sh", "-c", command], input=script, capture_output=True, check=True)
    dest = tmp_path / "out"
    result = unpack_tar_stream(io.BytesIO(proc.stdout), dest, rename=lambda n: member_target(n, "abc123"))
    assert result.refused == () and result.error is None
    rows = [line.split("\t") for line in (dest / ".meta/selection.tsv").read_text().splitlines()]
    actions = {Path(r[5]).name: (r[0], r[4]) for r in rows}
    # the big plog keeps its newest bytes, and leaves room for the older small one (it takes the rest afterwards)
    assert actions == {"plog-3_new.log": ("keep", "plog"), "device-7_1.log": ("keep", "device_log"),
                       "op_summary_1.csv": ("keep", "msprof"), "plog-2_big.log": ("tail", "plog"),
                       "plog-1_old.log": ("keep", "plog")}
    big = dest / "files" / str(base / "run/plog/plog-2_big.log").lstrip("/")
    assert 0 < big.stat().st_size <= 2 * 2**20
    assert (dest / "files" / str(base / "debug/plog/plog-3_new.log").lstrip("/")).read_bytes() == b"n" * 1000
    status = dict(line.split("\t")[:2] for line in (dest / ".meta/status.tsv").read_text().splitlines())
    assert status["npu-smi.topo"] == "absent" and status["kernel"] in {"0", "1"}


def test_collect_local_node_writes_bundle_and_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path / "plogs"))
    monkeypatch.setenv("HCCL_SECRET_KEY", "hidden")
    plant(tmp_path / "plogs", "debug/plog/plog-42_1.log", b"[ERROR] HCCL(42,python):x\n", age=10)
    result = runner.invoke(app, ["collect", "-o", "b.tar.gz", "--json", "--since", "1h"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) >= {"schema", "command", "status", "exit_code", "errors", "bundle", "manifest", "summary"}
    node = doc["manifest"]["nodes"][0]
    assert node["status"] == "ok" and node["truncated"] == []
    assert [f["category"] for f in node["files"]] == ["plog"]
    with tarfile.open(tmp_path / "b.tar.gz") as archive:
        names = archive.getnames()
        facts = json.load(archive.extractfile(f"b/{node['name']}/facts.json"))  # type: ignore[arg-type]
    assert "b/manifest.json" in names and "b/summary.json" in names
    assert any(n.endswith("plogs/debug/plog/plog-42_1.log") for n in names)
    assert facts["session_env"]["HCCL_SECRET_KEY"] == "<redacted>"
    from ascendctl.bundle.layout import open_bundle

    opened = open_bundle(tmp_path / "b.tar.gz", tmp_path / "unpacked")
    assert opened == tmp_path / "unpacked/b" and json.loads((opened / "manifest.json").read_text())["schema"] == 1
    again = runner.invoke(app, ["collect", "-o", str(tmp_path)])
    assert again.exit_code == 2 and "already exists" in again.stderr


def test_collect_that_fails_writing_its_metadata_leaves_no_partial_archive(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The archive is packed while nodes send; when the summary cannot be written afterwards (a full disk), the
    half-written OUTPUT.tar.gz.part goes too."""
    import ascendctl.bundle.summaries as summaries

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(summaries, "summarize_bundle", full_disk)
    result = runner.invoke(app, ["collect", "-o", "b.tar.gz", "--since", "1h"])
    assert result.exit_code != 0
    assert not (tmp_path / "b.tar.gz").exists() and not (tmp_path / "b.tar.gz.part").exists()


class StreamingNode:
    """A node whose collection script answers with a tar stream far past the cap (a node ignoring its budget)."""

    def __init__(self, big: int) -> None:
        self.big = big
        self.sent = 0

    def run(self, command: str, *, timeout: float | None = None, stdin: bytes | None = None) -> Any:
        from ascendctl.models import CommandResult

        return CommandResult(command, 0, "", "", 0.0)

    def stream(self, command: str, *, on_stdout: Any = None, on_stderr: Any = None, timeout: float | None = None,
               idle: float | None = None, stdin: bytes | None = None) -> Any:
        import shlex

        if stdin is None:  # the facts probe (ascendctl.remote.probe.ask streams too): nothing to say
            return self.run(command, timeout=timeout)
        assert b"collect_node.sh" not in command.encode()
        nonce = shlex.split(command)[3]  # sh -s -- NONCE ...
        selection = f"keep\t{self.big}\t{self.big}\t1.0\tplog\t/root/p.log\n".encode()
        for name, data in ((f"{nonce}/.meta/status.tsv", b"kernel\t0\tdmesg\n"), (f"{nonce}/.meta/selection.tsv", selection)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            on_stdout(info.tobuf(format=tarfile.GNU_FORMAT) + data + b"\0" * (-len(data) % 512))
        info = tarfile.TarInfo("root/p.log")
        info.size = self.big
        on_stdout(info.tobuf(format=tarfile.GNU_FORMAT))
        block = b"z" * 65536
        while self.sent < self.big:
            on_stdout(block)
            self.sent += len(block)
        raise AssertionError("the reader should have stopped at the cap")


def test_our_side_stops_reading_a_node_past_its_cap(tmp_path: Path) -> None:
    from ascendctl.bundle.collect import CollectOptions, _Budget, collect_node, stream_slack
    from ascendctl.inventory.load import Node

    node = Node("n1", "10.0.0.1", 0)
    fake = StreamingNode(big=64 * 2**20)
    options = CollectOptions(output=tmp_path / "b")
    bundle = collect_node(node, fake, options, tmp_path / "b", node_budget=2**20, total=_Budget(None), now=time.time())  # type: ignore[arg-type]
    assert bundle.capped is True
    assert fake.sent <= 2**20 + stream_slack(2**20)
    [entry] = bundle.files
    assert entry.truncated and entry.reason == "stream cut at cap" and 0 < entry.bytes < 2**20 + stream_slack(2**20)
    assert bundle.commands[-1].name == "kernel"


# -- the push unpacker: what the reading thread feeds chunk by chunk ------------------------------------

def _gnu_tar_of(root: Path, *names: str, fmt: str = "gnu") -> bytes:
    """A real GNU tar stream (as the nodes' collect_node.sh writes) of `names` under `root`."""
    proc = subprocess.run(["tar", f"--format={fmt}", "-cf", "-", "-C", str(root), *names], capture_output=True, check=True)
    return proc.stdout


def _tree(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = ("link:" + os.readlink(p)) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
    return out


@pytest.mark.parametrize("fmt", ["gnu", "posix"])
def test_the_push_unpacker_matches_tar_at_any_chunk_boundary(tmp_path: Path, fmt: str) -> None:
    """Long names (GNU 'L' records, pax 'path'), non-ASCII names, empty files, a relative link inside, mtimes:
    fed in one piece, byte by byte around headers, and in odd-sized chunks, the result is what GNU tar extracts."""
    import random

    from ascendctl.bundle.collect import SafeUnpacker

    src = tmp_path / "src"
    deep = src / ("d" * 90) / ("e" * 90)
    deep.mkdir(parents=True)
    (deep / ("plog-" + "x" * 120 + ".log")).write_bytes(os.urandom(70000))
    (src / "empty.log").write_bytes(b"")
    (src / "naïve-日志.log").write_bytes(b"utf8 name\n")
    (src / "link").symlink_to("empty.log")
    os.utime(src / "empty.log", (1_700_000_000, 1_700_000_000))
    data = _gnu_tar_of(src, ".", fmt=fmt)
    expected_dir = tmp_path / "tar-x"
    expected_dir.mkdir()
    subprocess.run(["tar", "-xf", "-", "-C", str(expected_dir)], input=data, check=True)
    expected = _tree(expected_dir)
    rng = random.Random(7)
    splits = {"whole": [len(data)], "bytes": [1] * 4096 + [len(data)], "odd": [rng.randint(1, 3000) for _ in range(400)] + [len(data)]}
    for how, sizes in splits.items():
        dest = tmp_path / how
        unpacker = SafeUnpacker(dest)
        pos = 0
        for size in sizes:
            if pos >= len(data):
                break
            unpacker.feed(data[pos:pos + size])
            pos += size
        result = unpacker.result()
        assert result.error is None and not result.refused, (how, result)
        assert _tree(dest) == expected, how
        assert (dest / "empty.log").stat().st_mtime == 1_700_000_000
        assert len(result.written) == 3


def test_the_push_unpacker_strips_setuid_and_refuses_sparse_and_reports_garbage(tmp_path: Path) -> None:
    from ascendctl.bundle.collect import SafeUnpacker

    stream = crafted(("tool", {"mode": 0o4755}, b"#!/bin/sh\n"), ("sparse", {"type": tarfile.GNUTYPE_SPARSE}, b""),
                     ("after.txt", {}, b"still read\n"))
    unpacker = SafeUnpacker(tmp_path / "a")
    unpacker.feed(stream.getvalue())
    result = unpacker.result()
    assert {r.member: r.reason for r in result.refused} == {"sparse": "unsupported member type (GNU sparse)"}
    assert (tmp_path / "a/tool").stat().st_mode & 0o7777 == 0o755 and (tmp_path / "a/after.txt").read_bytes() == b"still read\n"
    garbage = SafeUnpacker(tmp_path / "b")
    garbage.feed(b"not a tar header at all" * 40)
    broken = garbage.result()
    assert broken.error is not None and "bad header" in broken.error and broken.written == ()
    # feeding after the error is a no-op, never an exception
    garbage.feed(stream.getvalue())
    assert garbage.result().written == ()


def test_the_push_unpacker_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    """A link created by an earlier member, named like a later file: O_NOFOLLOW, nothing written outside."""
    from ascendctl.bundle.collect import SafeUnpacker

    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"untouched\n")
    stream = crafted(("x.log", {"type": tarfile.SYMTYPE, "linkname": "y.log"}, b""), ("x.log", {}, b"overwrite\n"))
    unpacker = SafeUnpacker(tmp_path / "d")
    unpacker.feed(stream.getvalue())
    result = unpacker.result()
    assert [r.member for r in result.refused] == ["x.log"] and "clashes" in result.refused[0].reason
    assert not (tmp_path / "d/y.log").exists() and outside.read_bytes() == b"untouched\n"


def test_a_pax_name_with_a_nul_byte_is_refused_not_a_crash(tmp_path: Path) -> None:
    from ascendctl.bundle.collect import SafeUnpacker

    payload = b"path=a\x00b\n"
    length = len(payload) + 3  # "NN " + payload, NN two digits
    pax = f"{length} ".encode() + payload
    assert len(pax) == length
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, len(pax)
    member = tarfile.TarInfo("placeholder")
    member.size = 3
    data = (header.tobuf(format=tarfile.USTAR_FORMAT) + pax + b"\0" * (-len(pax) % 512)
            + member.tobuf(format=tarfile.USTAR_FORMAT) + b"abc" + b"\0" * 509 + crafted(("next.txt", {}, b"ok\n")).getvalue())
    unpacker = SafeUnpacker(tmp_path / "d")
    unpacker.feed(data)
    result = unpacker.result()
    assert [r.member for r in result.refused] == ["a\x00b"] and result.refused[0].reason.startswith("unusable name")
    assert result.written == ("next.txt",) and result.error is None


def test_the_push_unpacker_survives_mutated_archives(tmp_path: Path) -> None:
    """400 archives with bytes flipped in and around their headers (seeded): a result every time, never an
    exception, and nothing written outside the destination."""
    import random

    from ascendctl.bundle.collect import SafeUnpacker

    src = tmp_path / "src"
    (src / ("d" * 120)).mkdir(parents=True)
    (src / ("d" * 120) / "plog-1.log").write_bytes(b"x" * 3000)
    (src / "link").symlink_to("d" * 120)
    (src / "naïve.log").write_bytes(b"y\n")
    clean = _gnu_tar_of(src, ".", fmt="posix") + _gnu_tar_of(src, ".", fmt="gnu")
    rng = random.Random(17)
    outside = tmp_path / "outside"
    outside.mkdir()
    for i in range(400):
        data = bytearray(clean)
        for _ in range(rng.randint(1, 12)):
            block = rng.randrange(len(data) // 512)
            pos = block * 512 + rng.choice([rng.randrange(512), rng.randrange(100), 124 + rng.randrange(12), 156, 345 + rng.randrange(155)])
            data[pos] = rng.randrange(256)
            if i % 2:  # a valid checksum again: the header passes tar's own test and reaches the member rules
                head = data[block * 512:block * 512 + 512]
                head[148:156] = b" " * 8
                data[block * 512 + 148:block * 512 + 156] = b"%06o\0 " % sum(head)
        dest = outside / f"d{i}"
        unpacker = SafeUnpacker(dest)
        for start in range(0, len(data), 4096):
            unpacker.feed(bytes(data[start:start + 4096]))
        unpacker.result()  # must not raise
    assert sorted(p.name for p in outside.iterdir()) == sorted(f"d{i}" for i in range(400))
    assert not any(p.is_file() for p in tmp_path.glob("*") if p.name not in ("src", "outside"))


def test_the_bundle_packer_packs_nodes_as_they_end_then_the_rest(tmp_path: Path) -> None:
    """Node directories queued while collection runs, metadata and unqueued directories at finish; links kept;
    the archive appears only when finished, an aborted one leaves nothing."""
    from ascendctl.bundle.collect import BundlePacker

    bundle = tmp_path / "b"
    for node in ("n1", "n2", "n3"):
        (bundle / node / "files").mkdir(parents=True)
        (bundle / node / "files" / "plog.log").write_bytes(node.encode() * 1000)
    (bundle / "n2" / "latest").symlink_to("files/plog.log")
    output = tmp_path / "b.tar.gz"
    packer = BundlePacker(bundle, output)
    packer.add(bundle / "n2")
    packer.add(bundle / "n2")  # a node added twice is packed once
    assert not output.exists()
    (bundle / "manifest.json").write_text("{}\n", encoding="utf-8")
    packer.finish()
    names = subprocess.run(["tar", "-tzvf", str(output)], capture_output=True, text=True, check=True).stdout.splitlines()
    listed = [line.split()[-1] if "->" not in line else line.split()[-3] for line in names]
    assert listed[0] == "b/" and listed[1] == "b/n2/"  # the node queued during collection comes first
    assert sorted(set(listed)) == sorted({"b/", "b/manifest.json", "b/n1/", "b/n1/files/", "b/n1/files/plog.log", "b/n2/",
                                          "b/n2/files/", "b/n2/files/plog.log", "b/n2/latest", "b/n3/", "b/n3/files/",
                                          "b/n3/files/plog.log"})
    assert len(listed) == len(set(listed))
    assert any("b/n2/latest -> files/plog.log" in line for line in names)
    aborted = BundlePacker(bundle, tmp_path / "c.tar.gz")
    aborted.add(bundle / "n1")
    aborted.abort()
    assert not (tmp_path / "c.tar.gz").exists() and not (tmp_path / "c.tar.gz.part").exists()


def test_the_parallel_gzip_writer_makes_one_member_every_reader_reads(tmp_path: Path) -> None:
    """Blocks deflated in threads and joined by sync flushes: `gzip -t` passes, zcat and Python's gzip give the
    bytes back, and tarfile's stream reader ("r|gz", which stops after a first gzip member) sees every member."""
    import gzip
    import random

    from ascendctl.bundle.collect import ParallelGzipWriter

    rng = random.Random(3)
    payload = b"".join(rng.randbytes(rng.randint(0, 300_000)) + b"plog line\n" * rng.randint(0, 50_000) for _ in range(12))
    path = tmp_path / "x.gz"
    with open(path, "wb") as raw:
        writer = ParallelGzipWriter(raw, workers=3)
        pos = 0
        while pos < len(payload):  # odd write sizes across block boundaries
            step = rng.randint(1, 3 * ParallelGzipWriter.BLOCK // 2)
            writer.write(payload[pos:pos + step])
            pos += step
        writer.close()
    assert len(payload) > 3 * ParallelGzipWriter.BLOCK
    assert subprocess.run(["gzip", "-t", str(path)]).returncode == 0
    assert subprocess.run(["zcat", str(path)], capture_output=True, check=True).stdout == payload
    assert gzip.decompress(path.read_bytes()) == payload
    # a tar written through it, read by tarfile's stream mode
    tar_path = tmp_path / "t.tar.gz"
    with open(tar_path, "wb") as raw:
        writer = ParallelGzipWriter(raw, workers=2)
        with tarfile.open(fileobj=writer, mode="w|") as archive:  # type: ignore[call-overload]
            for i in range(5):
                data = rng.randbytes(700_000)
                info = tarfile.TarInfo(f"n{i}/plog.log")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        writer.close()
    with tarfile.open(tar_path, mode="r|gz") as archive:
        assert [m.name for m in archive] == [f"n{i}/plog.log" for i in range(5)]
    empty = tmp_path / "empty.gz"
    with open(empty, "wb") as raw:
        ParallelGzipWriter(raw).close()
    assert gzip.decompress(empty.read_bytes()) == b""


# -- file names written by the jobs: never a record boundary, never an option, never read outside the roots ------

SHELLS = [shell for shell in ("sh", "dash", "bash") if shutil.which(shell)]
SECRET = b"SECRET-asct-5c1d\n"


def run_collect_script(shell: str, plan: NodeCollectPlan, staging: Path, *, path: str | None = None) -> dict[str, bytes]:
    """Run collect_node.sh for `plan` with `shell` (as `sh -s -- ARGS` runs it on a node): the members of its tar
    stream by name (a file's content; b"" for the others); the stream is also unpacked into `staging` as
    ascendctl's side does (commands/, .meta/, files/)."""
    command, script = collect_command(plan)
    argv = [shell, "-s", "--", *shlex.split(command)[3:]]
    env = dict(os.environ, PATH=path) if path else None
    proc = subprocess.run(argv, input=script, capture_output=True, check=True, env=env)
    members = {}
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as archive:
        for member in archive:
            assert not member.isdir() or member.name.startswith(plan.nonce), f"a directory from the list: {member.name!r}"
            extracted = archive.extractfile(member) if member.isfile() else None
            members[member.name] = extracted.read() if extracted else b""
    unpack_tar_stream(io.BytesIO(proc.stdout), staging, rename=lambda n: member_target(n, plan.nonce))
    return members


def refused_records(staging: Path) -> dict[str, tuple[str, str]]:
    """path -> (category, reason) of the node's NUL-ended refused list."""
    records = (staging / ".meta/refused").read_bytes().split(b"\0")
    assert records[-1] == b""
    return {os.fsdecode(path): (category.decode(), reason.decode())
            for category, reason, path in (record.split(b"\t", 2) for record in records[:-1])}


def secret_dir(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "id_rsa").write_bytes(SECRET)
    return secret


def assert_no_secret(members: dict[str, bytes]) -> None:
    assert not [name for name, data in members.items() if "secret" in PurePosixPath(name).parts or SECRET in data]


@pytest.mark.parametrize("shell", SHELLS)
def test_collect_script_never_lets_a_file_name_forge_a_record_or_leave_its_roots(tmp_path: Path, shell: str) -> None:
    """A job writes names into the log directories: newline+tab forging a record of a directory outside the roots,
    backslash escapes tar would have unquoted into a path up and out of them, a leading "-", a link out, a FIFO."""
    secret = secret_dir(tmp_path)
    plog = tmp_path / "log/debug/plog"
    plant(plog, "plog-1_ok.log", b"legit\n", age=60)
    plant(plog, "-C.log", b"dash\n", age=60)
    plant(plog, "back\\slash 'q' \"dq\" sp .log", b"odd but harmless\n", age=60)
    # dir "x\n<newest mtime>\t0\tplog\t" holding the secret dir's path: its file's find line ends in a forged record
    forged = plog / "x\n9999999999\t0\tplog\t" / str(tmp_path).lstrip("/")
    plant(forged, "secret", b"", age=60)
    # tar's default unquoting turned this one name into plog/d/../../../../secret/id_rsa
    (plog / "d").mkdir()
    plant(plog, "d\\057..\\057..\\057..\\057..\\057secret\\057id_rsa", b"bait\n", age=60)
    (plog / "link.log").symlink_to(secret / "id_rsa")
    os.mkfifo(plog / "fifo.log")
    plant(plog, "tab\there.log", b"tab\n", age=60)
    plan = NodeCollectPlan("n0nce1", time.time() - 3600, None, (), str(tmp_path / "log"), (), None, budget=2**20)
    staging = tmp_path / "staging"
    members = run_collect_script(shell, plan, staging)
    assert_no_secret(members)
    files = {"/" + name: data for name, data in members.items() if not name.startswith("n0nce1")}
    assert files == {str(plog / "plog-1_ok.log"): b"legit\n", str(plog / "-C.log"): b"dash\n",
                     str(plog / "back\\slash 'q' \"dq\" sp .log"): b"odd but harmless\n",
                     str(plog / "d\\057..\\057..\\057..\\057..\\057secret\\057id_rsa"): b"bait\n"}
    assert refused_records(staging) == {
        str(forged / "secret"): ("plog", "control character in the path"),
        str(plog / "tab\there.log"): ("plog", "control character in the path"),
        str(plog / "link.log"): ("plog", "symbolic link"),
        str(plog / "fifo.log"): ("plog", "not a regular file"),
    }
    rows = [line.split("\t") for line in (staging / ".meta/selection.tsv").read_text().split("\n") if line]
    assert sorted(row[5] for row in rows) == sorted(files) and all(len(row) == 6 for row in rows)


@pytest.mark.parametrize("shell", SHELLS)
def test_collect_script_checks_each_chosen_file_again_just_before_reading_it(tmp_path: Path, shell: str) -> None:
    """Between find and tar a chosen file may be swapped for a link, and a list may name what no search found: the
    `sort` the script runs (a wrapper first on PATH) swaps a file and adds rows naming a file outside the roots, a
    path climbing out with "..", a directory under a root and the secret directory; none is read, each is refused."""
    secret = secret_dir(tmp_path)
    plog = tmp_path / "log/debug/plog"
    plant(plog, "plog-1_ok.log", b"legit\n", age=60)
    plant(plog, "plog-2_swapped.log", b"swapped\n", age=60)
    (plog / "sub").mkdir()
    climb = f"{plog}/../../../secret/id_rsa"
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    forged = "".join(f"2\t9999999999\t0\tplog\t{p}\n" for p in (secret / "id_rsa", climb, plog / "sub", secret))
    swapped, target = shlex.quote(str(plog / "plog-2_swapped.log")), shlex.quote(str(secret / "id_rsa"))
    (wrappers / "sort").write_text(f"""#!/bin/sh
rm {swapped} && ln -s {target} {swapped}
{shlex.quote(shutil.which('sort') or 'sort')} "$@"
printf '%s' {shlex.quote(forged)}
""")
    (wrappers / "sort").chmod(0o755)
    plan = NodeCollectPlan("n0nce2", time.time() - 3600, None, (), str(tmp_path / "log"), (), None, budget=2**20)
    staging = tmp_path / "staging"
    members = run_collect_script(shell, plan, staging, path=f"{wrappers}:{os.environ['PATH']}")
    assert_no_secret(members)
    assert {name: data for name, data in members.items() if not name.startswith("n0nce2")} == {
        str(plog / "plog-1_ok.log").lstrip("/"): b"legit\n"}
    assert refused_records(staging) == {
        str(plog / "plog-2_swapped.log"): ("plog", "not a regular file when read"),
        str(secret / "id_rsa"): ("plog", "not under a searched directory"),
        climb: ("plog", "a .. component in the path"),
        str(plog / "sub"): ("plog", "not a regular file when read"),
        str(secret): ("plog", "not under a searched directory"),
    }


def test_collect_script_lists_at_most_1000_refused_files_and_counts_the_rest(tmp_path: Path) -> None:
    plog = tmp_path / "log/debug/plog"
    plant(plog, "plog-1_ok.log", b"legit\n", age=60)
    for i in range(1003):
        (plog / f"link-{i}.log").symlink_to("plog-1_ok.log")
    plan = NodeCollectPlan("n0nce3", time.time() - 3600, None, (), str(tmp_path / "log"), (), None, budget=2**20)
    staging = tmp_path / "staging"
    members = run_collect_script("sh", plan, staging)
    assert str(plog / "plog-1_ok.log").lstrip("/") in members
    assert len(refused_records(staging)) == 1000 and (staging / ".meta/refused.more").read_text() == "3\n"


def test_collect_manifest_names_each_refused_file_and_keeps_names_python_would_split(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ascendctl's side reads the node's lists by their own separators only: a name with U+2028 or \\x85 (line ends to
    str.splitlines) or bytes that are not UTF-8 is one file, kept; refused files are in the manifest and on stderr."""
    from tests.json_schemas import assert_valid

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path / "plogs"))
    secret = secret_dir(tmp_path)
    plog = tmp_path / "plogs/debug/plog"
    plant(plog, "plog-1_ok.log", b"legit\n", age=10)
    plant(plog, "a\u2028keep\u0085b.log", b"odd\n", age=10)
    odd_bytes = os.fsdecode(str(plog).encode() + b"/bad\xff.log")
    plant(Path("/"), odd_bytes.lstrip("/"), b"bytes\n", age=10)
    forged = plog / "x\n9999999999\t0\tplog\t" / str(tmp_path).lstrip("/")
    plant(forged, "secret", b"", age=10)
    (plog / "link.log").symlink_to(secret / "id_rsa")
    result = runner.invoke(app, ["collect", "-o", "b", "--json", "--since", "1h"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert_valid("collect", doc)
    [node] = doc["manifest"]["nodes"]
    assert {f["path"]: f["truncated"] for f in node["files"]} == {
        str(plog / "plog-1_ok.log"): False, str(plog / "a\u2028keep\u0085b.log"): False, odd_bytes: False}
    assert node["truncated"] == [] and node["warnings"] == []
    assert sorted(node["refused_files"], key=lambda r: r["path"]) == [
        {"path": str(plog / "link.log"), "category": "plog", "reason": "symbolic link"},
        {"path": str(forged / "secret"), "category": "plog", "reason": "control character in the path"}]
    bundle = tmp_path / "b"
    for entry in node["files"]:
        assert (bundle / entry["file"]).read_bytes() == Path(entry["path"]).read_bytes()
    assert sum(1 for p in (bundle / node["name"] / "files").rglob("*") if p.is_file()) == 3
    assert not any(SECRET in p.read_bytes() for p in bundle.rglob("*") if p.is_file())
    text = runner.invoke(app, ["collect", "-o", "b2", "--since", "1h"], catch_exceptions=False)
    assert text.exit_code == 0
    assert f"not collected: {str(forged / 'secret')!r}: control character in the path" in text.stderr
    assert f"not collected: {str(plog / 'link.log')!r}: symbolic link" in text.stderr


# -- size caps: the files triage cannot do without come first (issue #30, round 2) --------------------------------

HUGE = 5 * 2**30  # sparse: costs no disk


def job_files(tmp_path: Path) -> dict[str, Path]:
    """One node's job directory as `ascendctl launch` leaves it, plus plogs and a device log in the window."""
    job = tmp_path / "job/n1"
    return {
        "launcher.log": plant(job, "launcher.log", b"2026-11-22T19:00:01 | worker 3 exited with 1\n" * 40, age=300),
        "exit_code": plant(job, "exit_code", b"1\n", age=290),
        "pid": plant(job, "pid", b"4242\n", age=400),
        "rank_0.log": plant(job, "workers/rank_0.log", b"Traceback (most recent call last):\n" * 10, age=250),
        "plog-1.log": plant(tmp_path / "log", "debug/plog/plog-1.log", b"[ERROR] HCCL(1,python): first\n" * 100, age=200),
        "plog-2.log": plant(tmp_path / "log", "debug/plog/plog-2.log", b"[ERROR] HCCL(1,python): later\n" * 30, age=100),
        "device-0_1.log": plant(tmp_path / "log", "debug/device-0/device-0_1.log", b"[ERROR] DRV\n", age=100),
    }


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("where", ["debug/plog", "job/n1/workers"])
def test_a_huge_new_file_never_displaces_the_files_triage_needs(tmp_path: Path, shell: str, where: str) -> None:
    """A 5 GB log, newer than everything, in the plog directory or the launcher's log directory: the job's
    launcher.log, exit_code and pid files and every plog are kept whole; the huge file keeps its newest bytes."""
    files = job_files(tmp_path)
    root = tmp_path / "log" if where == "debug/plog" else tmp_path
    huge = plant(root, f"{where}/huge.log", HUGE, age=0)
    with open(huge, "ab") as f:
        f.write(b"LAST LINE\n")
    job = tmp_path / "job/n1"
    budget = 2**20
    plan = NodeCollectPlan("n0nce4", time.time() - 3600, None, (), str(tmp_path / "log"),
                    (str(job / "launcher.log"), str(job / "exit_code"), str(job / "pid"), str(job / "workers")), None,
                    budget=budget)
    staging = tmp_path / "staging"
    members = run_collect_script(shell, plan, staging)
    rows = {Path(r[5]).name: r for r in (line.split("\t") for line in (staging / ".meta/selection.tsv").read_text().splitlines())}
    for name, path in files.items():
        assert rows[name][0] == "keep", (name, rows[name])
        assert members[str(path).lstrip("/")] == path.read_bytes(), name
    assert rows["launcher.log"][4] == rows["exit_code"][4] == rows["rank_0.log"][4] == "launcher"
    assert rows["huge.log"][0] == "tail" and int(rows["huge.log"][2]) == HUGE + len(b"LAST LINE\n")
    kept = (staging / "files" / str(huge).lstrip("/")).read_bytes()
    assert kept.endswith(b"LAST LINE\n") and 0 < len(kept) == int(rows["huge.log"][1]) <= budget
    assert sum(int(r[1]) for r in rows.values()) <= budget


def test_the_budget_goes_by_priority_then_newest_first_and_big_files_get_a_share(tmp_path: Path) -> None:
    """Priority (launcher files, plogs, the launcher's log directory, device logs, msprof), newest first within
    each; no file takes more than a quarter of the budget while others wait, what is left goes to the tails."""
    base = tmp_path / "log"
    budget = 8 * 2**20
    job = tmp_path / "job/n1"
    plant(job, "launcher.log", 5 * 2**20, age=500)  # big and oldest: first anyway, cut to a quarter at first
    plant(job, "workers/rank_0.log", 2**20, age=0)
    plant(base, "debug/plog/plog-1.log", 2**20, age=300)
    plant(base, "debug/plog/plog-2.log", 600 * 1024, age=200)
    plant(base, "debug/device-0/device-0_1.log", 3 * 2**20, age=0)
    plan = NodeCollectPlan("n0nce5", time.time() - 3600, None, (), str(base), (str(job / "launcher.log"), str(job / "workers")),
                    None, budget=budget)
    staging = tmp_path / "staging"
    run_collect_script("sh", plan, staging)
    rows = [line.split("\t") for line in (staging / ".meta/selection.tsv").read_text().splitlines()]
    order = [(Path(r[5]).name, r[0], int(r[1])) for r in rows]
    assert [name for name, _, _ in order] == ["launcher.log", "plog-2.log", "plog-1.log", "rank_0.log", "device-0_1.log"]
    got = {name: (action, kept) for name, action, kept in order}
    assert got["plog-2.log"] == ("keep", 600 * 1024) and got["plog-1.log"] == got["rank_0.log"] == ("keep", 2**20)
    # the device log got its quarter (of the budget less the commands' output); what was left then went to the
    # launcher log, first in line
    assert got["device-0_1.log"][0] == "tail" and budget // 4 - 2**18 < got["device-0_1.log"][1] <= budget // 4
    assert got["launcher.log"][0] == "tail" and got["launcher.log"][1] > budget // 4 + 2**20
    assert budget - 2**20 < sum(kept for _, _, kept in order) <= budget


def test_launcher_paths_name_the_job_files_triage_needs() -> None:
    from ascendctl.bundle.collect import launcher_paths
    from ascendctl.jobs.record import NodeJob

    node = NodeJob("n1", "10.0.0.1", 0, "msrun ...", log="/data/ascendctl/j1/n1/launcher.log",
                   log_dir="/data/ascendctl/j1/n1/workers")
    assert launcher_paths(node, "/root") == ("/data/ascendctl/j1/n1/launcher.log", "/data/ascendctl/j1/n1/exit_code",
                                             "/data/ascendctl/j1/n1/pid", "/data/ascendctl/j1/n1/stacks",
                                             "/data/ascendctl/j1/n1/workers")
    relative = NodeJob("n1", "10.0.0.1", 0, "msrun ...", log="job/launch.log")
    assert launcher_paths(relative, "/home/u") == ("/home/u/job/launch.log", "/home/u/job/exit_code", "/home/u/job/pid",
                                                   "/home/u/job/stacks")
    assert launcher_paths(None, "/root") == ()
    # the job's rank table: triage attributes a plog's device to the rank it puts there (tests/test_triage_ranktable.py)
    tabled = NodeJob("n1", "10.0.0.1", 0, "torchrun ...", log="job/launch.log", env={"RANK_TABLE_FILE": "/shared/rank_table.json"})
    assert launcher_paths(tabled, "/home/u")[-1] == "/shared/rank_table.json"


def test_collect_of_a_job_keeps_its_launcher_log_and_exit_code_beside_a_huge_new_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on this machine (the real script through the local transport): `collect JOB` with a 5 GB log,
    newest of all, in the job's log directory; the manifest has launcher.log, exit_code and pid whole."""
    import socket

    from ascendctl.bundle.collect import CollectOptions, collect_bundle
    from ascendctl.inventory.load import builtin_inventory
    from ascendctl.jobs.record import NodeJob

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path / "log"))
    files = job_files(tmp_path)
    job = tmp_path / "job/n1"
    huge = plant(job, "workers/huge.log", HUGE, age=0)
    inventory = builtin_inventory(environ={})
    name = inventory.nodes[0].name
    assert name == (socket.gethostname() or "localhost")
    record = JobRecord("j1", "msrun", "inv", [], "127.0.0.1", 1, str(tmp_path / "job"),
                       (NodeJob(name, "localhost", 0, "msrun ...", log=str(job / "launcher.log"), log_dir=str(job / "workers")),),
                       started=time.time() - 600, ended=time.time(), status="failed")
    budget = 2**20
    report = collect_bundle(inventory, CollectOptions(output=tmp_path / "b", job=record, max_node_size=budget))
    assert report.exit_code == 0
    [node] = report.manifest()["nodes"]
    entries = {Path(f["path"]).name: f for f in node["files"]} | {Path(f["path"]).name: f for f in node["truncated"]}
    for wanted in ("launcher.log", "exit_code", "pid", "rank_0.log", "plog-1.log", "plog-2.log"):
        assert entries[wanted]["truncated"] is False and entries[wanted]["bytes"] == files[wanted].stat().st_size, wanted
        assert (tmp_path / "b" / entries[wanted]["file"]).read_bytes() == files[wanted].read_bytes()
    assert entries["exit_code"]["category"] == "launcher"
    assert entries["huge.log"]["truncated"] is True and 0 < entries["huge.log"]["bytes"] <= budget
    assert entries["huge.log"]["size"] == huge.stat().st_size


# -- a node that stops sending: lost after the silence limit, its tar stopped by the script's own watchdog ---------

def test_collect_script_stops_its_tar_when_nothing_reads_its_output(tmp_path: Path) -> None:
    """The client is gone (a link cut): sshd takes nothing, tar blocks in write() for ever. The script's watchdog
    stops tar once it could write nothing for SILENCE seconds; the script ends and leaves nothing behind."""
    token = f"asct-unit-{os.urandom(4).hex()}"
    tmp = tmp_path / token
    tmp.mkdir()
    plant(tmp_path / "log", "debug/plog/plog-1.log", os.urandom(2**20), age=10)
    plan = NodeCollectPlan("n0nce6", time.time() - 3600, None, (), str(tmp_path / "log"), (), None, budget=8 * 2**20, silence=2)
    command, script = collect_command(plan)
    err = tmp_path / "stderr"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=True)
    try:
        assert proc.stdin is not None
        proc.stdin.write(script)
        proc.stdin.close()
        started = time.monotonic()
        rc = proc.wait(timeout=30)  # stdout never read: the pipe fills and stays full
        assert time.monotonic() - started < 20
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    assert rc == 143
    assert b"collect_node.sh: tar could send nothing for 2s: stopped" in err.read_bytes()
    time.sleep(0.3)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert [line for line in ps.splitlines() if token in line] == []
    assert list(tmp.iterdir()) == []  # its staging directory removed


def test_collect_script_says_it_is_alive_while_its_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A vendor command that takes longer than the silence limit (each is bounded by the section timeout): the
    script's heartbeat (NUL bytes on stderr) keeps the node from being called lost."""
    import ascendctl.bundle.collect as collect
    from ascendctl.inventory.load import parse_inventory
    from ascendctl.remote.transport.local import LocalTransport

    monkeypatch.setattr(collect, "command_sections", lambda npu_ids, since: [("slow", "sleep", "sleep 4; echo done")])
    plan = NodeCollectPlan("n0nce7", time.time() - 3600, None, (), str(tmp_path / "log"), (), None, budget=2**20, silence=2)
    command, script = collect_command(plan)
    local = LocalTransport(parse_inventory("defaults: {transport: local}\nnodes: [here]\n", environ={}).nodes[0])
    out, err = bytearray(), bytearray()
    result = local.stream(command, on_stdout=out.extend, on_stderr=err.extend, timeout=float("inf"), idle=2.0, stdin=script)
    assert result.exit_code == 0 and err.count(b"\0") >= 3
    staging = tmp_path / "staging"
    unpack_tar_stream(io.BytesIO(bytes(out)), staging, rename=lambda n: member_target(n, "n0nce7"))
    assert (staging / ".meta/status.tsv").read_text() == "slow\t0\tsleep\n"
    assert (staging / "commands/slow.txt").read_text() == "done\n"
