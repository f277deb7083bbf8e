"""Device-IP discovery: probe command, parsers (against the samples), the hccn_tool simulator,
fan-out with FakeTransport, and `render ranktable --check`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.facts.devices import (HCCN_CONF_SECTION, NPU_MAP_SECTION, device_sections, devices_from_sections, discover_devices,
                               ip_section, parse_device_range, parse_hccn_conf, parse_hccn_tool_ip, parse_npu_map,
                               parse_spod_info, spod_sections)
from ascendctl.remote.probe import Section, build_probe, parse_probe
from ascendctl.errors import ConnectError
from ascendctl.inventory.load import load_inventory
from ascendctl.render import check_rank_table, render_rank_table
from tests.fakes import FakeFactory, ok
from tests.fakes import probe_reply as framed
from tests.sim.hccn_tool import hccn_conf_text, hccn_tool_script

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parent / "data/samples/ascend"
SAMPLE_IPS = {i: f"10.10.0.{10 + i}" for i in range(8)}  # envcheck_versions_hccn_ip_linkstat_8dev.txt
CONF_8NPU = {0: "127.0.0.45", 1: "127.0.0.226", 2: "127.0.0.83", 3: "127.0.0.190",
             4: "127.0.0.208", 5: "127.0.0.247", 6: "127.0.0.118", 7: "127.0.0.223"}  # hccn.conf_8npu_fixture.txt


def sample_blocks(name: str) -> dict[str, str]:
    """`<command line>` -> the output lines after it, from an envcheck dump in the samples."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in (SAMPLES / name).read_text().splitlines():
        if line.startswith("# "):
            continue
        if "hccn_tool -i" in line:
            current = blocks.setdefault(line.split("hccn_tool ", 1)[1].strip(), [])
        elif current is not None:
            if line.strip() == "":
                current = None
            else:
                current.append(line)
    return {cmd: "\n".join(lines) for cmd, lines in blocks.items()}


# --------------------------------------------------------------------------- parsers vs the samples


def test_hccn_tool_ip_parser_reads_every_sample_capture() -> None:
    blocks = sample_blocks("envcheck_versions_hccn_ip_linkstat_8dev.txt")
    assert {int(cmd.split()[1]): parse_hccn_tool_ip(text) for cmd, text in blocks.items() if cmd.endswith("-ip -g")} == SAMPLE_IPS
    blocks_910a = sample_blocks("envcheck_910A_npu-smi_hccn_tool_dump.txt")
    assert parse_hccn_tool_ip(blocks_910a["-i 0 -ip -g"]) == "192.161.200.10"
    assert parse_hccn_tool_ip(blocks_910a.get("-i 2 -ip -g", "")) is None  # device 2 printed nothing
    assert parse_hccn_tool_ip("ipaddr:29.1.112.213\nnetmask:255.255.0.0\n") == "29.1.112.213"  # arthurchiao blog


def test_hccn_conf_parser_reads_both_fixtures() -> None:
    assert parse_hccn_conf((SAMPLES / "hccn.conf_8npu_fixture.txt").read_text()) == CONF_8NPU
    a3 = parse_hccn_conf((SAMPLES / "hccn.conf_A3_16npu_fixture.txt").read_text())
    assert sorted(a3) == list(range(16))
    assert (a3[0], a3[1], a3[15]) == ("127.0.0.24", "127.0.0.114", "127.0.0.94")  # arp_N lines are not addresses


def test_spod_info_parser() -> None:
    # Line format documented for `npu-smi info -t spod-info -i 0 -c 0` (A3 SuperPoD).
    text = "SDID : 16777216\nSuper Pod Size : 384\nSuper Pod ID : 0\nServer Index : 4\n"
    info = parse_spod_info(text)
    assert (info.sdid, info.super_pod_id) == ("16777216", "0")
    assert parse_spod_info("garbage") == type(info)(None, None)


def test_device_range_parser_handles_multi_digit_ranges() -> None:
    assert parse_device_range("0-15") == list(range(16))
    assert parse_device_range("0,2,4-6,10-11") == [0, 2, 4, 5, 6, 10, 11]
    with pytest.raises(ValueError):
        parse_device_range("a-b")


# --------------------------------------------------------------------------- the real probe, run by sh on the simulator


def run_probe(tmp_path: Path, devices: range, *, tool: str | None = None, conf: str | None = None,
              spod: bool = False) -> dict[str, Section]:
    """The real device sections through the real probe, run by /bin/sh with the simulated hccn_tool (or none) on PATH
    and an hccn.conf (or none): how device discovery sees a node."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if tool is not None:
        (bin_dir / "hccn_tool").write_text(tool)
        (bin_dir / "hccn_tool").chmod(0o755)
    conf_path = tmp_path / "hccn.conf"
    if conf is not None:
        conf_path.write_text(conf)
    probe = build_probe(device_sections(devices, conf=str(conf_path), spod=spod), nonce="0123456789ab", section_timeout=10)
    out = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, check=True)
    return parse_probe(out.stdout, nonce="0123456789ab")


CONF_TEXT = "\n".join(line for line in (SAMPLES / "hccn.conf_8npu_fixture.txt").read_text().splitlines() if not line.startswith("# "))


def test_probe_prefers_hccn_tool(tmp_path: Path) -> None:
    found = devices_from_sections("n1", range(8), run_probe(tmp_path, range(8), tool=hccn_tool_script(SAMPLE_IPS), conf=CONF_TEXT))
    assert [(d.ip, d.source) for d in found.devices] == [(ip, "hccn_tool") for ip in SAMPLE_IPS.values()]


def test_probe_falls_back_to_hccn_conf_without_hccn_tool(tmp_path: Path) -> None:
    found = devices_from_sections("n1", range(8), run_probe(tmp_path, range(8), conf=CONF_TEXT))
    assert [(d.ip, d.source) for d in found.devices] == [(CONF_8NPU[i], "hccn.conf") for i in range(8)]


def test_probe_falls_back_per_device_when_hccn_tool_fails(tmp_path: Path) -> None:
    tool = hccn_tool_script({i: ip for i, ip in SAMPLE_IPS.items() if i != 5}, devices=[i for i in range(8) if i != 5])
    found = devices_from_sections("n1", range(8), run_probe(tmp_path, range(8), tool=tool, conf=CONF_TEXT))
    assert found.devices[5].source == "hccn.conf" and found.devices[5].ip == CONF_8NPU[5]
    assert {d.source for d in found.devices if d.device_id != 5} == {"hccn_tool"}


def test_probe_says_why_a_device_has_no_ip(tmp_path: Path) -> None:
    tool = hccn_tool_script({i: ip for i, ip in SAMPLE_IPS.items() if i != 2}, missing={2}, devices=range(8))
    conf = "\n".join(line for line in CONF_TEXT.splitlines() if not line.startswith("address_2"))
    found = devices_from_sections("n1", range(8), run_probe(tmp_path, range(8), tool=tool, conf=conf))
    assert found.devices[2].ip is None
    assert found.devices[2].note == "hccn_tool -i 2 -ip -g: printed no ipaddr (no output); /etc/hccn.conf has no address_2"
    nothing = devices_from_sections("n1", range(4), run_probe(tmp_path / "none" if (tmp_path / "none").mkdir() is None else tmp_path,
                                                              range(4)))
    assert {d.note for d in nothing.devices} == {"hccn_tool not found; /etc/hccn.conf not found"}


def test_probe_with_spod_sections() -> None:
    sections = {ip_section(0): Section("ipaddr:10.0.0.1\n", 0), ip_section(1): Section("ipaddr:10.0.0.2\n", 0),
                NPU_MAP_SECTION: Section("NPU ID Chip ID Chip Logic ID Chip Name\n0 0 0 Ascend910\n0 1 1 Ascend910\n", 0)}
    assert parse_npu_map(sections[NPU_MAP_SECTION].output) == {0: ("0", "0"), 1: ("0", "1")}
    assert spod_sections({1: ("0", "1")}) == {"spod.1": "npu-smi info -t spod-info -i 0 -c 1"}
    info = {"spod.0": Section("SDID : 16777216\nSuper Pod Size : 384\nSuper Pod ID : 3\nServer Index : 4\n", 0),
            "spod.1": Section("SDID : 16777217\nSuper Pod Size : 384\nSuper Pod ID : 3\nServer Index : 4\n", 0)}
    found = devices_from_sections("n1", [0, 1], sections, spod=True, spod_info=info)
    assert found.super_pod_id == "3" and [d.super_device_id for d in found.devices] == ["16777216", "16777217"]
    mixed = devices_from_sections("n1", [0, 1], sections, spod=True,
                                  spod_info={**info, "spod.1": Section(info["spod.1"].output.replace("ID : 3", "ID : 4"), 0)})
    assert mixed.problems == ("devices report different super pod ids: 3 (devices 0), 4 (devices 1)",)
    missing = devices_from_sections("n1", [0], {**sections, NPU_MAP_SECTION: Section("", 127)}, spod=True)
    assert missing.devices[0].super_device_note == "npu-smi not found"


# --------------------------------------------------------------------------- the simulator


def run_sim(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    tool = tmp_path / "hccn_tool"
    tool.write_text(script)
    tool.chmod(0o755)
    return subprocess.run([str(tool), *args], capture_output=True, text=True)


def test_simulator_replays_the_sample_line_formats(tmp_path: Path) -> None:
    blocks = sample_blocks("envcheck_versions_hccn_ip_linkstat_8dev.txt")
    script = hccn_tool_script(SAMPLE_IPS, net_health={0: "Socket failed"}, link={1: "DOWN"}, missing={8}, devices=range(9))
    for device in range(8):
        out = run_sim(tmp_path, script, "-i", str(device), "-ip", "-g")
        assert out.returncode == 0 and out.stdout == blocks[f"-i {device} -ip -g"] + "\n"
    health = sample_blocks("envcheck_910A_npu-smi_hccn_tool_dump.txt")["-i 0 -net_health -g"]
    assert run_sim(tmp_path, script, "-i", "0", "-net_health", "-g").stdout == health + "\n"
    assert run_sim(tmp_path, script, "-i", "2", "-net_health", "-g").stdout == "net health status: Success\n"
    assert run_sim(tmp_path, script, "-i", "1", "-link", "-g").stdout == "link status: DOWN\n"
    assert run_sim(tmp_path, script, "-i", "0", "-link", "-g").stdout == "link status: UP\n"
    missing = run_sim(tmp_path, script, "-i", "8", "-ip", "-g")
    assert (missing.returncode, missing.stdout) == (0, "")  # exists, no address: prints nothing
    unknown = run_sim(tmp_path, script, "-i", "9", "-ip", "-g")
    assert unknown.returncode != 0 and unknown.stdout == "" and "9" in unknown.stderr


def test_hccn_conf_text_round_trips() -> None:
    text = hccn_conf_text(CONF_8NPU, netmask="255.255.0.0", gateway="127.0.0.1")
    assert parse_hccn_conf(text) == CONF_8NPU
    fixture = [line for line in (SAMPLES / "hccn.conf_8npu_fixture.txt").read_text().splitlines() if not line.startswith("# ")]
    assert text.splitlines() == fixture


# --------------------------------------------------------------------------- discovery over the fan-out


def inventory_file(write_inventory: Any, extra: str = "") -> Path:
    return write_inventory(
        "defaults: {slots: 8}\nnodes:\n"
        "  - {host: 10.0.0.1, name: n1}\n"
        "  - {host: 10.0.0.2, name: n2}\n" + extra
    )


def probe_reply(ips: dict[int, str]) -> Any:
    return framed({ip_section(device): f"ipaddr:{ip}\nnetmask:255.255.255.0" for device, ip in ips.items()},
                  {HCCN_CONF_SECTION: 127})


def test_discovery_is_one_round_trip_per_node(write_inventory: Any) -> None:
    inventory = load_inventory(inventory_file(write_inventory))
    factory = FakeFactory(inventory, {
        "n1": [("hccn_tool", probe_reply({i: f"10.1.0.{i}" for i in range(8)}))],
        "n2": [("hccn_tool", probe_reply({i: f"10.2.0.{i}" for i in range(8)}))],
    })
    result = render_rank_table(inventory, factory=factory)
    assert result.problems == ()
    assert [len(t.calls) for t in factory.transports.values()] == [1, 1]
    assert result.table is not None and result.table["server_list"][1]["device"][7] == {"device_id": "7", "device_ip": "10.2.0.7", "rank_id": "15"}


def test_inventory_device_ips_mean_no_ssh_at_all(write_inventory: Any) -> None:
    ips = json.dumps([f"10.3.0.{i}" for i in range(8)])
    inventory = load_inventory(inventory_file(write_inventory, f"  - {{host: 10.0.0.3, name: n3, device_ips: {ips}}}\n"))
    factory = FakeFactory(inventory, default=[("hccn_tool", probe_reply({i: f"10.9.0.{i}" for i in range(8)}))])
    results = discover_devices(inventory, factory=factory)
    assert sorted(factory.transports) == ["n1", "n2"]
    assert [d.source for d in results.results[2].value.devices] == ["inventory"] * 8  # type: ignore[union-attr]


def test_unreachable_node_exits_4_and_others_are_still_validated(write_inventory: Any) -> None:
    inventory = load_inventory(inventory_file(write_inventory))
    factory = FakeFactory(
        inventory,
        {"n2": [("hccn_tool", probe_reply({i: f"10.2.0.{i}" for i in range(7)}))]},
        connect_errors={"n1": ConnectError("connection refused by 10.0.0.1:22", hint="is sshd running?")},
    )
    result = render_rank_table(inventory, factory=factory)
    assert int(result.exit_code) == 4 and result.table is None
    assert [(p.code, str(p)) for p in result.problems] == [
        ("unreachable", "n1: connection refused by 10.0.0.1:22"),
        ("invalid", "n2: device 7: no device IP (hccn_tool -i 7 -ip -g: printed no ipaddr (no output); /etc/hccn.conf not found)"),
    ]


def test_probe_that_does_not_finish_is_a_node_problem(write_inventory: Any) -> None:
    inventory = load_inventory(inventory_file(write_inventory))
    factory = FakeFactory(inventory, default=[("hccn_tool", ok("", exit_code=126, stderr="sh: permission denied\n"))])
    result = render_rank_table(inventory, factory=factory)
    assert int(result.exit_code) == 3
    assert [str(p) for p in result.problems] == [
        "n1: device probe failed (exit 126): sh: permission denied",
        "n2: device probe failed (exit 126): sh: permission denied",
    ]


def test_probe_cut_short_names_the_sections_that_never_answered(write_inventory: Any) -> None:
    inventory = load_inventory(inventory_file(write_inventory))
    full = probe_reply({i: f"10.1.0.{i}" for i in range(8)})

    def cut_after_device_5(command: str) -> Any:
        answer = full(command)
        text = answer.stdout
        return type(answer)(command, 137, text[:text.index("begin hccn_tool.ip.6@@") + len("begin hccn_tool.ip.6@@\n")], "", 0.0)

    factory = FakeFactory(inventory, default=[("hccn_tool", cut_after_device_5)])
    result = render_rank_table(inventory, factory=factory)
    assert int(result.exit_code) == 3
    assert str(result.problems[0]) == ("n1: device probe did not finish within 20s per section "
                                       "(no answer from hccn_tool.ip.6, hccn_tool.ip.7, hccn.conf)")


def test_v1_2_asks_npu_smi_only_when_the_inventory_lacks_super_ids(write_inventory: Any) -> None:
    path = write_inventory(
        "defaults: {slots: 2}\nnodes:\n"
        "  - {host: 10.0.0.1, name: n1, device_ips: [10.1.0.1, 10.1.0.2]}\n"
        "  - {host: 10.0.0.2, name: n2, device_ips: [10.1.0.3, 10.1.0.4], super_pod_id: 7, super_device_ids: [5, 6]}\n"
    )
    inventory = load_inventory(path)
    npu_map = "NPU ID  Chip ID  Chip Logic ID  Chip Name\n0       0        0              Ascend 910\n0       1        1              Ascend 910\n"
    spod = framed({f"spod.{d}": f"SDID : {100 + d}\nSuper Pod ID : 7\n" for d in (0, 1)})
    factory = FakeFactory(inventory, {"n1": [("spod-info", spod), ("npu-smi info -m", framed({NPU_MAP_SECTION: npu_map}))]})
    result = render_rank_table(inventory, version="1.2", factory=factory)
    assert result.problems == ()
    assert "hccn_tool" not in factory.transports["n1"].calls[0]  # IPs came from the inventory
    assert len(factory.transports["n1"].calls) == 2  # the chip map, then spod-info of the chips it listed
    assert list(factory.transports) == ["n1"]
    assert result.table is not None
    assert [(d["super_device_id"], d["device_ip"]) for s in result.table["server_list"] for d in s["device"]] == [
        ("100", "10.1.0.1"), ("101", "10.1.0.2"), ("5", "10.1.0.3"), ("6", "10.1.0.4"),
    ]
    assert result.table["super_pod_list"] == [{"super_pod_id": "7", "server_list": [{"server_id": "10.0.0.1"}, {"server_id": "10.0.0.2"}]}]


# --------------------------------------------------------------------------- --check


def written_table(write_inventory: Any) -> tuple[Path, dict[str, Any]]:
    path = write_inventory("defaults: {slots: 2}\nnodes:\n"
                           "  - {host: 10.0.0.1, name: n1, device_ips: [10.1.0.1, 10.1.0.2]}\n"
                           "  - {host: 10.0.0.2, name: n2, device_ips: [10.1.0.3, 10.1.0.4]}\n")
    result = render_rank_table(load_inventory(path))
    assert result.table is not None
    return path, json.loads(result.text())


def test_check_accepts_what_render_wrote(write_inventory: Any, tmp_path: Path) -> None:
    path, table = written_table(write_inventory)
    (tmp_path / "rt.json").write_text(json.dumps(table))
    result = runner.invoke(app, ["render", "ranktable", "-i", str(path), "--check", str(tmp_path / "rt.json")], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout == f"{tmp_path / 'rt.json'}: ok, version 1.0, 2 server(s), 4 rank(s) match the cluster\n"


def test_check_compares_with_the_live_nodes(write_inventory: Any) -> None:
    path = write_inventory("defaults: {slots: 2}\nnodes:\n  - {host: 10.0.0.1, name: n1}\n  - {host: 10.0.0.2, name: n2}\n")
    inventory = load_inventory(path)
    factory = FakeFactory(inventory, {
        "n1": [("hccn_tool", probe_reply({0: "10.1.0.1", 1: "10.1.0.2"}))],
        "n2": [("hccn_tool", probe_reply({0: "10.1.0.3", 1: "10.1.0.9"}))],
    })
    _, table = written_table(write_inventory)
    report = check_rank_table(inventory, table, source="rt.json", factory=factory)
    assert [(p.code, str(p)) for p in report.problems] == [
        ("mismatch", "n2: device 1: rank table has 10.1.0.4, the node reports (via hccn_tool) 10.1.0.9"),
    ]
    assert int(report.exit_code) == 3


def test_check_reports_file_problems_one_per_line(write_inventory: Any, tmp_path: Path) -> None:
    path, table = written_table(write_inventory)
    table["server_list"][1]["server_id"] = "10.0.0.99"
    table["server_list"][0]["device"][1]["device_ip"] = "10.1.0.1"
    table["server_list"][0]["device"][1]["rank_id"] = "0"
    (tmp_path / "rt.json").write_text(json.dumps(table))
    result = runner.invoke(app, ["render", "ranktable", "-i", str(path), "--check", str(tmp_path / "rt.json")])
    assert result.exit_code == 3
    rt = tmp_path / "rt.json"
    assert result.stderr.splitlines() == [
        f"ascendctl: error: {rt}: server_list[1]: server_id '10.0.0.99' matches no node host or name in the inventory",
        f"ascendctl: error: {rt}: rank_id: rank_id values are not 0..1, each once",
        f"ascendctl: error: n2: in the inventory but not in {rt}",
        "ascendctl: error: n1: device 1: duplicate device IP 10.1.0.1: also n1 device 0",
        "ascendctl: error: n1: device 1: rank table has 10.1.0.1, the inventory says 10.1.0.2",
        f"ascendctl: error: {rt}: 5 problem(s)",
    ]


def test_check_bad_json_is_a_problem_and_a_missing_file_an_error(write_inventory: Any, tmp_path: Path) -> None:
    path, _ = written_table(write_inventory)
    (tmp_path / "bad.json").write_text("{\n  \"version\": \"1.0\",\n")
    result = runner.invoke(app, ["render", "ranktable", "-i", str(path), "--check", str(tmp_path / "bad.json"), "--json"])
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert doc["errors"][0]["message"].startswith(f"{tmp_path / 'bad.json'}: not valid JSON: Expecting property name")
    result = runner.invoke(app, ["render", "ranktable", "-i", str(path), "--check", str(tmp_path / "none.json")])
    assert result.exit_code == 1 and result.stderr == f"ascendctl: error: {tmp_path / 'none.json'}: file not found\n"
