"""`collect --profile DIR`: only the newest profiling task's files that `ascendctl perf` reads, whole or not at all,
what was left out named; and collect's summary carrying perf's verdict (local nodes, the node script run by sh)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ascendctl.bundle.collect import NodeCollectPlan, collect_command, member_target
from ascendctl.bundle.archive import unpack_tar_stream
from ascendctl.cli import app
from tests.json_schemas import assert_valid

ASCEND = Path(__file__).resolve().parent / "data" / "perf" / "ascend"
STRAGGLER = Path(__file__).resolve().parent / "data" / "perf" / "straggler"
runner = CliRunner()


def aged(root: Path, age: float) -> None:
    """Every file under `root` (or `root` itself) modified `age` seconds ago."""
    stamp = time.time() - age
    for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
        os.utime(path, (stamp, stamp))


def profiles_dir(tmp_path: Path) -> Path:
    """Two tasks of torch_npu output under one directory (an old run of 4 ranks, 2 hours older, and the newest: 4
    ranks, the slow rank 1), the newest with raw data beside its output, and an old torch.profiler trace."""
    prof = tmp_path / "prof"
    shutil.copytree(ASCEND, prof / "old")
    aged(prof / "old", 7200)
    shutil.copytree(ASCEND, prof / "new")
    for unit in (prof / "new").iterdir():
        (unit / "FRAMEWORK").mkdir()
        (unit / "FRAMEWORK" / "torch.op_range").write_bytes(b"r" * 1000)
    aged(prof / "new", 20)
    trace = prof / "rank0.pt.trace.json.gz"
    shutil.copy(STRAGGLER / "rank0.pt.trace.json.gz", trace)
    aged(trace, 3 * 86400)
    return prof


def run_node(plan: NodeCollectPlan, dest: Path) -> list[list[str]]:
    command, script = collect_command(plan)
    proc = subprocess.run(["sh", "-c", command], input=script, capture_output=True, check=True)
    result = unpack_tar_stream(io.BytesIO(proc.stdout), dest, rename=lambda n: member_target(n, plan.nonce))
    assert result.refused == () and result.error is None
    return [line.split("\t") for line in (dest / ".meta/selection.tsv").read_text().splitlines()]


def test_the_node_takes_the_newest_task_only_and_only_what_perf_reads(tmp_path: Path) -> None:
    prof = profiles_dir(tmp_path)
    plan = NodeCollectPlan("abc123", None, None, (), str(tmp_path / "log"), (), None, budget=8 * 2**20,
                           profile_dir=str(prof))
    rows = run_node(plan, tmp_path / "out")
    taken = sorted(str(Path(r[5]).relative_to(prof)) for r in rows if r[4] == "profile")
    assert all(r[0] == "keep" for r in rows if r[4] == "profile")
    expected = sorted(str(p.relative_to(prof)) for p in (prof / "new").rglob("*")
                      if p.is_file() and "FRAMEWORK" not in p.parts)
    assert taken == expected and len(taken) == 16  # 4 ranks x (profiler_info + 3 outputs)
    left = [line.split("\t")[1] for line in (tmp_path / "out/.meta/profile_left").read_text().splitlines()]
    assert sorted(left[:4]) == sorted(str(u) for u in (prof / "old").iterdir())  # newest first: the old task, then the trace
    assert left[4:] == [str(prof / "rank0.pt.trace.json.gz")]


def test_a_profile_that_does_not_fit_is_dropped_whole_never_cut(tmp_path: Path) -> None:
    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "rank0.pt.trace.json").write_bytes(b"{" + b" " * (300 * 1024) + b"}")
    plan = NodeCollectPlan("abc123", None, None, (), str(tmp_path / "log"), (), None, budget=200 * 1024,
                           profile_dir=str(prof))
    rows = run_node(plan, tmp_path / "out")
    assert [(r[0], r[4]) for r in rows] == [("drop", "profile")]
    assert not (tmp_path / "out" / "files" / str(prof / "rank0.pt.trace.json").lstrip("/")).exists()


def test_collect_profile_on_a_local_node_summarises_perf_and_names_what_it_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path / "plogs"))
    prof = profiles_dir(tmp_path)
    result = runner.invoke(app, ["collect", "-o", "b", "--json", "--since", "1h", "--profile", str(prof)],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert_valid("collect", doc)
    perf = doc["summary"]["perf"]
    assert perf["verdict"].startswith("rank 1 is the straggler in 12 of 12 allReduce calls")
    assert perf["ranks"] == 4 and perf["straggler"]["rank"] == 1 and perf["problems"] == []
    assert [(link["src"], link["dst"], link["transport"]) for link in perf["slow_links"]] == [(2, 3, "HCCS")]
    node = doc["manifest"]["nodes"][0]
    assert len(node["profiles_left_out"]) == 5 and node["profiles_left_more"] == 0
    assert any("left out 5 older profile(s)" in w for w in node["warnings"])
    assert {f["category"] for f in node["files"]} == {"profile"} and len(node["files"]) == 16
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["perf"] == perf
    # the bundle is what `ascendctl perf` and the report read
    again = runner.invoke(app, ["perf", "b"])
    assert again.exit_code == 3 and again.stdout.startswith("rank 1 is the straggler")
    text = runner.invoke(app, ["collect", "-o", "c", "--since", "1h", "--profile", str(prof)])
    assert "perf: rank 1 is the straggler" in text.stdout


def test_a_bundle_without_profiles_has_a_null_perf_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(tmp_path / "plogs"))
    result = runner.invoke(app, ["collect", "-o", "b", "--json", "--since", "1h"], catch_exceptions=False)
    doc = json.loads(result.stdout)
    assert_valid("collect", doc)
    assert doc["summary"]["perf"] is None and doc["manifest"]["nodes"][0]["profiles_left_out"] == []
