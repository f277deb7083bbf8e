"""Inventory loading: the minimal file, ranges, precedence, and every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.errors import ExitCode, InventoryError
from ascendctl.inventory.load import BUILTIN_SOURCE, load_inventory, parse_inventory

REPO = Path(__file__).resolve().parent.parent

MINIMAL = """\
defaults: {user: root, port: 22, identity_file: /path/id_ed25519,
           known_hosts: /path/known_hosts, interface: eth0, slots: 8}
nodes:
  - {host: 10.0.0.11, name: n1}
  - {host: 10.0.0.12, name: n2, slots: 4}
"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, source="inv.yaml", environ={})
    assert info.value.exit_code == ExitCode.USAGE
    return info.value.problems


def test_minimal_inventory_from_the_issue_loads_as_is() -> None:
    inv = parse_inventory(MINIMAL, source="inv.yaml", environ={})
    assert [(n.name, n.host, n.slots, n.user, n.interface) for n in inv.nodes] == [
        ("n1", "10.0.0.11", 8, "root", "eth0"),
        ("n2", "10.0.0.12", 4, "root", "eth0"),
    ]
    assert inv.nodes[0].identity_file == "/path/id_ed25519"
    assert inv.nodes[1].sources["slots"] == "node"
    assert inv.nodes[0].sources["slots"] == "inventory"
    assert inv.nodes[0].sources["connect_timeout"] == "default"


def test_ranges_expand_in_order_with_matching_names() -> None:
    inv = parse_inventory(
        "nodes:\n  - host: 10.0.0.[11-13]\n    name: n[1-3]\n  - host: node[08-10]\n  - gpu01\n", environ={}
    )
    assert [(n.name, n.host, n.index) for n in inv.nodes] == [
        ("n1", "10.0.0.11", 0), ("n2", "10.0.0.12", 1), ("n3", "10.0.0.13", 2),
        ("node08", "node08", 3), ("node09", "node09", 4), ("node10", "node10", 5), ("gpu01", "gpu01", 6),
    ]


def test_range_of_sixteen_nodes() -> None:
    inv = parse_inventory("nodes:\n  - host: node[01-16]\n", environ={})
    assert inv.names[0] == "node01" and inv.names[-1] == "node16" and len(inv.nodes) == 16


def test_precedence_default_inventory_node_env_flag() -> None:
    text = "defaults: {connect_timeout: 3, slots: 4}\nnodes:\n  - {host: a, slots: 2}\n  - {host: b}\n"
    inv = parse_inventory(text, environ={"ASCENDCTL_CONNECT_TIMEOUT": "7"}, flags={"slots": 16})
    a, b = inv.nodes
    assert (a.connect_timeout, a.sources["connect_timeout"]) == (7.0, "env")
    assert (a.slots, a.sources["slots"]) == (16, "flag")
    assert (b.command_timeout, b.sources["command_timeout"]) == (60.0, "default")
    inv = parse_inventory(text, environ={})
    assert (inv.nodes[0].slots, inv.nodes[0].sources["slots"]) == (2, "node")
    assert (inv.nodes[1].slots, inv.nodes[1].sources["slots"]) == (4, "inventory")


def test_env_maps_merge_defaults_then_node() -> None:
    text = "defaults: {env: {A: '1', B: x}}\nnodes:\n  - {host: a, env: {B: y, C: 3}}\n"
    (node,) = parse_inventory(text, environ={}).nodes
    assert dict(node.env) == {"A": "1", "B": "y", "C": "3"}


def test_yaml_syntax_error_names_file_and_line() -> None:
    problems = errors_of("nodes:\n  - host: a\n  - {host: b\n")
    assert len(problems) == 1
    assert problems[0].startswith("inv.yaml:4: YAML syntax error")


def test_unknown_keys_suggest_the_right_one_with_line_numbers() -> None:
    problems = errors_of("defaults:\n  conect_timeout: 3\nnodes:\n  - {host: a, slot: 4}\nnode: []\n")
    assert "inv.yaml:2: defaults.conect_timeout: unknown key (did you mean connect_timeout?)" in problems
    assert "inv.yaml:4: nodes[0].slot: unknown key (did you mean slots?)" in problems
    assert "inv.yaml:5: node: unknown key (did you mean nodes?)" in problems


def test_wrong_types_name_key_path_and_expectation() -> None:
    problems = errors_of("defaults: {port: ssh, slots: true, connect_timeout: -1}\nnodes:\n  - {host: a, user: [x]}\n")
    assert "inv.yaml:1: defaults.port: expected an integer from 1 to 65535 (got 'ssh')" in problems
    assert "inv.yaml:1: defaults.slots: expected an integer from 1 to 1024 (got True)" in problems
    assert "inv.yaml:1: defaults.connect_timeout: expected a number of seconds greater than 0 and at most 3600 (got -1)" in problems
    assert "inv.yaml:3: nodes[0].user: expected a non-empty string (got ['x'])" in problems


def test_duplicates_after_expansion_are_reported() -> None:
    problems = errors_of("nodes:\n  - host: n[1-3]\n  - host: n2\n  - {host: x, name: n3}\n")
    assert "inv.yaml:3: nodes[1].host: duplicate host 'n2' (also in nodes[0])" in problems
    assert "inv.yaml:4: nodes[2].name: duplicate name 'n3' (also in nodes[0])" in problems


def test_malformed_ranges_and_mismatched_name_ranges() -> None:
    problems = errors_of("nodes:\n  - host: node[3-1]\n  - host: 'node[01-'\n  - {host: 'a[1-3]', name: 'b[1-2]'}\n")
    assert any(p.startswith("inv.yaml:2: nodes[0].host: malformed range 'node[3-1]'") for p in problems)
    assert any(p.startswith("inv.yaml:3: nodes[1].host: malformed range 'node[01-'") for p in problems)
    assert "inv.yaml:4: nodes[2].name: 2 name(s) for 3 host(s); a host range needs a name range of the same length" in problems


@pytest.mark.parametrize("text", ["nodes: []\n", "defaults: {user: root}\nnodes:\n"])
def test_empty_node_list_is_an_error(text: str) -> None:
    (problem,) = errors_of(text)
    assert problem.endswith("nodes: no nodes (expected a list with at least one `- host: ...`)")
    assert problem.startswith("inv.yaml:")


def test_top_level_must_be_a_mapping_and_missing_host() -> None:
    assert errors_of("- a\n- b\n") == ["inv.yaml: expected a mapping with `defaults:` and `nodes:` at the top level"]
    assert errors_of("nodes:\n  - {name: x}\n") == ["inv.yaml:2: nodes[0].host: required key missing"]


def test_cluster_only_setting_on_a_node_is_explained() -> None:
    assert errors_of("nodes:\n  - {host: a, fanout: 3}\n") == ["inv.yaml:2: nodes[0].fanout: `fanout` can only be set under `defaults:`"]


def test_bad_environment_override_is_reported() -> None:
    with pytest.raises(InventoryError) as info:
        parse_inventory("nodes: [a]\n", environ={"ASCENDCTL_PORT": "http"})
    assert info.value.problems == ["environment: ASCENDCTL_PORT='http': invalid literal for int() with base 10: 'http'"]


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as info:
        load_inventory(tmp_path / "nope.yaml", environ={})
    assert info.value.problems == [f"{tmp_path / 'nope.yaml'}: file not found"]


def test_builtin_default_is_one_local_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    inv = load_inventory(None, environ={})
    assert inv.source == BUILTIN_SOURCE
    assert [(n.host, n.transport) for n in inv.nodes] == [("localhost", "local")]


def test_inventory_lookup_order_flag_env_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inventory.yaml").write_text("nodes: [cwd]\n")
    (tmp_path / "env.yaml").write_text("nodes: [env]\n")
    (tmp_path / "flag.yaml").write_text("nodes: [flag]\n")
    assert load_inventory(None, environ={}).names == ["cwd"]
    assert load_inventory(None, environ={"ASCENDCTL_INVENTORY": "env.yaml"}).names == ["env"]
    assert load_inventory("flag.yaml", environ={"ASCENDCTL_INVENTORY": "env.yaml"}).names == ["flag"]


def test_example_inventory_loads() -> None:
    inv = load_inventory(REPO / "inventory.example.yaml", environ={})
    assert len(inv.nodes) >= 2
    assert len({n.host for n in inv.nodes}) == len(inv.nodes)


def test_builtin_inventory_slots_are_this_machines_accelerators(tmp_path: Path) -> None:
    from ascendctl.inventory.load import local_accelerators

    assert local_accelerators(tmp_path) == 0  # no accelerator: the built-in node gets one worker, not 8
    for name in ("davinci0", "davinci1", "davinci_manager", "nvidia0"):
        (tmp_path / name).touch()
    assert local_accelerators(tmp_path) == 2  # NPUs first; davinci_manager is not a device
    for name in ("davinci0", "davinci1"):
        (tmp_path / name).unlink()
    (tmp_path / "nvidiactl").touch()
    assert local_accelerators(tmp_path) == 1


def test_node_and_inventory_defaults_are_the_settings_defaults() -> None:
    """A setting's default is written once (inventory/settings.py); Node's and Inventory's fields take it from there."""
    import dataclasses

    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.inventory.settings import DEFAULTS

    checked = 0
    for cls in (Node, Inventory):
        for item in dataclasses.fields(cls):
            if item.name in DEFAULTS and item.default is not dataclasses.MISSING:
                assert item.default == DEFAULTS[item.name], (cls.__name__, item.name)
                checked += 1
    assert checked >= 16


def test_the_restart_section_is_launch_restarts_policy_checked_with_key_paths() -> None:
    from ascendctl.inventory.load import RestartSettings
    from ascendctl.inventory.selection import select_nodes

    inv = parse_inventory("nodes: [a, b]\nrestart:\n  restarts: 3\n  backoff: 0\n  allow_shrink: true\n"
                          "  no_progress_attempts: 2\n  checkpoint_dir: /ckpt\n", source="inv.yaml")
    assert inv.restart == RestartSettings(3, 0.0, True, 2, "/ckpt", where="inv.yaml:2: restart")
    assert select_nodes(inv, "b").restart == inv.restart  # a node selection keeps the cluster's policy
    assert parse_inventory("nodes: [a]\n", source="inv.yaml").restart is None
    with pytest.raises(InventoryError) as err:
        parse_inventory("nodes: [a]\nrestart:\n  restarts: -1\n  backoff: .nan\n  allow_shrink: 'yes'\n"
                        "  no_progress_attempts: 0\n  checkpoint_dir: \"/ck\\u202e\"\n  spares: b\n", source="inv.yaml")
    assert err.value.problems == [
        "inv.yaml:8: restart.spares: the spares are the `spares` group: `groups: {spares: 'n[15-16]'}` (or launch --spares)",
        "inv.yaml:3: restart.restarts: expected an integer from 0 to 10000 (got -1)",
        "inv.yaml:4: restart.backoff: expected a number of seconds >= 0 (got nan)",
        "inv.yaml:5: restart.allow_shrink: expected true or false (got 'yes')",
        "inv.yaml:6: restart.no_progress_attempts: expected an integer from 1 to 10000 (got 0)",
        "inv.yaml:7: restart.checkpoint_dir: cannot contain control or invisible characters (U+202E, a bidirectional "
        "control character) (got '/ck\\u202e')",
    ]
    with pytest.raises(InventoryError) as flat:
        parse_inventory("nodes: [a]\nrestart: 3\n", source="inv.yaml")
    assert flat.value.problems == ["inv.yaml:2: restart: expected a mapping like {restarts: 3, checkpoint_dir: /ckpt}"]
