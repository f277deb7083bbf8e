"""exec, preflight and collect `--json` documents from real test hosts (one with sshd down) match their shipped schemas."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec
from tests.json_schemas import assert_valid, problems
from tests.sim.hccn_tool import hccn_tool_script
from tests.sim.npu_smi import npu_smi_script

runner = CliRunner()


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def test_exec_preflight_and_collect_documents_from_real_hosts(cluster_factory: Any, tmp_path: Path) -> None:
    tools = {"npu-smi": npu_smi_script("910B4"), "hccn_tool": hccn_tool_script({d: f"198.51.100.{8 + d}" for d in range(8)})}
    cluster: Cluster = cluster_factory([HostSpec("h01", tools=tools), HostSpec("h02", sshd=False)])
    inventory = str(cluster.write_inventory(tmp_path / "inv.yaml", defaults={"connect_timeout": 5, "connect_retries": 0}))

    code, doc = run_json("exec", "-i", inventory, "--json", "--", "hostname; echo oops >&2; exit 3")
    assert code == 4 and [(n["name"], n["status"], n["exit_code"]) for n in doc["nodes"]] == [("h01", "failed", 3), ("h02", "unreachable", None)]
    assert doc["nodes"][0]["stdout"] == "h01\n" and doc["nodes"][0]["stderr"] == "oops\n"
    assert_valid("exec", doc)

    code, doc = run_json("preflight", "-i", inventory, "--json")
    assert code == 4 and [n["reachable"] for n in doc["nodes"]] == [True, False]
    assert {c["id"]: c["status"] for c in doc["nodes"][0]["checks"]}["npu_count"] == "pass"  # the simulated NPUs were asked
    assert_valid("preflight", doc)

    code, doc = run_json("collect", "-i", inventory, "-o", str(tmp_path / "bundle.tar.gz"), "--json")
    assert code == 4 and doc["manifest"]["unreachable"] == ["h02"]
    assert {c["tool"] for c in doc["manifest"]["nodes"][0]["commands"] if c["status"] == "ok"} >= {"npu-smi", "hccn_tool"}
    assert_valid("collect", doc)
    with tarfile.open(doc["bundle"]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/manifest.json"))
        manifest = json.load(tar.extractfile(member))  # type: ignore[arg-type]
    assert not problems("collect", {**doc, "manifest": manifest})
