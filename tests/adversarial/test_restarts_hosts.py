"""`launch --restarts` (issue #28) with real torchrun jobs over real SSH on test hosts: a transient rank death is
restarted in place and the job finishes; the job's own error (a missing module on every rank) is not restarted and
exits 6; a node taken off the network is quarantined and the job finishes on the others plus a spare, at the same
world size. On real Slurm (slurmctld, a slurmd per host), submit mode leaves a quarantined node out with sbatch --exclude.
The decision table itself: tests/test_restart.py; on local nodes: tests/test_restart_local.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cluster.harness import Cluster
from tests.cluster.test_launch_hosts import ASCENDCTL, finish, hosts, job_processes, start, wait_for_lines
from tests.json_schemas import assert_valid

SCRIPT = "restart_torch.py"


def inv_of(cluster: Cluster, tmp_path: Path, **defaults: Any) -> Path:
    return cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 2, "python": sys.executable,
                                                                    "command_timeout": 60, **defaults})


def records() -> dict[str, dict[str, Any]]:
    jobs = sorted((Path(os.environ["XDG_STATE_HOME"]) / "ascendctl" / "jobs").glob("*.json"))
    loaded = [json.loads(p.read_text()) for p in jobs]
    return {r["id"]: r for r in loaded}


def attempts_of(first: str) -> list[dict[str, Any]]:
    found = [r for r in records().values() if r["id"] == first or r.get("restart_of") == first]
    return sorted(found, key=lambda r: r["attempt"])


def test_a_rank_killed_once_is_restarted_in_place_and_the_job_finishes(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inv_of(cluster, tmp_path)
    checkpoints = tmp_path / "checkpoints"  # the hosts share this machine's filesystem: shared storage
    checkpoints.mkdir()
    proc = start(inv, tmp_path, "torchrun", SCRIPT, "--no-preflight", "--restarts", "2", "--restart-backoff", "1", "--json",
                 "--checkpoint-dir", str(checkpoints), env={"JOB_KILL_RANK": "3", "JOB_TIMEOUT": "30",
                                                            "JOB_CKPT_DIR": str(checkpoints)})
    code, out, err = finish(proc, 240)
    assert code == 0, err[-3000:]
    document = json.loads(out)
    assert_valid("launch", document)
    attempts = document["attempts"]
    assert [(a["attempt"], a["status"], a["decision"]) for a in attempts] == [(1, "failed", "restart"), (2, "succeeded", "done")]
    assert attempts[0]["nodes"] == attempts[1]["nodes"] == ["h01", "h02", "h03"]  # in place
    saved = attempts_of(attempts[0]["job"])
    assert [(r["attempt"], r["restart_of"]) for r in saved] == [(1, None), (2, attempts[0]["job"])]
    assert saved[0]["decision"].startswith("restart: ")
    assert "attempt 1 of job" in err and "attempt 2 in 1 s" in err
    log = "".join(p.read_text() for p in (tmp_path / "logs").rglob("launcher.log"))
    assert "attempt 2 finished" in log and "attempt 1 finished" not in log
    # attempt 1 saved ckpt-1 whole and ckpt-2 cut short (no .metadata): attempt 2 resumes from ckpt-1, says why not 2
    assert "attempt 1: no complete checkpoint in" in err, err[-3000:]
    assert f"attempt 2 resumes from {checkpoints}/ckpt-1 (skipped: ckpt-2: no .metadata in it" in err, err[-3000:]
    assert f"rank 0: resuming from {checkpoints}/ckpt-1\n" in log and "rank 0: step 2 done" in log
    assert job_processes(cluster, SCRIPT) == []


def test_a_job_that_always_dies_before_its_next_checkpoint_stops_for_no_progress_not_at_the_budget(
        cluster_factory: Any, tmp_path: Path) -> None:
    """Rank 3 dies (SIGKILL) at step 2 on every attempt: attempt 1 logs step 1 and saves ckpt-1; each relaunch resumes
    from ckpt-1 and dies before step 2 is saved, logging no step: with 2 attempts without progress allowed the loop
    gives up after 3 attempts, not after the 5 restarts allowed. The whole policy is the inventory's `restart:` section
    (no restart flag given)."""
    import yaml

    cluster: Cluster = cluster_factory(hosts())
    inv = inv_of(cluster, tmp_path)
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    written = yaml.safe_load(inv.read_text())
    written["restart"] = {"restarts": 5, "backoff": 1, "no_progress_attempts": 2, "checkpoint_dir": str(checkpoints)}
    inv.write_text(yaml.safe_dump(written))
    proc = start(inv, tmp_path, "torchrun", SCRIPT, "--no-preflight", "--json",
                 env={"JOB_KILL_RANK": "3", "JOB_BAD_ATTEMPT": "all", "JOB_TIMEOUT": "30", "JOB_CKPT_DIR": str(checkpoints)})
    code, out, err = finish(proc, 300)
    document = json.loads(out)
    assert_valid("launch", document)
    attempts = document["attempts"]
    assert [(a["attempt"], a["status"], a["decision"]) for a in attempts] == [
        (1, "failed", "restart"), (2, "failed", "restart"), (3, "failed", "give_up")], err[-3000:]
    last = attempts_of(attempts[0]["job"])[-1]
    assert f"no progress beyond step 1 or checkpoint {checkpoints}/ckpt-1 in 2 attempts" in last["decision"], last["decision"]
    assert code == 5, err[-3000:]  # the job failed (and may be requeued: not its own error)
    assert err.count(f"resumes from {checkpoints}/ckpt-1") == 2, err[-3000:]
    assert job_processes(cluster, SCRIPT) == []


def test_a_missing_module_on_every_rank_is_not_restarted_and_says_do_not_requeue(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inv_of(cluster, tmp_path)
    proc = start(inv, tmp_path, "torchrun", SCRIPT, "--no-preflight", "--restarts", "3", "--restart-backoff", "1",
                 env={"JOB_IMPORT": "a_module_that_is_not_installed"})
    code, out, err = finish(proc, 180)
    assert code == 6, out[-2000:] + err[-3000:]
    assert "-> no_restart: " in out and "do not requeue" in out, out[-3000:]
    first = [r for r in records().values() if r["decision"] and r["decision"].startswith("no_restart")]
    assert len(first) == 1 and first[0]["attempt"] == 1 and first[0]["first_failure"]["category"] == "LAUNCH"
    assert job_processes(cluster, SCRIPT) == []


def test_a_detached_job_is_relaunched_over_ssh_by_its_supervisor(cluster_factory: Any, tmp_path: Path) -> None:
    """`launch --detach --restarts`: launch returns at once; the supervisor left on this machine follows attempt 1 over
    SSH, decides (a bare SIGKILL: in place) and starts attempt 2 over its own connections (no preflight: it is most of
    the time, and the same launch_job as in the foreground, tests/test_restart_local.py)."""
    from ascendctl.jobs.record import list_jobs
    from tests.test_launch import marked, process_alive
    from tests.test_restart_local import LAUNCHER, until

    cluster: Cluster = cluster_factory(hosts())
    bin_dir = tmp_path / "venv" / "bin"  # a stand-in torchrun (tests/test_restart_local.py): the loop is what is tested
    bin_dir.mkdir(parents=True)
    (bin_dir / "torchrun").write_text(LAUNCHER)
    (bin_dir / "torchrun").chmod(0o755)
    (tmp_path / "train.py").write_text("")
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 1, "python": str(bin_dir / "python")})
    launched = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--detach", "--no-preflight",
                               "--restarts", "2", "--restart-backoff", "0", "--grace", "1", "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=1",
                               "--log-dir", str(tmp_path / "logs"), "--json", "--", str(tmp_path / "train.py")],
                              capture_output=True, text=True, timeout=120)
    assert launched.returncode == 0, launched.stderr[-3000:]
    document = json.loads(launched.stdout)
    assert_valid("launch", document)
    first = document["job"]["id"]
    assert document["detached"] is True and document["job"]["supervisor"]["loop"] is True
    until(lambda: not process_alive(document["job"]["supervisor"]["pid"]), 120)
    saved = sorted(list_jobs(), key=lambda r: r.attempt)
    assert [(r.attempt, r.status.value, (r.decision or "").split(":")[0], r.restart_of) for r in saved] == [
        (1, "failed", "restart", None), (2, "succeeded", "done", first)], Path(saved[0].supervisor.log).read_text()
    assert [n.name for n in saved[1].nodes] == ["h01", "h02", "h03"] and marked(saved[1].id) == []


def test_a_node_lost_is_quarantined_and_a_spare_takes_its_place(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts(4))
    inv = inv_of(cluster, tmp_path, connect_timeout=3, connect_retries=0)
    proc = start(inv, tmp_path, "torchrun", SCRIPT, "--no-preflight", "--restarts", "2", "--restart-backoff", "1",
                 "--spares", "h04", "--silence-limit", "10",
                 env={"JOB_SLEEP_ATTEMPT": "600", "JOB_TIMEOUT": "300"})
    h02 = cluster.host("h02")
    try:
        wait_for_lines(proc, r"rank (\d): step 1 done", 6, 120)
        subprocess.run(["ip", "link", "set", "dev", h02.veth, "down"], check=True)
        code, out, err = finish(proc, 240)
    finally:
        subprocess.run(["ip", "link", "set", "dev", h02.veth, "up"], check=True)
    assert code == 0, out[-2000:] + err[-3000:]
    assert "replaced by spare h04" in out and "attempts (2):" in out, out[-3000:]
    first = next(r for r in records().values() if r["attempt"] == 1 and r["decision"] and r["decision"].startswith("replace"))
    saved = attempts_of(first["id"])
    assert [(r["attempt"], r["status"]) for r in saved] == [(1, "failed"), (2, "succeeded")]
    assert [n["name"] for n in saved[0]["nodes"]] == ["h01", "h02", "h03"]
    assert [n["name"] for n in saved[1]["nodes"]] == ["h01", "h03", "h04"]  # the same world size, with the spare
    listed = subprocess.run([*ASCENDCTL, "nodes", "-i", str(inv), "--json"], capture_output=True, text=True, timeout=60)
    states = {n["name"]: n for n in json.loads(listed.stdout)["nodes"]}
    assert states["h02"]["state"] == "quarantined" and first["id"] in states["h02"]["reason"], states["h02"]
    subprocess.run([*ASCENDCTL, "stop", first["id"], "--grace", "1"], capture_output=True, text=True, timeout=60)
    assert job_processes(cluster, SCRIPT) == []


def test_submit_mode_on_real_slurm_excludes_a_quarantined_node_slurm_would_give(tmp_path: Path) -> None:
    """Real Slurm (slurmctld, a slurmd per test host): h02 is quarantined inside an allocation (drained with ascendctl's
    reason), then resumed by hand, as an operator might: sbatch would give it again. Submit mode passes it as
    --exclude: the 2-node job runs on h01 and h03 (first fit would take h01 and h02), and says so once."""
    from tests.cluster.harness import HostSpec, build_cluster
    from tests.cluster.slurm_harness import start_slurm

    cluster = build_cluster([HostSpec(f"h{i:02d}", private_home=False) for i in (1, 2, 3)], workdir=tmp_path / "c",
                            wait_chrony=False)
    try:
        slurm = start_slurm(cluster)
        try:
            env = slurm.env()
            hold = slurm.hold(3)
            held = subprocess.run([*ASCENDCTL, "nodes", "quarantine", "h02", "--reason", "HARDWARE in job j0"],
                                  capture_output=True, text=True, timeout=60, env=slurm.allocation_env(hold))
            assert held.returncode == 0, held.stderr
            slurm.cancel(hold)
            slurm.run(["scontrol", "update", "nodename=h02", "state=resume"])
            slurm.wait_idle()
            bin_dir = tmp_path / "venv" / "bin"  # a stand-in torchrun: the job itself is not what is tested
            bin_dir.mkdir(parents=True)
            (bin_dir / "torchrun").write_text("#!/bin/sh\necho \"torchrun on $(hostname)\"\n")
            (bin_dir / "torchrun").chmod(0o755)
            inv = tmp_path / "inv.yaml"
            inv.write_text(f"backend: slurm\nslurm: {{nodes: 2}}\ndefaults: {{slots: 1, python: {bin_dir}/python}}\n")
            (tmp_path / "train.py").write_text("")
            proc = subprocess.run([*ASCENDCTL, "launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight",
                                   "--log-dir", str(tmp_path / "logs"), "--", str(tmp_path / "train.py")],
                                  capture_output=True, text=True, timeout=120, env=env, cwd=slurm.workdir)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
            [job] = records().values()
            assert [n["name"] for n in job["nodes"]] == ["h01", "h03"] and job["slurm_submitted"] is True
            assert proc.stderr.count("leaving out 1 quarantined node: h02 (sbatch --exclude;") == 1, proc.stderr[-3000:]
            slurm.jobs.append(job["slurm_job"])
        finally:
            slurm.stop()
    finally:
        cluster.teardown()
