"""Commands and probes that outlive their limits, on real test hosts: stopped on the node, reported as timeouts.

Closing an SSH channel does not stop the remote command; ascendctl runs every remote command under the
node's `timeout -k` so that TERM, then KILL, reaches the command's whole process group on the node. These
tests look for leftovers with `ps` (the test hosts share one pid namespace) by a token unique to each test.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec
from tests.cluster.test_preflight_hosts import ascend_tools

runner = CliRunner()


def invoke_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, [args[0], "--json", *args[1:]], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def left_running(cluster: Cluster, token: str, *, settle: float = 5.0) -> list[str]:
    """Processes whose command line holds `token`, after giving a stop in flight `settle` seconds to land."""
    deadline = time.monotonic() + settle
    while True:
        ps = cluster.run_on(cluster.hosts[0], ["ps", "-eo", "pid,args"])
        left = [line for line in ps.stdout.splitlines() if token in line and "ps -eo" not in line]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def test_exec_past_command_timeout_stops_the_remote_command_and_reports_a_timeout(cluster_factory: Any,
                                                                                tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([HostSpec("h01", chrony="none"), HostSpec("h02", chrony="none")])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    token = f"asct-tmo-{secrets.token_hex(4)}"
    # h02 hangs in a child of the shell (the case that used to be re-parented to pid 1 and live on)
    command = f'if [ "$(hostname)" = h02 ]; then sleep 300 & wait; fi; echo {token} done'
    code, doc = invoke_json("exec", "-i", str(inventory), "--command-timeout", "2", "--", command)
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["h01"]["status"] == "ok"
    assert by_name["h02"]["status"] == "timeout"
    assert by_name["h02"]["error"] == "command timed out after 2s (stopped on the node)"
    assert code == 3  # the node answered; its command failed there: not an unreachable node (4)
    assert left_running(cluster, token) == []


def test_a_command_ignoring_sigterm_is_killed_after_the_grace(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([HostSpec("h01", chrony="none")])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    token = f"asct-tmo-{secrets.token_hex(4)}"
    # TERM ignored by the shell and (inherited) by its child: only KILL ends them
    command = f"trap '' TERM; sh -c 'trap \"\" TERM; sleep 300; : {token}' & wait; echo {token}"
    code, doc = invoke_json("exec", "-i", str(inventory), "--command-timeout", "2", "--", command)
    assert doc["nodes"][0]["status"] == "timeout" and code == 3
    assert left_running(cluster, token) == []


def hung_tool(token: str) -> str:
    """A vendor tool wedged in the driver: ignores TERM, never returns (a real failure mode of npu-smi)."""
    return f"#!/bin/sh\n# {token}\ntrap '' TERM\nwhile :; do sleep 1; done\n"


def test_a_hung_vendor_tool_is_one_check_timing_out_on_a_reachable_node(cluster_factory: Any, tmp_path: Path) -> None:
    token = f"asct-hung-{secrets.token_hex(4)}"
    healthy = ascend_tools(1)
    wedged = {**ascend_tools(2), "npu-smi": hung_tool(token)}
    cluster: Cluster = cluster_factory([HostSpec("h01", tools=healthy), HostSpec("h02", tools=wedged)])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={
        "command_timeout": 20, "preflight": {"section_timeout": 3}})
    code, doc = invoke_json("preflight", "-i", str(inventory))
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert nodes["h02"]["reachable"] is True, nodes["h02"]["checks"][0]
    checks = {c["id"]: c for c in nodes["h02"]["checks"]}
    npu_checks = [c for c in checks.values() if c["id"].startswith("npu")]
    assert npu_checks and all(c["status"] == "error" for c in npu_checks), npu_checks
    assert any("timed out after 3s on the node" in c["summary"] for c in npu_checks), npu_checks
    # the rest of the node was still judged: ssh answered, hccn links read from the working hccn_tool
    assert checks["ssh"]["status"] == "pass"
    assert checks["hccn_link"]["status"] == "pass"
    assert {c["status"] for c in nodes["h01"]["checks"] if c["id"].startswith("npu")} <= {"pass", "warn"}
    assert code == 3
    assert left_running(cluster, token) == []


def test_a_probe_whose_tools_all_hang_answers_within_the_command_timeout(cluster_factory: Any, tmp_path: Path) -> None:
    """Hung tools in several sections: the probe spends its budget, says which sections it did not run, and the
    node still answers inside command_timeout instead of turning into `ssh: timeout` (exit 4)."""
    token = f"asct-hung-{secrets.token_hex(4)}"
    tools = {"npu-smi": hung_tool(token), "hccn_tool": hung_tool(token)}
    cluster: Cluster = cluster_factory([HostSpec("h01", tools=tools)])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={
        "command_timeout": 14, "preflight": {"section_timeout": 4}})
    code, doc = invoke_json("preflight", "-i", str(inventory))
    node = doc["nodes"][0]
    assert node["reachable"] is True, node
    summaries = {c["id"]: c["summary"] for c in node["checks"] if c["status"] == "error"}
    assert "timed out after 4s on the node" in summaries["npu_count"], summaries
    assert "timed out after 4s on the node" in summaries["hccn_link"] or "not run" in summaries["hccn_link"], summaries
    assert any("not run" in s for s in summaries.values()), summaries
    # the node's own health sections run before the hung tools' cross-node extras: disk and limits were judged
    judged = {c["id"]: c["status"] for c in node["checks"]}
    assert judged["disk"] in ("pass", "warn") and judged["limits"] in ("pass", "warn"), judged
    cross = {c["id"]: c for c in doc["cluster"]}
    assert cross["device_ips"]["status"] == "error" and "h01" in cross["device_ips"]["summary"], cross["device_ips"]
    assert code == 3
    assert left_running(cluster, token) == []
