"""--rerun-failed: each run records its failed and unreachable nodes; a rerun runs on exactly those (local transport)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.paths import state_dir
from ascendctl.inventory.retry import load_failures, retry_path
from tests.json_schemas import assert_valid

runner = CliRunner()

# a: runs `sleep 1` fine; b: the same command runs past its 0.5 s limit (failed); c: nothing listens on port 1 (unreachable).
INVENTORY = """
defaults: {transport: local, connect_retries: 0}
nodes:
  - {host: 127.0.0.1, name: a}
  - {host: localhost, name: b, command_timeout: 0.5}
  - {host: 127.0.0.2, name: c, transport: ssh, port: 1, connect_timeout: 2}
"""


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


def run(*args: str) -> tuple[int, dict[str, Any], str]:
    result = runner.invoke(app, [args[0], "--json", *args[1:]])
    return result.exit_code, json.loads(result.stdout), result.stderr


def statuses(doc: dict[str, Any]) -> dict[str, str]:
    return {n["name"]: n["status"] for n in doc["nodes"]}


def test_exec_rerun_failed_runs_on_exactly_the_failed_and_unreachable_nodes(inventory: Path) -> None:
    code, doc, _ = run("exec", "-i", str(inventory), "--", "sleep 1")
    assert code == 4 and statuses(doc) == {"a": "ok", "b": "timeout", "c": "unreachable"}
    record = load_failures("exec", str(inventory))
    assert record is not None and (record.failed, record.unreachable) == (("b",), ("c",))
    path = retry_path("exec", str(inventory))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.parent == state_dir() / "retry"

    code, doc, _ = run("exec", "-i", str(inventory), "--rerun-failed", "--", "sleep 1")
    assert code == 4 and statuses(doc) == {"b": "timeout", "c": "unreachable"}  # a is not asked again
    assert_valid("exec", doc)

    # Fixed on b (a longer limit), c left out with -x: only b runs, and now nothing failed.
    code, doc, _ = run("exec", "-i", str(inventory), "--rerun-failed", "-x", "c", "--command-timeout", "5", "--", "sleep 1")
    assert code == 0 and statuses(doc) == {"b": "ok"}
    record = load_failures("exec", str(inventory))
    assert record is not None and record.nodes == ()

    code, doc, stderr = run("exec", "-i", str(inventory), "--rerun-failed", "--", "sleep 1")
    assert code == 0 and doc["status"] == "ok" and "nodes" not in doc and doc["nothing_to_do"].startswith("nothing to rerun")
    assert_valid("envelope", doc)  # the envelope alone: there is no run to describe
    assert "ascendctl: notice: nothing to rerun: the last `exec` on" in stderr and "had no failed or unreachable nodes" in stderr


def test_records_are_per_command_and_per_inventory(inventory: Path, tmp_path: Path) -> None:
    assert run("exec", "-i", str(inventory), "--", "sleep 1")[0] == 4
    other = tmp_path / "other.yaml"
    other.write_text(INVENTORY)
    for args in (("exec", "-i", str(other)), ("preflight", "-i", str(inventory))):
        result = runner.invoke(app, [*args, "--rerun-failed", "--", "true"] if args[0] == "exec" else [*args, "--rerun-failed"])
        assert result.exit_code == 2
        assert f"nothing to rerun: no earlier `{args[0]}` on {args[2]} is recorded" in result.stderr


def test_the_same_file_by_another_path_shares_its_record(inventory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run("exec", "-i", str(inventory), "--", "sleep 1")[0] == 4
    monkeypatch.chdir(inventory.parent)
    code, doc, _ = run("exec", "-i", "inv.yaml", "--rerun-failed", "-x", "c", "--", "true")
    assert code == 0 and statuses(doc) == {"b": "ok"}


def test_preflight_records_unreachable_nodes_for_its_own_rerun(inventory: Path) -> None:
    code, doc, _ = run("preflight", "-i", str(inventory), "--only", "ssh")
    assert code == 4
    record = load_failures("preflight", str(inventory))
    assert record is not None and record.unreachable == ("c",) and record.failed == ()
    code, doc, _ = run("preflight", "-i", str(inventory), "--only", "ssh", "--rerun-failed")
    assert code == 4 and [n["name"] for n in doc["nodes"]] == ["c"]
    assert load_failures("exec", str(inventory)) is None  # exec has its own record


@pytest.mark.parametrize("args, message", [
    (("-w", "a"), "-w cannot be combined with --rerun-failed"),
    (("-x", "b,c"), "no node left to run on"),
])
def test_rerun_failed_usage_errors(inventory: Path, args: tuple[str, ...], message: str) -> None:
    assert run("exec", "-i", str(inventory), "--", "sleep 1")[0] == 4
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--rerun-failed", *args, "--", "true"])
    assert result.exit_code == 2 and message in result.stderr


def test_a_node_gone_from_the_inventory_is_named(inventory: Path) -> None:
    assert run("exec", "-i", str(inventory), "--", "sleep 1")[0] == 4
    inventory.write_text(INVENTORY.replace("name: b,", "name: b2,"))
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--rerun-failed", "--", "true"])
    assert result.exit_code == 2 and f"b: no such node in {inventory} any more" in result.stderr


def test_a_state_dir_that_cannot_be_written_warns_and_keeps_the_result(inventory: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    result = runner.invoke(app, ["exec", "-i", str(inventory), "-x", "c", "--", "sleep 1"])
    assert result.exit_code == 3
    assert "cannot save the nodes to rerun in" in result.stderr and "Traceback" not in result.output


def test_a_corrupt_record_is_a_usage_error_naming_it(inventory: Path) -> None:
    path = retry_path("exec", str(inventory))
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--rerun-failed", "--", "true"])
    assert result.exit_code == 2 and f"{path}: cannot read the record of the last `exec`" in result.stderr
    assert os.path.exists(path)
