"""bundle/layout.py and bundle/archive.py: the bundle's names, its one reader (directory or archive alike), and the one
safe-member policy and caps, which unpacking and streamed reading both apply."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

import ascendctl.bundle.archive as archive
from ascendctl.bundle.archive import (ArchiveCapError, ArchiveLimits, ArchiveMembers, SafeUnpacker, member_refusal,
                                      unpack_tar_stream)
from ascendctl.bundle.layout import (ARCHIVE_SUFFIXES, CMD_HCCN_LINK, CMD_NPU_INFO, COMMANDS, FACTS, FILES, JOB,
                                     MANIFEST, PACKED_SUFFIXES, SUMMARY, BundleArchive, bundle_directory, command_name,
                                     command_path, device_of, files_path, is_archive_name, is_bundle, iter_bundle,
                                     node_path, open_bundle, per_device, read_bundle_meta)
from ascendctl.errors import UsageError

PACKAGE = Path(__file__).resolve().parent.parent / "ascendctl"

# a bundle as collect writes it: metadata at the top, per node facts, command outputs and the node's files
BUNDLE: dict[str, bytes] = {
    MANIFEST: b'{"schema": 1, "nodes": [{"name": "n1"}, {"name": "n2"}]}\n',
    SUMMARY: b'{"topology": [], "msprof": null}\n',
    JOB: b'{"id": "j1", "nodes": []}\n',
    node_path("n1", FACTS): b'{"name": "n1", "host": "10.0.0.1"}\n',
    node_path("n1", command_path(CMD_NPU_INFO)): b"npu-smi info output\n",
    node_path("n1", command_path(per_device(CMD_HCCN_LINK, 0))): b"link status: UP\n",
    node_path("n1", command_path("kernel")): b"[Mon Nov 23 16:16:32 2026] kernel line\n",
    node_path("n1", files_path("/root/ascend/log/debug/plog/plog-42_1.log")): b"[ERROR] HCCL(42) timeout\n" * 3,
    node_path("n2", FACTS): b'{"name": "n2", "host": "10.0.0.2"}\n',
    node_path("n2", files_path("/home/u/job/n2/launcher.log")): b"rank 1 exited with 1\n",
    node_path("n2", files_path("/home/u/job/n2/stacks/cap1/rank1.txt")): b"Thread 1 (most recent call first)\n",
}


def write_dir(root: Path, files: dict[str, bytes] = BUNDLE) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def pack(directory: Path, output: Path, mode: str = "w:gz") -> Path:
    """As collect packs a bundle: every entry under the directory's own name."""
    with tarfile.open(output, mode) as tar:
        tar.add(directory, arcname=directory.name)
    return output


def contents(path: Path, **kwargs: Any) -> set[tuple[str | None, str, bytes]]:
    return {(e.node, e.path, e.stream.read()) for e in iter_bundle(path, **kwargs)}


def crafted(*members: tuple[str, dict[str, Any], bytes], gz: bool = True) -> bytes:
    """A tar (gzip) archive of hand-made members: name, TarInfo attributes, data."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w", format=tarfile.GNU_FORMAT) as tar:
        for name, attrs, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for key, value in attrs.items():
                setattr(info, key, value)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buffer.getvalue()


# --- one reader: a directory and its archive read alike ----------------------------------------------------------


@pytest.mark.parametrize("suffix, mode", [(".tar.gz", "w:gz"), (".tgz", "w:gz"), (".tar", "w"), (".tar.xz", "w:xz"),
                                          (".tar.bz2", "w:bz2")])
def test_the_reader_yields_the_same_node_path_and_content_from_a_directory_and_its_archive(
        tmp_path: Path, suffix: str, mode: str) -> None:
    directory = write_dir(tmp_path / "b")
    packed = pack(directory, tmp_path / f"out{suffix}", mode)
    expected = {(rel.split("/")[0] if "/" in rel else None, rel, data) for rel, data in BUNDLE.items()}
    assert contents(directory) == expected
    assert contents(packed) == expected  # the archive's top folder (the bundle's name) is not part of any path
    assert is_bundle(directory) and is_bundle(packed)


def test_the_reader_never_opens_a_link_or_a_fifo_in_a_directory(tmp_path: Path) -> None:
    import os

    directory = write_dir(tmp_path / "b")
    (directory / "n1" / "commands" / "leak.txt").symlink_to("/etc/passwd")
    os.mkfifo(directory / "n1" / "commands" / "fifo.txt")  # opening it would block
    paths = {path for _, path, _ in contents(directory)}
    assert paths == set(BUNDLE)


def test_want_picks_files_and_prunes_directories_alike_in_both_forms(tmp_path: Path) -> None:
    directory = write_dir(tmp_path / "b")
    packed = pack(directory, tmp_path / "b.tar.gz")
    seen_dirs: list[str] = []

    def want(rel: str, is_dir: bool) -> bool:
        if is_dir:
            seen_dirs.append(rel)
            return rel.count("/") == 0 or rel.endswith(f"/{COMMANDS}")
        return f"/{COMMANDS}/" in rel

    commands = {(n, p, d) for p, d in BUNDLE.items() if f"/{COMMANDS}/" in p for n in [p.split("/")[0]]}
    assert contents(directory, want=want) == commands == contents(packed, want=want)
    assert f"n1/{FILES}" in seen_dirs and not any(f"/{FILES}/" in d for d in seen_dirs)  # files/ refused: never walked


def test_read_bundle_meta_reads_the_same_metadata_from_both_and_leaves_the_logs(tmp_path: Path) -> None:
    directory = write_dir(tmp_path / "b")
    packed = pack(directory, tmp_path / "b.tgz")
    meta = read_bundle_meta(directory, commands=(f"{CMD_NPU_INFO}.",))
    assert meta == read_bundle_meta(packed, commands=(f"{CMD_NPU_INFO}.",))
    assert set(meta) == {MANIFEST, SUMMARY, JOB, node_path("n1", FACTS), node_path("n2", FACTS),
                         node_path("n1", command_path(CMD_NPU_INFO))}
    everything = read_bundle_meta(packed)
    assert node_path("n1", command_path("kernel")) in everything
    assert not any(f"/{FILES}/" in rel for rel in everything)  # the collected logs are never metadata
    assert read_bundle_meta(packed, max_bytes=40) == {rel: d for rel, d in everything.items() if len(d) <= 40}


def test_open_bundle_unpacks_the_archive_to_the_same_files(tmp_path: Path) -> None:
    directory = write_dir(tmp_path / "b")
    opened = open_bundle(pack(directory, tmp_path / "b.tar.gz"), tmp_path / "work")
    assert opened == tmp_path / "work" / "b" and contents(opened) == contents(directory)


def test_names_of_the_layout() -> None:
    assert command_path(CMD_NPU_INFO) == "commands/npu-smi.info.txt"
    assert command_name("commands/hccn_tool.link.3.txt") == "hccn_tool.link.3" and command_name("facts.json") is None
    assert device_of("hccn_tool.link.3", CMD_HCCN_LINK) == "3" and device_of("hccn_tool.linkx.3", CMD_HCCN_LINK) is None
    assert device_of("hccn_tool.net_health.0", CMD_HCCN_LINK) is None
    assert files_path("/var/log/x.log") == "files/var/log/x.log" and node_path("n1", FACTS) == "n1/facts.json"
    assert all(is_archive_name(f"b{s}") for s in ARCHIVE_SUFFIXES) and not is_archive_name("b.json")
    assert set(PACKED_SUFFIXES) <= set(ARCHIVE_SUFFIXES)
    assert bundle_directory(Path("/o/b.tar.gz")) == Path("/o/b") and bundle_directory(Path("/o/b.tgz")) == Path("/o/b")
    assert bundle_directory(Path("/o/b.tar.xz")) == Path("/o/b.tar.xz")  # collect packs gzip only: a directory then


# --- one policy: a hostile archive refused alike when unpacked and when streamed -----------------------------------

HOSTILE = (
    ("b/../../escape.log", {}, b"x\n"),
    ("/etc/evil.log", {}, b"x\n"),
    ("b/n1/passwd.log", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, b""),
    ("b/n1/up.log", {"type": tarfile.SYMTYPE, "linkname": "../../../x"}, b""),
    ("b/n1/hard.log", {"type": tarfile.LNKTYPE, "linkname": "etc/shadow"}, b""),
    ("b/n1/tty.log", {"type": tarfile.CHRTYPE, "devmajor": 4, "devminor": 1}, b""),
    ("b/n1/disk.log", {"type": tarfile.BLKTYPE, "devmajor": 8, "devminor": 0}, b""),
    ("b/n1/fifo.log", {"type": tarfile.FIFOTYPE}, b""),
    ("b/n1/ok.log", {}, b"fine\n"),
)


def test_a_hostile_archive_is_refused_member_by_member_when_streamed(tmp_path: Path) -> None:
    path = tmp_path / "hostile.tar.gz"
    path.write_bytes(crafted(*HOSTILE))
    refused: dict[str, str] = {}
    read = contents(path, on_refused=lambda name, reason: refused.setdefault(name, reason))
    assert read == {("n1", "n1/ok.log", b"fine\n")}
    assert refused == {
        "b/../../escape.log": "name leads outside the bundle (..)",
        "/etc/evil.log": "absolute path",
        "b/n1/passwd.log": "link to '/etc/passwd', not followed",
        "b/n1/up.log": "link to '../../../x', not followed",
        "b/n1/hard.log": "link to 'etc/shadow', not followed",
        "b/n1/tty.log": "special file",
        "b/n1/disk.log": "special file",
        "b/n1/fifo.log": "special file",
    }
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["hostile.tar.gz"]  # nothing written anywhere


def test_the_same_hostile_archive_is_refused_by_the_same_rule_when_unpacked(tmp_path: Path) -> None:
    import gzip

    dest = tmp_path / "out" / "node"
    result = unpack_tar_stream(io.BytesIO(gzip.decompress(crafted(*HOSTILE))), dest)
    assert {r.member: r.reason for r in result.refused} == {
        "b/../../escape.log": "outside the destination",  # judged against the real destination
        "/etc/evil.log": "absolute path",
        "b/n1/passwd.log": "link to an absolute path (/etc/passwd)",
        "b/n1/up.log": "link pointing outside (../../../x)",
        "b/n1/hard.log": "hard link",
        "b/n1/tty.log": "special file",
        "b/n1/disk.log": "special file",
        "b/n1/fifo.log": "special file",
    }
    assert result.written == ("b/n1/ok.log",) and result.error is None
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "out", "out/node", "out/node/b", "out/node/b/n1", "out/node/b/n1/ok.log"]


@pytest.mark.parametrize("member", HOSTILE[:-1], ids=lambda m: m[0])
def test_every_hostile_member_is_refused_in_both_modes_by_member_refusal_or_the_destination(
        member: tuple[str, dict[str, Any], bytes], tmp_path: Path) -> None:
    info = tarfile.TarInfo(member[0])
    for key, value in member[1].items():
        setattr(info, key, value)
    assert member_refusal(info, unpacking=False) is not None
    if member_refusal(info, unpacking=True) is None:  # a symbolic link or a "..": the destination judges it
        assert info.issym() or ".." in info.name
        assert archive.destination_member(info, info.name, str(tmp_path))[1] is not None


def test_one_member_cap_for_both_readers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = crafted(*((f"b/n1/f{i}.log", {}, b"x\n") for i in range(30)))
    path = tmp_path / "many.tar.gz"
    path.write_bytes(data)
    assert ArchiveLimits().members == archive.MAX_MEMBERS == 1_000_000
    monkeypatch.setattr(archive, "MAX_MEMBERS", 10)  # the one cap: lowered once, both readers stop at it
    assert ArchiveLimits().members == 10
    streamed: list[str] = []
    with pytest.raises(ArchiveCapError, match=r"^more than 10 archive members: the rest was not read$"):
        for entry in iter_bundle(path):
            streamed.append(entry.path)
    assert len(streamed) == 10
    import gzip

    unpacked = unpack_tar_stream(io.BytesIO(gzip.decompress(data)), tmp_path / "d")
    assert unpacked.error == "more than 10 archive members: stopped there" and len(unpacked.written) == 10
    with pytest.raises(UsageError, match="more than 10 archive members"):
        read_bundle_meta(path)


def test_an_oversized_extended_header_is_refused_by_both_readers(tmp_path: Path) -> None:
    """A GNU long name past META_LIMIT: the unpacker stops before buffering it, the stream before tarfile reads it whole."""
    header = tarfile.TarInfo("././@LongLink")
    header.type, header.size = tarfile.GNUTYPE_LONGNAME, archive.META_LIMIT + 1
    data = (crafted(("b/n1/first.log", {}, b"one\n"), gz=False)[:1024]  # the first member, without the end blocks
            + header.tobuf(format=tarfile.USTAR_FORMAT) + b"a" * (archive.META_LIMIT + 1) + b"\0" * 1023
            + crafted(("b/n1/after.log", {}, b"two\n"), gz=False))
    path = tmp_path / "long.tar"
    path.write_bytes(data)
    read: list[str] = []
    with pytest.raises(ArchiveCapError, match=f"a {archive.META_LIMIT + 1}-byte extended header"):
        for entry in iter_bundle(path):
            read.append(entry.path)
    assert read == ["n1/first.log"]
    result = unpack_tar_stream(io.BytesIO(data), tmp_path / "d")
    assert result.error is not None and "extended header" in result.error and result.written == ("b/n1/first.log",)


def test_a_truncated_archive_says_so_and_keeps_what_came_before(tmp_path: Path) -> None:
    data = crafted(*((f"b/n1/f{i}.log", {}, b"y" * 5000) for i in range(4)), gz=False)
    reader = BundleArchive(io.BytesIO(data[:2 * (512 + 5120) + 100]))  # cut inside the third member's header
    assert [entry.path for entry in reader] == ["n1/f0.log", "n1/f1.log"]
    assert reader.problem is not None and "truncated" in reader.problem
    members = ArchiveMembers(io.BytesIO(data))
    assert [m.name for m, _ in members] == [f"b/n1/f{i}.log" for i in range(4)] and members.problem is None


def test_a_broken_archive_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.tar.gz"
    path.write_bytes(crafted(("b/manifest.json", {}, b"{}"))[:40])
    with pytest.raises(UsageError, match="broken.tar.gz: not a bundle directory or a readable .tar.gz"):
        read_bundle_meta(path)


def test_the_unpacker_takes_the_same_default_caps(tmp_path: Path) -> None:
    assert SafeUnpacker(tmp_path / "d").limits == ArchiveLimits() == ArchiveLimits(archive.MAX_MEMBERS,
                                                                                  archive.MAX_UNPACKED)


# --- layering -----------------------------------------------------------------------------------------------------

FOUNDATION = {"ascendctl.errors", "ascendctl.paths", "ascendctl.models", "ascendctl.redact", "ascendctl.nodeset"}


def _ascendctl_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ascendctl"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ascendctl"))
    return found


def test_layout_and_archive_import_only_foundation_modules() -> None:
    assert _ascendctl_imports(PACKAGE / "bundle/archive.py") <= FOUNDATION
    assert _ascendctl_imports(PACKAGE / "bundle/layout.py") <= FOUNDATION | {"ascendctl.bundle.archive"}
    code = ("import sys, ascendctl.bundle.layout; loaded = {m for m in sys.modules if m.startswith('ascendctl.')}; "
            f"assert loaded <= {FOUNDATION | {'ascendctl.version', 'ascendctl.bundle', 'ascendctl.bundle.archive', 'ascendctl.bundle.layout'}}, "
            "sorted(loaded)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_triage_reads_bundles_without_collect_or_summaries() -> None:
    for path in (PACKAGE / "triage").glob("*.py"):
        assert not _ascendctl_imports(path) & {"ascendctl.bundle.collect", "ascendctl.bundle.summaries"}, path
