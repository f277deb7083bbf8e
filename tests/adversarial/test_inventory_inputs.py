"""Hostile inventories: every input has a bound and a clear error past it (exit 2, file:line: key path, no traceback).

Each hostile file is generated here. The CLI cases run `ascendctl` in a subprocess under `prlimit --as`, so a
bound that does not hold shows up as a MemoryError, a kill or a crash instead of the expected message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.inventory import load as inventory_module
from ascendctl.cli import app
from ascendctl.errors import ExitCode, InventoryError, PathEscapeError
from ascendctl.inventory.load import MAX_NODES, MAX_YAML_ALIASES, TOP_LEVEL_KEYS, Inventory, Node, load_inventory, parse_inventory
from ascendctl.paths import child, name_problem

MEMORY_CAP = 1 << 30  # 1 GiB of address space: a billion laughs needs tens of GB, a good inventory far less
runner = CliRunner()

BILLION_LAUGHS = "".join(
    [f"a0: &a0 [{', '.join(['lol'] * 9)}]\n"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)]
    + ["nodes: [*a8]\n"]
)
# The same explosion through merge keys: each level merges the previous mapping twice.
MERGE_LAUGHS = "m0: &m0 {k0: 1, k1: 2}\n" + "".join(
    f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], x{i}: 1}}\n" for i in range(1, 40)
) + "nodes: [{host: a}]\n"


def cli(*args: str, memory: int = MEMORY_CAP) -> subprocess.CompletedProcess[str]:
    """Run ascendctl in a subprocess under an address-space cap."""
    return subprocess.run(["prlimit", f"--as={memory}", sys.executable, "-m", "ascendctl", *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "ASCENDCTL_NO_PROGRESS": "1"})


def problems_of(text: str, **kwargs: Any) -> list[str]:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, source="inv.yaml", environ=kwargs.pop("environ", {}), **kwargs)
    assert info.value.exit_code == ExitCode.USAGE
    return info.value.problems


def assert_refused(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr[-2000:]
    for text in expected:
        assert text in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize("command", [["inventory", "validate"], ["inventory", "show"], ["preflight"]])
def test_billion_laughs_is_refused_under_a_memory_cap(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(BILLION_LAUGHS)
    assert len(BILLION_LAUGHS) < 1000
    result = cli(*command, "-i", str(path))
    assert_refused(result, f"{path}:", "values once aliases are expanded")


def test_billion_laughs_through_merge_keys_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(MERGE_LAUGHS)
    assert_refused(cli("inventory", "validate", "-i", str(path)), "values once aliases are expanded")


def test_recursive_alias_and_deep_nesting_are_refused(tmp_path: Path) -> None:
    recursive = problems_of("a: &a [1, *a]\nnodes: [{host: h}]\n")
    assert recursive == ["inv.yaml:1: alias *a refers to a value that contains it"]
    path = tmp_path / "deep.yaml"
    path.write_text("nodes: " + "[" * 100_000 + "]" * 100_000 + "\n")  # libyaml's composer segfaults on this
    assert_refused(cli("inventory", "validate", "-i", str(path)), f"{path}:1: nested deeper than 32 levels")


@pytest.mark.parametrize("depth", [33, 40, 999, 1000, 1001, 5000])
def test_nesting_bound_speaks_first_whatever_libyamls_own_limit(depth: int) -> None:
    """libyaml 0.2.6 (PyYAML 6.0.4) refuses flow nesting past 1,000 while looking ahead on the line; ours is 32."""
    one_line = "nodes: " + "[" * depth + "]" * depth + "\n"
    assert problems_of(one_line) == ["inv.yaml:1: nested deeper than 32 levels"]
    # one bracket a line: no look-ahead past the line, so the refusal names the line of level 33 (the
    # top-level mapping is level 1, so the 32nd bracket, on line 33)
    per_line = "nodes:\n" + "  [\n" * depth + "  ]\n" * depth
    assert problems_of(per_line) == ["inv.yaml:33: nested deeper than 32 levels"]


def test_nesting_within_the_bound_still_loads() -> None:
    deep = "nodes: [{host: a, env: {X: '1'}}]\nextra: " + "[" * 31 + "]" * 31 + "\n"
    assert problems_of(deep)[0].startswith("inv.yaml:2: extra: unknown key")


def test_libyaml_nesting_refusal_gets_the_bounds_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever libyaml the lock installs, its own depth refusal is translated (not a 'YAML syntax error')."""
    import yaml

    class DepthLimitedParser:
        def __init__(self, text: str) -> None:
            self.events = 0

        def get_event(self) -> yaml.Event:
            self.events += 1
            if self.events > 2:
                mark = yaml.Mark("<unicode string>", 1006, 2, 1006, None, None)
                raise yaml.scanner.ScannerError("while increasing flow level", mark, "exceeded maximum nesting depth", mark)
            return yaml.StreamStartEvent() if self.events == 1 else yaml.DocumentStartEvent()

        def dispose(self) -> None:
            pass

    monkeypatch.setattr(inventory_module, "_SAFE_LOADER", DepthLimitedParser)
    with pytest.raises(InventoryError) as info:
        parse_inventory("nodes: [{host: a}]\n", source="inv.yaml", environ={})
    assert info.value.problems == ["inv.yaml:3: nested deeper than 32 levels"]
    assert info.value.exit_code == ExitCode.USAGE

    class OtherScannerError(DepthLimitedParser):
        def get_event(self) -> yaml.Event:
            raise yaml.scanner.ScannerError("while scanning", None, "found character '\\t'", yaml.Mark("f", 0, 4, 0, None, None))

    monkeypatch.setattr(inventory_module, "_SAFE_LOADER", OtherScannerError)
    with pytest.raises(InventoryError) as info:
        parse_inventory("nodes: [{host: a}]\n", source="inv.yaml", environ={})
    assert info.value.problems == ["inv.yaml:5: YAML syntax error: found character '\\t'"]


def test_alias_count_is_bounded() -> None:
    text = "x: &x 1\nnodes: [{host: h}]\ny: [" + ", ".join(["*x"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    assert problems_of(text) == [f"inv.yaml:3: more than {MAX_YAML_ALIASES:,} aliases"]


def test_aliases_within_bounds_still_work_and_name_lines() -> None:
    text = ("defaults: {slots: 4}\ncommon: &c {slots: 2, port: 2222}\n"
            "nodes:\n  - {<<: *c, host: a}\n  - {<<: *c, host: b, port: 22}\n")
    problems = problems_of(text)  # `common` is not an inventory key; everything else is fine
    assert problems == [f"inv.yaml:2: common: unknown key (expected one of: {', '.join(TOP_LEVEL_KEYS)})"]
    good = "defaults: &d {slots: 2, port: 2222}\nnodes:\n  - {<<: *d, host: a}\n  - {<<: *d, host: b, port: 22}\n"
    a, b = parse_inventory(good, environ={}).nodes
    assert (a.slots, a.port, b.slots, b.port) == (2, 2222, 2, 22)
    # a bad value reached through an alias is reported at the nearest line that holds it
    bad = "defaults: &d {slots: 0}\nnodes:\n  - {<<: *d, host: a}\n"
    assert "inv.yaml:3: nodes[0].slots: expected an integer from 1 to 1024 (got 0)" in problems_of(bad)


def test_file_size_is_bounded_even_for_an_endless_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory_module, "MAX_INVENTORY_BYTES", 4096)
    with pytest.raises(InventoryError) as info:
        load_inventory("/dev/zero", environ={})  # never ends: only the cap stops the read
    assert info.value.problems[0].startswith("/dev/zero: larger than")
    with pytest.raises(InventoryError):
        parse_inventory("nodes: [{host: a}]\n" + "#" * 5000, environ={})


def test_huge_range_is_refused_before_expansion(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("nodes:\n  - {host: h1, name: 'n[1-100000000]'}\n  - {host: 'h[1-99999999999999]x[1-1000]'}\n")
    assert_refused(cli("inventory", "validate", "-i", str(path), memory=MEMORY_CAP // 2),
                   f"{path}:2: nodes[0].name: 'n[1-100000000]' is 100,000,000 nodes; an inventory holds at most 100,000 nodes")


def test_node_cap_counts_across_entries_and_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    problems = problems_of("nodes:\n  - {host: 'a[1-60000]'}\n  - {host: 'b[1-60000]'}\n  - {host: 'c[1-60000]'}\n")
    assert problems == ["inv.yaml:3: nodes[1].host: 'b[1-60000]' is 60,000 nodes after the 60,000 before it; "
                        "an inventory holds at most 100,000 nodes"]
    monkeypatch.setattr(inventory_module, "MAX_NODES", 10)  # the entry count, without parsing 100,001 entries
    text = "nodes:\n" + "".join(f"  - h{i}\n" for i in range(11))
    assert problems_of(text) == ["inv.yaml:1: nodes: 11 entries; an inventory holds at most 10 nodes"]


@pytest.mark.parametrize("pattern, problem", [
    ("'@all[1-2]'", "unexpected '@' outside [...]"),  # a ClusterShell group: could run the site's group commands
    ("'n[1-2],m1'", "unexpected ',' outside [...]"),
    ("'n[1-4]!n2'", "unexpected '!' outside [...]"),
    ("'n[5-1]'", "'5-1' is an empty range"),
    ("'n[1-2'", "unexpected '[' outside [...]"),
])
def test_range_syntax_is_ours_not_nodeset_extensions(pattern: str, problem: str) -> None:
    (message,) = problems_of(f"nodes:\n  - {{host: {pattern}}}\n")
    assert message.startswith("inv.yaml:2: nodes[0].host: malformed range") and problem in message


def test_100k_nodes_load_as_ranges_and_as_explicit_entries() -> None:
    as_range = parse_inventory("defaults: {user: root}\nnodes:\n  - {host: '10.1.[0-99].[0-999]', name: 'n[0-99999]'}\n",
                               environ={})
    explicit = parse_inventory("defaults: {user: root}\nnodes:\n" + "".join(
        f"  - {{host: 10.{i >> 16}.{(i >> 8) & 255}.{i & 255}, name: n{i}}}\n" for i in range(MAX_NODES)), environ={})
    for inv in (as_range, explicit):
        assert len(inv.nodes) == MAX_NODES
        assert len(set(inv.names)) == MAX_NODES and len({n.host for n in inv.nodes}) == MAX_NODES
        assert [n.index for n in inv.nodes[:3]] == [0, 1, 2] and inv.nodes[-1].index == MAX_NODES - 1
        assert {n.user for n in inv.nodes} == {"root"} and inv.nodes[-1].sources["user"] == "inventory"
    assert (explicit.nodes[-1].name, explicit.nodes[-1].host) == ("n99999", "10.1.134.159")
    assert as_range.nodes[0].name == "n0"


def test_duplicate_keys_are_refused_with_lines_and_key_paths() -> None:
    assert problems_of("defaults: {user: a}\ndefaults: {user: b}\nnodes: [{host: h}]\n") == [
        "inv.yaml:2: defaults: duplicate key (first on line 1)"]
    assert problems_of("nodes:\n  - host: h1\n    slots: 2\n    host: h2\n") == [
        "inv.yaml:4: nodes[0].host: duplicate key (first on line 2)"]
    assert problems_of("defaults:\n  preflight: {min_mtu: 9000, min_mtu: 1500}\nnodes: [{host: h}]\n") == [
        "inv.yaml:2: defaults.preflight.min_mtu: duplicate key (first on line 2)"]


@pytest.mark.parametrize("setting, value, message", [
    ("connect_timeout", ".nan", "defaults.connect_timeout: expected a number of seconds greater than 0 and at most 3600 (got nan)"),
    ("connect_timeout", ".inf", "defaults.connect_timeout: expected a number of seconds greater than 0 and at most 3600 (got inf)"),
    ("command_timeout", "-.inf", "defaults.command_timeout: expected a number of seconds greater than 0 and at most 604800 (got -inf)"),
    ("command_timeout", "-1", "defaults.command_timeout: expected a number of seconds greater than 0 and at most 604800 (got -1)"),
    ("slots", "8.5", "defaults.slots: expected an integer from 1 to 1024 (got 8.5)"),
    ("port", "70000", "defaults.port: expected an integer from 1 to 65535 (got 70000)"),
    ("preflight", "{min_mtu: -5}", "defaults.preflight.min_mtu: expected an integer from 68 to 65535 (got -5)"),
    ("preflight", "{max_clock_skew: .nan}", "defaults.preflight.max_clock_skew: expected a number of seconds greater than 0 and at most 3600 (got nan)"),
    ("preflight", "{section_timeout: .inf}", "defaults.preflight.section_timeout: expected a number of seconds greater than 0 and at most 3600 (got inf)"),
    ("preflight", "{master_port: 0}", "defaults.preflight.master_port: expected an integer from 1 to 65535 (got 0)"),
    ("preflight", "{min_free_disk_gb: -.inf}", "defaults.preflight.min_free_disk_gb: expected a number of gigabytes greater than 0 and at most 1e+06 (got -inf)"),
    ("preflight", "{min_mtu: 9000, mtu: 1}", "defaults.preflight.mtu: unknown key (did you mean min_mtu?)"),
    ("env", "{'1X': a}", "defaults.env.1X: invalid environment variable name"),
])
def test_numbers_are_finite_and_in_range_naming_full_key_paths(setting: str, value: str, message: str) -> None:
    assert problems_of(f"defaults:\n  {setting}: {value}\nnodes: [{{host: h}}]\n") == [f"inv.yaml:2: {message}"]


def test_every_bad_preflight_key_is_reported_at_once() -> None:
    problems = problems_of("defaults:\n  preflight:\n    min_mtu: 10\n    warn_clock_skew: .nan\nnodes: [{host: h}]\n")
    assert [p.split(": expected")[0] for p in problems] == ["inv.yaml:3: defaults.preflight.min_mtu",
                                                            "inv.yaml:4: defaults.preflight.warn_clock_skew"]


def test_numbers_from_environment_and_flags_pass_the_same_checks() -> None:
    text = "nodes: [{host: h}]\n"
    assert problems_of(text, environ={"ASCENDCTL_CONNECT_TIMEOUT": "nan"}) == [
        "environment: ASCENDCTL_CONNECT_TIMEOUT='nan': expected a number of seconds greater than 0 and at most 3600"]
    assert problems_of(text, flags={"command_timeout": float("inf")}) == [
        "command line: --command-timeout inf: expected a number of seconds greater than 0 and at most 604800"]


BAD_NAMES = ["../../x", "..", ".", "/abs/path", "a/b", "-oProxyCommand=x", "a\\x01b", "a\\x7fb", "a..b", "a\\\\b", "@all", "a*"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_node_names_are_refused_naming_the_key(name: str) -> None:
    (problem,) = problems_of(f'nodes:\n  - {{host: 10.0.0.1, name: "{name}"}}\n')
    assert problem.startswith("inv.yaml:2: nodes[0].name: ") and "not a node name" in problem
    (problem,) = problems_of(f'nodes:\n  - h1\n  - "{name}"\n')  # a bare host is the name too
    assert problem.startswith("inv.yaml:3: nodes[1].host: ") and "not a node name" in problem
    assert problems_of('nodes:\n  - {host: h, name: ""}\n') == ["inv.yaml:2: nodes[0].name: expected a name or a range like n[1-16]"]


def test_names_from_ranges_are_checked_too() -> None:
    (problem,) = problems_of("nodes:\n  - {host: 'h[1-3]', name: '-n[1-3]'}\n")
    assert problem == "inv.yaml:2: nodes[0].name: '-n1': not a node name: a name cannot start with '-'"


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "/abs", "-x", "a\x00b", "a\nb"])
def test_child_refuses_every_escape(tmp_path: Path, name: str) -> None:
    assert name_problem(name) is not None
    with pytest.raises(PathEscapeError):
        child(tmp_path, name)
    with pytest.raises(PathEscapeError):
        child(PurePosixPath("/var/log/job"), name)


def test_child_joins_a_plain_name_and_refuses_a_planted_link(tmp_path: Path) -> None:
    assert child(tmp_path, "n01") == tmp_path / "n01"
    assert child(PurePosixPath("/var/log/job"), "node-1.x") == PurePosixPath("/var/log/job/node-1.x")
    (tmp_path / "n02").symlink_to("/etc")
    with pytest.raises(PathEscapeError, match="symbolic link"):
        child(tmp_path, "n02")


def test_collect_and_launch_with_a_hostile_name_never_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work" / "here"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    path = tmp_path / "inv.yaml"
    path.write_text("defaults: {transport: local}\nnodes:\n  - {host: localhost, name: ../../x}\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for args in (["collect", "-i", str(path), "-o", "b.tar.gz", "--since", "1h"],
                 ["collect", "-i", str(path), "-o", "bundle"],
                 ["launch", "-i", str(path), "--launcher", "torchrun", "--dry-run", "--no-preflight", "--", "t.py"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"{path}:3: nodes[0].name: '../../x': not a node name" in result.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_use_sites_refuse_a_name_that_bypassed_the_inventory(tmp_path: Path) -> None:
    """A Node built by hand (not through the inventory) still cannot write outside the bundle or the log dir."""
    from ascendctl.bundle.collect import CollectOptions, collect_bundle
    from ascendctl.jobs.plan import LaunchOptions, build_plan
    from ascendctl.facts.endpoint import Endpoint

    hostile = Node(name="../escaped", host="localhost", index=0, transport="local")
    inv = Inventory(source="<test>", nodes=(hostile,))
    out = tmp_path / "out"
    out.mkdir()
    report = collect_bundle(inv, CollectOptions(output=out / "b", since=0.0))
    (bundle,) = report.nodes
    assert bundle.error is not None and "refusing the path for '../escaped'" in bundle.error
    assert not (out / "escaped").exists() and sorted(p.name for p in out.iterdir()) == ["b"]
    endpoints = {hostile.name: Endpoint(hostile.name, "eth0", "10.0.0.1", "test")}
    with pytest.raises(PathEscapeError):
        build_plan(inv, LaunchOptions(launcher="torchrun", script=("t.py",)), job_id="j1", endpoints=endpoints)


def test_groups_are_sized_before_expansion_and_take_no_nodeset_extensions() -> None:
    base = "nodes:\n  - {host: 'h[1-4]', name: 'n[1-4]'}\ngroups:\n"
    inv = parse_inventory(base + "  rack: 'n[1-2],h4'\n", environ={})
    assert inv.groups == {"rack": ("n1", "n2", "n4")}
    assert problems_of(base + "  big: 'n[1-100000000]'\n") == [
        "inv.yaml:4: groups.big: 'n[1-100000000]' is 100,000,000 names; an inventory holds at most 100,000 nodes"]
    (problem,) = problems_of(base + "  site: '@all'\n")
    assert problem.startswith("inv.yaml:4: groups.site: bad node set '@all': unexpected '@'")


# ------------------------------------------------------------------------------ hidden characters (issue #30)

# The whole class, one of each kind: C0 (tab, ESC), DEL, C1 (NEL, CSI), bidi marks, embeddings, overrides and
# isolates, the Arabic letter mark, other format characters (zero-width space, BOM, soft hyphen), the line and
# paragraph separators. Each is written into the YAML as an escape, so the file itself stays plain ASCII.
HIDDEN_CHARS = ["\t", "\x1b", "\x7f", "\x85", "\x9b", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                "\u2066", "\u2067", "\u2068", "\u2069", "\u061c", "\u200b", "\ufeff", "\u00ad", "\u2028", "\u2029"]


def yaml_escaped(text: str) -> str:
    """`text` as the inside of a YAML double-quoted scalar, every character past printable ASCII as a \\uXXXX escape."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else f"\\u{ord(c):04x}" for c in text)


def hidden_id(char: str) -> str:
    return f"U+{ord(char):04X}"


@pytest.mark.parametrize("char", HIDDEN_CHARS, ids=hidden_id)
def test_hidden_characters_in_names_and_hosts_are_refused_naming_the_character(char: str) -> None:
    code = f"U+{ord(char):04X}"
    for where, entry in (("name", f'{{host: 10.0.0.1, name: "{yaml_escaped("n" + char + "1")}"}}'),
                         ("name", f'{{host: "h[1-2]", name: "{yaml_escaped("n[1-2]" + char)}"}}'),  # a range, at its end
                         ("host", f'{{host: "{yaml_escaped("a" + char + "b")}", name: n1}}'),
                         ("host", f'"{yaml_escaped(char + "10.0.0.1")}"')):  # a bare host is the name too
        (problem,) = problems_of(f"nodes:\n  - {entry}\n")
        assert problem.startswith(f"inv.yaml:2: nodes[0].{where}: "), problem
        assert f"cannot contain control or invisible characters ({code}, " in problem, problem
        what = "not a node name" if where == "name" or entry.startswith('"') else "not a host name or address"
        assert what in problem, problem


@pytest.mark.parametrize("key, value", [
    ("user", '"ro{c}ot"'), ("jump_host", '"bastion{c}"'), ("interface", '"eth0{c}"'), ("identity_file", '"/k/id{c}"'),
    ("known_hosts", '"/k/known{c}"'), ("python", '"python3{c}"'), ("host_ip", '"10.0.0.1{c}"'),
    ("device_ips", '["10.1.0.1", "10.1.0.2{c}"]'), ("super_pod_id", '"1{c}"'), ("env", '{{A: "x{c}y"}}'),
])
@pytest.mark.parametrize("char", ["\x85", "\u202e", "\u2066", "\u2028"], ids=hidden_id)
def test_hidden_characters_in_string_settings_are_refused_with_file_line_key(key: str, value: str, char: str) -> None:
    written = value.format(c=yaml_escaped(char))
    (problem,) = problems_of(f"nodes:\n  - {{host: h1, {key}: {written}}}\n")
    key_path = "nodes[0].env.A" if key == "env" else f"nodes[0].{key}"
    assert problem.startswith(f"inv.yaml:2: {key_path}: cannot contain control or invisible characters "
                              f"({hidden_id(char)}, "), problem


def test_hidden_characters_in_defaults_environment_and_flags_are_refused() -> None:
    assert problems_of('defaults: {ssh_config: "~/.ssh/c\\u202e", preflight: {log_dir: "/tmp\\x1b[2J"}}\nnodes: [h]\n') == [
        "inv.yaml:1: defaults.ssh_config: cannot contain control or invisible characters (U+202E, a bidirectional control "
        "character) (got '~/.ssh/c\\u202e')",
        "inv.yaml:1: defaults.preflight.log_dir: cannot contain control or invisible characters (U+001B, a control character) "
        "(got '/tmp\\x1b[2J')"]
    assert problems_of("nodes: [h]\n", environ={"ASCENDCTL_USER": "ro\u202eot"}) == [
        "environment: ASCENDCTL_USER='ro\\u202eot': cannot contain control or invisible characters (U+202E, a bidirectional "
        "control character)"]
    assert problems_of("nodes: [h]\n", flags={"user": "ro\x85ot"}) == [
        "command line: --user 'ro\\x85ot': cannot contain control or invisible characters (U+0085, a control character)"]


def test_nel_is_named_not_taken_for_whitespace_or_stripped() -> None:
    """str.split() and strip() treat U+0085 as whitespace: it was 'one host per entry', or silently cut off."""
    (problem,) = problems_of('nodes:\n  - {host: 10.0.0.1, name: "a\\x85b"}\n')
    assert problem == ("inv.yaml:2: nodes[0].name: 'a\\x85b': not a node name: a name cannot contain control or invisible "
                       "characters (U+0085, a control character)")
    (problem,) = problems_of('nodes:\n  - {host: "h[1-2]\\N"}\n')  # YAML's own escape for NEL, after a range
    assert problem == ("inv.yaml:2: nodes[0].host: 'h[1-2]\\x85': not a node name: a name cannot contain control or "
                       "invisible characters (U+0085, a control character) (the host is the node's name when `name` is "
                       "not given)")


def test_hidden_characters_in_a_hostfile_stay_on_their_line_and_are_refused() -> None:
    """str.splitlines() breaks lines at U+0085, U+2028 and U+2029: one line must not become two hosts."""
    for char in ("\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c"):
        with pytest.raises(InventoryError) as info:
            parse_inventory(f"h1 slots=8\nh2{char}h3 slots=8\nh4\n", source="hosts", environ={})
        (problem,) = info.value.problems
        assert problem.startswith(f"hosts:2: host: {'h2' + char + 'h3'!r}: not a node name: ") and hidden_id(char) in problem
    inv = parse_inventory("h1\tslots=8\r\nh2:4\r\n", source="hosts", environ={})  # tabs and CRLF are still fine
    assert [(n.name, n.slots) for n in inv.nodes] == [("h1", 8), ("h2", 4)]


def test_hidden_characters_in_groups_are_refused() -> None:
    base = "nodes:\n  - {host: 'h[1-2]', name: 'n[1-2]'}\ngroups:\n"
    (problem,) = problems_of(base + '  rack: ["n1", "n2\\u202e"]\n')
    assert problem == ("inv.yaml:4: groups.rack: bad node set 'n2\\u202e': it cannot contain control or invisible characters "
                       "(U+202E, a bidirectional control character)")
    (problem,) = problems_of(base + '  "rack\\n": n1\n')  # `$` matched before a trailing newline
    assert problem.startswith("inv.yaml:4: groups.rack\\n: bad group name 'rack\\n'")
    (problem,) = problems_of('nodes:\n  - {host: h1, "us\\u202eer": root}\n')  # a key is shown escaped too
    assert problem.startswith("inv.yaml:2: nodes[0].us\\u202eer: unknown key")


@pytest.mark.parametrize("option", ["-w", "-x"])
@pytest.mark.parametrize("char", ["\x85", "\u202e", "\u2069", "\u200b"], ids=hidden_id)
def test_hidden_characters_in_node_sets_are_refused(tmp_path: Path, option: str, char: str) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("defaults: {transport: local}\nnodes:\n  - {host: 'h[1-2]', name: 'n[1-2]'}\n")
    result = runner.invoke(app, ["exec", "-i", str(path), option, f"n[1-2]{char}", "--", "true"])
    assert result.exit_code == 2, result.output
    assert (f"bad node set {'n[1-2]' + char!r}: it cannot contain control or invisible characters ({hidden_id(char)}, "
            in result.stderr), result.stderr
    assert char not in result.stderr  # shown escaped, never raw


def test_a_bidi_host_is_refused_by_the_cli_with_file_line_key_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text('nodes:\n  - {host: "10.0.0.1\\u202e", name: n1}\n  - {host: h2, user: "a\\u2066b"}\n')
    result = cli("inventory", "validate", "-i", str(path))
    assert_refused(result, f"{path}:2: nodes[0].host: '10.0.0.1\\u202e': not a host name or address",
                   f"{path}:3: nodes[1].user: cannot contain control or invisible characters (U+2066,")
    assert "\u202e" not in result.stderr and "\u2066" not in result.stderr
