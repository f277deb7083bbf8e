"""Output that scales (issue #30): past FOLD_NODES_ABOVE nodes, what many nodes print alike is shown once with the
folded node set: launch's teardown output, `launch --dry-run`, the collect table. Small clusters print as before, and
`--json` keeps every node."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ClusterShell.NodeSet import NodeSet
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.bundle.collect import CollectReport, CommandEntry, FileEntry, NodeBundle, RefusedFile
from ascendctl.inventory.load import load_inventory
from ascendctl.jobs.plan import LaunchOptions, build_plan, render_plan
from ascendctl.jobs.service import launch_job
from ascendctl.jobs.record import load_job
from ascendctl.models import NodeStatus
from ascendctl.facts.endpoint import Endpoint
from ascendctl.ui import FOLD_NODES_ABOVE, launch_view
from ascendctl.ui.collect_view import show_collect
from ascendctl.ui.launch_folding import plan_text

runner = CliRunner()
NAMES = [f"n{i:04d}" for i in range(1, 1001)]
# what a stopped torchrun prints (25 lines): its pid, its node's name and ranks differ from node to node
TRACEBACK = [
    "W1123 19:03:{s:02d}.{pid}000 {pid} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death "
    "signal, shutting down workers",
    "W1123 19:03:{s:02d}.{pid}001 {pid} torch/distributed/elastic/multiprocessing/api.py:897] Sending process {child} "
    "closing signal SIGTERM",
    "[default0]:[rank{rank}]: RuntimeError: Connection closed by peer [10.0.{octet}.{s}]:{port}",
    "Traceback (most recent call last):",
    '  File "/opt/venv/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", '
    "line 355, in wrapper",
    "    return f(*args, **kwargs)",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 919, in main',
    "    run(args)",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 910, in run',
    "    elastic_launch(",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 138, in __call__',
    "    return launch_agent(self._config, self._entrypoint, list(args))",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 260, in launch_agent',
    "    result = agent.run()",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 696, in run',
    "    result = self._invoke_run(role)",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 855, in _invoke_run',
    "    time.sleep(monitor_interval)",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 84, in '
    "_terminate_process_handler",
    '    raise SignalException(f"Process {{os.getpid()}} got signal: {{sigval}}", sigval=sigval)',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process {pid} got signal: 15",
    "  host      : {node}",
    "  rank      : {rank} (local_rank: 0)",
]
FAILED = ["[default3]:[rank59]: Traceback (most recent call last):", '[default3]:[rank59]:   File "train.py", line 7',
          "[default3]:[rank59]: RuntimeError: rank 59: bad batch at step 2"]


def _stopped_lines(i: int, node: str) -> list[str]:
    return [line.format(pid=4000 + i, child=4100 + i, rank=8 * i, octet=i // 250, s=i % 60, port=29500 + i, node=node)
            for line in TRACEBACK]


def _folded_sets(text: str) -> list[tuple[set[str], int, str]]:
    """The `[n[...]] (count) line` lines of folded output: (nodes, count, line)."""
    found = []
    for match in re.finditer(r"^\[(\S+)\]\s+\((\d+)\) (.*)$", text, re.M):
        found.append((set(NodeSet(match[1])), int(match[2]), match[3]))
    return found


def test_teardown_output_of_1000_nodes_is_folded_and_the_failing_node_shown_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #30: one failure at 1,000 nodes streamed every stopped torchrun's traceback: 25,000 lines."""
    with launch_view.launch_output(NAMES) as output:
        output.line("n0002", "step 1 loss 2.31")  # before the teardown: shown as it comes
        for line in FAILED[:2]:
            output.line("n0008", line)
        output.notice("n0008: launcher exited 1; stopping the other nodes")
        output.teardown("n0008")
        output.line("n0008", FAILED[2])  # the failing node's last words: never folded
        for i, node in enumerate(NAMES):
            if node != "n0008":
                for line in _stopped_lines(i, node):
                    output.line(node, line)
        output.line("n0500", "a line only n0500 printed")
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    lines = out.splitlines()
    assert len(lines) < 40 and len(err.splitlines()) < 5, out + err
    assert lines[:4] == ["[n0002] step 1 loss 2.31", *(f"[n0008] {line}" for line in FAILED)]
    victims = set(NAMES) - {"n0008"}
    folded = _folded_sets(out)
    # every line shape once, with every stopped node that printed it (and their count)
    assert len(folded) == len(TRACEBACK) + 1
    assert all(nodes == victims and count == 999 for nodes, count, _ in folded[:-1]), folded[:3]
    assert folded[0][2] == _stopped_lines(0, "n0001")[0] and folded[-2][2] == "  rank      : 0 (local_rank: 0)"
    assert folded[-1] == ({"n0500"}, 1, "a line only n0500 printed")
    assert "ascendctl: notice: n0008: launcher exited 1; stopping the other nodes" in err
    assert (f"ascendctl: notice: n[0001-0007,0009-1000]: {999 * 25 + 1:,} lines from the 999 nodes the teardown stopped, "
            "folded") in err and "launcher.log" in err


def test_teardown_output_past_the_distinct_line_cap_is_counted(capsys: pytest.CaptureFixture[str]) -> None:
    with launch_view.launch_output(NAMES) as output:
        output.teardown(None)  # a stop signal: every node is stopped
        for node in NAMES:
            output.line(node, f"{node}: my own words {'x' * int(node[1:])}")  # a different line on every node
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 50 and len(captured.err.splitlines()) == 2, captured
    assert "ascendctl: notice: n[0051-1000]: 950 more lines not shown (past 50 distinct lines)" in captured.err


def test_a_small_job_streams_every_line_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    names = NAMES[:FOLD_NODES_ABOVE]
    with launch_view.launch_output(names) as output:
        output.teardown("n0003")
        for i, node in enumerate(names):
            for line in _stopped_lines(i, node)[:3]:
                output.line(node, line)
    out = capsys.readouterr().out
    assert out == "".join(f"[{node}] {line}\n" for i, node in enumerate(names) for line in _stopped_lines(i, node)[:3])


FAKE_TORCHRUN = """#!/bin/sh
# Stand-in launcher: rank 0 fails; the others, stopped, print a traceback as torchrun does
for a in "$@"; do case $a in --node-rank=*) rank=${a#--node-rank=};; esac; done
if [ "$rank" = 0 ]; then sleep 1; echo "rank 0: bad batch"; exit 7; fi
trap 'echo "Traceback (most recent call last):"; echo "SignalException: Process $$ got signal: 15 on rank $rank"; exit 143' TERM
echo "rank $rank ready"
sleep 60 & wait
"""


def test_launch_folds_what_the_stopped_nodes_print(tmp_path: Path) -> None:
    """The teardown the supervise loop announces starts the folding, through the CLI: 17 local nodes, the first fails."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"defaults:\n  transport: local\n  slots: 1\n  python: {bin_dir}/python\n"
                         f"nodes:\n  - {{name: 'n[01-{FOLD_NODES_ABOVE + 1}]', host: '127.0.0.[1-{FOLD_NODES_ABOVE + 1}]'}}\n")
    result = runner.invoke(app, ["launch", "-i", str(inventory), "--launcher", "torchrun", "--no-preflight", "--grace", "2",
                                 "--log-dir", str(tmp_path / "logs"), "--", "train.py"], catch_exceptions=False)
    assert result.exit_code == 5, result.output
    assert "[n01] rank 0: bad batch" in result.stdout
    assert "ascendctl: notice: n01: launcher exited 7; stopping the other nodes" in result.stderr
    folded = {line: (nodes, count) for nodes, count, line in _folded_sets(result.stdout)}
    stopped = {f"n{i:02d}" for i in range(2, FOLD_NODES_ABOVE + 2)}
    assert folded["Traceback (most recent call last):"] == (stopped, len(stopped)), result.stdout
    assert not re.search(r"^\[n\d\d\] +Traceback", result.stdout, re.M)  # not one per node
    assert "lines from the 16 nodes the teardown stopped" in result.stderr
    record = load_job()  # the evidence is kept whole: each node's launcher.log
    for node in record.nodes[1:]:
        assert "Traceback (most recent call last):" in Path(node.log).read_text()


# -- launch --dry-run -------------------------------------------------------------------------------------
def _plan(count: int, tmp_path: Path, launcher: str = "torchrun") -> Any:
    width = len(str(count))
    inventory = tmp_path / "big.yaml"
    inventory.write_text("defaults: {user: root, interface: enp189s0f0, slots: 8, python: /opt/venv/bin/python, "
                         "env: {GLOG_v: '2'}}\n"
                         f"nodes:\n  - {{name: 'n[{1:0{width}d}-{count}]', host: 'h[{1:0{width}d}-{count}]'}}\n")
    inv = load_inventory(inventory)
    endpoints = {n.name: Endpoint(n.name, "enp189s0f0", f"172.16.{n.index // 250}.{n.index % 250 + 1}",
                                  "enp189s0f0 (inventory interface)") for n in inv.nodes}
    return build_plan(inv, LaunchOptions(launcher, ("/shared/train.py",), log_dir="/data/logs/j1"), job_id="dry-run",
                      endpoints=endpoints)


@pytest.mark.parametrize("launcher", ["torchrun", "msrun"])
def test_dry_run_of_1000_nodes_is_one_block_with_the_node_set(launcher: str, tmp_path: Path) -> None:
    plan = _plan(1000, tmp_path, launcher)
    text = plan_text(plan)
    lines = text.splitlines()
    assert len(lines) < 40, text
    assert lines[:4] == render_plan(plan).splitlines()[:4] and lines[1] == "nodes: 1000, workers: 8000"
    head = [line for line in lines if line.startswith("[")]
    assert head == ["[n[0001-1000]] (1000 nodes, node ranks 0-999) node rank <rank>, host <host>, 8 workers, "
                    "log /data/logs/j1/<node>/launcher.log"], head
    assert "  cluster address: <address> via enp189s0f0 (inventory interface)" in lines
    assert "  HCCL_IF_IP=<address>" in lines and "  MASTER_ADDR=172.16.0.1" in lines and "  GLOG_v=2" in lines
    command = lines[-1]
    rank_flag = "--node-rank" if launcher == "torchrun" else "--node_rank"
    assert f" {rank_flag}=<rank> " in command and "/data/logs/j1/<node>/workers" in command
    assert "n0001" not in text and "172.16.0.2" not in text  # no node's own value left in the folded block


def test_dry_run_keeps_a_node_that_differs_in_its_own_block_and_json_keeps_every_node(tmp_path: Path,
                                                                                      cluster_network: Any) -> None:
    inventory = tmp_path / "big.yaml"
    inventory.write_text("defaults: {user: root, interface: enp189s0f0, slots: 2, python: /opt/venv/bin/python}\n"
                         "nodes:\n  - {name: 'n[001-200]', host: 'h[001-200]'}\n"
                         "  - {name: n201, host: h201, env: {GLOG_v: '3'}}\n")
    for i in range(1, 202):
        cluster_network[f"n{i:03d}"] = ("enp189s0f0", f"172.16.{i // 250}.{i % 250}")
    result = runner.invoke(app, ["launch", "-i", str(inventory), "--launcher", "torchrun", "--dry-run", "--",
                                 "train.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) < 40, result.stdout
    assert [line for line in lines if line.startswith("[")] == [
        "[n[001-200]] (200 nodes, node ranks 0-199) node rank <rank>, host <host>, 2 workers, "
        "log /tmp/ascendctl-root/dry-run/<node>/launcher.log",
        "[n201] node rank 200, host h201, 2 workers, log /tmp/ascendctl-root/dry-run/n201/launcher.log"]
    assert "  GLOG_v=3" in lines and "  HCCL_IF_IP=172.16.0.201" in lines  # the odd node's block is its own, as it is
    doc = json.loads(runner.invoke(app, ["launch", "-i", str(inventory), "--launcher", "torchrun", "--dry-run", "--json",
                                         "--", "train.py"], catch_exceptions=False).stdout)
    nodes = doc["plan"]["nodes"]
    assert [n["name"] for n in nodes] == [f"n{i:03d}" for i in range(1, 202)]
    assert [n["node_rank"] for n in nodes] == list(range(201))
    assert nodes[41]["cluster_address"] == "172.16.0.42" and "--node-rank=41 " in nodes[41]["command"]


def test_dry_run_of_a_small_cluster_is_render_plan_byte_for_byte(tmp_path: Path) -> None:
    plan = _plan(FOLD_NODES_ABOVE, tmp_path)
    assert plan_text(plan) == render_plan(plan) and render_plan(plan).count("\n[n") == FOLD_NODES_ABOVE


# -- collect --------------------------------------------------------------------------------------------
def _bundle(i: int, *, status: NodeStatus = NodeStatus.OK, files: int = 12, refused: int = 0,
            error: str | None = None) -> NodeBundle:
    name, host = f"n{i:04d}", f"10.0.{i // 250}.{i % 250}"
    if status != NodeStatus.OK:
        return NodeBundle(name, host, status, error=error)
    commands = tuple(CommandEntry(f"c{k}", "npu-smi", "ok", 0, f"{name}/commands/c{k}.txt", 100) for k in range(35)) + (
        CommandEntry("nvidia-smi", "nvidia-smi", "absent", None, f"{name}/commands/nvidia-smi.txt", 0),)
    kept = tuple(FileEntry(f"/var/log/plog-{k}.log", "plog", 1024, 1.0, 1024, False, file=f"{name}/files/{k}")
                 for k in range(files))
    refused_files = tuple(RefusedFile(f"/root/ascend/log/x{k}\n", "plog", "control character in the path")
                          for k in range(refused))
    return NodeBundle(name, host, status, commands=commands, files=kept, refused_files=refused_files,
                      bytes=sum(f.bytes for f in kept) + 3 * 1024)


def _report(nodes: list[NodeBundle]) -> CollectReport:
    return CollectReport(Path("bundle.tar.gz"), Path("bundle"), tuple(nodes), None, None, None,
                         summary={"topology": [], "msprof": None}, total_bytes=sum(n.bytes for n in nodes))


def test_collect_table_of_1000_nodes_folds_rows_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [_bundle(i, files=12 if i % 2 else 11, refused=7 if i <= 400 else 0) for i in range(1, 998)]
    nodes += [_bundle(i, status=NodeStatus.UNREACHABLE, error=f"connection refused by 10.0.{i // 250}.{i % 250}:22")
              for i in range(998, 1001)]
    show_collect(_report(nodes), as_json=False, argv=["collect"])
    captured = capsys.readouterr()
    out, err = captured.out.splitlines(), captured.err.splitlines()
    assert len(out) < 40 and len(err) < 40, captured
    rows = {line.split()[0]: line for line in out[1:] if line.startswith("n")}
    assert set(rows) == {"n[0001-0997]", "n[0998-1000]"}, out
    assert re.match(r"n\[0001-0997\] \(997\) +ok +35 +nvidia-smi +11-12 +0 +14\.0K-15\.0K, 14\.1M in all *$",
                    rows["n[0001-0997]"])
    assert re.match(r"n\[0998-1000\] \(3\) +unreachable +0 +- +0 +0 +0B *$", rows["n[0998-1000]"])
    assert ("ascendctl: error: n[0998-1000]: connection refused by <host>:22 (listed in manifest.json)" in err
            and "bundle: bundle.tar.gz (14.1M from 1000 nodes)" in out)
    assert "ascendctl: warning: n[0001-0400]: not collected: '/root/ascend/log/x0\\n': control character in the path" in err
    assert "ascendctl: warning: n[0001-0400]: not collected: 2 more files (manifest.json: refused_files)" in err
    # --json is every node, unfolded
    show_collect(_report(nodes), as_json=True, argv=["collect", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in doc["manifest"]["nodes"]] == [f"n{i:04d}" for i in range(1, 1001)]
    assert [e["node"] for e in doc["errors"]] == ["n0998", "n0999", "n1000"]


def test_collect_errors_of_many_kinds_are_capped_and_every_node_named(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [_bundle(i, status=NodeStatus.UNREACHABLE, error=f"stopped answering after {i} s") for i in range(1, 1001)]
    show_collect(_report(nodes), as_json=False, argv=["collect"])
    err = capsys.readouterr().err.splitlines()
    assert len(err) == FOLD_NODES_ABOVE + 1, err
    assert err[0] == "ascendctl: error: n0001: stopped answering after 1 s (listed in manifest.json)"
    assert err[-1] == ("ascendctl: error: n[0017-1000]: 984 more nodes not reached with other errors "
                       "(listed in manifest.json)")


def test_collect_table_of_a_small_cluster_has_a_row_and_warnings_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [_bundle(i, refused=1) for i in range(1, FOLD_NODES_ABOVE)] + [
        _bundle(FOLD_NODES_ABOVE, status=NodeStatus.UNREACHABLE, error="connection refused by 10.0.0.16:22")]
    show_collect(_report(nodes), as_json=False, argv=["collect"])
    captured = capsys.readouterr()
    out, err = captured.out.splitlines(), captured.err.splitlines()
    assert out[0].split() == ["node", "status", "commands", "absent", "files", "truncated", "size"]
    assert re.match(r"n0001 +ok +35 +nvidia-smi +12 +0 +15\.0K *$", out[1]), out
    assert re.match(r"n0016 +unreachable +0 +- +0 +0 +0B *$", out[16]) and len(out) == 18
    assert err == [f"ascendctl: warning: n{i:04d}: not collected: '/root/ascend/log/x0\\n': control character in the path"
                   for i in range(1, FOLD_NODES_ABOVE)] + [
        "ascendctl: error: n0016: connection refused by 10.0.0.16:22 (listed in manifest.json)"]


def test_victims_that_differ_only_in_their_numbers_are_one_line() -> None:
    """At 1,000 nodes the verdict listed 999 victims, one line each, alike but for a pid and a rank."""
    from ascendctl.triage.model import fold_victims

    victims = [(f"n{i:04d}", i, f"stopped by its launcher or ascendctl (SIGTERM), pid {4000 + i}") for i in range(2, 1001)]
    victims.append(("n0001", 0, "timed out in allreduce"))
    folded = fold_victims(victims)
    assert len(folded) == 2
    who, how = folded[0]
    assert who == "n[0002-1000] ranks 2-1000"
    assert how == "stopped by its launcher or ascendctl (SIGTERM), pid 4002 (its numbers differ from victim to victim)"
    assert folded[1] == ("n0001 rank 0", "timed out in allreduce")
    # alike victims that say exactly the same: no note
    assert fold_victims([("a", 1, "SIGTERM"), ("b", 2, "SIGTERM")]) == [("a,b ranks 1-2", "SIGTERM")]
