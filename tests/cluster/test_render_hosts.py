"""`ascendctl render ranktable` over real SSH to real test hosts.

Each host has its own /etc/hccn.conf (bind-mounted per host) and, unless the test says
otherwise, the simulated `hccn_tool` from tests/sim/hccn_tool.py on the PATH of its SSH
sessions, replaying the line formats of the real tool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec
from tests.sim.hccn_tool import hccn_conf_text, hccn_tool_script

runner = CliRunner()


def device_ips(k: int, devices: int = 8) -> dict[int, str]:
    """Host k's device IPs: one /24 per device id, like the Atlas 800 cabling in the samples."""
    return {d: f"192.168.{100 + d}.{k}" for d in range(devices)}


def npu_host(name: str, *, tool: dict[int, str] | None, conf: dict[int, str] | None, missing: set[int] | None = None) -> HostSpec:
    tools = {"hccn_tool": hccn_tool_script(tool, missing=missing or set(), devices=range(8))} if tool is not None else {}
    files = {"/etc/hccn.conf": hccn_conf_text(conf)} if conf is not None else {}
    return HostSpec(name, tools=tools, files=files)


def ranktable(inventory: Path, *args: str) -> Any:
    return runner.invoke(app, ["render", "ranktable", "-i", str(inventory), *args])


def test_discovery_over_ssh_builds_the_right_rank_table(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([
        npu_host("h01", tool=device_ips(1), conf=device_ips(1)),
        # hccn_tool answers for what is configured now; a stale hccn.conf must not win
        npu_host("h02", tool=device_ips(2), conf={d: f"172.31.{d}.2" for d in range(8)}),
        npu_host("h03", tool=device_ips(3), conf=device_ips(3)),
    ])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    out = tmp_path / "rank_table.json"
    result = ranktable(inventory, "-o", str(out))
    assert result.exit_code == 0, result.output
    expected = {
        "version": "1.0",
        "server_count": "3",
        "server_list": [
            {
                "server_id": host.ip,
                "device": [{"device_id": str(d), "device_ip": ip, "rank_id": str(8 * k + d)} for d, ip in device_ips(k + 1).items()],
                "host_nic_ip": "reserve",
            }
            for k, host in enumerate(cluster.hosts)
        ],
        "status": "completed",
    }
    assert json.loads(out.read_text()) == expected
    assert result.stderr == f"ascendctl: wrote {out} (version 1.0, 3 server(s), 24 rank(s))\n"

    check = ranktable(inventory, "--check", str(out))
    assert check.exit_code == 0, check.output
    assert check.stdout == f"{out}: ok, version 1.0, 3 server(s), 24 rank(s) match the cluster\n"


def test_host_without_hccn_tool_falls_back_to_hccn_conf(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([
        npu_host("h01", tool=device_ips(1), conf=device_ips(1)),
        npu_host("h02", tool=None, conf=device_ips(2)),
    ])
    assert cluster.ssh("h02", "command -v hccn_tool || echo none").stdout.strip() == "none"
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    result = ranktable(inventory, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(n["name"], {d["source"] for d in n["devices"]}) for n in doc["nodes"]] == [("h01", {"hccn_tool"}), ("h02", {"hccn.conf"})]
    h02 = doc["rank_table"]["server_list"][1]
    assert [d["device_ip"] for d in h02["device"]] == list(device_ips(2).values())
    assert [d["rank_id"] for d in h02["device"]] == [str(r) for r in range(8, 16)]


def test_duplicate_device_ip_exits_3_naming_node_and_device(cluster_factory: Any, tmp_path: Path) -> None:
    clash = {**device_ips(2), 3: device_ips(1)[3]}
    cluster: Cluster = cluster_factory([
        npu_host("h01", tool=device_ips(1), conf=device_ips(1)),
        npu_host("h02", tool=clash, conf=clash),
    ])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    out = tmp_path / "rank_table.json"
    result = ranktable(inventory, "-o", str(out))
    assert result.exit_code == 3
    assert not out.exists()
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "ascendctl: error: h02: device 3: duplicate device IP 192.168.103.1: also h01 device 3",
        "ascendctl: error: ranktable: 1 problem(s); nothing written",
    ]


def test_host_with_seven_of_eight_addresses_exits_3(cluster_factory: Any, tmp_path: Path) -> None:
    seven = {d: ip for d, ip in device_ips(2).items() if d != 7}
    cluster: Cluster = cluster_factory([
        npu_host("h01", tool=device_ips(1), conf=device_ips(1)),
        npu_host("h02", tool=seven, conf=seven, missing={7}),
    ])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    result = ranktable(inventory, "-o", str(tmp_path / "rank_table.json"))
    assert result.exit_code == 3
    assert not (tmp_path / "rank_table.json").exists()
    assert result.stderr.splitlines() == [
        "ascendctl: error: h02: device 7: no device IP "
        "(hccn_tool -i 7 -ip -g: printed no ipaddr (no output); /etc/hccn.conf has no address_7)",
        "  hint: give the nodes' device IPs in the inventory (`device_ips: [...]` per node, in device-id order), "
        "or make `hccn_tool -i N -ip -g` answer on them",
        "ascendctl: error: ranktable: 1 problem(s); nothing written",
    ]


def test_unreachable_host_exits_4_and_the_rest_is_still_checked(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([
        npu_host("h01", tool=device_ips(1), conf=device_ips(1)),
        HostSpec("h02", sshd=False),
        HostSpec("h03", files={"/etc/hccn.conf": "# NPU network not configured yet\n"}),
    ])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"connect_retries": 0})
    result = ranktable(inventory, "--json")
    assert result.exit_code == 4
    doc = json.loads(result.stdout)
    assert [n["status"] for n in doc["nodes"]] == ["ok", "unreachable", "ok"]
    codes = [(e["code"], e["node"], e["device"]) for e in doc["errors"]]
    assert codes == [("unreachable", "h02", None)] + [("invalid", "h03", d) for d in range(8)]
    assert doc["errors"][1]["message"] == "h03: device 0: no device IP (hccn_tool not found; /etc/hccn.conf has no address_0)"


def test_check_finds_a_device_ip_that_changed_on_the_node(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([npu_host("h01", tool=device_ips(1), conf=device_ips(1))])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    out = tmp_path / "rank_table.json"
    assert ranktable(inventory, "-o", str(out)).exit_code == 0
    table = json.loads(out.read_text())
    table["server_list"][0]["device"][5]["device_ip"] = "192.168.105.99"
    out.write_text(json.dumps(table, indent=4))
    result = ranktable(inventory, "--check", str(out))
    assert result.exit_code == 3
    assert result.stderr.splitlines() == [
        "ascendctl: error: h01: device 5: rank table has 192.168.105.99, the node reports (via hccn_tool) 192.168.105.1",
        f"ascendctl: error: {out}: 1 problem(s)",
    ]
