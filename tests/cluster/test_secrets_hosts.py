"""No secret in any record, bundle, report, argv or output: a real torchrun job on two test hosts with three
planted secrets (HCCL_DB_PASSWD, a token inside an env value, a password in the inventory's `env`).

The job must still receive every value (each rank checks a SHA-256 of it); then `ps` on every node while
the job runs, the job record, the node's job directory, the bundle, and the output of every command are
searched for the secrets, in clear and base64-encoded.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster
from tests.cluster.test_launch_hosts import ASCENDCTL, FAST, JOBS, finish, hosts, last_job, wait_for_lines



def forms(secret: str) -> list[bytes]:
    """The secret as it could leak: in clear, and base64 at each of the three alignments."""
    raw = secret.encode()
    # raw[i:] starting on a 3-byte boundary of the stream encodes to these whole 4-character groups
    encoded = [base64.b64encode(raw[i:])[: len(raw[i:]) // 3 * 4] for i in range(3)]
    return [raw, *encoded]


class Leaks:
    def __init__(self, secrets: dict[str, str]) -> None:
        self.secrets = secrets
        self.found: list[str] = []

    def scan(self, where: str, data: bytes | str) -> None:
        blob = data.encode() if isinstance(data, str) else data
        for name, secret in self.secrets.items():
            if any(form in blob for form in forms(secret)):
                self.found.append(f"{name} in {where}")

    def scan_tree(self, where: str, root: Path, *, allowed: set[Path] = frozenset()) -> int:  # type: ignore[assignment]
        count = 0
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and path not in allowed:
                self.scan(f"{where}: {path.relative_to(root)}", path.read_bytes())
                count += 1
        return count


def run(*args: str, env: dict[str, str], leaks: Leaks, expect: int = 0) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*ASCENDCTL, *args], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == expect, f"{args}: {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    leaks.scan(f"`ascendctl {' '.join(args[:2])}` output", result.stdout + result.stderr)
    return result


def test_no_secret_leaves_the_job(cluster_factory: Any, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:12]
    secrets = {
        "HCCL_DB_PASSWD": f"Hccl-Db-{tag}-pw",
        "token in DATASET_URL": f"ghp{tag}Url",
        "token parameter in DATASET_URL": f"sigparam{tag}",
        "DB_PASSWORD (inventory env)": f"Inventory-{tag}-pw",
    }
    dataset_url = (f"https://reader:{secrets['token in DATASET_URL']}@data.example.invalid/set"
                   f"?part=1&token={secrets['token parameter in DATASET_URL']}")
    leaks = Leaks(secrets)
    cluster: Cluster = cluster_factory(hosts(2))
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={
        "slots": 2, "python": sys.executable, "command_timeout": 60,
        "env": {"DB_PASSWORD": secrets["DB_PASSWORD (inventory env)"], "NCCL_DEBUG": "WARN"},
    })
    # the secrets reach ascendctl through its environment: `--env NAME` takes the value from there, never from argv
    env = {**os.environ, "HCCL_DB_PASSWD": secrets["HCCL_DB_PASSWD"], "DATASET_URL": dataset_url}
    expected = {"HCCL_DB_PASSWD": secrets["HCCL_DB_PASSWD"], "DATASET_URL": dataset_url,
                "DB_PASSWORD": secrets["DB_PASSWORD (inventory env)"]}
    check = ",".join(f"{name}:{hashlib.sha256(value.encode()).hexdigest()}" for name, value in expected.items())
    job_env = ["--env", "HCCL_DB_PASSWD", "--env", "DATASET_URL", f"--env=JOB_CHECK_SHA={check}", "--env=JOB_SLEEP=3",
               *[f"--env={k}={v}" for k, v in FAST.items()], "--env=PYTHONUNBUFFERED=1"]
    launch = ["launch", "-i", str(inv), "--launcher", "torchrun", "--log-dir", str(tmp_path / "logs"), "--grace", "3",
              *job_env, "--", str(JOBS / "allreduce_torch.py")]

    run(*launch[:5], "--dry-run", *launch[5:], env=env, leaks=leaks)
    run("render", "env", "-i", str(inv), "--node", "h02", "--launcher", "torchrun", env=env, leaks=leaks)
    private = tmp_path / "h02.env"
    run("render", "env", "-i", str(inv), "--node", "h02", "-o", str(private), env=env, leaks=leaks)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and secrets["DB_PASSWORD (inventory env)"] in private.read_text()
    run("inventory", "show", "-i", str(inv), env=env, leaks=leaks)
    run("preflight", "-i", str(inv), "--json", "--only", "ssh", env=env, leaks=leaks)

    proc = subprocess.Popen([*ASCENDCTL, *launch], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = wait_for_lines(proc, r"rank (\d)/4 started", 4, 90)
    for host in cluster.hosts:  # the job sleeps 3 s: every process of it is alive now
        ps = cluster.run_on(host, ["ps", "-eww", "-o", "pid,args"], check=True)
        leaks.scan(f"`ps` on {host.name}", ps.stdout)
        cmdlines = cluster.run_on(host, "cat /proc/[0-9]*/cmdline 2>/dev/null", text=False)
        leaks.scan(f"/proc/*/cmdline on {host.name}", cmdlines.stdout)
    code, out, err = finish(proc)
    output = "\n".join(seen) + "\n" + out + err
    assert code == 0, output[-3000:]
    leaks.scan("`ascendctl launch` output", output)
    for rank in range(4):
        for name in expected:
            assert f"rank {rank} env {name} sha256 ok" in output, f"rank {rank} did not get {name}:\n{output[-3000:]}"

    job = last_job()
    state = Path(os.environ["XDG_STATE_HOME"]) / "ascendctl"
    assert leaks.scan_tree("job state", state) >= 1
    for host in cluster.hosts:
        job_dir = tmp_path / "logs" / host.name
        assert not (job_dir / ".job.env").exists(), "the env file outlived the launcher's start"
        assert leaks.scan_tree(f"{host.name}'s job directory", job_dir) >= 2

    run("jobs", env=env, leaks=leaks)
    run("status", job["id"], "-i", str(inv), env=env, leaks=leaks)
    run("logs", job["id"], "-i", str(inv), env=env, leaks=leaks)
    bundle = tmp_path / "bundle"
    run("collect", job["id"], "-i", str(inv), "-o", str(bundle), "--json", env=env, leaks=leaks)
    assert leaks.scan_tree("bundle", bundle) >= 5
    run("triage", str(bundle), env=env, leaks=leaks)
    run("triage", "--json", str(bundle), env=env, leaks=leaks)
    packed = tmp_path / "bundle2.tar.gz"
    run("collect", job["id"], "-i", str(inv), "-o", str(packed), env=env, leaks=leaks)
    leaks.scan("packed bundle (uncompressed)", subprocess.run(["tar", "-xzOf", str(packed)], capture_output=True, check=True).stdout)

    assert leaks.found == [], "\n".join(leaks.found)


def test_the_leak_scanner_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The search above must be able to fail: a planted leak in clear and in base64 is found."""
    leaks = Leaks({"s": "Hccl-Db-0123456789ab-pw"})
    leaks.scan("clear", "x HCCL_DB_PASSWD=Hccl-Db-0123456789ab-pw y")
    leaks.scan("base64", base64.b64encode(b"HCCL_DB_PASSWD=Hccl-Db-0123456789ab-pw\n"))
    leaks.scan("redacted", "HCCL_DB_PASSWD=<redacted>")
    assert leaks.found == ["s in clear", "s in base64"]
