"""Node state that lasts (inventory/nodestate.py, `ascendctl nodes`): quarantine, release, spares, the state file
(key, mode, lock, corruption), quarantined nodes left out of the commands that reach nodes, `preflight
--quarantine-failed`, and the Slurm drain through a stand-in `scontrol` on PATH."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import ExitCode
from ascendctl.inventory.load import load_inventory
from ascendctl.inventory.nodestate import (NodeState, NodeStateError, inventory_key, load_node_state, quarantine_nodes,
                                           release_nodes, state_path, without_quarantined)
from ascendctl.preflight.checks.model import CheckResult, Status
from ascendctl.preflight.result import NodeReport, PreflightReport
from ascendctl.slurm import Allocation
from tests.json_schemas import assert_valid

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
LOCAL = (f"defaults: {{transport: local, slots: 1, python: {sys.executable}}}\ngroups: {{spares: 'n[05-06]'}}\n"
         "nodes:\n  - {name: 'n[01-06]', host: '127.0.0.[1-6]'}\n")


@pytest.fixture
def inv_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(LOCAL, encoding="utf-8")
    return path


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


def listing(inv: Path) -> dict[str, dict[str, Any]]:
    result = invoke("nodes", "-i", str(inv), "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert_valid("nodes", document)
    return {node["name"]: node for node in document["nodes"]}


# --- listing, quarantine, release -----------------------------------------------------------------------------------


def test_nodes_lists_ok_spare_and_quarantined_with_why_and_who(inv_file: Path) -> None:
    before = listing(inv_file)
    assert {n: v["state"] for n, v in before.items()} == {"n01": "ok", "n02": "ok", "n03": "ok", "n04": "ok",
                                                          "n05": "spare", "n06": "spare"}
    done = invoke("nodes", "quarantine", "n[03,06]", "-i", str(inv_file), "--reason", "ECC errors",
                  "--evidence", "job 20261126-1200 npu_ecc")
    assert done.exit_code == 0, done.output
    assert done.stdout == "quarantined: n[03,06]\n"
    after = listing(inv_file)
    assert after["n03"]["state"] == "quarantined" and after["n03"]["reason"] == "ECC errors"
    assert after["n03"]["evidence"] == "job 20261126-1200 npu_ecc"
    assert after["n03"]["command"] == "ascendctl nodes quarantine" and after["n03"]["by"]
    assert after["n03"]["since"].endswith("Z")
    assert after["n06"]["state"] == "quarantined" and after["n06"]["spare"] is True  # a quarantined spare
    assert after["n05"]["state"] == "spare" and after["n01"]["state"] == "ok" and after["n01"]["reason"] is None
    text = invoke("nodes", "-i", str(inv_file))
    assert text.exit_code == 0
    row = next(line for line in text.stdout.splitlines() if line.startswith("n03"))
    assert "quarantined" in row and "ECC errors" in row and "job 20261126-1200 npu_ecc" in row and "UTC" in row
    assert "2 quarantined" in text.stdout.splitlines()[0] and str(state_path(load_inventory(inv_file))) in text.stdout


def test_release_and_requarantine_keep_since_and_report_what_changed(inv_file: Path) -> None:
    inv = load_inventory(inv_file)
    first = quarantine_nodes(inv, ["n01"], "slow", by="alice", command="test", now=1000.0)
    again = quarantine_nodes(inv, ["n01", "n02"], "slower", by="bob", command="test", now=2000.0)
    assert (first.changed, again.changed, again.unchanged) == (("n01",), ("n02",), ("n01",))
    held = load_node_state(inv).quarantined
    assert (held["n01"].since, held["n01"].reason, held["n01"].by) == (1000.0, "slower", "bob")
    result = invoke("nodes", "-i", str(inv_file), "release", "n[01-03]")  # -i before the subcommand works too
    assert result.exit_code == 0, result.output
    assert result.stdout == "released: n[01-02]\nalready not quarantined: n03\n"
    assert load_node_state(inv).quarantined == {}


@pytest.mark.parametrize("args, says", [
    (["quarantine", "n[03,07-08]", "--reason", "x"], "n[07-08] in 'n[03,07-08]': no such node"),
    (["release", "nope"], "nope in 'nope': no such node"),
    (["quarantine", "n01", "--reason", "  "], "a quarantine needs a reason"),
    (["quarantine", "n01", "--reason", "a\x1b[2Jb"], "--reason cannot contain control or invisible characters"),
    (["quarantine", "@rack9", "--reason", "x"], "unknown node group @rack9"),
])
def test_bad_input_is_a_usage_error_naming_it(inv_file: Path, args: list[str], says: str) -> None:
    result = invoke("nodes", *args, "-i", str(inv_file))
    assert result.exit_code == ExitCode.USAGE, result.output
    assert says in result.stderr and "Traceback" not in result.output
    assert not state_path(load_inventory(inv_file)).exists()  # nothing half done


def test_quarantine_needs_a_reason_option(inv_file: Path) -> None:
    result = invoke("nodes", "quarantine", "n01", "-i", str(inv_file))
    assert result.exit_code == 2 and "--reason" in result.stderr


# --- the state file -----------------------------------------------------------------------------------------------


def test_state_is_private_and_keyed_by_the_inventory_files_resolved_path(inv_file: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    inv = load_inventory(inv_file)
    quarantine_nodes(inv, ["n02"], "x", by="a", command="t")
    path = state_path(inv)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.parent == Path(os.environ["XDG_STATE_HOME"]) / "ascendctl" / "nodes"
    assert inventory_key(inv) == str(inv_file.resolve())
    link = tmp_path / "link.yaml"
    link.symlink_to(inv_file)
    monkeypatch.chdir(tmp_path)
    assert "n02" in load_node_state(load_inventory("link.yaml")).quarantined  # the same file by another name
    inv_file.write_text(LOCAL.replace("n[01-06]", "n[01-08]").replace("127.0.0.[1-6]", "127.0.0.[1-8]"))
    assert "n02" in load_node_state(load_inventory(inv_file)).quarantined  # an edited file keeps its state
    copy = tmp_path / "copy.yaml"
    copy.write_text(LOCAL)
    assert load_node_state(load_inventory(copy)).quarantined == {}  # another file: its own state


@pytest.mark.parametrize("content", ["{not json", '{"schema": 1, "quarantined": []}', '{"schema": 9, "quarantined": {}}',
                                     '{"schema": 1, "quarantined": {"n01": {"reason": 3}}}', "[" * 100000])
def test_a_corrupt_state_file_is_a_clear_error_naming_it(inv_file: Path, content: str) -> None:
    path = state_path(load_inventory(inv_file))
    path.parent.mkdir(parents=True)
    path.write_text(content)
    for args in (["nodes", "-i", str(inv_file)], ["nodes", "quarantine", "n01", "--reason", "x", "-i", str(inv_file)],
                 ["exec", "-i", str(inv_file), "--", "true"]):
        result = invoke(*args)
        assert result.exit_code == ExitCode.ERROR, (args, result.output)
        assert f"{path}: the node state file is corrupt" in result.stderr and f"rm {path}" in result.stderr
        assert "Traceback" not in result.output and "internal error" not in result.stderr
    assert path.read_text() == content  # never overwritten behind the user's back
    used = invoke("exec", "-i", str(inv_file), "--include-quarantined", "-w", "n01", "--", "true")
    assert used.exit_code == 0, used.output  # the way round it: the state is not read


def test_an_unreadable_state_file_names_it(inv_file: Path) -> None:
    path = state_path(load_inventory(inv_file))
    path.mkdir(parents=True)  # a directory where the file should be: unreadable as a file, whoever runs the test
    with pytest.raises(NodeStateError, match="cannot read the node state") as err:
        load_node_state(load_inventory(inv_file))
    assert str(path) in err.value.message and err.value.hint and f"rm {path}" in err.value.hint


CONCURRENT = """
import sys, threading, time
from pathlib import Path
from ascendctl.inventory.load import load_inventory
from ascendctl.inventory.nodestate import quarantine_nodes
inv = load_inventory(sys.argv[1])
go, names = Path(sys.argv[2]), sys.argv[3:]
ready = threading.Barrier(len(names))

def one(name):
    ready.wait()
    quarantine_nodes(inv, [name], "concurrent " + name, by="t", command="test")

threads = [threading.Thread(target=one, args=(name,)) for name in names]
while not go.exists():
    pass
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def test_two_processes_quarantining_at_once_lose_no_update(tmp_path: Path) -> None:
    """2 processes x 20 threads, each one read-modify-write of the same file at once for its own node: all 40 end
    quarantined (without the lock most runs lose some)."""
    inv_file = tmp_path / "big.yaml"
    inv_file.write_text("defaults: {transport: local}\nnodes:\n  - {name: 'n[01-40]', host: 'h[01-40]'}\n")
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    halves = ([f"n{i:02d}" for i in range(1, 41, 2)], [f"n{i:02d}" for i in range(2, 41, 2)])
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(inv_file), str(go), *names], env=env) for names in halves]
    go.touch()  # both start their writes together
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    held = load_node_state(load_inventory(inv_file)).quarantined
    assert sorted(held) == [f"n{i:02d}" for i in range(1, 41)]
    assert held["n17"].reason == "concurrent n17"
    assert [p.name for p in state_path(load_inventory(inv_file)).parent.iterdir() if ".tmp-" in p.name] == []


# --- quarantined nodes left out of the commands that reach nodes ---------------------------------------------------


def test_commands_that_reach_nodes_leave_quarantined_ones_out_and_say_so_once(inv_file: Path) -> None:
    quarantine_nodes(load_inventory(inv_file), ["n03", "n04"], "x", by="a", command="t")
    result = invoke("exec", "-i", str(inv_file), "--json", "--", "true")
    assert result.exit_code == 0, result.output
    assert [n["name"] for n in json.loads(result.stdout)["nodes"]] == ["n01", "n02", "n05", "n06"]  # spares stay in
    notice = "ascendctl: notice: leaving out 2 quarantined nodes: n[03-04] (ascendctl nodes; --include-quarantined to use them)"
    assert result.stderr.count(notice) == 1 and result.stderr.count("leaving out") == 1
    every = invoke("exec", "-i", str(inv_file), "--include-quarantined", "--json", "--", "true")
    assert every.exit_code == 0 and len(json.loads(every.stdout)["nodes"]) == 6 and "quarantined" not in every.stderr
    plan = invoke("launch", "-i", str(inv_file), "--launcher", "torchrun", "--dry-run", "--json", "--", "train.py")
    assert plan.exit_code == 0, plan.output
    planned = json.loads(plan.stdout)["plan"]
    assert [(n["name"], n["node_rank"]) for n in planned["nodes"]] == [("n01", 0), ("n02", 1), ("n05", 2), ("n06", 3)]
    assert planned["world_size"] == 4 and notice in plan.stderr
    pre = invoke("preflight", "-i", str(inv_file), "-w", "n[01,03]", "--only", "ssh", "--json")
    assert [n["name"] for n in json.loads(pre.stdout)["nodes"]] == ["n01"]
    assert "leaving out 1 quarantined node: n03" in pre.stderr
    none_left = invoke("exec", "-i", str(inv_file), "-w", "n03", "--", "true")
    assert none_left.exit_code == ExitCode.USAGE and "no node left to run on: n03 is quarantined" in none_left.stderr
    shown = invoke("inventory", "show", "-i", str(inv_file), "--json")  # a command that does not reach nodes lists them all
    assert len(json.loads(shown.stdout)["nodes"]) == 6 and "quarantined" not in shown.stderr


def test_every_command_that_reaches_nodes_takes_include_quarantined() -> None:
    import typer

    group = typer.main.get_command(app)
    having = set()

    def walk(command: Any, path: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])
        if any("--include-quarantined" in getattr(p, "opts", ()) for p in getattr(command, "params", ())):
            having.add(" ".join(path))

    walk(group, [])
    assert {"launch", "exec", "preflight", "collect", "netcheck"} <= having
    assert not having & {"inventory show", "render hostfile", "nodes", "triage", "report"}


def test_without_quarantined_renumbers_like_a_selection(inv_file: Path) -> None:
    inv = load_inventory(inv_file)
    quarantine_nodes(inv, ["n01"], "x", by="a", command="t")
    kept, out = without_quarantined(inv)
    assert out == ["n01"] and kept.names == ["n02", "n03", "n04", "n05", "n06"]
    assert [n.index for n in kept.nodes] == [0, 1, 2, 3, 4] and kept.master.name == "n02"


# --- preflight --quarantine-failed ---------------------------------------------------------------------------------


def report_with_failures() -> PreflightReport:
    ok, fail = CheckResult("ntp", Status.PASS, "synced"), CheckResult("npu.count", Status.FAIL, "7/8 NPUs visible")
    mtu = CheckResult("mtu", Status.FAIL, "mtu 1500, expected 9000")
    unevaluated = CheckResult("ntp", Status.ERROR, "not evaluated: unreachable")
    return PreflightReport(("ntp", "npu.count", "mtu"), (
        NodeReport("n01", "127.0.0.1", True, (ok,)), NodeReport("n02", "127.0.0.2", True, (ok, fail, mtu)),
        NodeReport("n03", "127.0.0.3", False, (unevaluated,)), NodeReport("n04", "127.0.0.4", True, (fail,))), ())


def test_preflight_quarantine_failed_quarantines_the_nodes_whose_checks_failed(inv_file: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import ascendctl.preflight.run

    seen: list[list[str]] = []

    def fake_run(inv: Any, checks: Any, **kwargs: Any) -> PreflightReport:
        seen.append(inv.names)
        return report_with_failures()

    monkeypatch.setattr(ascendctl.preflight.run, "run_preflight", fake_run)
    result = invoke("preflight", "-i", str(inv_file), "--quarantine-failed", "--json")
    assert result.exit_code == ExitCode.NODES_UNREACHABLE, result.output  # preflight's own exit code stands
    held = listing(inv_file)
    assert {n for n, v in held.items() if v["state"] == "quarantined"} == {"n02", "n04"}  # not the unreachable n03
    assert held["n02"]["reason"] == "preflight: npu.count, mtu"
    assert held["n02"]["evidence"] == "npu.count: 7/8 NPUs visible; mtu: mtu 1500, expected 9000"
    assert held["n02"]["command"] == "ascendctl preflight --quarantine-failed"
    assert "quarantined n[02,04]" in result.stderr
    invoke("preflight", "-i", str(inv_file), "--quarantine-failed", "--json")
    assert seen[1] == ["n01", "n03", "n05", "n06"]  # the next run leaves them out
    without = invoke("preflight", "-i", str(inv_file), "--include-quarantined", "--json")
    assert without.exit_code == ExitCode.NODES_UNREACHABLE and seen[2] == [f"n0{i}" for i in range(1, 7)]


# --- Slurm: drain and resume through a stand-in scontrol ---------------------------------------------------------


@pytest.fixture
def scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in `scontrol` on PATH: it records every argv (one line, fields split by |) and answers `show node -o`
    from the file `nodes.txt`; `update` of a node listed in `refuse` fails as a user without operator rights does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "scontrol.log"
    (tmp_path / "nodes.txt").write_text("")
    (tmp_path / "refuse").write_text("")
    script = bin_dir / "scontrol"
    script.write_text(f"""#!/bin/sh
(IFS='|'; printf '%s\\n' "$*") >> {log}
case "$1 $2" in
  "show hostnames") printf "h01\\nh02\\nh03\\n" ;;
  "show node") cat {tmp_path}/nodes.txt ;;
  "update "*) if grep -qx "$2" {tmp_path}/refuse; then echo "slurm_update error: Invalid user id" >&2; exit 1; fi ;;
  *) echo "unexpected: $*" >&2; exit 1 ;;
esac
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def slurm_inventory(tmp_path: Path) -> Any:
    base = load_inventory(_write(tmp_path / "s.yaml", "nodes:\n  - {name: 'h0[1-3]', host: 'h0[1-3]'}\n"))
    return replace(base, allocation=Allocation("42", ("h01", "h02", "h03"), "test"), source="<Slurm job 42>")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def calls(log: Path) -> list[list[str]]:
    return [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []


def test_on_slurm_quarantine_drains_with_ascendctls_reason(tmp_path: Path, scontrol: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "c1")
    inv = slurm_inventory(tmp_path)
    assert inventory_key(inv) == "slurm:c1"  # every allocation on this cluster shares the state
    change = quarantine_nodes(inv, ["h01", "h03"], "preflight: npu.count", by="a", command="t")
    assert calls(scontrol) == [["update", "NodeName=h01", "State=DRAIN", "Reason=ascendctl: preflight: npu.count"],
                               ["update", "NodeName=h03", "State=DRAIN", "Reason=ascendctl: preflight: npu.count"]]
    assert change.slurm_problems == [] and [c.action for c in change.slurm] == ["drain", "drain"]


def test_on_slurm_release_resumes_only_nodes_drained_for_ascendctls_reason(tmp_path: Path, scontrol: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "c1")  # as Slurm sets it in a job (else `scontrol show config` is asked)
    inv = slurm_inventory(tmp_path)
    quarantine_nodes(inv, ["h01", "h02", "h03"], "x", by="a", command="t")
    (tmp_path / "nodes.txt").write_text(
        "NodeName=h01 NodeAddr=h01 State=IDLE+DRAIN Reason=ascendctl: x [root@2026-11-26T10:00:00]\n"
        "NodeName=h02 NodeAddr=h02 State=IDLE+DRAIN Reason=bad fan [ops@2026-11-26T09:00:00]\n"
        "NodeName=h03 NodeAddr=h03 State=IDLE\n")
    scontrol.unlink()
    change = release_nodes(inv, ["h01", "h02", "h03"])
    assert calls(scontrol) == [["show", "node", "-o", "h01,h02,h03"], ["update", "NodeName=h01", "State=RESUME"]]
    assert [(c.node, c.action) for c in change.slurm] == [("h01", "resume"), ("h02", "keep")]
    assert change.changed == ("h01", "h02", "h03") and load_node_state(inv).quarantined == {}


def test_a_refused_drain_keeps_the_quarantine_and_exits_1(tmp_path: Path, scontrol: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nodes.txt").write_text("NodeName=h01 NodeAddr=10.0.0.1 State=ALLOCATED\nNodeName=h02 NodeAddr=10.0.0.2 "
                                        "State=ALLOCATED\nNodeName=h03 NodeAddr=10.0.0.3 State=ALLOCATED\n")
    (tmp_path / "refuse").write_text("NodeName=h02\n")
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "h[01-03]")
    result = invoke("nodes", "quarantine", "h0[1-2]", "--reason", "slow links")
    assert result.exit_code == ExitCode.ERROR, result.output
    assert "quarantined: h[01-02]\ndrained in Slurm: h01\n" == result.stdout
    assert "ascendctl: warning: h02: slurm: `scontrol update NodeName=h02 State=DRAIN Reason=ascendctl: slow links` " \
           "failed: slurm_update error: Invalid user id" in result.stderr
    assert "ask a Slurm operator to drain it" in result.stderr
    listed = invoke("nodes", "--json")
    assert listed.exit_code == 0, listed.output
    document = json.loads(listed.stdout)
    assert_valid("nodes", document)
    assert [n["state"] for n in document["nodes"]] == [NodeState.QUARANTINED.value] * 2 + ["ok"]


def test_a_state_dir_that_cannot_be_written_is_exit_1_naming_it(inv_file: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    result = invoke("nodes", "quarantine", "n01", "--reason", "x", "-i", str(inv_file))
    assert result.exit_code == ExitCode.ERROR, result.output
    assert f"{blocker}/ascendctl/nodes/" in result.stderr and "cannot open the node state lock" in result.stderr
    assert "Traceback" not in result.output
    assert invoke("nodes", "-i", str(inv_file)).exit_code == 0  # nothing recorded there: every node ok


def test_a_long_listing_folds_ok_and_spare_nodes_but_never_a_quarantined_one(tmp_path: Path) -> None:
    inv_file = _write(tmp_path / "big.yaml", "defaults: {transport: local}\ngroups: {spares: 'n[19-20]'}\n"
                                             "nodes:\n  - {name: 'n[01-20]', host: 'h[01-20]'}\n")
    quarantine_nodes(load_inventory(inv_file), ["n03", "n04"], "bad", by="a", command="t")
    lines = invoke("nodes", "-i", str(inv_file)).stdout.splitlines()
    assert [line.split()[:2] for line in lines[2:]] == [["n[01-02,05-18]", "ok"], ["n[19-20]", "spare"],
                                                        ["n03", "quarantined"], ["n04", "quarantined"]]
    assert len(listing(inv_file)) == 20  # --json never folds


def test_a_node_gone_from_the_inventory_can_still_be_released_but_not_quarantined(inv_file: Path) -> None:
    quarantine_nodes(load_inventory(inv_file), ["n06", "n02"], "x", by="a", command="t")
    inv_file.write_text(LOCAL.replace("n[01-06]", "n[01-05]").replace("127.0.0.[1-6]", "127.0.0.[1-5]").replace("n[05-06]", "n05"))
    assert invoke("nodes", "quarantine", "n06", "--reason", "x", "-i", str(inv_file)).exit_code == ExitCode.USAGE
    assert "n06: quarantined but no longer in the inventory" in invoke("nodes", "-i", str(inv_file)).stderr
    typo = invoke("nodes", "release", "n[02,06-07]", "-i", str(inv_file))
    assert typo.exit_code == ExitCode.USAGE and "n07 in 'n[02,06-07]': no such node" in typo.stderr
    result = invoke("nodes", "release", "n[02,06]", "-i", str(inv_file))
    assert result.exit_code == 0, result.output
    assert result.stdout == "released: n[02,06]\n" and load_node_state(load_inventory(inv_file)).quarantined == {}


def test_the_schema_rejects_a_quarantine_without_why_and_an_ok_node_with_one(inv_file: Path) -> None:
    from tests.json_schemas import problems

    quarantine_nodes(load_inventory(inv_file), ["n01"], "x", by="a", command="t")
    document = json.loads(invoke("nodes", "-i", str(inv_file), "--json").stdout)
    assert problems("nodes", document) == []
    bad = json.loads(json.dumps(document))
    bad["nodes"][0]["reason"] = None
    bad["nodes"][1]["reason"] = "stray"
    bad["nodes"][2]["state"] = "drained"
    assert [p.split(":")[0] for p in problems("nodes", bad)] == ["nodes/0/reason", "nodes/1/reason", "nodes/2/state"]


def test_a_recorded_jobs_own_nodes_are_kept_for_collect_even_when_quarantined(inv_file: Path) -> None:
    """The culprit of a failed job is quarantined; `collect JOB` must still take its logs (cli/collect_cmd.py selects a
    job's nodes with keep_quarantined)."""
    from ascendctl.cli.common import NodeOptions

    assert invoke("nodes", "quarantine", "n02", "-i", str(inv_file), "--reason", "HANG job j1").exit_code == 0
    options = NodeOptions(inventory=str(inv_file), include_quarantined=False)
    assert "n02" not in options.select("collect").names
    assert "n02" in options.select("collect", keep_quarantined=True).names
    source = (REPO / "ascendctl" / "cli" / "collect_cmd.py").read_text()
    assert "keep_quarantined=True" in source  # the job path of collect asks for it
