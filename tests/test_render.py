"""`ascendctl render`: golden files, the HCCL sample rank tables, templates, validation, env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import ExitCode, InventoryError, TemplateError
from ascendctl.inventory.load import load_inventory, parse_inventory
from ascendctl.jobs.environment import env_snippet
from ascendctl.templating import Template, load_template, render_template
from ascendctl.render import build_rank_table, rank_table_json, render_env, render_hostfile, render_rank_table

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parent / "data/samples/ascend"
GOLDEN = Path(__file__).parent / "golden" / "render"

# case -> {output file: ascendctl arguments after `-i <case>/inventory.yaml`}
GOLDEN_CASES: dict[str, dict[str, list[str]]] = {
    "two_nodes_8dev": {
        "hostfile-openmpi": ["render", "hostfile", "--format", "openmpi"],
        "hostfile-deepspeed": ["render", "hostfile", "--format", "deepspeed"],
        "hostfile-mpich": ["render", "hostfile", "--format", "mpich"],
        "hostfile-plain": ["render", "hostfile", "--format", "plain"],
        "rank_table.json": ["render", "ranktable"],
        "env.sh": ["render", "env", "--rank-table-file", "/shared/job/rank_table.json"],
    },
    "a3_host_ip_ports": {
        "hostfile-openmpi": ["render", "hostfile"],
        "rank_table.json": ["render", "ranktable", "--server-id", "name", "--no-host-nic-ip"],
        "env.sh": ["render", "env", "--rank-table-file", "/shared/job/rank_table.json", "--master-port", "6000"],
    },
    "superpod_v1_2": {
        "hostfile-mpich": ["render", "hostfile", "--format", "mpich"],
        "rank_table.json": ["render", "ranktable", "--version", "1.2", "--server-id", "name"],
    },
}


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize(
    ("case", "output"), [(case, output) for case, outputs in GOLDEN_CASES.items() for output in outputs], ids=lambda v: str(v)
)
def test_golden_files_byte_for_byte(case: str, output: str, tmp_path: Path, update_golden: bool, cluster_network: Any) -> None:
    args = GOLDEN_CASES[case][output]
    inventory = GOLDEN / case / "inventory.yaml"
    if args[1] == "env":  # the snippet on stdout (no secrets in these inventories)
        result = invoke(*args, "-i", str(inventory))
        assert result.exit_code == 0, result.output
        text = result.stdout
    else:
        target = tmp_path / output
        result = invoke(*args, "-i", str(inventory), "-o", str(target))
        assert result.exit_code == 0, result.output
        assert result.stdout == ""
        text = target.read_text()
    golden = GOLDEN / case / output
    if update_golden:
        golden.write_text(text)
    assert golden.read_text() == text


def test_stdout_equals_the_written_file(tmp_path: Path) -> None:
    inventory = str(GOLDEN / "two_nodes_8dev" / "inventory.yaml")
    result = invoke("render", "ranktable", "-i", inventory)
    assert result.exit_code == 0
    assert result.stdout == (GOLDEN / "two_nodes_8dev" / "rank_table.json").read_text()
    assert result.stderr == ""


# --------------------------------------------------------------------------- the HCCL samples


def _sample(name: str) -> Any:
    return json.loads((SAMPLES / name).read_text())


def _inventory_for(sample: dict[str, Any], *, host_of: dict[str, str] | None = None) -> str:
    """An inventory with the sample's servers, devices, IPs and ports (server_id is the node name)."""
    pods = {m["server_id"]: pod["super_pod_id"] for pod in sample.get("super_pod_list", []) for m in pod["server_list"]}
    lines = ["nodes:"]
    for i, server in enumerate(sample["server_list"]):
        devices = sorted(server["device"], key=lambda d: int(d["device_id"]))
        node: dict[str, Any] = {
            "host": (host_of or {}).get(server["server_id"], f"10.99.0.{i + 1}"),
            "name": server["server_id"],
            "slots": len(devices),
            "device_ips": [d["device_ip"] for d in devices],
        }
        if "host_ip" in server:
            node["host_ip"] = server["host_ip"]
        for key in ("device_port", "host_port", "backup_device_port"):
            if key in devices[0]:
                node[key] = [int(d[key]) for d in devices]
        if "backup_device_ip" in devices[0]:
            node["backup_device_ips"] = [d["backup_device_ip"] for d in devices]
        if "super_device_id" in devices[0]:
            node["super_device_ids"] = [int(d["super_device_id"]) for d in devices]
        if server["server_id"] in pods:
            node["super_pod_id"] = pods[server["server_id"]]
        lines.append("  - " + json.dumps(node))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("sample", "version", "server_id", "host_nic_ip"),
    [
        ("ranktable_v1.0_910_template1_hccl-doc.json", "1.0", "name", None),
        ("ranktable_v1.0_A2_2nodes_device_port_hccl-doc.json", "1.0", "name", None),
        ("ranktable_v1.0_A3_typical_hccl-doc.json", "1.0", "name", None),
        ("ranktable_v1.2_A3_superpod_2pods_4nodes_hccl-doc.json", "1.2", "name", None),
        ("rank_table_16p_64_66_ais-bench_merge_hccl-style.json", "1.0", "host", "reserve"),
    ],
)
def test_rendered_table_equals_the_hccl_sample(sample: str, version: str, server_id: str, host_nic_ip: str | None) -> None:
    expected = _sample(sample)
    hosts = {s["server_id"]: s["server_id"] for s in expected["server_list"]} if server_id == "host" else None
    inventory = parse_inventory(_inventory_for(expected, host_of=hosts), environ={})
    result = render_rank_table(inventory, version=version, server_id=server_id, host_nic_ip=host_nic_ip)
    assert result.problems == ()
    assert result.table == expected
    assert json.loads(result.text()) == expected


def test_ais_bench_sample_through_the_cli_with_default_options(write_inventory: Any) -> None:
    expected = _sample("rank_table_16p_64_66_ais-bench_merge_hccl-style.json")
    hosts = {s["server_id"]: s["server_id"] for s in expected["server_list"]}
    result = invoke("render", "ranktable", "-i", str(write_inventory(_inventory_for(expected, host_of=hosts))))
    assert result.exit_code == 0
    assert json.loads(result.stdout) == expected
    assert list(json.loads(result.stdout)) == list(expected)  # version, server_count, server_list, status


def test_indent_matches_the_hccl_doc_samples() -> None:
    expected_text = (SAMPLES / "ranktable_v1.0_A2_2nodes_device_port_hccl-doc.json").read_text()
    doc = json.loads(expected_text)
    inventory = parse_inventory(_inventory_for(doc), environ={})
    result = render_rank_table(inventory, server_id="name", host_nic_ip=None)
    assert result.table is not None
    # Same dict with the sample's key order gives the sample's bytes: 4-space indent, no trailing spaces.
    reordered = {"status": "completed", **{k: v for k, v in result.table.items() if k != "status"}}
    assert rank_table_json(reordered).rstrip("\n") == expected_text.rstrip("\n")


# --------------------------------------------------------------------------- rank ids, devices


def test_rank_ids_follow_inventory_order_then_device_id(write_inventory: Any) -> None:
    path = write_inventory(
        "defaults: {slots: 2}\nnodes:\n"
        "  - {host: 10.0.0.3, name: c, device_ips: [1.1.3.0, 1.1.3.1]}\n"
        "  - {host: 10.0.0.1, name: a, device_ips: [1.1.1.0, 1.1.1.1]}\n"
    )
    result = render_rank_table(load_inventory(path))
    assert result.table is not None
    ranks = [(s["server_id"], d["device_id"], d["rank_id"]) for s in result.table["server_list"] for d in s["device"]]
    assert ranks == [("10.0.0.3", "0", "0"), ("10.0.0.3", "1", "1"), ("10.0.0.1", "0", "2"), ("10.0.0.1", "1", "3")]


def test_multi_digit_device_ranges_work(write_inventory: Any) -> None:
    ips = [f"192.168.{d}.1" for d in range(16)]
    path = write_inventory(f"nodes:\n  - {{host: 10.0.0.1, slots: 8, device_ips: {json.dumps(ips)}}}\n")
    result = invoke("render", "ranktable", "-i", str(path), "--devices", "8-15")
    assert result.exit_code == 0, result.output
    devices = json.loads(result.stdout)["server_list"][0]["device"]
    assert [(d["device_id"], d["device_ip"], d["rank_id"]) for d in devices] == [
        (str(d), f"192.168.{d}.1", str(d - 8)) for d in range(8, 16)
    ]


@pytest.mark.parametrize("bad", ["x", "7-3", "", "0-"])
def test_bad_device_range_is_a_usage_error(bad: str, write_inventory: Any) -> None:
    path = write_inventory("nodes:\n  - {host: 10.0.0.1, device_ips: [1.1.1.1]}\n")
    result = runner.invoke(app, ["render", "ranktable", "-i", str(path), "--devices", bad])
    assert result.exit_code == 2
    assert "--devices" in result.output


# --------------------------------------------------------------------------- validation


def test_every_problem_is_one_line_naming_node_and_device_and_nothing_is_written(write_inventory: Any, tmp_path: Path) -> None:
    path = write_inventory(
        "defaults: {slots: 4}\nnodes:\n"
        "  - {host: 10.0.0.1, name: n1, device_ips: [10.1.0.1, 10.1.0.2, 10.1.0.3, 10.1.0.4]}\n"
        "  - {host: 10.0.0.2, name: n2, device_ips: [10.1.0.5, 10.1.0.2, 10.0.0.1, 10.1.0.999]}\n"
        "  - {host: 10.0.0.3, name: n3, device_ips: [10.1.0.9, 10.1.0.10, 10.1.0.11]}\n"
        "  - {host: 10.0.0.4, name: n4, slots: 2, device_ips: [10.1.0.12, 10.1.0.13, 10.1.0.14]}\n"
    )
    out = tmp_path / "rank_table.json"
    result = runner.invoke(app, ["render", "ranktable", "-i", str(path), "-o", str(out)])
    assert result.exit_code == ExitCode.CHECKS_FAILED == 3
    assert not out.exists()
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "ascendctl: error: n2: device 1: duplicate device IP 10.1.0.2: also n1 device 1",
        "ascendctl: error: n2: device 2: device IP 10.0.0.1 is also the host IP of n1",
        "ascendctl: error: n2: device 3: malformed device IP '10.1.0.999' (from inventory)",
        "ascendctl: error: n3: device 3: no device IP (device_ips has 3 entries, none for device 3)",
        "  hint: give the nodes' device IPs in the inventory (`device_ips: [...]` per node, in device-id order), "
        "or make `hccn_tool -i N -ip -g` answer on them",
        "ascendctl: error: n4: device_ips lists 3 addresses but slots is 2",
        "ascendctl: error: ranktable: 5 problem(s); nothing written",
    ]


def test_json_envelope_lists_problems_as_errors(write_inventory: Any) -> None:
    path = write_inventory("defaults: {slots: 1}\nnodes:\n  - {host: h1, device_ips: [10.1.0.1]}\n  - {host: h2, device_ips: [10.1.0.1]}\n")
    result = runner.invoke(app, ["render", "ranktable", "-i", str(path), "--json"])
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert list(doc) == ["schema", "command", "status", "exit_code", "file", "ranks", "rank_table", "nodes", "errors"]
    assert doc["status"] == "partial" and doc["rank_table"] is None and doc["file"] is None
    assert doc["errors"] == [
        {"code": "invalid", "node": "h2", "device": 0, "message": "h2: device 0: duplicate device IP 10.1.0.1: also h1 device 0"}
    ]
    assert doc["nodes"][0] == {"name": "h1", "status": "ok", "devices": [{"device_id": 0, "device_ip": "10.1.0.1", "source": "inventory"}]}


def test_json_envelope_carries_the_table_when_valid(write_inventory: Any, tmp_path: Path) -> None:
    path = write_inventory("nodes:\n  - {host: h1, slots: 1, device_ips: [10.1.0.1]}\n")
    out = tmp_path / "rt.json"
    doc = json.loads(invoke("render", "ranktable", "-i", str(path), "--json", "-o", str(out)).stdout)
    assert doc["status"] == "ok" and doc["file"] == str(out) and doc["ranks"] == 1
    assert doc["rank_table"] == json.loads(out.read_text())


def test_v1_2_needs_super_pod_and_unique_super_device_ids(write_inventory: Any) -> None:
    path = write_inventory(
        "defaults: {slots: 2}\nnodes:\n"
        "  - {host: h1, super_pod_id: 0, super_device_ids: [0, 1], device_ips: [10.1.0.1, 10.1.0.2]}\n"
        "  - {host: h2, super_pod_id: 0, super_device_ids: [1, 2], device_ips: [10.1.0.3, 10.1.0.4]}\n"
        "  - {host: h3, super_pod_id: 1, super_device_ids: [1], device_ips: [10.1.0.5, 10.1.0.6]}\n"
    )
    result = render_rank_table(load_inventory(path), version="1.2")
    assert [str(p) for p in result.problems] == [
        "h2: device 0: duplicate super_device_id 1 in super pod 0: also h1 device 1",
        "h3: device 1: no super_device_id (super_device_ids has 1 entries, none for device 1)",
    ]


def test_per_device_port_lists_must_cover_every_device(write_inventory: Any) -> None:
    path = write_inventory("nodes:\n  - {host: h1, slots: 2, device_port: [16667], device_ips: [10.1.0.1, 10.1.0.2]}\n")
    result = render_rank_table(load_inventory(path))
    assert [str(p) for p in result.problems] == ["h1: device 1: device_port lists 1 port(s), none for device 1"]


def test_device_ips_is_node_only(write_inventory: Any) -> None:
    path = write_inventory("defaults: {device_ips: [10.1.0.1]}\nnodes:\n  - {host: h1}\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert caught.value.problems == [f"{path}:1: defaults.device_ips: `device_ips` can only be set per node, under `nodes:`"]


def test_build_rank_table_is_pure_data() -> None:
    inventory = parse_inventory("nodes:\n  - {host: h1, slots: 1, device_ips: [10.1.0.1]}\n", environ={})
    from ascendctl.facts.devices import devices_from_inventory

    table = build_rank_table(inventory, [devices_from_inventory(inventory.nodes[0], [0])])
    assert table == {
        "version": "1.0", "server_count": "1",
        "server_list": [{"server_id": "h1", "device": [{"device_id": "0", "device_ip": "10.1.0.1", "rank_id": "0"}],
                         "host_nic_ip": "reserve"}],
        "status": "completed",
    }


# --------------------------------------------------------------------------- templates


def test_unknown_template_variable_names_template_and_variable() -> None:
    with pytest.raises(TemplateError) as caught:
        render_template(Template("${host} slots=${slot}\n", "templates/hostfile-openmpi.tmpl"), {"host": "h", "slots": 8})
    assert caught.value.message == "templates/hostfile-openmpi.tmpl: unknown variable ${slot}"
    assert caught.value.hint == "known variables: ${host}, ${slots}"


def test_user_templates_win_and_strictness_applies_to_them(write_inventory: Any, tmp_path: Path) -> None:
    path = write_inventory("nodes:\n  - {host: 10.0.0.1, name: a, slots: 4}\n  - {host: 10.0.0.2, name: b}\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "hostfile-plain.tmpl").write_text("${name} ${host} # rank base ${index}\n")
    result = invoke("render", "hostfile", "-i", str(path), "--format", "plain", "--templates", str(mine))
    assert result.stdout == "a 10.0.0.1 # rank base 0\nb 10.0.0.2 # rank base 1\n"
    # a format the user did not override still comes from the built-in templates
    assert invoke("render", "hostfile", "-i", str(path), "--format", "mpich", "--templates", str(mine)).stdout == "10.0.0.1:4\n10.0.0.2:8\n"
    (mine / "hostfile-openmpi.tmpl").write_text("${host} slots=${slot}\n")
    result = runner.invoke(app, ["render", "hostfile", "-i", str(path), "--templates", str(mine)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"ascendctl: error: {mine}/hostfile-openmpi.tmpl: unknown variable ${{slot}}",
        "  hint: known variables: ${host}, ${name}, ${slots}, ${index}",
    ]


def test_bad_placeholder_and_missing_directory_are_template_errors(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=r"^t.tmpl: Invalid placeholder"):
        render_template(Template("cost: $5\n", "t.tmpl"), {})
    with pytest.raises(TemplateError, match="templates directory not found"):
        load_template("hostfile-openmpi.tmpl", tmp_path / "nope")


def test_builtin_templates_are_found_and_labelled() -> None:
    template = load_template("hostfile-openmpi.tmpl")
    assert template.label == "templates/hostfile-openmpi.tmpl"
    assert template.text == "${host} slots=${slots}\n"


def test_hostfile_formats(write_inventory: Any) -> None:
    inventory = load_inventory(write_inventory("nodes:\n  - {host: 192.168.1.10}\n  - {host: 192.168.1.11, slots: 4}\n"))
    assert render_hostfile(inventory, "openmpi") == "192.168.1.10 slots=8\n192.168.1.11 slots=4\n"
    assert render_hostfile(inventory, "deepspeed") == "192.168.1.10 slots=8\n192.168.1.11 slots=4\n"
    assert render_hostfile(inventory, "mpich") == "192.168.1.10:8\n192.168.1.11:4\n"
    assert render_hostfile(inventory, "plain") == "192.168.1.10\n192.168.1.11\n"


def test_hostfile_is_written_atomically_and_announced_on_stderr(write_inventory: Any, tmp_path: Path) -> None:
    path = write_inventory("nodes:\n  - {host: 192.168.1.10}\n")
    out = tmp_path / "hosts"
    result = invoke("render", "hostfile", "-i", str(path), "-o", str(out))
    assert out.read_text() == "192.168.1.10 slots=8\n"
    assert result.stdout == "" and result.stderr == f"ascendctl: wrote {out} (openmpi, 1 node(s))\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# --------------------------------------------------------------------------- env


def test_env_exports_per_node_and_inventory_env_wins(write_inventory: Any, cluster_network: Any) -> None:
    path = write_inventory(
        "defaults: {interface: eth0}\nnodes:\n"
        "  - {host: 10.0.0.1, name: m}\n"
        "  - {host: worker-2, name: w, host_ip: 10.0.0.2, env: {HCCL_CONNECT_TIMEOUT: 600, GLOO_SOCKET_IFNAME: eth9}}\n"
    )
    cluster_network["w"] = ("eth0", "172.16.0.2")
    envs = render_env(load_inventory(path), rank_table_file="/job/rt.json", master_port=1234)
    # HCCL_IF_IP is the address of the cluster interface the node reported, never `host` or the rank table's host_ip
    assert [dict(e.values) for e in envs] == [
        {"HCCL_IF_IP": "172.16.0.1", "HCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0",
         "MASTER_ADDR": "172.16.0.1", "MASTER_PORT": "1234", "HCCL_CONNECT_TIMEOUT": "1200", "RANK_TABLE_FILE": "/job/rt.json",
         "PYTHONUNBUFFERED": "1"},
        {"HCCL_IF_IP": "172.16.0.2", "HCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth9", "NCCL_SOCKET_IFNAME": "eth0",
         "MASTER_ADDR": "172.16.0.1", "MASTER_PORT": "1234", "HCCL_CONNECT_TIMEOUT": "600", "RANK_TABLE_FILE": "/job/rt.json",
         "PYTHONUNBUFFERED": "1"},
    ]
    assert env_snippet(envs[:1]).splitlines()[0] == "# m (10.0.0.1)"


def test_render_env_and_launch_dry_run_print_the_same_environment(write_inventory: Any, cluster_network: Any) -> None:
    path = write_inventory("defaults: {interface: ib0, python: /opt/venv/bin/python, env: {HCCL_DB_PASSWD: hunter2}}\n"
                           "nodes:\n  - {host: 10.0.0.1, name: a}\n  - {host: 10.0.0.2, name: b}\n")
    env = invoke("render", "env", "-i", str(path), "--launcher", "torchrun", "--rank-table-file", "/rt.json")
    plan = invoke("launch", "-i", str(path), "--launcher", "torchrun", "--rank-table", "/rt.json", "--dry-run", "--", "t.py")
    assert env.exit_code == 0 and plan.exit_code == 0, env.output + plan.output
    rendered = [line[len("export "):] for line in env.stdout.splitlines() if line.startswith("export ")]
    planned = [line.strip() for line in plan.stdout.splitlines() if line.startswith("  ") and "=" in line.split()[0]
               and not line.strip().startswith("/")]
    # launch alone puts the job's stacks hook first on PYTHONPATH (docs/stacks.md): `render env` has no job directory
    hooks = [line for line in planned if line.startswith("PYTHONPATH=")]
    assert [h.split("/dry-run/")[1] for h in hooks] == [f'{n}/pyhook${{PYTHONPATH:+:"$PYTHONPATH"}}' for n in "ab"]
    planned = [line for line in planned if line not in hooks]
    assert rendered == planned and len(rendered) == 2 * 12
    assert "HCCL_IF_IP=172.16.0.1" in rendered and "HCCL_SOCKET_IFNAME=ib0" in rendered
    assert "hunter2" not in env.stdout + env.stderr + plan.stdout + plan.stderr  # secrets never reach the terminal


def test_env_snippet_is_valid_sh_and_quotes_values(write_inventory: Any, cluster_network: Any, tmp_path: Path) -> None:
    path = write_inventory("nodes:\n  - {host: 10.0.0.1, env: {ODD: \"it's $HOME; rm -rf /\", HF_TOKEN: tok}}\n")
    result = invoke("render", "env", "-i", str(path), "--rank-table-file", "/a b/rt.json", "-o", str(tmp_path / "env.sh"))
    assert result.exit_code == 0 and result.stdout == ""
    written = tmp_path / "env.sh"
    assert written.stat().st_mode & 0o777 == 0o600
    shell = subprocess.run(["sh", "-c", f". {written}; " + 'printf "%s|%s|%s" "$ODD" "$RANK_TABLE_FILE" "$HF_TOKEN"'],
                           capture_output=True, text=True, check=True)
    assert shell.stdout == "it's $HOME; rm -rf /|/a b/rt.json|tok"
    shown = invoke("render", "env", "-i", str(path))
    assert "HF_TOKEN='<redacted>'" in shown.stdout and "tok" not in shown.stdout.replace("HF_TOKEN", "")
    # the one atomic write: a file that cannot be written is a clear error naming it (before: an internal error)
    missing = tmp_path / "no such dir" / "env.sh"
    failed = invoke("render", "env", "-i", str(path), "-o", str(missing))
    assert failed.exit_code == 1 and f"{missing}: cannot write" in failed.stderr and "internal error" not in failed.stderr


def test_env_json_and_node_filter(write_inventory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                  cluster_network: Any) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_inventory("nodes:\n  - {host: 10.0.0.1, name: a}\n  - {host: 10.0.0.2, name: b}\n")
    doc = json.loads(invoke("render", "env", "-i", str(path), "--json", "--node", "b").stdout)
    assert doc["status"] == "ok"
    # no RANK_TABLE_FILE unless asked for: a set one switches HCCL and MindSpore to rank-table mode
    assert doc["nodes"] == [{"name": "b", "host": "10.0.0.2", "env": {
        "HCCL_IF_IP": "172.16.0.2", "HCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0",
        "MASTER_ADDR": "172.16.0.1", "MASTER_PORT": "29500", "HCCL_CONNECT_TIMEOUT": "1200", "PYTHONUNBUFFERED": "1"}}]
    relative = json.loads(invoke("render", "env", "-i", str(path), "--json", "--node", "b", "--rank-table-file", "rt.json").stdout)
    assert relative["nodes"][0]["env"]["RANK_TABLE_FILE"] == str(tmp_path / "rt.json")
    result = runner.invoke(app, ["render", "env", "-i", str(path), "--node", "zz"])
    assert result.exit_code == 2 and "zz in 'zz': no such node" in result.stderr


def test_an_interface_without_an_address_is_an_error_not_a_fallback(write_inventory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendctl.inventory.load import Node
    from ascendctl.remote.transport.factory import TransportFactory
    from tests.fakes import FakeTransport, ip_sections, probe_reply

    def no_address(self: TransportFactory, node: Node) -> FakeTransport:
        sections = {**ip_sections("ib0", "192.0.2.1"), "net.addrs": ""}
        return FakeTransport(node, [(r"@@\w+ begin ", probe_reply(sections))])

    monkeypatch.setattr(TransportFactory, "open", no_address)
    path = write_inventory("defaults: {interface: ib0}\nnodes:\n  - {host: 10.0.0.1, name: a}\n")
    result = runner.invoke(app, ["render", "env", "-i", str(path)])
    assert result.exit_code == 3 and "a: interface ib0 (inventory interface) has no IPv4 address" in result.stderr
    result = runner.invoke(app, ["launch", "-i", str(path), "--launcher", "msrun", "--dry-run", "--", "t.py"])
    assert result.exit_code == 3 and "has no IPv4 address" in result.stderr


def test_core_does_not_import_cli_stack() -> None:
    code = "import ascendctl.render, ascendctl.facts.devices, sys; assert not {'typer', 'rich', 'click'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_same_problem_on_many_nodes_and_devices_is_one_line_with_its_hint_once(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #30: 200 nodes x 16 devices without device IPs printed 3,201 error lines and no hint to set device_ips."""
    from ascendctl.facts.device_check import Problem
    from ascendctl.ui.render_view import show_problems

    hint = "give the device IPs"
    problems = [Problem("no device IP (hccn_tool not found)", f"n{i:03d}", device, hint=hint) for i in range(1, 201) for device in range(16)]
    problems += [Problem("no device IP (hccn_tool not found)", "n201", 0, hint=hint)]  # another device set: its own line
    problems += [Problem("device_ips lists 3 addresses but slots is 2", "n007")]
    show_problems(problems)
    assert capsys.readouterr().err.splitlines() == [
        "ascendctl: error: n[001-200]: device 0-15: no device IP (hccn_tool not found)",
        "  hint: give the device IPs",
        "ascendctl: error: n201: device 0: no device IP (hccn_tool not found)",
        "  hint: give the device IPs",
        "ascendctl: error: n007: device_ips lists 3 addresses but slots is 2",
    ]
