"""ascendctl inside (and submitting) real Slurm allocations on real test hosts: slurmctld, slurmd per host, munge.

The cluster (3 hosts, Slurm on top of them) is built once for the module; every test holds its own
allocation (`sbatch --wrap 'sleep'`, as `salloc` would give) and runs ascendctl with that allocation's
variables, exactly what a command in `salloc -N3 ascendctl ...` sees. No inventory is given anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster, HostSpec, build_cluster
from tests.cluster.slurm_harness import PARTITION, SlurmCluster, leftover_job_processes, start_slurm

JOBS = Path(__file__).resolve().parent.parent / "jobs"
ASCENDCTL = [sys.executable, "-m", "ascendctl"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    # the venv's python may live under /root: keep this machine's home on the hosts
    cluster: Cluster = build_cluster([HostSpec(f"h{i:02d}", private_home=False) for i in (1, 2, 3)],
                                     workdir=tmp_path_factory.mktemp("slurm-cluster"), wait_chrony=False)
    try:
        running = start_slurm(cluster)
        try:
            yield running
        finally:
            running.stop()
    finally:
        cluster.teardown()


@pytest.fixture
def allocation(slurm: SlurmCluster) -> Iterator[str]:
    """A 3-node allocation for the test, cancelled afterwards (and every node resumed)."""
    job = slurm.hold(3)
    try:
        yield job
    finally:
        slurm.cancel(job)
        for h in slurm.hosts:
            slurm.run(["scontrol", "update", f"nodename={h.name}", "state=resume"], check=False)


def ascendctl(slurm: SlurmCluster, job: str | None, *args: str, timeout: float = 120,
              extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = slurm.allocation_env(job) if job else slurm.env()
    env.update(extra_env or {})
    env.pop("ASCENDCTL_INVENTORY", None)
    return subprocess.run([*ASCENDCTL, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=slurm.workdir)


def test_inventory_comes_from_the_allocation(slurm: SlurmCluster, allocation: str) -> None:
    proc = ascendctl(slurm, allocation, "inventory", "show", "--json", extra_env={"SLURM_NTASKS_PER_NODE": "2"})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["source"] == f"<Slurm job {allocation}>"
    nodes = data["nodes"]
    assert [n["name"] for n in nodes] == ["h01", "h02", "h03"]
    assert [n["host"] for n in nodes] == [h.ip for h in slurm.hosts]
    assert nodes[0]["sources"]["host"] == "scontrol show node (NodeAddr)"
    assert "scontrol show hostnames" in nodes[0]["sources"]["name"]
    assert nodes[0]["settings"]["slots"] == {"value": 2, "source": "Slurm allocation (SLURM_NTASKS_PER_NODE=2)"}
    assert nodes[0]["settings"]["transport"]["value"] == "slurm"
    text = ascendctl(slurm, allocation, "inventory", "show")
    assert text.returncode == 0 and "scontrol show node (NodeAddr)" in text.stdout


def test_exec_is_one_srun_step_split_per_node(slurm: SlurmCluster, allocation: str) -> None:
    proc = ascendctl(slurm, allocation, "exec", "--json", "--", 'echo "$(hostname) $SLURM_STEP_ID"; echo to-err >&2; '
                     '[ "$(hostname)" != h02 ] || exit 7')
    assert proc.returncode == 3, proc.stderr
    nodes = {n["name"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert set(nodes) == {"h01", "h02", "h03"}
    step_ids = {n["stdout"].split()[1] for n in nodes.values()}
    assert step_ids == {"0"}, nodes  # one step for the whole fan-out: the allocation's first, on every node
    for name, node in nodes.items():
        assert node["stdout"].split()[0] == name
        assert node["stderr"] == "to-err\n"
    assert nodes["h02"]["status"] == "failed" and nodes["h02"]["exit_code"] == 7
    assert nodes["h01"]["status"] == "ok" and nodes["h01"]["exit_code"] == 0


def test_a_drained_node_is_unreachable_with_slurms_reason(slurm: SlurmCluster, allocation: str) -> None:
    slurm.run(["scontrol", "update", "nodename=h03", "state=drain", "reason=fan failure in tray 2"])
    proc = ascendctl(slurm, allocation, "exec", "--json", "--", "hostname")
    assert proc.returncode == 4, proc.stderr
    nodes = {n["name"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert nodes["h03"]["status"] == "unreachable"
    assert "drained" in nodes["h03"]["error"] and "fan failure in tray 2" in nodes["h03"]["error"]
    assert nodes["h01"]["stdout"] == "h01\n" and nodes["h02"]["stdout"] == "h02\n"


def test_render_hostfile_reads_the_allocation(slurm: SlurmCluster, allocation: str) -> None:
    proc = ascendctl(slurm, allocation, "render", "hostfile", extra_env={"SLURM_NTASKS_PER_NODE": "4"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "".join(f"{h.ip} slots=4\n" for h in slurm.hosts)


def test_preflight_runs_as_srun_steps(slurm: SlurmCluster, allocation: str) -> None:
    proc = ascendctl(slurm, allocation, "preflight", "--json", "--only", "ssh,mtu,clock_skew,path_mtu,master_port")
    doc = json.loads(proc.stdout)
    checks = {n["name"]: {c["id"]: c["status"] for c in n["checks"]} for n in doc["nodes"]}
    cluster = {c["id"]: c["status"] for c in doc["cluster"]}
    assert proc.returncode == 0, (checks, doc["cluster"], proc.stderr)
    assert set(checks) == {"h01", "h02", "h03"}
    # the hosts' clocks are this machine's: a warning may only say that a slow answer (the machine busy with the other
    # test lane) kept the reading from vouching for them, never that a clock is off
    clock = next(c for c in doc["cluster"] if c["id"] == "clock_skew")
    assert cluster["clock_skew"] == "pass" or "cannot confirm" in clock["summary"], clock
    assert {k: v for k, v in cluster.items() if k != "clock_skew"} == {"path_mtu": "pass", "master_port": "pass"}


def test_preflight_names_a_drained_node(slurm: SlurmCluster, allocation: str) -> None:
    slurm.run(["scontrol", "update", "nodename=h02", "state=drain", "reason=ECC errors"])
    proc = ascendctl(slurm, allocation, "preflight", "--json", "--only", "ssh,mtu")
    assert proc.returncode == 4, proc.stderr
    doc = json.loads(proc.stdout)
    h02 = next(n for n in doc["nodes"] if n["name"] == "h02")
    assert h02["reachable"] is False and "ECC errors" in json.dumps(h02)


def job_python() -> str:
    """The python of the environment torch is installed in (torchrun is next to it), also when this venv borrows torch."""
    import torch

    return str(Path(torch.__file__).resolve().parents[4] / "bin" / "python")


def launch(slurm: SlurmCluster, job: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None,
           timeout: float = 180, launcher: str = "torchrun", script: str = "allreduce_torch.py") -> subprocess.CompletedProcess[str]:
    job_env = [f"--env={k}={v}" for k, v in {**(env or {}), "PYTHONUNBUFFERED": "1", "JOB_TIMEOUT": "60"}.items()]
    return ascendctl(slurm, job, "launch", "--launcher", launcher, "--log-dir", str(tmp_path / "logs"), "--grace", "3",
                     *job_env, *extra, "--", str(JOBS / script), timeout=timeout,
                     extra_env={"SLURM_NTASKS_PER_NODE": "2", "ASCENDCTL_PYTHON": job_python(),
                                "XDG_STATE_HOME": str(tmp_path / "state")})


def job_record(tmp_path: Path) -> dict[str, Any]:
    jobs = sorted((tmp_path / "state" / "ascendctl" / "jobs").glob("*.json"))
    return json.loads(jobs[-1].read_text())


def test_torchrun_job_inside_the_allocation(slurm: SlurmCluster, allocation: str, tmp_path: Path) -> None:
    proc = launch(slurm, allocation, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(6):
        assert f"rank {rank}: allreduce sum 15 expected 15" in proc.stdout, proc.stdout[-3000:]
    job = job_record(tmp_path)
    assert job["runner"] == "slurm" and job["slurm_job"] == allocation
    assert job["slurm_step"] and job["slurm_step"].startswith(f"{allocation}.")
    assert job["status"] == "succeeded" and [n["exit_code"] for n in job["nodes"]] == [0, 0, 0]
    assert [n["name"] for n in job["nodes"]] == ["h01", "h02", "h03"]
    # the head node's address from the allocation, the port from the Slurm job id
    assert job["master_addr"] == slurm.hosts[0].ip
    assert job["master_port"] == 29500 + int(allocation) % 1000
    assert leftover_job_processes(job["id"]) == []


def test_a_failing_rank_is_named_with_its_node_and_exit_code(slurm: SlurmCluster, allocation: str, tmp_path: Path) -> None:
    proc = launch(slurm, allocation, tmp_path, "--no-preflight", env={"JOB_FAIL_RANK": "3", "JOB_SLEEP": "2"})
    assert proc.returncode == 5, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "h02 (rank 3): failed first: EXCEPTION: " in proc.stderr, proc.stderr
    job = job_record(tmp_path)
    assert job["status"] == "failed" and job["first_failure"]["node"] == "h02" and job["first_failure"]["rank"] == 3
    assert job["nodes"][1]["exit_code"] == 1
    assert leftover_job_processes(job["id"]) == []


def test_stop_cancels_the_step_and_leaves_nothing(slurm: SlurmCluster, allocation: str, tmp_path: Path) -> None:
    proc = launch(slurm, allocation, tmp_path, "--detach", "--no-preflight", env={"JOB_SLEEP": "600"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = job_record(tmp_path)
    step = job["slurm_step"]
    assert step in slurm.run(["squeue", "--steps", "--noheader", "--format=%i", "--jobs", allocation]).stdout
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(leftover_job_processes(job["id"])) < 3 * 3:
        time.sleep(0.5)  # wrapper, torchrun and 2 workers per node: the job is up
    state_env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    status = ascendctl(slurm, None, "status", job["id"], extra_env=state_env)  # from outside the allocation
    assert status.returncode == 0 and "running" in status.stdout, status.stdout + status.stderr
    stopped = ascendctl(slurm, None, "stop", job["id"], "--grace", "3", extra_env=state_env)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert leftover_job_processes(job["id"]) == []
    assert step not in slurm.run(["squeue", "--steps", "--noheader", "--format=%i", "--jobs", allocation]).stdout
    assert job_record(tmp_path)["status"] == "stopped"


def test_submit_mode_end_to_end(slurm: SlurmCluster, tmp_path: Path) -> None:
    args = ["launch", "--backend", "slurm", "--nodes", "2", "--partition", "debug", "--time", "10", "--launcher", "torchrun",
            "--nproc-per-node", "2",
            "--log-dir", str(tmp_path / "logs"), "--grace", "3", "--env", "JOB_TIMEOUT=60", "--env", "PYTHONUNBUFFERED=1",
            "--", str(JOBS / "allreduce_torch.py")]
    state = {"XDG_STATE_HOME": str(tmp_path / "state"), "ASCENDCTL_PYTHON": job_python()}
    dry = ascendctl(slurm, None, *args[:1], "--dry-run", *args[1:], extra_env=state)
    assert dry.returncode == 0, dry.stderr
    assert "#SBATCH --nodes=2\n" in dry.stdout and "#SBATCH --partition=debug\n" in dry.stdout
    assert "#SBATCH --time=10\n" in dry.stdout and "--env JOB_TIMEOUT " in dry.stdout and "=60" not in dry.stdout
    proc = ascendctl(slurm, None, *args, extra_env=state, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(4):  # 2 nodes x 2 slots
        assert f"rank {rank}: allreduce sum 6 expected 6" in proc.stdout, proc.stdout[-3000:]
    job = job_record(tmp_path)
    assert job["status"] == "succeeded" and job["slurm_submitted"] is True and job["runner"] == "slurm"
    assert job["slurm_job"] and f"Slurm job {job['slurm_job']}" in proc.stderr
    slurm.jobs.append(job["slurm_job"])
    assert len(job["nodes"]) == 2 and leftover_job_processes(job["id"]) == []


def test_msrun_job_inside_the_allocation(slurm: SlurmCluster, allocation: str, tmp_path: Path) -> None:
    proc = launch(slurm, allocation, tmp_path, "--no-preflight", "--cluster-timeout", "90", launcher="msrun",
                  script="allreduce_ms.py", env={"GLOG_v": "3"}, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for node_rank, host in enumerate(slurm.hosts):  # 3 nodes x 2 slots: every rank sums 0..5
        for rank in (2 * node_rank, 2 * node_rank + 1):
            log = (tmp_path / "logs" / host.name / "workers" / f"worker_{rank}.log").read_text()
            assert f"rank {rank}: allreduce sum 15 expected 15" in log, log[-2000:]
    job = job_record(tmp_path)
    assert job["runner"] == "slurm" and job["launcher"] == "msrun" and job["slurm_step"].startswith(f"{allocation}.")
    assert job["status"] == "succeeded" and [n["exit_code"] for n in job["nodes"]] == [0, 0, 0]
    assert job["master_addr"] == slurm.hosts[0].ip and job["master_port"] == 29500 + int(allocation) % 1000
    assert leftover_job_processes(job["id"]) == []


def test_collect_inside_the_allocation_has_every_node_and_names_a_drained_one(slurm: SlurmCluster, allocation: str,
                                                                              tmp_path: Path) -> None:
    proc = launch(slurm, allocation, tmp_path, "--no-preflight", script="hello.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    bundle = tmp_path / "bundle"
    collected = ascendctl(slurm, allocation, "collect", "last", "--json", "-o", str(bundle), extra_env=state)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    manifest = json.loads((bundle / "manifest.json").read_text())
    by_name = {n["name"]: n for n in manifest["nodes"]}
    assert list(by_name) == ["h01", "h02", "h03"] and manifest["unreachable"] == []
    job = job_record(tmp_path)
    for rank, name in enumerate(by_name):
        assert by_name[name]["status"] == "ok", by_name[name]
        # each node's own facts (its UTS namespace's hostname) and its own launcher log, through srun steps
        assert json.loads((bundle / name / "facts.json").read_text())["hostname"] == name
        log = next(f for f in by_name[name]["files"] if f["path"] == f"{tmp_path}/logs/{name}/launcher.log")
        assert log["category"] == "launcher"
        assert f"[rank{2 * rank}]:hello {2 * rank} " in (bundle / log["file"]).read_text()  # 2 slots a node
    assert json.loads((bundle / "job.json").read_text())["id"] == job["id"]

    slurm.run(["scontrol", "update", "nodename=h02", "state=drain", "reason=PSU 1 lost"])
    drained = tmp_path / "drained"
    proc = ascendctl(slurm, allocation, "collect", "last", "--json", "-o", str(drained), extra_env=state)
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    manifest = json.loads((drained / "manifest.json").read_text())
    by_name = {n["name"]: n for n in manifest["nodes"]}
    assert manifest["unreachable"] == ["h02"]
    assert by_name["h02"]["status"] == "unreachable"
    assert "Slurm reports node h02 drained" in by_name["h02"]["error"] and "PSU 1 lost" in by_name["h02"]["error"]
    assert by_name["h01"]["status"] == "ok" and by_name["h03"]["status"] == "ok"
    assert (drained / "h03" / "facts.json").is_file()


def test_launch_dry_run_inside_the_allocation(slurm: SlurmCluster, allocation: str, tmp_path: Path) -> None:
    proc = launch(slurm, allocation, tmp_path, "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)["plan"]
    nodes = plan["nodes"]
    assert [n["name"] for n in nodes] == ["h01", "h02", "h03"] and [n["node_rank"] for n in nodes] == [0, 1, 2]
    assert [n["host"] for n in nodes] == [h.ip for h in slurm.hosts] and plan["world_size"] == 6
    # the head node's address from the allocation, the port from the Slurm job id, as the real launch uses
    assert plan["master_addr"] == slurm.hosts[0].ip and plan["master_port"] == 29500 + int(allocation) % 1000
    assert [n["cluster_address"] for n in nodes] == [h.ip for h in slurm.hosts]
    assert all("torchrun" in n["command"] and "allreduce_torch.py" in n["command"] for n in nodes)
    text = launch(slurm, allocation, tmp_path, "--dry-run")
    assert text.returncode == 0 and "h03" in text.stdout, text.stderr
    assert not (tmp_path / "logs").exists()  # nothing started
    assert not (tmp_path / "state" / "ascendctl" / "jobs").exists() or job_records(tmp_path) == []


def job_records(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "state" / "ascendctl" / "jobs").glob("*.json"))


def test_scancel_of_the_allocation_leaves_no_process_of_the_job(slurm: SlurmCluster, tmp_path: Path) -> None:
    job_alloc = slurm.hold(3)
    proc = launch(slurm, job_alloc, tmp_path, "--detach", "--no-preflight", env={"JOB_SLEEP": "600"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = job_record(tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(leftover_job_processes(job["id"])) < 3 * 3:
        time.sleep(0.5)  # wrapper, torchrun and 2 workers per node: the job is up
    assert len(leftover_job_processes(job["id"])) >= 3 * 3
    slurm.cancel(job_alloc)
    deadline = time.monotonic() + 60  # Slurm sends TERM, then KILL after KillWait (5 s)
    while time.monotonic() < deadline and leftover_job_processes(job["id"]):
        time.sleep(0.5)
    assert leftover_job_processes(job["id"]) == []
    status = ascendctl(slurm, None, "status", job["id"], "--json", extra_env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert status.returncode in (4, 5), status.stdout + status.stderr  # the job did not succeed, and says so
    job_now = json.loads(status.stdout)["job"]
    assert job_now["status"] == "failed", job_now
    assert all(f"Slurm job {job_alloc} ended (CANCELLED)" in n["error"] for n in job_now["nodes"]), job_now["nodes"]


def test_exec_from_inside_an_srun_step_reaches_every_node(slurm: SlurmCluster, allocation: str) -> None:
    # a one-task step on h02, as a batch script's `srun -N1 ascendctl exec ...` would be: its step-scoped SLURM_*
    # variables (SLURM_NNODES=1, SLURM_NODELIST=h02, SLURM_STEP_ID, ...) must not narrow or break the inner steps
    inner = [*ASCENDCTL, "exec", "--json", "--", 'echo "$(hostname) $SLURM_STEP_ID"']
    proc = subprocess.run(["srun", f"--jobid={allocation}", "--overlap", "-N1", "-n1", "--nodelist=h02", "--quiet", *inner],
                          capture_output=True, text=True, timeout=120, env=slurm.allocation_env(allocation),
                          cwd=slurm.workdir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    nodes = {n["name"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert list(nodes) == ["h01", "h02", "h03"]
    answers = {name: n["stdout"].split() for name, n in nodes.items()}
    assert {name: a[0] for name, a in answers.items()} == {"h01": "h01", "h02": "h02", "h03": "h03"}
    assert len({a[1] for a in answers.values()}) == 1  # one inner step, on all 3 nodes


def test_an_inventory_saying_backend_slurm_submits_and_lends_its_defaults(slurm: SlurmCluster, tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"backend: slurm\nslurm:\n  partition: {PARTITION}\n  time: 10\n  nodes: 2\n"
                   f"defaults:\n  slots: 1\n  python: {job_python()}\n  env:\n    HELLO_FROM: inventory\n")
    # inside an allocation: the allocation's nodes, with the file's defaults
    allocation = slurm.hold(3)
    shown = ascendctl(slurm, allocation, "inventory", "show", "-i", str(inv), "--json")
    slurm.cancel(allocation)  # its nodes are needed for the submitted job
    slurm.wait_state(allocation, "CANCELLED")
    assert shown.returncode == 0, shown.stderr
    nodes = json.loads(shown.stdout)["nodes"]
    assert [n["name"] for n in nodes] == ["h01", "h02", "h03"]
    assert {n["settings"]["slots"]["value"] for n in nodes} == {1} and nodes[0]["settings"]["transport"]["value"] == "slurm"
    # outside: `launch` submits (no --backend), sbatch options from the `slurm:` section
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    args = ["launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(tmp_path / "logs"), "--grace", "3",
            "--", str(JOBS / "hello.py")]
    dry = ascendctl(slurm, None, *args[:1], "--dry-run", *args[1:], extra_env=state)
    assert dry.returncode == 0, dry.stderr
    assert "#SBATCH --nodes=2\n" in dry.stdout and f"#SBATCH --partition={PARTITION}\n" in dry.stdout
    assert "#SBATCH --time=10\n" in dry.stdout and f"launch -i {inv} " in dry.stdout
    proc = ascendctl(slurm, None, *args, extra_env=state, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    job = job_record(tmp_path)
    slurm.jobs.append(job["slurm_job"])
    assert job["slurm_submitted"] is True and job["runner"] == "slurm" and len(job["nodes"]) == 2
    assert job["nodes"][0]["env"]["HELLO_FROM"] == "inventory"
    assert "hello 0 " in proc.stdout and "hello 1 " in proc.stdout and "hello 2 " not in proc.stdout  # 1 slot a node
    # other commands refuse such a file outside an allocation, with the key and a hint
    refused = ascendctl(slurm, None, "exec", "-i", str(inv), "--", "true")
    assert refused.returncode == 2 and "backend: slurm" in refused.stderr and "hint:" in refused.stderr


def test_quarantine_drains_for_ascendctl_and_release_resumes_only_its_own_drain(slurm: SlurmCluster, allocation: str) -> None:
    """`nodes quarantine` drains with ascendctl's reason and later commands leave the node out; `nodes release`
    resumes it, but not a node an operator drained for a reason of their own (docs/nodes.md)."""
    done = ascendctl(slurm, allocation, "nodes", "quarantine", "h0[2-3]", "--reason", "ECC errors")
    assert done.returncode == 0, done.stderr
    assert "DRAIN" in slurm.node_state("h02")
    assert "Reason=ascendctl: ECC errors" in slurm.run(["scontrol", "show", "node", "-o", "h02"]).stdout
    proc = ascendctl(slurm, allocation, "exec", "--json", "--", "hostname")
    assert proc.returncode == 0, proc.stderr
    assert [n["name"] for n in json.loads(proc.stdout)["nodes"]] == ["h01"]
    assert "leaving out 2 quarantined nodes: h[02-03]" in proc.stderr
    slurm.run(["scontrol", "update", "nodename=h03", "state=drain", "reason=fan failure in tray 2"])  # an operator's
    released = ascendctl(slurm, allocation, "nodes", "release", "h0[2-3]")
    assert released.returncode == 0, released.stderr
    assert "DRAIN" not in slurm.node_state("h02")
    assert "DRAIN" in slurm.node_state("h03")
    assert "fan failure in tray 2" in slurm.run(["scontrol", "show", "node", "-o", "h03"]).stdout
    assert "h03: drained by someone else (fan failure in tray 2" in released.stderr


def test_restarts_inside_the_allocation_drain_the_faulty_node_and_use_a_spare_of_it(slurm: SlurmCluster, allocation: str,
                                                                                      tmp_path: Path) -> None:
    """`launch --restarts` inside an allocation (issue #28): a rank on h02 reports a real device fault (an SDMA error
    line of a captured plog) and exits; the engine blames h02's hardware, so h02 is quarantined, which drains it in
    Slurm with ascendctl's reason, and attempt 2 runs on h01 and the allocation's spare h03 (the same world size) and
    succeeds. `nodes release` resumes h02. With the default preflights: attempt 1's full one, attempt 2's reduced one,
    as srun steps of the allocation."""
    samples = Path(__file__).resolve().parent.parent / "data" / "samples" / "ascend" / "plog_fixtures_ascend-faultdiag.txt"
    fault = tmp_path / "fault.txt"
    fault.write_text(next(line for line in samples.read_text().splitlines() if "ProcessSdmaErrorInfo" in line) + "\n")
    proc = launch(slurm, allocation, tmp_path, "--restarts", "1", "--restart-backoff", "1",
                  "--spares", "h03", env={"JOB_FAULT_RANK": "2", "JOB_FAULT_LINE": str(fault)},
                  script="restart_torch.py", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "replaced by spare h03" in out and "attempts (2):" in out, out[-3000:]
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "state" / "ascendctl" / "jobs").glob("*.json"))]
    by_attempt = {r["attempt"]: r for r in records}
    assert by_attempt[1]["status"] == "failed" and by_attempt[1]["first_failure"]["node"] == "h02"
    assert by_attempt[1]["first_failure"]["category"] == "HARDWARE" and by_attempt[1]["decision"].startswith("replace")
    assert [n["name"] for n in by_attempt[1]["nodes"]] == ["h01", "h02"]
    assert by_attempt[2]["status"] == "succeeded" and [n["name"] for n in by_attempt[2]["nodes"]] == ["h01", "h03"]
    assert all(r["slurm_job"] == allocation for r in records)
    shown = slurm.run(["scontrol", "show", "node", "-o", "h02"]).stdout
    assert "DRAIN" in slurm.node_state("h02") and f"Reason=ascendctl: HARDWARE in job {by_attempt[1]['id']}" in shown, shown
    released = ascendctl(slurm, allocation, "nodes", "release", "h02", extra_env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert released.returncode == 0, released.stderr
    assert "DRAIN" not in slurm.node_state("h02")
    for r in records:
        assert leftover_job_processes(r["id"]) == []


def test_restarts_with_detach_inside_the_allocation_are_refused_clearly(slurm: SlurmCluster, allocation: str,
                                                                       tmp_path: Path) -> None:
    proc = launch(slurm, allocation, tmp_path, "--no-preflight", "--restarts", "1", "--detach", script="restart_torch.py")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "inside a Slurm allocation the loop runs in the foreground" in proc.stderr and "Traceback" not in proc.stderr
    assert "(asked by --restarts " in proc.stderr, proc.stderr


def test_a_log_dir_holding_a_previous_jobs_pid_and_exit_status_does_not_end_the_new_job(slurm: SlurmCluster,
                                                                                       allocation: str,
                                                                                       tmp_path: Path) -> None:
    """A relaunch (or a launch run again) reuses --log-dir: a previous job's `pid` and `exit_code` in a node's directory
    were read as the new job's while its step started, so the job was taken as ended and stopped at once (seen in a
    full run: attempt 2 of a restart loop cancelled 1.4 s after its start). The runner clears them first."""
    for h in ("h01", "h02", "h03"):
        node_dir = tmp_path / "logs" / h
        node_dir.mkdir(parents=True)
        (node_dir / "pid").write_text("1\n")  # a pid that is alive: the stalest kind
        (node_dir / "exit_code").write_text("143\n")
    proc = launch(slurm, allocation, tmp_path, "--no-preflight", env={"JOB_SLEEP": "3"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(6):
        assert f"rank {rank}: allreduce sum 15 expected 15" in proc.stdout, proc.stdout[-3000:]
    assert [n["exit_code"] for n in job_record(tmp_path)["nodes"]] == [0, 0, 0]
