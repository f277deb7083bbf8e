"""-w/--nodes and -x/--exclude: node sets, groups, names or hosts, renumbered ranks, clear errors."""

from __future__ import annotations

import pytest

from ascendctl.errors import UsageError
from ascendctl.inventory.load import parse_inventory
from ascendctl.inventory.selection import select_nodes

INVENTORY = """
groups:
  rack1: 'n[01-03]'
  gpu: [n05, 10.0.0.4]
nodes:
  - {name: 'n[01-06]', host: '10.0.0.[1-6]'}
"""


def names(**kw: str) -> list[tuple[str, int]]:
    inv = select_nodes(parse_inventory(INVENTORY, source="inv.yaml"), kw.get("nodes"), kw.get("exclude"))
    return [(n.name, n.index) for n in inv.nodes]


def test_nothing_asked_keeps_every_node() -> None:
    assert [n for n, _ in names()] == ["n01", "n02", "n03", "n04", "n05", "n06"]


def test_node_set_keeps_inventory_order_and_renumbers_ranks() -> None:
    assert names(nodes="n06,n[02-03]") == [("n02", 0), ("n03", 1), ("n06", 2)]


def test_groups_hosts_and_exclusion() -> None:
    assert [n for n, _ in names(nodes="@rack1")] == ["n01", "n02", "n03"]
    assert [n for n, _ in names(nodes="@gpu")] == ["n04", "n05"]  # a group may name hosts
    assert [n for n, _ in names(nodes="10.0.0.[5-6]")] == ["n05", "n06"]
    assert [n for n, _ in names(exclude="@rack1,n05")] == ["n04", "n06"]
    assert [n for n, _ in names(nodes="@all", exclude="n[02-06]")] == ["n01"]
    assert [n for n, _ in names(nodes="n[01-04]!n02")] == ["n01", "n03", "n04"]


@pytest.mark.parametrize("kw, message", [
    ({"nodes": "n09"}, "n09 in 'n09': no such node in inv.yaml"),
    ({"nodes": "@rack9"}, "unknown node group @rack9"),
    ({"nodes": "n[01-"}, "bad node set"),
    ({"exclude": "@all"}, "no node left to run on"),
    ({"nodes": "n[1-100000000]"}, "stands for 100,000,000 names"),
])
def test_bad_selections_are_usage_errors_that_say_why(kw: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        names(**kw)
    assert message in caught.value.message
    assert caught.value.exit_code == 2


def test_a_group_naming_an_unknown_node_is_an_inventory_error() -> None:
    from ascendctl.errors import InventoryError

    with pytest.raises(InventoryError) as caught:
        parse_inventory("groups: {r: 'n[01-09]'}\nnodes:\n  - {name: 'n[01-02]', host: '10.0.0.[1-2]'}\n", source="x.yaml")
    assert "groups.r" in caught.value.message and "no such node" in caught.value.message
