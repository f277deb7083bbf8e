"""`ascendctl launch` of real msrun and torchrun jobs over real SSH to real test hosts (no mocks).

Hosts share this machine's filesystem (so the venv's python, msrun and torchrun) and pid
namespace, so "no process of the job left" is checked with `ps` on each host, which sees all.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster, HostSpec

JOBS = Path(__file__).resolve().parent.parent / "jobs"
ASCENDCTL = [sys.executable, "-m", "ascendctl"]
FAST = {"JOB_TIMEOUT": "60"}


def hosts(n: int = 3) -> list[HostSpec]:
    """The venv's python may live under /root (pyenv), so the hosts keep this machine's home."""
    return [HostSpec(f"h{i:02d}", private_home=False) for i in range(1, n + 1)]


def inventory(cluster: Cluster, tmp_path: Path) -> Path:
    return cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 2, "python": sys.executable,
                                                                    "command_timeout": 60})


def start(inv: Path, tmp_path: Path, launcher: str, script: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`ascendctl launch` in a subprocess; `env` goes to the job on every node through --env."""
    job_env = [f"--env={k}={v}" for k, v in {**(env or {}), "PYTHONUNBUFFERED": "1"}.items()]
    argv = [*ASCENDCTL, "launch", "-i", str(inv), "--launcher", launcher, "--log-dir", str(tmp_path / "logs"),
            "--grace", "3", "--cluster-timeout", "60", *job_env, *extra, "--", str(JOBS / script)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = 150) -> tuple[int, str, str]:
    """Wait for `proc` and return its exit code and the rest of its output.

    Not `communicate()`: it reads the raw pipes, so lines that `wait_for_lines`' readline() had already
    buffered in the file objects would be lost (seen as a flaky "rank 3 did not get ..." in the secrets test).
    """
    texts: dict[str, str] = {}

    def drain(name: str, stream: Any) -> None:
        texts[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(name, stream), daemon=True)
               for name, stream in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    for reader in readers:
        reader.join(timeout=30)
    return proc.returncode, texts.get("out", ""), texts.get("err", "")


def last_job() -> dict[str, Any]:
    jobs = sorted((Path(os.environ["XDG_STATE_HOME"]) / "ascendctl" / "jobs").glob("*.json"))
    return json.loads(jobs[-1].read_text())


# Every process whose command line holds $ASCT_PATH and that lives in this host's network namespace: the hosts share one
# pid namespace, so `ps` on a host also lists the jobs of the other lane's test hosts (scripts/test.sh runs two at once).
# The path comes in the environment, not in argv, so this shell and its subshells do not match themselves.
_HOST_PROCESSES = r"""
self=$(readlink /proc/self/ns/net)
for d in /proc/[0-9]*; do
    [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$self" ] || continue
    args=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null) || continue
    case $args in *"$ASCT_PATH"*) echo "${d#/proc/} $args" ;; esac
done
"""


def job_processes(cluster: Cluster, script: str) -> list[str]:
    """Processes of the job on every host of this cluster: matched by the script's path in this checkout and by the
    host's network namespace (jobs of another test, or another cluster of this run, are not counted)."""
    path = str(JOBS / script)
    left = []
    for host in cluster.hosts:
        found = cluster.run_on(host, ["env", f"ASCT_PATH={path}", "sh", "-c", _HOST_PROCESSES])
        left += [f"{host.name}: {line}" for line in found.stdout.splitlines() if line.strip()]
    return left


def wait_for_lines(proc: subprocess.Popen[str], pattern: str, count: int, timeout: float) -> list[str]:
    """Read stdout until `pattern` matched `count` distinct texts (the job is then running everywhere).

    Matches are searched in the whole output: two workers writing at once can share a line.
    """
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while len(set(re.findall(pattern, "\n".join(seen)))) < count:
        assert time.monotonic() < deadline, "\n".join(seen[-30:])
        line = proc.stdout.readline()
        assert line, "launch ended early:\n" + "\n".join(seen[-30:])
        seen.append(line.rstrip("\n"))
    return seen


def test_output_streams_while_the_job_runs_without_the_job_asking_for_it(cluster_factory: Any, tmp_path: Path) -> None:
    """Python block-buffers stdout on a pipe: launch sets PYTHONUNBUFFERED=1 for launcher and workers (not the test)."""
    cluster: Cluster = cluster_factory(hosts(2))
    inv = inventory(cluster, tmp_path)
    stop = tmp_path / "stop"
    argv = [*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(tmp_path / "logs"),
            "--grace", "3", f"--env=STOP_FILE={stop}", "--", str(JOBS / "steps_torch.py")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        # the job runs until told to stop (60 s at most): with buffered output nothing would arrive before that
        wait_for_lines(proc, r"rank (\d): step 3\b", 4, timeout=40)
        assert proc.poll() is None
    finally:
        stop.touch()
    code, out, err = finish(proc)
    assert code == 0, out[-3000:] + err[-3000:]
    assert all(n["env"].get("PYTHONUNBUFFERED") == "1" for n in last_job()["nodes"])


def test_torchrun_gloo_allreduce_on_three_hosts(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    code, out, err = finish(start(inv, tmp_path, "torchrun", "allreduce_torch.py", env=FAST))
    assert code == 0, out[-3000:] + err[-3000:]
    for node_rank, host in enumerate(cluster.hosts):
        log = (tmp_path / "logs" / host.name / "launcher.log").read_text()
        for rank in (2 * node_rank, 2 * node_rank + 1):
            assert f"rank {rank}: allreduce sum 15 expected 15" in log
            # torchrun prefixes every worker line with its local and global rank (ascendctl sets the template)
            assert f"[{host.name}] [default{rank - 2 * node_rank}]:[rank{rank}]:rank {rank}: allreduce sum 15 expected 15" in out
    job = last_job()
    assert job["status"] == "succeeded" and [n["exit_code"] for n in job["nodes"]] == [0, 0, 0]
    assert [n["rank"] for n in job["nodes"]] == [0, 1, 2]
    assert job_processes(cluster, "allreduce_torch.py") == []


def eth1_bytes(cluster: Cluster) -> dict[str, int]:
    return {h.name: int(cluster.run_on(h, ["cat", "/sys/class/net/eth1/statistics/rx_bytes"], check=True).stdout)
            for h in cluster.hosts}


def test_two_nic_nodes_get_the_cluster_interface_address_not_the_ssh_address(cluster_factory: Any, tmp_path: Path) -> None:
    # eth0 carries SSH (the inventory's host); eth1 is the cluster NIC on its own network (10.214/16)
    cluster: Cluster = cluster_factory([HostSpec(f"h0{i}", cluster_nic=True, private_home=False) for i in (1, 2)])
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 2, "python": sys.executable,
                                                                    "command_timeout": 60, "interface": "eth1"})
    h1, h2 = cluster.hosts
    assert h1.cluster_ip and h2.cluster_ip and h1.cluster_ip != h1.ip
    wanted = {"HCCL_IF_IP": h2.cluster_ip, "HCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1",
              "MASTER_ADDR": h1.cluster_ip}
    rendered = subprocess.run([*ASCENDCTL, "render", "env", "-i", str(inv), "--node", "h02", "--launcher", "torchrun"],
                              capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    exports = dict(re.findall(r"^export (\w+)=(\S*)$", rendered.stdout, re.MULTILINE))
    assert {k: exports.get(k) for k in wanted} == wanted, rendered.stdout
    dry = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--dry-run", "--", "train.py"],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    h02_plan = dry.stdout[dry.stdout.index("h02"):]
    for name, value in wanted.items():
        assert f"{name}={value}" in h02_plan, dry.stdout
    before = eth1_bytes(cluster)
    names = ",".join(sorted(wanted))
    code, out, err = finish(start(inv, tmp_path, "torchrun", "allreduce_torch.py", env={**FAST, "JOB_PRINT_ENV": names}))
    assert code == 0, out[-3000:] + err[-3000:]
    for rank, host in ((2, h2), (3, h2), (0, h1)):
        assert f"rank {rank} env HCCL_IF_IP={host.cluster_ip}" in out, out[-3000:]
        assert f"rank {rank} env MASTER_ADDR={h1.cluster_ip}" in out and f"rank {rank} env GLOO_SOCKET_IFNAME=eth1" in out
    # the rendezvous and the all-reduce went over the cluster network: nothing else talks on eth1
    after = eth1_bytes(cluster)
    assert all(after[name] - before[name] > 2_000 for name in after), (before, after)


def test_cluster_interface_without_an_address_refuses_to_launch(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([HostSpec("h01", cluster_nic=True, private_home=False),
                                                 HostSpec("h02", cluster_nic=True, cluster_nic_ip=False, private_home=False)])
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 1, "python": sys.executable, "interface": "eth1"})
    code, out, err = finish(start(inv, tmp_path, "torchrun", "allreduce_torch.py", "--no-preflight", env=FAST))
    assert code == 3, out + err
    assert "h02: interface eth1 (inventory interface) has no IPv4 address" in err, err
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").rglob("launcher.log"))
    rendered = subprocess.run([*ASCENDCTL, "render", "env", "-i", str(inv), "--node", "h02"], capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 3 and "h02: interface eth1 (inventory interface) has no IPv4 address" in rendered.stderr, rendered.stderr


def test_msrun_allreduce_on_three_hosts(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    code, out, err = finish(start(inv, tmp_path, "msrun", "allreduce_ms.py", "--no-preflight", env={"GLOG_v": "3"}))
    assert code == 0, out[-3000:] + err[-3000:]
    for node_rank, host in enumerate(cluster.hosts):
        for rank in (2 * node_rank, 2 * node_rank + 1):
            log = (tmp_path / "logs" / host.name / "workers" / f"worker_{rank}.log").read_text()
            assert f"rank {rank}: allreduce sum 15 expected 15" in log
    assert last_job()["status"] == "succeeded"
    assert job_processes(cluster, "allreduce_ms.py") == []


def test_failing_rank_tears_down_every_node_and_is_named_first(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    proc = start(inv, tmp_path, "torchrun", "allreduce_torch.py", "--no-preflight", env={**FAST, "JOB_FAIL_RANK": "3", "JOB_SLEEP": "2"})
    wait_for_lines(proc, r"rank \d/6 started", 6, 90)
    failed_at = time.monotonic()
    code, out, err = finish(proc)
    # torn down at the failure (2 s, then grace 3 s), not when the others' collective times out (JOB_TIMEOUT, 60 s);
    # the margin is for a loaded machine (the suite's three lanes on 2 cores took 19 s once)
    assert time.monotonic() - failed_at < 40
    assert code == 5  # the job ran and failed
    assert "h02 (rank 3): failed first: EXCEPTION: " in err, err
    assert "ascendctl collect" in err
    job = last_job()
    assert job["status"] == "failed" and job["first_failure"]["node"] == "h02" and job["first_failure"]["rank"] == 3
    assert job["nodes"][1]["exit_code"] == 1
    assert all(n["exit_code"] is not None or n["signal"] for n in job["nodes"]), job["nodes"]  # an exit or a signal
    assert job_processes(cluster, "allreduce_torch.py") == []


def test_detached_job_is_torn_down_at_its_first_failure_by_its_supervisor_with_nobody_following(
        cluster_factory: Any, tmp_path: Path) -> None:
    """Issue #30: with --detach, fail-fast held only while a terminal followed (q1 still ran 40 s after q2 failed) and no
    verdict was computed. The launch's session is gone at once here (as after a logout): the supervisor stays."""
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    launch = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(tmp_path / "logs"),
                             "--grace", "3", "--no-preflight", "--detach", "--env=JOB_TIMEOUT=60", "--env=JOB_FAIL_RANK=3",
                             "--env=JOB_SLEEP=4", "--", str(JOBS / "allreduce_torch.py")],
                            capture_output=True, text=True, timeout=120, start_new_session=True)
    assert launch.returncode == 0, launch.stderr
    job = last_job()
    assert job["status"] == "running" and job["supervisor"]["pid"] > 0
    deadline = time.monotonic() + 90
    while (job := last_job())["status"] == "running":
        assert time.monotonic() < deadline, job
        time.sleep(0.5)
    assert job["status"] == "failed" and job["first_failure"]["node"] == "h02" and job["first_failure"]["rank"] == 3
    assert job["first_failure"]["category"] == "EXCEPTION"
    # every node's end is on record: its exit code, or the signal the teardown ended it with (a KILL after the grace on a
    # loaded machine: the clean-clone run saw h01 recorded as SIGKILL)
    assert all(n["exit_code"] is not None or n["signal"] for n in job["nodes"]), job["nodes"]
    assert job_processes(cluster, "allreduce_torch.py") == []
    status = subprocess.run([*ASCENDCTL, "status", job["id"]], capture_output=True, text=True, timeout=60)
    assert status.returncode == 5 and "verdict: " in status.stdout, status.stdout


def test_failing_msrun_rank_is_named_from_its_worker_log(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    proc = start(inv, tmp_path, "msrun", "allreduce_ms.py", "--no-preflight", env={"GLOG_v": "3", "JOB_FAIL_RANK": "3", "JOB_SLEEP": "2"})
    wait_for_lines(proc, r"rank \d/6 started", 2, 120)  # msrun tails only this node's workers; any start will do
    code, out, err = finish(proc)
    assert code == 5, out[-3000:] + err[-3000:]
    assert "h02 (rank 3): failed first: EXCEPTION: " in err, err
    assert last_job()["first_failure"]["rank"] == 3
    assert job_processes(cluster, "allreduce_ms.py") == []


def test_ctrl_c_tears_down_every_node_and_exits_130(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    proc = start(inv, tmp_path, "torchrun", "allreduce_torch.py", "--no-preflight", env={**FAST, "JOB_SLEEP": "120"})
    wait_for_lines(proc, r"rank \d/6 started", 6, 90)
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc, 30)
    assert code == 130, err
    assert "interrupted" in err
    assert last_job()["status"] == "interrupted"
    assert job_processes(cluster, "allreduce_torch.py") == []


def test_host_lost_mid_job_is_reported_unreachable_and_the_others_torn_down(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    proc = start(inv, tmp_path, "torchrun", "allreduce_torch.py", "--no-preflight", env={**FAST, "JOB_SLEEP": "120"})
    wait_for_lines(proc, r"rank \d/6 started", 6, 90)
    cluster.stop_sshd("h03", kill_sessions=True)
    code, out, err = finish(proc, 60)
    assert code == 4  # a node lost: that wins over the job's failure (5)
    assert "h03: failed first: " in err and "unreachable" in err, err
    job = last_job()
    assert job["first_failure"]["node"] == "h03"
    assert "unreachable" in job["nodes"][2]["error"]
    # h01 and h02 are clean; h03 cannot be reached, so its launcher (in its own session) is left to the harness.
    marked = subprocess.run(["sh", "-c", "grep -lzE 'ASCENDCTL_JOB=.*/h0[12]$' /proc/[0-9]*/environ"],
                            capture_output=True, text=True).stdout.split()
    assert marked == []


def test_preflight_refuses_to_start_when_the_master_port_is_taken(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts(2))
    inv = inventory(cluster, tmp_path)
    squatter = ("import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                "s.bind(('0.0.0.0', 29500)); s.listen(1); time.sleep(60)")
    cluster.run_on("h01", f"nohup python3 -c \"{squatter}\" >/dev/null 2>&1 &")
    time.sleep(0.5)
    code, out, err = finish(start(inv, tmp_path, "torchrun", "allreduce_torch.py", env=FAST))
    assert code == 3, out[-2000:] + err[-2000:]
    assert "port 29500 is already in use on master h01" in out + err
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").rglob("launcher.log"))
    assert job_processes(cluster, "allreduce_torch.py") == []
