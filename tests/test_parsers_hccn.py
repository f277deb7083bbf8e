"""ascendctl.facts.parsers.hccn: hccn_tool -link -g and -net_health -g."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.hccn import NET_HEALTH_STATUSES, parse_link, parse_net_health

SAMPLES = Path(__file__).resolve().parent / "data/samples/ascend"
DATA = Path(__file__).resolve().parent / "data/hccn_tool"


def test_link_up_from_mind_cluster_doc() -> None:
    assert parse_link((DATA / "link_up_mindcluster_doc.txt").read_text()) == "UP"


@pytest.mark.parametrize(("text", "state"), [("link status: DOWN\n", "DOWN"), ("link status: Up", "UP"), ("  link status :down  \n", "DOWN")])
def test_link_states_and_spellings(text: str, state: str) -> None:
    assert parse_link(text) == state


@pytest.mark.parametrize(
    "text",
    ["", "\n", "link status: FLAPPING\n", "net health status: Success\n", "dsmi_get_device_info failed, ret = -8005\n"],
)
def test_link_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="link status"):
        parse_link(text)


def test_net_health_socket_failed_from_envcheck_dump() -> None:
    dump = (SAMPLES / "envcheck_910A_npu-smi_hccn_tool_dump.txt").read_text()
    output = dump.split("-net_health -g\n", 1)[1].split("\n\n", 1)[0]
    health = parse_net_health(output)
    assert health.status == "Socket failed"
    assert health.ok is False


def test_net_health_init_from_mind_cluster_doc() -> None:
    health = parse_net_health((DATA / "net_health_init_mindcluster_doc.txt").read_text())
    assert (health.status, health.ok) == ("Init", False)


@pytest.mark.parametrize("status", NET_HEALTH_STATUSES + ("Socket failed",))
def test_only_success_is_ok(status: str) -> None:
    health = parse_net_health(f"net health status: {status}\n")
    assert health.status == status
    assert health.ok is (status == "Success")


@pytest.mark.parametrize("text", ["", "net health status:\n", "link status: UP\n", "ipaddr:10.10.0.10\nnetmask:255.255.255.0\n"])
def test_net_health_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="net health status"):
        parse_net_health(text)
