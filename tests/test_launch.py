"""`ascendctl launch`: plan golden files, the pure remote-command builders, and whole jobs on local nodes.

The local-node tests use a stand-in launcher (a shell script named torchrun next to the node's
`python`), so they run in seconds; real msrun/torchrun jobs are in tests/cluster/test_launch_hosts.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import UsageError
from ascendctl.inventory.load import load_inventory
from ascendctl.jobs.environment import parse_env_assignments
from ascendctl.jobs.plan import LaunchOptions, build_plan
from ascendctl.launchers import launcher_binary
from ascendctl.jobs.service import launch_job
from ascendctl.jobs.record import list_jobs, load_job
from ascendctl.jobs.ssh_runner import marker
from ascendctl.jobs.ssh_runner import SSHNodeStream, start_command, start_payload
from ascendctl.facts.endpoint import Endpoint
from ascendctl.remote.scripts import remote

runner = CliRunner()
GOLDEN = Path(__file__).parent / "golden" / "launch"
GOLDEN_CASES = {
    "msrun.txt": ["--launcher", "msrun", "--env", "EXTRA=a b", "--rank-table", "/shared/rank_table.json", "--",
                  "/shared/train.py", "--epochs", "2"],
    "torchrun.txt": ["--launcher", "torchrun", "--nproc-per-node", "2", "--master-port", "29600", "--", "/shared/train.py"],
    "torchrun-rdzv.txt": ["--launcher", "torchrun", "--rdzv", "--master-addr", "10.0.0.1", "--log-dir", "/data/logs/j1", "--",
                          "/shared/train.py", "--lr", "0.1 0.2"],
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_dry_run_matches_golden_byte_for_byte(name: str, update_golden: bool, cluster_network: Any) -> None:
    inventory = GOLDEN / "four_nodes" / "inventory.yaml"
    result = runner.invoke(app, ["launch", "-i", str(inventory), "--dry-run", *GOLDEN_CASES[name]], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    golden = GOLDEN / "four_nodes" / name
    if update_golden:
        golden.write_text(result.stdout, encoding="utf-8")
    assert result.stdout == golden.read_text(encoding="utf-8")


def test_dry_run_changes_nothing(tmp_path: Path, cluster_network: Any) -> None:
    result = runner.invoke(app, ["launch", "-i", str(GOLDEN / "four_nodes" / "inventory.yaml"), "--launcher", "msrun",
                                 "--dry-run", "--", "x.py"], catch_exceptions=False)
    assert result.exit_code == 0
    assert list_jobs() == []


@pytest.mark.parametrize("bad", ["1BAD=x", "A-B=x", "=x", "NO-EQUALS"])
def test_bad_env_names_are_usage_errors_naming_them(bad: str) -> None:
    result = runner.invoke(app, ["launch", "--launcher", "torchrun", "--env", bad, "--dry-run", "--", "x.py"])
    assert result.exit_code == 2
    assert repr(bad) in result.stderr
    with pytest.raises(UsageError):
        parse_env_assignments([bad])


def test_bare_env_name_takes_the_value_from_our_environment_so_no_secret_is_in_argv() -> None:
    assert parse_env_assignments(["HCCL_DB_PASSWD", "A=1"], {"HCCL_DB_PASSWD": "s3cret"}) == (("HCCL_DB_PASSWD", "s3cret"), ("A", "1"))
    with pytest.raises(UsageError, match="--env UNSET_ONE: UNSET_ONE is not set in this environment"):
        parse_env_assignments(["UNSET_ONE"], {})


def endpoints(inv: Any) -> dict[str, Endpoint]:
    return {n.name: Endpoint(n.name, "enp189s0f0", f"172.16.0.{11 + n.index}", "enp189s0f0 (inventory interface)")
            for n in inv.nodes}


def test_plan_ranks_world_size_and_env_precedence() -> None:
    inv = load_inventory(GOLDEN / "four_nodes" / "inventory.yaml")
    options = LaunchOptions("msrun", ("t.py",), env=("GLOG_v=1",))
    plan = build_plan(inv, options, job_id="j", endpoints=endpoints(inv))
    assert [n.rank for n in plan.nodes] == [0, 1, 2, 3] and plan.world_size == 32
    env = dict(plan.nodes[3].environment.values)
    # the cluster interface's address, never the management host or the rank table's host_ip
    assert env["HCCL_IF_IP"] == "172.16.0.14" and env["HCCL_SOCKET_IFNAME"] == "enp189s0f0"
    assert env["GLOG_v"] == "1"  # --env wins over the inventory
    assert plan.master_addr == "172.16.0.11" and plan.master_port == 8118 and env["MASTER_PORT"] == "8118"
    assert "--node_rank=3" in plan.nodes[3].command and plan.log_dir == "/tmp/ascendctl-root/j"


def test_output_is_unbuffered_unless_asked_and_the_choice_reaches_a_submitted_job() -> None:
    """Python block-buffers a pipe: without PYTHONUNBUFFERED, `logs -f` sees step lines in 8 KiB bursts or at exit."""
    from ascendctl.jobs.submit import inner_launch_args

    inv = load_inventory(GOLDEN / "four_nodes" / "inventory.yaml")
    default = LaunchOptions("torchrun", ("t.py",))
    plan = build_plan(inv, default, job_id="j", endpoints=endpoints(inv))
    assert all(dict(n.environment.values)["PYTHONUNBUFFERED"] == "1" for n in plan.nodes)
    buffered = LaunchOptions("torchrun", ("t.py",), buffered=True)
    plan = build_plan(inv, buffered, job_id="j", endpoints=endpoints(inv))
    assert all("PYTHONUNBUFFERED" not in dict(n.environment.values) for n in plan.nodes)
    assert "--buffered" in inner_launch_args(buffered, "j", preflight=False)
    assert "--buffered" not in inner_launch_args(default, "j", preflight=False)
    # the inventory's env (or --env) still decides in the end
    plan = build_plan(inv, LaunchOptions("torchrun", ("t.py",), env=("PYTHONUNBUFFERED=",)), job_id="j", endpoints=endpoints(inv))
    assert dict(plan.nodes[0].environment.values)["PYTHONUNBUFFERED"] == ""


def test_a_launcher_option_after_the_double_dash_is_refused_not_taken_for_the_script() -> None:
    """Issue #30: `-- --max-restarts 3 train.py` reached torchrun unseen and was recorded as the script."""
    from ascendctl.errors import UsageError

    inv = load_inventory(GOLDEN / "four_nodes" / "inventory.yaml")
    for launcher, script in (("torchrun", ("--max-restarts", "3", "train.py")), ("msrun", ("--bind_core=True", "train.py"))):
        with pytest.raises(UsageError) as info:
            build_plan(inv, LaunchOptions(launcher, script), job_id="j", endpoints=endpoints(inv))
        assert f"{script[0]!r} after -- would be the training script" in info.value.message
        assert "-- train.py --epochs 3" in (info.value.hint or "")
    # torchrun's own ways of naming what runs stay possible
    plan = build_plan(inv, LaunchOptions("torchrun", ("-m", "pkg.train", "--lr", "1")), job_id="j", endpoints=endpoints(inv))
    assert plan.nodes[0].command.endswith("--tee=3 -m pkg.train --lr 1")
    result = runner.invoke(app, ["launch", "-i", str(GOLDEN / "four_nodes" / "inventory.yaml"), "--launcher", "torchrun",
                                 "--dry-run", "--", "--nnodes=2", "train.py"])
    assert result.exit_code == 2 and "'--nnodes=2' after -- would be the training script" in result.stderr


def test_launcher_binary_next_to_an_absolute_python_else_on_path() -> None:
    inv = load_inventory(GOLDEN / "four_nodes" / "inventory.yaml")
    node = inv.nodes[0]
    assert launcher_binary(node, "msrun") == "/opt/venv/bin/msrun"
    from dataclasses import replace
    assert launcher_binary(replace(node, python="python3"), "torchrun") == "torchrun"


def test_follow_stream_splits_lines_and_reads_the_framed_exit() -> None:
    from tests.fakes import FakeSpawned

    stream = SSHNodeStream("n1", FakeSpawned(b"2026-11-23T10:00:00.000001 | a\nb\n\n@@f00d exit 7 1763840000.5@@\n"), "f00d")
    lines, ended = stream.pump()
    assert lines == ["2026-11-23T10:00:00.000001 | a", "b"]
    assert ended is not None and (ended.exit_code, ended.when, ended.lost) == (7, 1763840000.5, None)
    cut = SSHNodeStream("n1", FakeSpawned(b"partial"), "f00d")
    lines, ended = cut.pump()
    if ended is None:
        lines, ended = cut.pump()
    assert lines == ["partial"] and ended is not None and ended.lost is not None


def test_follow_stream_drops_heartbeats_wherever_they_land_and_ends_a_silent_node_as_lost() -> None:
    from tests.fakes import FakeSpawned

    beat = b"@@f00d alive@@\n"
    r, w = os.pipe()
    os.set_blocking(r, False)
    spawned = FakeSpawned(b"")
    os.close(spawned.fileno())
    spawned._r = r  # a follower still running: its channel stays open
    try:
        stream = SSHNodeStream("n1", spawned, "f00d", silence=0.5)
        os.write(w, beat + b"par" + beat + b"tial\n@@f00d al")  # one mid-line, one split between two reads
        assert stream.pump() == (["partial"], None)
        os.write(w, b"ive@@\nnext\n")
        assert stream.pump() == (["next"], None)
        time.sleep(0.3)
        os.write(w, beat)  # a heartbeat alone keeps a quiet node alive
        time.sleep(0.3)
        assert stream.pump() == ([], None)
        time.sleep(0.6)  # then nothing at all
        lines, ended = stream.pump()
        assert lines == [] and ended is not None and ended.lost is not None and "nothing received for 0.5 s" in ended.lost
    finally:
        os.close(w)


def test_remote_commands_are_valid_shell_and_quote_everything() -> None:
    inv = load_inventory(GOLDEN / "four_nodes" / "inventory.yaml")
    plan = build_plan(inv, LaunchOptions("torchrun", ("t.py", "a b;rm -rf /"), env=("HCCL_DB_PASSWD=s3cret",)), job_id="j1",
                      endpoints=endpoints(inv))
    command = start_command("j1", plan.nodes[0])
    assert subprocess.run(["sh", "-n", "-c", command]).returncode == 0
    for script, args in (("teardown_job.sh", (marker("j1", "node01"), 2000)), ("follow_log.sh", ("/d", 42, "n0nce"))):
        text, stdin = remote(script, *args)
        assert subprocess.run(["sh", "-n", "-c", text]).returncode == 0 and stdin.startswith(b"#!/bin/sh")
    assert "'a b;rm -rf /'" in plan.nodes[0].command
    # the job's environment travels on stdin (the start payload), never in the command line
    assert "s3cret" not in command and b"s3cret" in start_payload(plan.nodes[0])


# -- whole jobs on local nodes with a stand-in launcher ---------------------------------------
FAKE_TORCHRUN = """#!/bin/sh
# Stand-in launcher: prints its arguments, then does what $FAKE_<node rank> says.
for a in "$@"; do case $a in --node-rank=*) rank=${a#--node-rank=};; esac; done
echo "launcher rank $rank args: $*"
eval "what=\\${FAKE_$rank:-ok}"
case $what in
  ok) sleep 0.3; echo "rank $rank done"; exit 0;;
  fail) sleep 0.5; echo "rank $rank failing"; exit 7;;
  latefail) sleep 4; echo "rank $rank failing"; exit 7;;
  sleep) sh -c 'sleep 60' & sleep 60;;
  quiet) sleep 5; echo "rank $rank done"; exit 0;;
  stubborn) trap '' TERM; sh -c 'sleep 60' & sleep 60;;
esac
"""


def write_local_inventory(tmp_path: Path, launcher: str, script: str, names: str = "a b c") -> Path:
    """Local nodes (no SSH) whose python's folder holds `script` as the stand-in `launcher`."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / launcher).write_text(script)
    (bin_dir / launcher).chmod(0o755)
    listed = "".join(f"  - {{name: {n}, host: 127.0.0.{i + 1}}}\n" for i, n in enumerate(names.split()))
    path = tmp_path / "inv.yaml"
    path.write_text(f"defaults:\n  transport: local\n  slots: 1\n  python: {bin_dir}/python\nnodes:\n{listed}")
    return path


@pytest.fixture
def local_inventory(tmp_path: Path) -> Path:
    return write_local_inventory(tmp_path, "torchrun", FAKE_TORCHRUN)


def marked(job_id: str) -> list[str]:
    out = subprocess.run(["sh", "-c", f"grep -lzF {shlex.quote('ASCENDCTL_JOB=' + job_id)} /proc/[0-9]*/environ"],
                         capture_output=True, text=True).stdout
    return out.split()


# -- the env file (the job's secrets) never outlives a start that failed -------------------------
SECRET = "s3cret-value-" + os.urandom(4).hex()


def files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_a_start_that_fails_part_way_through_writing_the_job_files_leaves_no_env_file(local_inventory: Path,
                                                                                       tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    # on node b, tar cannot write .job.cmd, the member after .job.env: the job files fail part way (as on a full disk)
    (logs / "b" / ".job.cmd" / "in-the-way").mkdir(parents=True)
    outcome = launch_job(load_inventory(local_inventory),
                         LaunchOptions("torchrun", ("t.py",), env=(f"HF_TOKEN={SECRET}", "FAKE_0=sleep", "FAKE_2=sleep"), grace=1,
                                       log_dir=str(logs)), preflight=False)
    record = outcome.record
    b = record.node("b")
    assert record.status == "failed" and b.pid is None and b.error is not None and b.error.startswith("not started: start failed")
    assert [n.pid is not None for n in record.nodes] == [True, False, True]
    assert list(logs.rglob(".job.env")) == [] and files_holding(logs, SECRET) == []  # on no node, started or not
    assert marked(record.id) == []


def test_the_start_command_creates_the_env_file_0600_and_removes_it_when_stopped_part_way(
        local_inventory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's own shell cleans up: its tar is TERMed at the command timeout after writing .job.env."""
    from ascendctl.errors import CommandTimeoutError
    from ascendctl.remote.transport.local import LocalTransport

    inv = load_inventory(local_inventory)
    plan = build_plan(inv, LaunchOptions("torchrun", ("t.py",), env=(f"HF_TOKEN={SECRET}",), log_dir=str(tmp_path / "logs")),
                      job_id="j1", endpoints=endpoints(inv))
    node = plan.nodes[0]
    seen = tmp_path / "seen"
    seen.mkdir()
    real_tar = shutil.which("tar")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tar").write_text(f"#!/bin/sh\numask > {seen}/umask\n{real_tar} \"$@\" || exit\n"
                              f"stat -c %a {shlex.quote(node.dir)}/.job.env > {seen}/mode\nexec sleep 30\n")
    (fake / "tar").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    with pytest.raises(CommandTimeoutError):
        LocalTransport(inv.nodes[0]).run(start_command("j1", node), timeout=1.5, stdin=start_payload(node))
    assert (seen / "umask").read_text().strip() == "0077" and (seen / "mode").read_text().strip() == "600"
    assert not Path(node.dir, ".job.env").exists() and files_holding(tmp_path / "logs", SECRET) == []


@pytest.mark.parametrize("failure", ["connection lost", "timed out", "exit 2"])
def test_a_failed_start_asks_the_node_again_to_remove_the_env_file(failure: str) -> None:
    """For a start shell that could not clean up itself (KILLed at the timeout, its connection gone)."""
    from ascendctl.errors import CommandTimeoutError, TransportError
    from ascendctl.remote.group import NodeGroup
    from ascendctl.jobs.ssh_runner import SSHRunner
    from ascendctl.jobs.service import new_record
    from ascendctl.jobs.ssh_runner import forget_env_command
    from ascendctl.models import CommandResult
    from tests.fakes import FakeFactory

    inv = load_inventory(GOLDEN / "four_nodes" / "inventory.yaml")
    plan = build_plan(inv, LaunchOptions("torchrun", ("t.py",), env=(f"HF_TOKEN={SECRET}",)), job_id="j1",
                      endpoints=endpoints(inv))
    started = CommandResult("", 0, "4242 +0000\n", "", 0.0)

    def timed_out(_command: str) -> CommandResult:
        raise CommandTimeoutError("command timed out after 60s", timeout=60)

    failed: Any = {"connection lost": TransportError("connection closed"), "timed out": timed_out,
                   "exit 2": CommandResult("", 2, "", "tar: .job.cmd: Cannot write: No space left on device\n", 0.0)}[failure]
    factory = FakeFactory(inv, {"node02": [(r"job_wrapper\.sh", failed), (r"^rm -f ", started)]},
                          default=[(r"job_wrapper\.sh", started)])
    with NodeGroup(inv, factory=factory) as group:
        record = SSHRunner(group).start(plan, new_record(inv, plan, "ssh"), notice=lambda _m: None)
    assert record.node("node02").error is not None and record.node("node02").error.startswith("not started")
    calls = factory.transports["node02"].calls
    assert calls[-1] == forget_env_command(plan.nodes[1]) == f"rm -f {plan.nodes[1].dir}/.job.env"
    assert not any(c.startswith("rm -f") for c in factory.transports["node01"].calls)  # a started node's wrapper owns it


def test_local_job_succeeds_streams_prefixed_output_and_records_the_job(local_inventory: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight",
                                 "--log-dir", str(tmp_path / "logs"), "--", "train.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "[a] rank 0 done" in result.stdout and "[c] rank 2 done" in result.stdout
    record = load_job()
    assert record.status == "succeeded" and [n.exit_code for n in record.nodes] == [0, 0, 0]
    assert all(n.pid for n in record.nodes)
    jobs = runner.invoke(app, ["jobs"], catch_exceptions=False)
    assert record.id in jobs.stdout and "succeeded" in jobs.stdout
    logs = runner.invoke(app, ["logs", record.id, "--node", "b"], catch_exceptions=False)
    assert "[b] rank 1 done" in logs.stdout and "[a]" not in logs.stdout


def test_local_failure_tears_the_others_down_and_names_the_node(local_inventory: Path, tmp_path: Path) -> None:
    inv = load_inventory(local_inventory)
    lines: list[tuple[str, str]] = []
    started = time.monotonic()
    outcome = launch_job(inv, LaunchOptions("torchrun", ("t.py",), env=("FAKE_0=sleep", "FAKE_1=fail", "FAKE_2=sleep"), grace=2,
                                        log_dir=str(tmp_path / "logs")), preflight=False, on_line=lambda n, l: lines.append((n, l)))
    assert time.monotonic() - started < 10
    assert int(outcome.exit_code) == 5  # the job ran and failed
    record = outcome.record
    assert record.status == "failed" and record.first_failure is not None and record.first_failure.node == "b"
    assert record.nodes[1].exit_code == 7
    assert record.nodes[0].signal == "SIGTERM" and record.nodes[0].exit_code is not None
    assert ("b", "rank 1 failing") in lines
    assert marked(record.id) == []


def test_a_quiet_job_is_kept_alive_by_the_follower_heartbeat(local_inventory: Path, tmp_path: Path) -> None:
    outcome = launch_job(load_inventory(local_inventory),
                         LaunchOptions("torchrun", ("t.py",), env=("FAKE_0=quiet",), silence_limit=3,
                                       log_dir=str(tmp_path / "logs")), preflight=False)
    assert int(outcome.exit_code) == 0 and outcome.record.status == "succeeded"  # 5 s without a line, limit 3 s
    assert not any("alive@@" in line for line in (tmp_path / "logs" / "a" / "launcher.log").read_text().splitlines())


def test_a_node_that_goes_silent_is_lost_and_the_job_torn_down(local_inventory: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # no heartbeat from node a's follower: its node went dark as far as ascendctl can tell
    from ascendctl.jobs import ssh_runner

    real = ssh_runner.heartbeat_every
    first = {"a": True}

    def beats(silence: float) -> int:
        if first.pop("a", False):
            return 0
        return real(silence)

    monkeypatch.setattr(ssh_runner, "heartbeat_every", beats)
    started = time.monotonic()
    outcome = launch_job(load_inventory(local_inventory),
                         LaunchOptions("torchrun", ("t.py",), env=("FAKE_0=sleep", "FAKE_1=sleep", "FAKE_2=sleep"), grace=2,
                                       silence_limit=3, log_dir=str(tmp_path / "logs")), preflight=False)
    assert time.monotonic() - started < 20
    assert int(outcome.exit_code) == 4  # a node lost during a job
    record = outcome.record
    assert record.status == "failed"
    lost = record.node("a").error or ""
    assert lost.startswith("unreachable: lost: nothing received for 3 s"), lost
    assert record.node("b").signal == "SIGTERM" and record.node("c").signal == "SIGTERM"
    assert marked(record.id) == []


def test_status_of_a_running_job_with_a_node_that_cannot_be_asked_exits_4_naming_it(local_inventory: Path,
                                                                                    tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--env", "FAKE_0=sleep", "--env", "FAKE_1=sleep", "--env", "FAKE_2=sleep",
                                 "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0
    job = load_job()
    try:
        # node b's host now has no shell to answer with: its transport fails the question
        text = local_inventory.read_text().replace("{name: b, host: 127.0.0.2}",
                                                   "{name: b, host: 127.0.0.2, transport: ssh, port: 1, connect_timeout: 1}")
        local_inventory.write_text(text)
        status = runner.invoke(app, ["status", job.id, "-i", str(local_inventory)])
        assert status.exit_code == 4, status.output
        assert "b: could not be asked" in status.stderr
        assert "running" in status.stdout
    finally:
        runner.invoke(app, ["stop", job.id, "--grace", "1"])
        subprocess.run(["sh", "-c", f"kill $(grep -lzF {shlex.quote('ASCENDCTL_JOB=' + job.id)} /proc/[0-9]*/environ "
                        "| cut -d/ -f3) 2>/dev/null"])


def test_detach_status_logs_follow_and_stop(local_inventory: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--env", "FAKE_0=sleep", "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = load_job()
    assert "detached" in result.stdout and record.status == "running"
    status = runner.invoke(app, ["status", record.id], catch_exceptions=False)
    assert status.exit_code == 0 and "running" in status.stdout
    assert marked(record.id)
    stop = runner.invoke(app, ["stop", record.id, "--grace", "1"], catch_exceptions=False)
    assert stop.exit_code == 0, stop.output
    assert load_job(record.id).status == "stopped"
    assert marked(record.id) == []
    follow = runner.invoke(app, ["logs", record.id, "-f"], catch_exceptions=False)
    assert follow.exit_code == 0 and "[b] launcher rank 1 args:" in follow.stdout


def test_collect_and_status_of_a_job_use_its_own_nodes_and_refuse_an_inventory_that_disagrees(
        local_inventory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #30: `collect last` without -i collected this machine (the built-in inventory), not the job's nodes."""
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--env", "FAKE_0=sleep", "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = load_job()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no ./inventory.yaml here: without the record, the built-in inventory would be used
    monkeypatch.delenv("ASCENDCTL_INVENTORY", raising=False)
    try:
        collected = runner.invoke(app, ["collect", "last", "-o", "bundle", "--json"], catch_exceptions=False)
        assert collected.exit_code == 0, collected.stderr
        assert [n["name"] for n in json.loads(collected.stdout)["manifest"]["nodes"]] == ["a", "b", "c"]
        one = runner.invoke(app, ["collect", record.id, "-w", "b", "-o", "one", "--json"], catch_exceptions=False)
        assert [n["name"] for n in json.loads(one.stdout)["manifest"]["nodes"]] == ["b"]
        # an inventory without one of the job's nodes, or with another host for it, is refused before anything runs
        other = tmp_path / "other.yaml"
        other.write_text(local_inventory.read_text().replace("  - {name: c, host: 127.0.0.3}\n", ""))
        refused = runner.invoke(app, ["collect", "last", "-i", str(other), "-o", "x"])
        assert refused.exit_code == 2 and f"job {record.id} ran on a,b,c, but {other} has no node c" in refused.stderr
        assert "leave out -i" in refused.stderr and not (elsewhere / "x").exists()
        moved = tmp_path / "moved.yaml"
        moved.write_text(local_inventory.read_text().replace("127.0.0.3", "127.0.0.9"))
        refused = runner.invoke(app, ["status", record.id, "-i", str(moved)])
        assert refused.exit_code == 2 and "c is 127.0.0.3 in the job record, 127.0.0.9 there" in refused.stderr
    finally:
        stop = runner.invoke(app, ["stop", record.id, "--grace", "1"], catch_exceptions=False)
    assert stop.exit_code == 0, stop.output
    assert marked(record.id) == []


def test_jobs_asks_the_nodes_of_running_jobs_and_records_when_they_ended_there(local_inventory: Path, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #30: a detached job that ended stayed `running` in `jobs`, and `ended` was when someone asked. (Its
    supervisor would record the end itself: here none could start, as when the control host cannot run one.)"""
    from ascendctl.errors import AscendctlError

    def no_supervisor(*_args: Any) -> Any:
        raise AscendctlError("cannot start the job's supervisor: test")

    monkeypatch.setattr("ascendctl.jobs.detached.start_supervisor", no_supervisor)
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--env", "FAKE_1=fail", "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = load_job()
    deadline = time.monotonic() + 30
    while not all((tmp_path / "logs" / name / "exit_code").exists() for name in "abc"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ended_on_nodes = max((tmp_path / "logs" / name / "exit_code").stat().st_mtime for name in "abc")
    time.sleep(1.5)  # asking later must not move the end
    stale = runner.invoke(app, ["jobs", "--json", "--no-refresh"], catch_exceptions=False)
    assert [j["status"] for j in json.loads(stale.stdout)["jobs"] if j["id"] == record.id] == ["running"]
    fresh = runner.invoke(app, ["jobs", "--json"], catch_exceptions=False)
    assert fresh.exit_code == 0, fresh.stderr
    (job,) = [j for j in json.loads(fresh.stdout)["jobs"] if j["id"] == record.id]
    assert job["status"] == "failed" and [n["exit_code"] for n in job["nodes"]] == [0, 7, 0]
    assert int(ended_on_nodes) <= job["ended"] <= ended_on_nodes + 1
    assert load_job(record.id).status == "failed"  # saved: the next `jobs` need not ask again
    text = runner.invoke(app, ["jobs"], catch_exceptions=False)
    assert record.id in text.stdout and "failed" in text.stdout


def test_stop_finds_a_job_whose_record_has_no_pids_by_its_marker_on_the_nodes(local_inventory: Path, tmp_path: Path) -> None:
    """Issue #30: a launch killed (-9) while starting left a record without pids; `stop` skipped those nodes, said
    `stopped`, exited 0, and the job kept running everywhere."""
    from dataclasses import replace as dc_replace

    from ascendctl.jobs.record import save_job

    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--env", "FAKE_0=sleep", "--env", "FAKE_1=sleep", "--env", "FAKE_2=sleep",
                                 "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = load_job()
    assert marked(record.id)
    save_job(dc_replace(record, nodes=tuple(dc_replace(n, pid=None) for n in record.nodes)))  # what the killed start left
    try:
        stop = runner.invoke(app, ["stop", record.id, "--grace", "1", "--json"], catch_exceptions=False)
        assert stop.exit_code == 0, stop.output
        assert marked(record.id) == []  # every node's job processes found by the marker and ended
        assert load_job(record.id).status == "stopped"
    finally:
        for path in marked(record.id):  # what the old code left running: /proc/PID/environ
            subprocess.run(["kill", "-9", path.split("/")[2]], check=False, capture_output=True)


# -- a detached job keeps the foreground's promises: its supervisor on the control host -------------
def wait_for_end(job_id: str, seconds: float = 40) -> Any:
    deadline = time.monotonic() + seconds
    while (record := load_job(job_id)).status == "running":
        assert time.monotonic() < deadline, record
        time.sleep(0.2)
    return record


def process_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_detached_job_is_torn_down_at_its_first_failure_and_its_verdict_recorded_with_nobody_following(
        local_inventory: Path, tmp_path: Path) -> None:
    """Issue #30: a detached job whose node failed still ran on the others, and no verdict was ever computed: fail-fast
    held only while a terminal followed. Now the supervisor left on this host does what the foreground launch does."""
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--grace", "1", "--env", "FAKE_0=sleep", "--env", "FAKE_1=fail", "--env", "FAKE_2=stubborn",
                                 "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    job = load_job()
    sup = job.supervisor
    assert sup is not None and sup.options[:2] == ["--grace", "1"]
    # in a session of its own, not a child of the launch: a closed terminal or a logout does not reach it
    fields = Path(f"/proc/{sup.pid}/stat").read_text().rpartition(")")[2].split()
    assert int(fields[3]) != os.getsid(0) and int(fields[1]) != os.getpid()
    record = wait_for_end(job.id)
    assert record.status == "failed" and [n.exit_code for n in record.nodes][1] == 7
    assert record.node("a").signal == "SIGTERM" and record.node("c").signal == "SIGKILL"  # c ignores SIGTERM
    assert marked(job.id) == []
    assert record.first_failure is not None and record.first_failure.node == "b"
    log = Path(sup.log).read_text()
    assert "b: launcher exited 7; stopping the other nodes" in log and f"job {job.id} failed" in log
    deadline = time.monotonic() + 10
    while process_alive(sup.pid):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    status = runner.invoke(app, ["status", job.id], catch_exceptions=False)
    assert status.exit_code == 5 and "failed" in status.stdout and "first failure" in status.stdout
    listed = runner.invoke(app, ["jobs"], catch_exceptions=False)
    assert f" on b]" in [line for line in listed.stdout.splitlines() if line.startswith(job.id)][0]
    follow = runner.invoke(app, ["logs", job.id, "-f"], catch_exceptions=False)
    assert follow.exit_code == 5 and f"job {job.id}: failed" in follow.stdout and "[b] rank 1 failing" in follow.stdout


def test_logs_follow_restarts_a_lost_supervisor_and_shows_the_verdict_it_records(local_inventory: Path, tmp_path: Path) -> None:
    """`logs -f` reattaches: a running job whose supervisor was killed gets a new one, which tears the job down at its
    first failure; the follow ends with the recorded verdict and exit 5."""
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--grace", "1", "--env", "FAKE_0=sleep", "--env", "FAKE_1=latefail", "--env", "FAKE_2=sleep",
                                 "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    job = load_job()
    assert job.supervisor is not None
    os.kill(job.supervisor.pid, signal.SIGKILL)
    while process_alive(job.supervisor.pid):
        time.sleep(0.05)
    status = runner.invoke(app, ["status", job.id], catch_exceptions=False)
    assert "supervisor: gone" in status.stdout and "logs" in status.stdout
    follow = subprocess.run([sys.executable, "-m", "ascendctl", "logs", job.id, "-f"], capture_output=True, text=True, timeout=60)
    assert follow.returncode == 5, follow.stderr
    assert "had no supervisor left: started one" in follow.stderr
    assert f"job {job.id}: failed" in follow.stdout and "[b] rank 1 failing" in follow.stdout
    record = load_job(job.id)
    assert record.status == "failed" and record.supervisor is not None and record.supervisor.pid != job.supervisor.pid
    assert record.node("a").signal == "SIGTERM" and marked(job.id) == []


def test_stop_of_a_supervised_job_is_recorded_as_stopped_and_its_supervisor_leaves(local_inventory: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--env", "FAKE_0=sleep", "--env", "FAKE_1=sleep", "--env", "FAKE_2=sleep",
                                 "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    job = load_job()
    assert job.supervisor is not None and process_alive(job.supervisor.pid)
    stop = runner.invoke(app, ["stop", job.id, "--grace", "1"], catch_exceptions=False)
    assert stop.exit_code == 0, stop.output
    deadline = time.monotonic() + 15
    while process_alive(job.supervisor.pid):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    record = load_job(job.id)
    assert record.status == "stopped" and record.first_failure is None and marked(job.id) == []
    assert "its record is stop's to finish" in Path(job.supervisor.log).read_text()


def launched(local_inventory: Path, tmp_path: Path, *env: str) -> subprocess.Popen[str]:
    """`ascendctl launch` of the stand-in launcher on the local nodes, in a subprocess, once every node has started."""
    argv = [sys.executable, "-m", "ascendctl", "launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight",
            "--grace", "2", "--log-dir", str(tmp_path / "logs"), *(f"--env={e}" for e in env), "--", "t.py"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen: set[str] = set()
    while len(seen) < 3:
        line = proc.stdout.readline()
        assert line, "launch ended before every node started"
        seen.update(re.findall(r"^\[(\w)\] launcher rank", line))
    return proc


def read_until(stream: Any, text: str) -> str:
    lines = []
    while not lines or text not in lines[-1]:
        lines.append(stream.readline())
        assert lines[-1], "".join(lines)
    return "".join(lines)


@pytest.mark.parametrize("signals, code", [((signal.SIGTERM,), 143), ((signal.SIGHUP,), 129),
                                           ((signal.SIGINT, signal.SIGINT), 130), ((signal.SIGTERM, signal.SIGINT), 143)],
                         ids=["SIGTERM", "SIGHUP", "SIGINT-twice", "SIGTERM-then-SIGINT"])
def test_stop_signals_tear_down_every_node_finalise_the_record_and_exit_128_plus_the_signal(
        local_inventory: Path, tmp_path: Path, signals: tuple[signal.Signals, ...], code: int) -> None:
    # node a ignores SIGTERM: its teardown needs the SIGKILL, which a repeated signal must not skip
    proc = launched(local_inventory, tmp_path, "FAKE_0=stubborn", "FAKE_1=sleep", "FAKE_2=sleep")
    proc.send_signal(signals[0])
    err = read_until(proc.stderr, "stopping the job on every node")
    for again in signals[1:]:
        proc.send_signal(again)
    out, rest = proc.communicate(timeout=60)
    err += rest
    assert proc.returncode == code, err
    assert f"interrupted by {signals[0].name}: job stopped on every node" in err
    if len(signals) > 1:
        assert f"{signals[1].name} again: the teardown is finishing on every node" in err
    record = load_job()
    assert record.status == "interrupted" and record.stopped_by == signals[0].name
    assert [n.signal for n in record.nodes] == ["SIGKILL", "SIGTERM", "SIGTERM"]
    assert f"job {record.id}: interrupted ({signals[0].name})" in out
    assert marked(record.id) == []
    status = runner.invoke(app, ["status", record.id], catch_exceptions=False)
    assert status.exit_code == code and f"interrupted ({signals[0].name})" in status.stdout


def test_logs_follow_stops_following_on_sigterm_and_leaves_the_job_running(local_inventory: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--detach",
                                 "--env", "FAKE_0=sleep", "--log-dir", str(tmp_path / "logs"), "--", "t.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    record = load_job()
    follow = subprocess.Popen([sys.executable, "-m", "ascendctl", "logs", record.id, "-f"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    read_until(follow.stdout, "[a] launcher rank 0")
    follow.send_signal(signal.SIGTERM)
    follow.communicate(timeout=30)
    assert follow.returncode == 143
    assert marked(record.id)  # following never stops the job
    assert runner.invoke(app, ["stop", record.id, "--grace", "1"], catch_exceptions=False).exit_code == 0
    assert marked(record.id) == []


def test_unknown_job_is_a_usage_error() -> None:
    result = runner.invoke(app, ["status", "nope"])
    assert result.exit_code == 2 and "no jobs recorded" in result.stderr


def test_preflight_failure_refuses_to_start(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("defaults:\n  connect_timeout: 1\n  connect_retries: 0\nnodes:\n  - {name: x, host: 127.0.0.1, port: 1}\n")
    result = runner.invoke(app, ["launch", "-i", str(path), "--launcher", "msrun", "--", "t.py"])
    assert result.exit_code == 4, result.output
    assert "preflight failed, nothing started" in result.stderr and "x: ssh: unreachable" in result.stderr
    assert list_jobs() == []


def test_job_record_round_trips(local_inventory: Path, tmp_path: Path) -> None:
    runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--log-dir",
                        str(tmp_path / "l"), "--", "t.py"], catch_exceptions=False)
    record = load_job()
    data: dict[str, Any] = json.loads(json.dumps(record.to_dict()))
    assert data["nodes"][0]["command"].endswith("t.py") and data["log_dir"] == str(tmp_path / "l")
    assert os.path.basename(data["nodes"][0]["log"]) == "launcher.log"


def test_job_records_keep_plain_values_and_redact_secrets(local_inventory: Path, tmp_path: Path) -> None:
    runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--no-preflight", "--log-dir",
                        str(tmp_path / "l"), "--env", "NOTE=a b", "--env", "HF_TOKEN=abc", "--", "t.py"], catch_exceptions=False)
    env = load_job().nodes[0].env
    assert env["NOTE"] == "a b" and env["HF_TOKEN"] == "<redacted>" and env["PATH"].endswith(":$PATH")


def test_launch_core_imports_neither_typer_nor_rich() -> None:
    import sys

    code = "import ascendctl.jobs.service, sys; assert not {'typer', 'rich', 'click'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)




def test_launch_preflight_refuses_a_missing_launcher_or_script_before_starting_anything(tmp_path: Path) -> None:
    """Whether the launcher and the script exist on every node is a preflight fact: nothing starts without them."""
    missing = tmp_path / "nowhere" / "bin"
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"defaults:\n  transport: local\n  slots: 1\n  python: {missing}/python\n"
                   "nodes:\n  - {name: a, host: 127.0.0.1}\n  - {name: b, host: 127.0.0.2}\n")
    script = tmp_path / "train.py"
    before = {r.id for r in list_jobs()}
    result = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--", str(script)])
    assert result.exit_code == 3, result.output
    # one line for both nodes (folded), naming the launcher and the script, each hint once
    lines = [line for line in result.stderr.splitlines() if "launcher" in line and "not found" in line]
    assert len(lines) == 1 and ": a,b: launcher: " in lines[0], lines
    assert f"{missing}/torchrun not found" in result.stderr and f"script {script} not found" in result.stderr
    assert result.stderr.count("hint: install torch on the node") == 1
    assert {r.id for r in list_jobs()} == before  # nothing recorded, nothing started


def test_the_default_log_dir_is_per_user_and_one_that_cannot_be_created_is_a_preflight_failure(
        local_inventory: Path, tmp_path: Path) -> None:
    """Issue #30: /tmp/ascendctl/<job> belonged to the first user; the next user's launch died with Permission denied
    at start, and the hint pointed at collect/triage."""
    inv = load_inventory(GOLDEN / "four_nodes" / "inventory.yaml")  # user: root
    assert build_plan(inv, LaunchOptions("msrun", ("t.py",)), job_id="j", endpoints=endpoints(inv)).log_dir == "/tmp/ascendctl-root/j"
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    (tmp_path / "t.py").write_text("")
    before = {r.id for r in list_jobs()}
    result = runner.invoke(app, ["launch", "-i", str(local_inventory), "--launcher", "torchrun", "--log-dir", str(blocker / "logs"),
                                 "--", str(tmp_path / "t.py")])
    assert result.exit_code == 3, result.output
    assert f"cannot create the job's log directory {blocker}/logs: {blocker} is not a directory this user can write" in result.stderr
    assert "--log-dir DIR" in result.stderr
    assert {r.id for r in list_jobs()} == before  # refused before anything started


def test_preflight_launcher_check_passes_with_the_launcher_and_script_and_skips_without_a_job(local_inventory: Path,
                                                                                                tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    result = runner.invoke(app, ["preflight", "-i", str(local_inventory), "--only", "launcher", "--json",
                                 "--launcher", "torchrun", "--script", str(script)])
    doc = json.loads(result.stdout)
    assert {c["status"] for n in doc["nodes"] for c in n["checks"]} == {"pass"}, doc
    result = runner.invoke(app, ["preflight", "-i", str(local_inventory), "--only", "launcher", "--json"])
    doc = json.loads(result.stdout)
    assert {c["status"] for n in doc["nodes"] for c in n["checks"]} == {"skip"} and result.exit_code == 0


def test_start_end_and_status_fold_many_nodes_into_one_line_per_state(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #30: launch's start and end summaries and `status` printed one line per node (1,000 at 1,000 nodes)."""
    from ascendctl.jobs.record import JobRecord, NodeJob
    from ascendctl.jobs.service import LaunchOutcome
    from ascendctl.ui.launch_view import show_outcome, show_status

    def node(i: int, **kw: Any) -> NodeJob:
        return NodeJob(f"n{i:04d}", f"10.0.{i // 256}.{i % 256}", i, "torchrun", log=f"/tmp/l/n{i:04d}/launcher.log", pid=1000 + i, **kw)

    many = JobRecord("j1", "torchrun", "inv.yaml", ["t.py"], "10.0.0.1", 29500, "/tmp/l",
                     tuple(node(i) for i in range(1, 1001)), started=1.0)
    show_outcome(LaunchOutcome(many, detached=True))
    out = capsys.readouterr().out.splitlines()
    assert "  n[0001-1000]  1000 nodes  running" in out and len(out) < 10, out
    ended = JobRecord("j1", "torchrun", "inv.yaml", ["t.py"], "10.0.0.1", 29500, "/tmp/l",
                      tuple(node(i, exit_code=1 if i == 7 else 143, signal=None if i == 7 else "SIGTERM") for i in range(1, 1001)),
                      started=1.0, ended=2.0, status="failed")
    show_status(ended)
    out = capsys.readouterr().out.splitlines()
    assert "  n0007  1 node  exit 1" in out and "  n[0001-0006,0008-1000]  999 nodes  exit 143, SIGTERM sent" in out
    assert len(out) < 10, out
    few = JobRecord("j2", "torchrun", "inv.yaml", ["t.py"], "10.0.0.1", 29500, "/tmp/l", tuple(node(i) for i in range(1, 4)), started=1.0)
    show_status(few)  # a small job keeps its per-node lines (pid, rank, log)
    assert "pid 1002" in capsys.readouterr().out


# A stand-in msrun: node rank 0 starts the "scheduler", whose log (--log_dir/scheduler.log, never printed) names node 1
# as timed out; node 1's worker fails in its AllReduce as the others do when the scheduler aborts the cluster.
FAKE_MSRUN = """#!/bin/sh
for a in "$@"; do case $a in --node_rank=*) rank=${a#--node_rank=};; --log_dir=*) dir=${a#--log_dir=};; esac; done
mkdir -p "$dir"
echo "Start worker process with rank id:$rank, log file:$dir/worker_$rank.log. Environment variable [RANK_ID=$rank] is exported."
if [ "$rank" = 0 ]; then
  echo "[ERROR] DISTRIBUTED(7,7f,python):2026-11-27-10:25:49.084.843 [mindspore/ccsrc/cluster/topology/meta_server_node.cc:548] UpdateTopoState] The node: 1 is timed out. It may exit with exception, please check this node's log." > "$dir/scheduler.log"
fi
sleep 0.5
echo "RuntimeError: Launch kernel failed, name:Default/AllReduce-op0"
exit 1
"""


def test_a_failed_msrun_jobs_verdict_reads_the_scheduler_log_its_launcher_never_printed(tmp_path: Path) -> None:
    """msrun's scheduler names the node whose heartbeats stopped only in scheduler.log on the master node: launch reads
    it after the teardown (LauncherSpec.master_logs), so its verdict names that rank, as triage of the bundle does."""
    inv = write_local_inventory(tmp_path, "msrun", FAKE_MSRUN, "a b")
    outcome = launch_job(load_inventory(inv), LaunchOptions("msrun", ("t.py",), grace=1, log_dir=str(tmp_path / "logs")),
                         preflight=False)
    failure = outcome.record.first_failure
    assert failure is not None and (failure.category, failure.node, failure.rank, failure.rule) == (
        "COMM_TIMEOUT", "b", 1, "absent_named"), failure
    assert failure.file == "a:workers/scheduler.log" and "The node: 1 is timed out" in (failure.text or "")
