"""A user other than root on the nodes (issue #29): preflight, exec and collect work as that user, and what needs root
is skipped or left out saying so, not reported as a fault. Plain `ssh` as the same user is the control.

The hosts' npu-smi and hccn_tool replay the real captured outputs for root and refuse anyone else, as the driver's
device files (root and HwHiAiUser only) make the real tools do; the refusal's wording is ours (no capture of a real
one was found), so the rule that reads it matches the system's own words ("Permission denied"), not a vendor text.
The kernel log is really refused: this machine's kernel.dmesg_restrict decides, as on the nodes of a real cluster.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec
from tests.cluster.test_launch_hosts import job_processes, last_job
from tests.sim.hccn_tool import hccn_tool_script
from tests.sim.npu_smi import npu_smi_script

JOBS = Path(__file__).resolve().parent.parent / "jobs"

runner = CliRunner()
USER = "train"
REFUSE = ('if [ "$(id -u)" != 0 ]; then echo "$(basename "$0"): open /dev/davinci_manager failed: Permission denied" >&2; '
          "exit 1; fi\n")


def root_only(script: str) -> str:
    """A simulator that refuses every user but root, before replaying anything."""
    shebang, _, rest = script.partition("\n")
    return f"{shebang}\n{REFUSE}{rest}"


def tools() -> dict[str, str]:
    return {"npu-smi": root_only(npu_smi_script("910B4", clear_processes=True)),
            "hccn_tool": root_only(hccn_tool_script({d: f"198.51.100.{8 + d}" for d in range(8)}))}


def checks(doc: dict[str, Any], node: str) -> dict[str, tuple[str, str]]:
    entry = next(n for n in doc["nodes"] if n["name"] == node)
    return {c["id"]: (c["status"], c["summary"]) for c in entry["checks"]}


def test_a_non_root_user_runs_preflight_exec_and_collect_and_is_told_what_needs_root(cluster_factory: Any,
                                                                                    tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([HostSpec(f"h0{i}", users=(USER,), tools=tools()) for i in (1, 2)])
    common = {"accelerator": "ascend", "slots": 8}
    as_user = cluster.write_inventory(tmp_path / "user.yaml", defaults={"user": USER, **common})
    as_root = cluster.write_inventory(tmp_path / "root.yaml", defaults=common)

    # the control: plain ssh logs in as that user, who is not root there
    control = subprocess.run(cluster.ssh_argv(cluster.hosts[0], "id -un; id -u", user=USER), capture_output=True,
                             text=True, timeout=30)
    assert control.returncode == 0 and control.stdout.split() == [USER, "4200"], control.stdout + control.stderr

    result = runner.invoke(app, ["exec", "-i", str(as_user), "--json", "--", "id -un"], catch_exceptions=False)
    assert result.exit_code == 0
    assert {n["name"]: n["stdout"] for n in json.loads(result.stdout)["nodes"]} == {"h01": f"{USER}\n", "h02": f"{USER}\n"}

    user = json.loads(runner.invoke(app, ["preflight", "-i", str(as_user), "--json"], catch_exceptions=False).stdout)
    root = json.loads(runner.invoke(app, ["preflight", "-i", str(as_root), "--json"], catch_exceptions=False).stdout)
    for node in ("h01", "h02"):
        mine, roots = checks(user, node), checks(root, node)
        assert mine["ssh"][0] == "pass" and f"as {USER}@" in mine["ssh"][1]
        for check in ("npu_count", "npu_health", "npu_stale_procs", "hccn_link"):
            # root reads the devices; the user is told the check needs root, never that the driver is down
            assert roots[check][0] == "pass", (check, roots[check])
            assert mine[check][0] == "skip" and mine[check][1].startswith(f"needs root: ") and USER in mine[check][1], \
                (check, mine[check])
        # what needs no root is the same for both
        for check in ("ntp", "mtu", "name_resolution", "disk"):
            assert mine[check][0] == roots[check][0], (check, mine[check], roots[check])

    bundle = tmp_path / "b.tar.gz"
    result = runner.invoke(app, ["collect", "-i", str(as_user), "--output", str(bundle), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout
    doc = json.loads(result.stdout)
    restricted = Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() == "1"
    with tarfile.open(bundle) as tar:
        kernel = {m.name.split("/")[1]: tar.extractfile(m).read().decode() for m in tar.getmembers()  # type: ignore[union-attr]
                  if m.name.endswith("commands/kernel.txt")}
    for node in doc["manifest"]["nodes"]:
        said = " ".join(node["warnings"])
        if restricted:  # the kernel refuses the user: said, not an empty log passed off as a quiet kernel
            assert "kernel log not collected: not readable as user train" in said, node["warnings"]
            assert "not readable as user train" in kernel[node["name"]], kernel
        else:
            assert "kernel log" not in said, node["warnings"]


def user_python(base: Path) -> Path:
    """An interpreter the user can run: the system's python3 with the test venv's packages (this machine's venv points
    at a Python under /root, which only root may enter), and torchrun beside it, as `launch` looks for it."""
    site = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
    bin_dir = base / "bin"
    bin_dir.mkdir(parents=True)
    for name, run in (("python", ""), ("torchrun", "-m torch.distributed.run ")):
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec /usr/bin/python3 {run}"$@"\n')
        path.chmod(0o755)
    return bin_dir / "python"


def test_a_non_root_user_launches_a_job_and_its_failure_is_judged(cluster_factory: Any, tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="asct-nonroot-"))  # outside the test's private directory: the user must reach it
    try:
        base.chmod(0o755)
        python = user_python(base)
        logs = base / "logs"
        logs.mkdir()
        logs.chmod(0o1777)
        cluster: Cluster = cluster_factory([HostSpec(f"h0{i}", users=(USER,)) for i in (1, 2)])
        inv = cluster.write_inventory(tmp_path / "user.yaml", defaults={"user": USER, "slots": 2, "python": str(python),
                                                                       "command_timeout": 60})
        argv = [sys.executable, "-m", "ascendctl", "launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir",
                str(logs / "job"), "--grace", "3", "--cluster-timeout", "30", "--no-preflight", "--env=JOB_FAULT=raise",
                "--env=JOB_FAULT_RANK=3", "--env=JOB_TIMEOUT=8", "--env=PYTHONUNBUFFERED=1", "--",
                str(JOBS / "faults_torch.py")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        assert done.returncode == 5, done.stdout[-2000:] + done.stderr[-2000:]  # the job ran and failed
        assert "h02 (rank 3): failed first: EXCEPTION" in done.stderr, done.stderr[-2000:]
        owners = subprocess.run(cluster.ssh_argv(cluster.hosts[1], f"stat -c %U {logs}/job/h02/launcher.log"),
                                capture_output=True, text=True, timeout=30)
        assert owners.stdout.strip() == USER, owners.stdout + owners.stderr  # the job ran as the user, not as root
        # a job left running (detached), then stopped by `stop`: every process of it ends, as the user's processes do
        detached = subprocess.run([*argv[:argv.index("--log-dir") + 1], str(logs / "job2"), "--grace", "3", "--no-preflight",
                                   "--detach", "--no-stacks", "--env=JOB_FAULT=hang", "--env=JOB_FAULT_RANK=0",
                                   "--env=JOB_TIMEOUT=120", "--", str(JOBS / "faults_torch.py")],
                                  capture_output=True, text=True, timeout=120, start_new_session=True)
        assert detached.returncode == 0, detached.stderr[-2000:]
        job = last_job()
        deadline = time.monotonic() + 60
        while not all(f"rank {r}/4 started" in subprocess.run(
                cluster.ssh_argv(cluster.hosts[r // 2], f"cat {logs}/job2/h0{r // 2 + 1}/launcher.log"),
                capture_output=True, text=True, timeout=30).stdout for r in range(4)):
            assert time.monotonic() < deadline, "the job did not start on every node"
            time.sleep(0.5)
        stop = subprocess.run([sys.executable, "-m", "ascendctl", "stop", job["id"]], capture_output=True, text=True,
                              timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert last_job()["status"] == "stopped"
        assert job_processes(cluster, "faults_torch.py") == []
    finally:
        shutil.rmtree(base, ignore_errors=True)
