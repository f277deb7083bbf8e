"""netcheck's device network: the hccn_tool -ping parser on real captures, the simulator against it, targets, verdict."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ascendctl.facts.devices import DeviceAddress, NodeDevices
from ascendctl.netcheck.device_ping import DevicePing, judge_devices, ping_command, ping_from_section, ping_targets
from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.hccn import parse_ping
from tests.sim.hccn_tool import hccn_tool_script

DATA = Path(__file__).parent / "data" / "netcheck"


def test_ping_parser_on_real_clean_captures() -> None:
    for name in ("hccn_tool_ping_910B1_arthurchiao-blog.txt", "hccn_tool_ping_ok_mindie-llm-multi-node.txt"):
        result = parse_ping((DATA / name).read_text())
        assert (result.transmitted, result.received, result.loss_percent, result.lost_lines) == (3, 3, 0.0, 0), name
        assert result.ok and result.problem is None


def test_ping_parser_on_the_real_capture_with_a_lost_packet() -> None:
    # as posted: the lost packet's line reads `recv time out seq=O` (a letter O) in the guide
    result = parse_ping((DATA / "hccn_tool_ping_loss_mindie-llm-multi-node.txt").read_text())
    assert (result.transmitted, result.received, result.loss_percent, result.lost_lines) == (3, 2, 33.33, 1)
    assert not result.ok


def test_ping_parser_rejects_output_without_the_summary_line() -> None:
    with pytest.raises(ParseError, match="packets transmitted"):
        parse_ping("hccn_tool: device id 9 is invalid\n")
    unreachable = parse_ping("device 0 PING 10.0.0.2\nFrom 10.0.0.1: Destination Host Unreachable\n"
                             "3 packets transmitted, 3 received, 0.00% packet loss\n")
    assert unreachable.problem == "Destination Host Unreachable" and not unreachable.ok


def _sim(tmp_path: Path, **kw: object) -> Path:
    path = tmp_path / "hccn_tool"
    path.write_text(hccn_tool_script({0: "10.0.0.1", 1: "10.0.0.2"}, **kw))  # type: ignore[arg-type]
    path.chmod(0o755)
    return path


def test_simulator_ping_answers_like_the_captures_and_the_parser_reads_it(tmp_path: Path) -> None:
    sim = _sim(tmp_path, ping_lost={1: 1}, unreachable=["10.0.9.9"])
    real_shape = (DATA / "hccn_tool_ping_910B1_arthurchiao-blog.txt").read_text().splitlines()[1:]

    def ping(device: int, address: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(sim), "-i", str(device), "-ping", "-g", "address", address], capture_output=True, text=True)

    clean = ping(0, "10.0.0.7")
    assert clean.returncode == 0
    assert [line.split(" ")[0] for line in clean.stdout.splitlines()] == [line.split(" ")[0] for line in real_shape]
    assert parse_ping(clean.stdout).ok
    lossy = ping(1, "10.0.0.7")
    assert lossy.returncode == 1 and parse_ping(lossy.stdout).received == 2
    dead = ping(0, "10.0.9.9")
    assert dead.returncode == 1 and parse_ping(dead.stdout).received == 0
    assert ping(5, "10.0.0.7").returncode == 1  # no such device


def _devices(name: str, base: int, count: int = 2, missing: int | None = None) -> NodeDevices:
    return NodeDevices(name, tuple(DeviceAddress(d, None if d == missing else f"10.0.{base}.{d}", "hccn_tool")
                                   for d in range(count)))


def test_targets_are_same_numbered_devices_of_each_pair_once() -> None:
    devices = {"a": _devices("a", 1), "b": _devices("b", 2, missing=1), "c": _devices("c", 3)}
    targets = ping_targets([("a", "b"), ("b", "c"), ("b", "a"), ("a", "z")], devices)
    assert targets == {"a": [("b", 0, "10.0.2.0")], "b": [("c", 0, "10.0.3.0")]}
    assert ping_command(3, "10.0.0.1; reboot") == (
        "command -v hccn_tool >/dev/null 2>&1 || exit 127; hccn_tool -i 3 -ping -g address '10.0.0.1; reboot'")


def test_section_results_become_pings_with_reasons() -> None:
    lossy = (DATA / "hccn_tool_ping_loss_mindie-llm-multi-node.txt").read_text()
    ping = ping_from_section("a", "b", 0, "10.0.2.0", lossy, 1)
    assert not ping.ok and ping.error == "1 of 3 packets lost (33.33%)"
    assert ping_from_section("a", "b", 0, "ip", "", 127).error == "hccn_tool -i 0 -ping -g address ip: hccn_tool not found"
    assert "exit 1: hccn_tool is busy" in (ping_from_section("a", "b", 0, "ip", "hccn_tool is busy\n", 1).error or "")


def _ping(node: str, peer: str, device: int, ok: bool) -> DevicePing:
    return DevicePing(node, peer, device, f"ip-{peer}-{device}", 3, 3 if ok else 0, None if ok else "3 of 3 packets lost (100%)")


def test_a_device_that_fails_with_every_peer_is_named_and_its_links_are_not() -> None:
    pings = [_ping("h01", "h02", 3, False), _ping("h02", "h03", 3, False), _ping("h01", "h03", 3, True),
             _ping("h01", "h02", 0, True), _ping("h02", "h03", 0, True)]
    verdict = judge_devices(pings)
    assert [(n, d) for n, d, _ in verdict.broken_devices] == [("h02", 3)]
    assert verdict.broken_links == () and not verdict.clean


def test_one_failed_ping_is_a_device_link() -> None:
    pings = [_ping("h01", "h02", 3, False), _ping("h02", "h03", 3, True), _ping("h01", "h03", 3, True)]
    verdict = judge_devices(pings)
    assert verdict.broken_devices == () and [(p.node, p.peer, p.device) for p in verdict.broken_links] == [("h01", "h02", 3)]
    assert judge_devices([_ping("h01", "h02", 0, True)]).clean
