"""Triage end to end on synthetic multi-node log sets: root cause over symptoms, attribution, bundle reading, CLI."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path, PurePosixPath

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.triage.signatures import Category
from ascendctl.triage import attribute_path, parse_time, triage

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parent / "data/samples/ascend"

BENIGN = [
    "[INFO] 2024-01-01 11:59:{s:02d},000 train.py:88 step {i} | lm loss: 2.{i:03d} | loss scale: 65536.0 | grad norm: 1.2 | tokens/s: 1234",
    "[INFO] HCCL(4242,python3):2024-01-01-11:59:{s:02d}.000.000 [hcom.cc:454][4242]Entry-HcomAllReduce:tag[x], count[1024], op[sum]",
    "export HCCL_CONNECT_TIMEOUT=1800",
]


def benign(n: int = 20) -> list[str]:
    return [BENIGN[i % len(BENIGN)].format(i=i, s=i % 60) for i in range(n)]


def write(path: Path, lines: list[str], *, gz: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)


def nccl_timeout(rank: int, second: int) -> str:
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum=88, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600{second:03d} milliseconds before timing out. "
            f"2024-01-01T12:10:{second:02d}")


def hccl_timeout(second: int) -> str:
    return (f"[ERROR] HCCL(4242,python3):2024-01-01-12:{second // 60 + 30:02d}:{second % 60:02d}.000.000 [task_exception_handler.cc:908] "
            f"[4242][TaskExecStage][Timeout][Host]Task run failed, base information is streamID:[2], taskID[21]")


def test_one_rank_ooms_and_63_nodes_time_out(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    for n in range(1, 65):
        node = f"n{n:02d}"
        rank = (n - 1) * 8 + 2
        lines = benign()
        if node == "n17":
            lines.append(f"[rank{rank}]: RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 2; 60.96 GiB total capacity) "
                         "[2024-01-01 12:00:01,500]")
            lines.append(nccl_timeout(rank, 59))
        else:
            lines.append(hccl_timeout(n))
            lines.append(nccl_timeout(rank, n % 60))
        write(bundle / node / "launcher" / f"rank{rank}.log", lines)
    (bundle / "manifest.json").write_text("{}")
    report = triage([bundle])
    assert report.category is Category.OOM
    first = report.first_failure
    assert first is not None and (first.node, first.rank, first.device) == ("n17", 130, 2)
    assert first.file.endswith("n17/launcher/rank130.log") and first.line == 21
    assert first.time == "2024-01-01T12:00:01.500000"
    result = runner.invoke(app, ["triage", str(bundle)], catch_exceptions=False)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("verdict: OOM (device memory) on node n17, rank 130, device 2")
    assert any(line.startswith("  n[01-16,18-64] ranks ") and "communication error" in line for line in lines), lines
    assert any("rank130.log:21" in line for line in lines)
    assert any("recompute" in line for line in lines) and any("micro_batch_num" in line for line in lines)


def test_torchrun_root_cause_blames_a_sigkilled_victim_but_dmesg_names_the_oom_rank(tmp_path: Path) -> None:
    bundle = tmp_path / "job"
    report_block = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "[1]:",
        "  time      : 2024-01-01_12:00:09",
        "  host      : n1",
        "  rank      : 3 (local_rank: 3)",
        "  exitcode  : -9 (pid: 2003)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 2003",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-01-01_12:00:04",
        "  host      : n1",
        "  rank      : 5 (local_rank: 5)",
        "  exitcode  : -9 (pid: 2005)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 2005",
        "============================================================",
    ]
    write(bundle / "n1" / "launcher" / "torchrun.log", [*benign(), *report_block])
    write(bundle / "n1" / "dmesg.txt", [
        "[Mon Jan  1 11:00:00 2024] eth0: renamed from veth1234",
        "[Mon Jan  1 12:00:02 2024] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0",
        "[Mon Jan  1 12:00:02 2024] Memory cgroup out of memory: Killed process 2003 (python) total-vm:9000000kB, anon-rss:8000000kB",
    ])
    for n in (2, 3):
        write(bundle / f"n{n}" / "launcher" / "worker_9.log", [*benign(), nccl_timeout(8 * n, 30)])
    report = triage([bundle])
    assert report.category is Category.OOM
    assert report.first_failure is not None
    assert (report.first_failure.node, report.first_failure.rank) == ("n1", 3)
    assert report.first_failure.file.endswith("dmesg.txt")
    assert report.first_failure.time == "2024-01-01T12:00:02.000000"


def test_an_oom_kill_on_one_node_is_not_joined_to_the_same_pid_on_another(tmp_path: Path) -> None:
    bundle = tmp_path / "job"
    write(bundle / "n1" / "launcher" / "torchrun.log", [
        *benign(),
        "  rank      : 3 (local_rank: 3)",
        "  exitcode  : -9 (pid: 4242)",
        "  traceback : Signal 9 (SIGKILL) received by PID 4242",
    ])
    # pid 4242 on n2 is another process: its OOM kill says nothing about n1's rank 3
    write(bundle / "n2" / "dmesg.txt", [
        "[Mon Jan  1 12:00:02 2024] Out of memory: Killed process 4242 (java) total-vm:9000000kB, anon-rss:8000000kB",
    ])
    report = triage([bundle])
    assert report.first_failure is not None
    assert report.first_failure.node == "n2" and report.first_failure.rank is None


def test_nan_loss_on_one_rank_then_timeouts(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    for n in range(1, 5):
        lines = benign()
        if n == 3:
            lines.append("[default7]: iteration 120/5000 | lm loss: nan | grad norm: nan | 2024-01-01 12:05:00")
            lines.append("[default7]: iteration 121/5000 | lm loss: nan | grad norm: nan | 2024-01-01 12:05:10")
        lines.append(nccl_timeout(n * 8, 10 + n))
        write(root / f"node{n}" / "train.log", lines)
    report = triage([root])
    assert report.category is Category.NAN
    # [default7]: is torchrun's local-rank prefix; with no job record the global rank is unknown
    assert report.first_failure is not None and (report.first_failure.node, report.first_failure.local_rank) == ("node3", 7)
    assert any("loss scale" in h for h in report.hints)


def test_a_normal_loss_scale_decrease_and_config_echoes_give_no_verdict(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log"
    write(path, [*benign(), "Reducing loss scale from 65536 to 32768", "Gradient overflow. Skipping step"])
    report = triage([path])
    assert report.first_failure is None and report.category is Category.UNKNOWN and report.findings == ()


def test_only_timeouts_name_the_rank_they_point_at(tmp_path: Path) -> None:
    root = tmp_path / "b"
    for n in range(1, 4):
        write(root / f"n{n}" / "plog" / f"plog-{100 + n}_20251023172806.log", [
            f"[INFO] HCCL({100 + n},python):2025-10-23-17:00:00.000.000 [hcom.cc:194][hccl-x][{n}]hcom init by file success,take time [1]us, "
            f"rankTablePath[/r.json], rankNum[4], rank[{n}],server[10.0.0.{n}], device[{n}]",
            f"[ERROR]HCCL({100 + n},all_reduce_test):2025-10-23-17:28:0{n}.049.385[task_exception_handler.cc:610][{100 + n}][TaskExecStage]"
            "[HeartbeatAbnormal]Cluster Exception Location[IP/ID]:[127.10.0.9/0], Arrival Time:[Thu Oct 23 17:25:58 2025], "
            "ExceptionType:[Heartbeat Lost Occurred]",
        ])
    report = triage([root])
    assert report.category is Category.COMM_TIMEOUT
    assert report.first_failure is not None and report.first_failure.rank == 0
    assert "point at rank 0" in report.reason
    assert any("HCCL_CONNECT_TIMEOUT" in h for h in report.hints) and any("MTU" in h for h in report.hints)
    by_file = {f.file.rsplit("/", 1)[-1]: (f.rank, f.device) for f in report.findings}
    assert by_file["plog-102_20251023172806.log"] == (2, 2)


def test_tar_gz_bundle_with_gzip_members_is_read_as_streams(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("b1/manifest.json", b"{}")
        add("b1/summary.json", json.dumps({"topology": [{"tool": "npu-smi", "outliers": [{"node": "n2", "cells": [{}]}]}],
                                           "msprof": {"stragglers": [5], "comm_flagged": []}}).encode())
        add("b1/n1/files/var/log/train/rank0.log.gz", gzip.compress("\n".join([*benign(), nccl_timeout(0, 40)]).encode() + b"\n"))
        add("b1/n2/commands/kernel.txt",
            b"[Mon Jan  1 12:00:02 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n")
    path = tmp_path / "b1.tar.gz"
    path.write_bytes(buf.getvalue())
    report = triage([path])
    assert report.category is Category.HARDWARE
    assert report.first_failure is not None and report.first_failure.node == "n2"
    assert report.first_failure.file == "b1.tar.gz:n2/commands/kernel.txt"
    timeout = next(f for f in report.findings if f.category is Category.COMM_TIMEOUT)
    assert (timeout.node, timeout.rank) == ("n1", 0)
    assert any("n2 differs from the majority" in note for note in report.notes)
    assert any("straggler rank(s) [5]" in note for note in report.notes)


def test_summary_notes_say_which_rule_named_the_stragglers() -> None:
    from ascendctl.triage.reader import summary_notes
    new = {"stragglers": ["n2/PROF_1 dev 0"], "straggler_factor": 1.2, "straggler_limit_us": 123456.0,
           "straggler_rule": {"spreads": 3.0, "floor": 0.05, "min_effect": 0.2, "looks": 2}}
    assert summary_notes({"msprof": new}) == [
        "msprof: straggler rank(s) ['n2/PROF_1 dev 0'] (step time above 123.46 ms in both halves of their steps: 1.2x "
        "and 3 spreads over the healthy ranks' median)"]
    old = {"stragglers": [5], "straggler_factor": 1.2}  # a summary.json of an older ascendctl
    assert summary_notes({"msprof": old}) == ["msprof: straggler rank(s) [5] (step time above 1.2x the median)"]


def test_json_document_has_the_issue_keys(tmp_path: Path) -> None:
    write(tmp_path / "n1" / "rank1.log", [*benign(), "ModuleNotFoundError: No module named 'torch_npu' 2024-01-01 12:00:00"])
    result = runner.invoke(app, ["triage", str(tmp_path), "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert {"schema", "command", "status", "exit_code", "errors", "category", "first_failure", "findings", "hints"} <= set(doc)
    assert doc["category"] == "LAUNCH"
    assert set(doc["first_failure"]) == {"node", "rank", "device", "time", "file", "line", "text", "signature"}
    # a missing module is the node's setup, shared by its ranks: the node is named, not the rank whose log said it
    assert doc["first_failure"]["node"] == "n1" and doc["first_failure"]["rank"] is None
    assert doc["first_failure"]["line"] == 21
    assert {"category", "signature", "node", "rank", "time", "file", "line", "text"} <= set(doc["findings"][0])


def test_nothing_readable_exits_1(tmp_path: Path) -> None:
    result = runner.invoke(app, ["triage", str(tmp_path / "missing")])
    assert result.exit_code == 1
    assert "nothing could be read" in result.stderr and result.stdout == ""


def test_shared_samples_are_read_and_give_a_verdict() -> None:
    report = triage([SAMPLES])
    assert report.files_read >= 10 and report.category is not None and report.first_failure is not None


@pytest.mark.parametrize("line,expected", [
    ("[ERROR] HCCL(1,p):2024-01-01-12:00:00.123.456 x", "2024-01-01T12:00:00.123456"),
    ("2024-01-01T12:00:00.5Z rest", "2024-01-01T12:00:00.500000"),
    ("[2024-01-01 12:00:00,123] torch", "2024-01-01T12:00:00.123000"),
    ("[Mon Jan  1 12:00:02 2024] Out of memory", "2024-01-01T12:00:02.000000"),
    ("Jan  1 12:00:02 node07 kernel: x", "0000-01-01T12:00:02.000000"),
    ("no time here", None),
])
def test_timestamps_are_normalised(line: str, expected: str | None) -> None:
    assert parse_time(line) == expected


@pytest.mark.parametrize("path,expected", [
    ("n03/launcher/rank3.log", ("n03", 3, None, None)),
    ("n03/files/root/ascend/log/debug/plog/plog-4242_20240101.log", ("n03", None, None, 4242)),
    ("n03/files/root/ascend/log/debug/device-6/device-4242_20240101.log", ("n03", None, 6, 4242)),
    ("node1/worker_5.log", ("node1", 5, None, None)),
    ("dmesg.txt", (None, None, None, None)),
])
def test_paths_are_attributed(path: str, expected: tuple[object, ...]) -> None:
    assert attribute_path(PurePosixPath(path), bundle=True) == expected


def test_python_prefilter_gives_the_same_verdict_as_grep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ascendctl.triage as core
    import ascendctl.triage.reader as reader

    for n in range(1, 4):
        lines = [*benign(), nccl_timeout(n, 20 + n)]
        if n == 2:
            lines.insert(5, "[rank2]: RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB (GPU 2; 79 GiB total) 2024-01-01 12:00:00")
        write(tmp_path / f"n{n}" / "rank.log.gz", lines, gz=True)
        write(tmp_path / f"n{n}" / "plain" / f"rank{n}.log", lines)
    with_grep = core.triage([tmp_path])
    monkeypatch.setattr(reader, "_GREP", None)
    without = core.triage([tmp_path])
    assert with_grep.to_dict() == without.to_dict()
    assert with_grep.category is Category.OOM and with_grep.first_failure is not None and with_grep.first_failure.node == "n2"


def test_triage_core_does_not_import_the_cli_stack() -> None:
    import subprocess
    import sys

    code = ("import ascendctl.triage, ascendctl.triage.signatures, sys; "
            "assert not {'typer', 'rich', 'click'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
