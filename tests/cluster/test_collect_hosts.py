"""`ascendctl collect` over real SSH to real test hosts with simulated npu-smi/hccn_tool and planted logs."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.jobs.record import JobRecord, NodeJob, save_job
from ascendctl.ranktable import rank_places
from tests.cluster.harness import Cluster, HostSpec
from tests.sim.hccn_tool import hccn_tool_script
from tests.sim.npu_smi import npu_smi_script

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parents[1] / "data/samples/ascend"
PLOG_DIR = "/root/ascend/log/debug/plog"


def ascend_tools(host_number: int, **npu: Any) -> dict[str, str]:
    ips = {d: f"198.51.100.{host_number * 8 + d}" for d in range(8)}
    return {"npu-smi": npu_smi_script("910B4", **npu), "hccn_tool": hccn_tool_script(ips)}


def plog_lines() -> str:
    lines = (SAMPLES / "plog_fixtures_ascend-faultdiag.txt").read_text().splitlines()
    return "\n".join(line for line in lines if line.startswith("[")) + "\n"


def plant(cluster: Cluster, host: str, path: str, content: str, *, age: float = 0) -> None:
    stamp = int(time.time() - age)
    result = cluster.run_on(host, f'mkdir -p "$(dirname {path})" && cat > {path} && touch -d @{stamp} {path}', input=content)
    assert result.returncode == 0, result.stderr


def collect(*args: str) -> tuple[int, dict[str, Any], str]:
    result = runner.invoke(app, ["collect", "--json", *args], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_collect_job_bundle_has_every_node_and_a_truthful_manifest(cluster_factory: Any, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    specs = [HostSpec("h01", tools=ascend_tools(1)), HostSpec("h02", tools=ascend_tools(2, drop_devices={7})),
             HostSpec("h03", tools=ascend_tools(3), sshd=False), HostSpec("h04", tools=ascend_tools(4))]
    cluster: Cluster = cluster_factory(specs)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"connect_timeout": 5, "connect_retries": 0})
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    started = time.time() - 600
    table = (SAMPLES / "rank_table_16p_64_66_ais-bench_merge_hccl-style.json").read_text()
    nodes = tuple(NodeJob(h.name, h.ip, i, "msrun ...", env={"HCCL_CONNECT_TIMEOUT": "600", "HCCL_AUTH_TOKEN": "s3cret",
                                                                  "PATH": "/bin", "RANK_TABLE_FILE": "/root/job/rank_table.json"},
                          log="/root/job/launch.log", log_dir="/root/job/msrun_log") for i, h in enumerate(cluster.hosts))
    save_job(JobRecord("20261122-190000-ab12", "msrun", str(inventory), ["train.py"], cluster.hosts[0].ip, 8118,
                       "/root/job", nodes, started, ended=time.time() - 60, status="failed"))
    for host in ("h01", "h02", "h04"):
        plant(cluster, host, f"{PLOG_DIR}/plog-10972_20230131024824126.log", plog_lines(), age=300)
        plant(cluster, host, f"{PLOG_DIR}/plog-1_old.log", "before the job\n", age=7200)  # outside the window
        plant(cluster, host, "/root/job/launch.log", "worker 3 exited with 1\n", age=120)
        plant(cluster, host, "/root/job/msrun_log/worker_0.log", "Traceback ...\n", age=120)
        plant(cluster, host, "/root/job/rank_table.json", table, age=3600)  # written before the job: taken all the same
    # h04: a 1 GB plog written during the job, older plogs around it
    plant(cluster, "h04", f"{PLOG_DIR}/plog-2_before.log", "x" * 1000 + "\n", age=500)
    big = f"{PLOG_DIR}/plog-3_big.log"
    assert cluster.run_on("h04", f"truncate -s 1G {big} && echo TAIL-END >> {big} && touch -d @{int(time.time() - 200)} {big}").returncode == 0
    bundle_dir = tmp_path / "bundle"
    code, doc, _ = collect("last", "-i", str(inventory), "-o", str(bundle_dir), "--max-node-size", "5M")
    assert code == 4
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    assert manifest == doc["manifest"] | {"created": manifest["created"]}
    assert manifest["job"] == "20261122-190000-ab12" and manifest["unreachable"] == ["h03"]
    by_name = {n["name"]: n for n in manifest["nodes"]}
    assert list(by_name) == ["h01", "h02", "h03", "h04"]
    assert by_name["h03"]["status"] == "unreachable" and "refused" in by_name["h03"]["error"]
    assert {e["node"] for e in doc["errors"]} == {"h03"}
    for name in ("h01", "h02", "h04"):
        node = by_name[name]
        node_dir = bundle_dir / name
        assert node["status"] == "ok"
        commands = {c["name"]: c for c in node["commands"]}
        assert commands["npu-smi.info"]["status"] == "ok"
        assert commands["npu-smi.health.0"]["status"] == "ok" and commands["hccn_tool.link.0"]["status"] == "ok"
        assert commands["nvidia-smi"]["status"] == "absent" and "nvidia-smi" in node["absent_tools"]
        for entry in commands.values():  # every recorded file exists with the recorded size
            if entry["file"]:
                assert (bundle_dir / entry["file"]).stat().st_size == entry["bytes"]
        assert "HCCS" in (node_dir / "commands/npu-smi.topo.txt").read_text()
        assert "UP" in (node_dir / "commands/hccn_tool.link.3.txt").read_text()
        files = {f["path"]: f for f in node["files"]}
        assert f"{PLOG_DIR}/plog-1_old.log" not in files
        assert files["/root/job/launch.log"]["category"] == "launcher"
        assert files["/root/job/rank_table.json"]["category"] == "launcher"  # the job's RANK_TABLE_FILE, for triage
        assert rank_places(json.loads((node_dir / "files/root/job/rank_table.json").read_text()))[15].rank == 15
        assert files["/root/job/msrun_log/worker_0.log"]["truncated"] is False
        for entry in node["files"]:
            assert (bundle_dir / entry["file"]).stat().st_size == entry["bytes"]
        facts = json.loads((node_dir / "facts.json").read_text())
        assert facts["hostname"] == name
        assert facts["job_env"] == {"HCCL_AUTH_TOKEN": "<redacted>", "HCCL_CONNECT_TIMEOUT": "600"}
        assert not (node_dir / ".meta").exists()
    assert (bundle_dir / "h01/files/root/job/launch.log").read_text() == "worker 3 exited with 1\n"
    assert "get socket timeout" in (bundle_dir / f"h01/files{PLOG_DIR}/plog-10972_20230131024824126.log").read_text()
    # h04: capped at 5M, the newest bytes of the 1 GB plog kept; it takes at most a quarter of the budget while
    # other files wait, so the older, small plog is kept whole (the rest of the budget then goes to the big one)
    h04 = by_name["h04"]
    truncated = {f["path"]: f for f in h04["truncated"]}
    assert list(truncated) == [big]
    assert truncated[big]["size"] == 2**30 + len("TAIL-END\n") and truncated[big]["reason"] == "node cap"
    assert 5 * 2**20 // 4 < truncated[big]["bytes"] < 5 * 2**20
    assert (bundle_dir / f"h04/files{big}").read_bytes().endswith(b"TAIL-END\n")
    before = {f["path"]: f for f in h04["files"]}[f"{PLOG_DIR}/plog-2_before.log"]
    assert before["truncated"] is False and (bundle_dir / before["file"]).read_bytes() == b"x" * 1000 + b"\n"
    assert h04["bytes"] <= 5 * 2**20 and by_name["h01"]["truncated"] == []
    # topology: h02 lacks NPU7, so its matrix differs from the majority
    topo = json.loads((bundle_dir / "summary.json").read_text())["topology"][0]
    assert topo["majority"] == ["h01", "h04"] and [o["node"] for o in topo["outliers"]] == ["h02"]
    assert {"row": "NPU0", "column": "NPU7", "expected": "HCCS", "actual": ""} in topo["outliers"][0]["cells"]
    assert json.loads((bundle_dir / "job.json").read_text())["id"] == "20261122-190000-ab12"


def test_collect_tar_gz_with_msprof_summaries(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([HostSpec("h01"), HostSpec("h02")])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    step_header = "Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID"
    comm_header = "Device_id,OP Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"
    out_dir = "/root/prof/PROF_000001_20261122/mindstudio_profiler_output"
    for i, host in enumerate(("h01", "h02")):
        step = 100000 if host == "h01" else 200000
        rows = "\n".join(f"{i},{it},0,0,0,{step},0,0,0,1" for it in (1, 2))
        plant(cluster, host, f"{out_dir}/step_trace_20261122.csv", f"{step_header}\n{rows}\n")
        plant(cluster, host, f"{out_dir}/communication_statistic_20261122.csv", f"{comm_header}\n{i},hcom_allReduce_,2,{2 * step * 0.1 * (i + 1)},1,1,1,100\n")
        plant(cluster, host, "/root/prof/PROF_000001_20261122/device_0/data/raw.data", "raw\n")
    output = tmp_path / "b.tar.gz"
    result = runner.invoke(app, ["collect", "-i", str(inventory), "-o", str(output), "--msprof", "/root/prof"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "bundle: " in result.stdout
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("h0") and " dev " in line}
    assert lines["h01/PROF_000001_20261122"].split()[-1] == "-"
    assert lines["h02/PROF_000001_20261122"].split()[-1] == "comm,straggler"
    with tarfile.open(output) as archive:
        names = archive.getnames()
        manifest = json.load(archive.extractfile("b/manifest.json"))  # type: ignore[arg-type]
    assert "b/h01/files/root/prof/PROF_000001_20261122/mindstudio_profiler_output/step_trace_20261122.csv" in names
    assert not any(name.endswith("raw.data") for name in names)
    assert not (tmp_path / "b").exists()
    assert [n["name"] for n in manifest["nodes"]] == ["h01", "h02"]
    assert {c["tool"] for c in manifest["nodes"][0]["commands"] if c["status"] == "absent"} == {"npu-smi", "nvidia-smi"}


def malicious_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        def add(name: str, data: bytes = b"", **kw: Any) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for key, value in kw.items():
                setattr(info, key, value)
            archive.addfile(info, io.BytesIO(data) if data else None)
        add("../../etc/passwd", b"root::0:0::/:/bin/sh\n")
        add("/tmp/ascendctl-absolute-evil", b"evil\n")
        add("escape", type=tarfile.SYMTYPE, linkname="/etc")
        add("up", type=tarfile.SYMTYPE, linkname="../../../..")
        add("up/evil-through-link", b"evil\n")
        add("root/ok.log", b"fine\n")
    return buffer.getvalue()


def test_malicious_node_tar_stream_is_refused_and_nothing_escapes(cluster_factory: Any, tmp_path: Path) -> None:
    payload = base64.b64encode(malicious_tar()).decode()
    fake_tar = f"#!/bin/sh\nbase64 -d <<'EOF'\n{payload}\nEOF\n"
    cluster: Cluster = cluster_factory([HostSpec("h01", tools={"tar": fake_tar}), HostSpec("h02")])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    work = tmp_path / "work"
    work.mkdir()
    before = {p for p in tmp_path.rglob("*")}
    code, doc, stderr = collect("-i", str(inventory), "-o", str(work / "bundle"))
    assert code == 0
    h01 = doc["manifest"]["nodes"][0]
    refused = {r["member"]: r["reason"] for r in h01["refused"]}
    assert refused == {
        "../../etc/passwd": "outside the destination",
        "/tmp/ascendctl-absolute-evil": "absolute path",
        "escape": "link to an absolute path (/etc)",
        "up": "link pointing outside (../../../..)",
    }
    assert "refused archive member" in stderr or stderr == ""
    assert (work / "bundle/h01/files/root/ok.log").read_text() == "fine\n"
    assert not Path("/tmp/ascendctl-absolute-evil").exists()
    after = {p for p in tmp_path.rglob("*")}
    assert {p for p in after - before if work / "bundle" not in p.parents and p != work / "bundle"} == set()
    assert not any(p.is_symlink() for p in (work / "bundle").rglob("*"))
    assert doc["manifest"]["nodes"][1]["refused"] == []
