"""Hostfiles read as inventories: each form, comments, and bad lines named by file and line (same checks as YAML)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import InventoryError
from ascendctl.inventory.hostfile import is_hostfile
from ascendctl.inventory.load import MAX_NODES, load_inventory, parse_inventory
from ascendctl.render import render_hostfile
from tests.json_schemas import assert_valid

runner = CliRunner()


def nodes_of(text: str) -> list[tuple[str, str, int]]:
    return [(n.name, n.host, n.slots) for n in parse_inventory(text, source="hosts").nodes]


def problems_of(text: str) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        parse_inventory(text, source="hosts")
    assert caught.value.exit_code == 2
    return caught.value.problems


@pytest.mark.parametrize("text, expected", [
    ("10.0.0.1 slots=8\n10.0.0.2 slots=4\n", [("10.0.0.1", "10.0.0.1", 8), ("10.0.0.2", "10.0.0.2", 4)]),  # Open MPI / DeepSpeed
    ("node1 slots=8 max_slots=8\nnode2 max-slots=16 slots=2\n", [("node1", "node1", 8), ("node2", "node2", 2)]),
    ("node1:8\nnode2:2\n", [("node1", "node1", 8), ("node2", "node2", 2)]),  # MPICH
    ("node1\nnode2\n", [("node1", "node1", 8), ("node2", "node2", 8)]),  # plain: the default slots
    ("# rack 1\n\n  node1 slots=4   # the head\n#node9\nnode2:1 # spare\n", [("node1", "node1", 4), ("node2", "node2", 1)]),
    ("fe80::1 slots=2\n", [("fe80::1", "fe80::1", 2)]),  # an IPv6 address is a host, not HOST:N
])
def test_each_hostfile_form_becomes_nodes_with_host_and_slots(text: str, expected: list[tuple[str, str, int]]) -> None:
    assert nodes_of(text) == expected


@pytest.mark.parametrize("fmt", ["openmpi", "deepspeed", "mpich", "plain"])
def test_every_hostfile_render_writes_reads_back_as_the_same_nodes(fmt: str) -> None:
    inv = parse_inventory("nodes:\n  - {host: 'n[1-3]'}\n  - {host: n9, slots: 2}\n", source="inv.yaml")
    back = parse_inventory(render_hostfile(inv, fmt), source="hosts")
    slots = [8, 8, 8, 2] if fmt != "plain" else [8, 8, 8, 8]
    assert [(n.name, n.host, n.slots) for n in back.nodes] == [(n, n, s) for n, s in zip(["n1", "n2", "n3", "n9"], slots)]


def test_yaml_inventories_are_not_taken_for_hostfiles() -> None:
    for text in ("nodes:\n  - node1\n", "# c\ndefaults: {slots: 2}\nnodes: [a]\n", "---\nnodes: [a]\n", "{nodes: [a]}\n",
                 "- node1\n", "nodes:  # trailing comment\n  - a\n"):
        assert not is_hostfile(text), text
    for text in ("node1\n", "# nodes: a\nnode1:8\n", "10.0.0.1 slots=8 # x: y\n"):
        assert is_hostfile(text), text


def test_bad_lines_are_all_reported_in_file_order_with_file_and_line() -> None:
    text = "node1 slots=8\nnode2 cpu=4\nnode3 slots=0\nnode4 slots=x\n:4\nnode5 max_slots=many\nnode1 slots=2\nbad/name\n"
    assert problems_of(text) == [
        "hosts:2: 'cpu=4': expected slots=N or max_slots=N after the host (HOST, HOST:SLOTS, or HOST slots=N [max_slots=N])",
        "hosts:3: slots: expected an integer from 1 to 1024 (got 0)",
        "hosts:4: slots: expected an integer from 1 to 1024 (got 'x')",
        "hosts:5: expected HOST, HOST:SLOTS, or HOST slots=N [max_slots=N] (got ':4')",
        "hosts:6: max_slots: expected a whole number (got 'many')",
        "hosts:7: host: duplicate host 'node1' (also in line 1)",
        "hosts:8: host: 'bad/name': not a node name: a name cannot contain '/' or '\\' "
        "(the host is the node's name when `name` is not given)",
    ]


def test_more_than_max_nodes_hosts_is_refused_at_the_first_line_past_the_cap() -> None:
    text = "".join(f"n{i}\n" for i in range(MAX_NODES + 5))
    assert problems_of(text) == [f"hosts:{MAX_NODES + 1}: more than {MAX_NODES:,} hosts; an inventory holds at most {MAX_NODES:,} nodes"]


def test_a_hostfile_gets_the_same_settings_chain_as_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDCTL_SLOTS", "2")
    inv = parse_inventory("node1\nnode2 slots=4\n", source="hosts", flags={"connect_timeout": 3})
    assert [(n.slots, n.sources["slots"], n.connect_timeout) for n in inv.nodes] == [(2, "env", 3), (2, "env", 3)]


def test_cli_takes_a_hostfile_as_inventory_and_reports_bad_lines_with_exit_2(tmp_path: Path) -> None:
    hosts = tmp_path / "hostfile"
    hosts.write_text("10.0.0.1 slots=8\n10.0.0.2:4\n")
    result = runner.invoke(app, ["inventory", "show", "-i", str(hosts), "--json"])
    assert result.exit_code == 0, result.output
    assert_valid("inventory-show", json.loads(result.stdout))
    assert load_inventory(hosts).names == ["10.0.0.1", "10.0.0.2"]
    hosts.write_text("10.0.0.1 slots=8\n10.0.0.1\n")
    result = runner.invoke(app, ["inventory", "validate", "-i", str(hosts)])
    assert result.exit_code == 2
    assert f"ascendctl: error: {hosts}:2: host: duplicate host '10.0.0.1' (also in line 1)" in result.stderr
    assert "Traceback" not in result.output
