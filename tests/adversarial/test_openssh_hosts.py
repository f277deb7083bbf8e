"""`transport: openssh` (the system ssh, multiplexed) against real sshds: preflight, exec, launch and collect on one
3-host cluster, and an unknown host key refused with the file named. Plain `ssh` is the control in each case.

The `ssh` on PATH is a wrapper that logs each call and runs /usr/bin/ssh, so the tests see that the system client did
the work, that each node had one connection for a whole command (sshd's own log), and that every connection was closed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster, HostSpec, build_cluster

ASCENDCTL = [sys.executable, "-m", "ascendctl"]
JOBS = Path(__file__).resolve().parent.parent / "jobs"
WRAPPER = """#!/bin/sh
prev=; host=; kind=run
for a; do
  if [ "$prev" = "--" ] && [ -z "$host" ]; then host=$a; fi
  if [ "$a" = "-O" ]; then kind=control; fi
  prev=$a
done
[ -z "$host" ] || echo "$kind $host" >> "$0.log"  # ascendctl's calls (`-- HOST`); not the test's own controls
exec {ssh} "$@"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """h01..h03 keeping this machine's home (the job's python may live under /root)."""
    built = build_cluster([HostSpec(f"h0{i}", private_home=False) for i in (1, 2, 3)], workdir=tmp_path_factory.mktemp("ossh"))
    try:
        yield built
    finally:
        built.teardown()


@pytest.fixture
def ssh_log(tmp_path: Path, hermetic_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A logging `ssh` first on PATH (for ascendctl's subprocesses); the log it writes."""
    real = shutil.which("ssh")
    assert real, "ssh (openssh-client) is needed"
    wrapper = tmp_path / "bin" / "ssh"
    wrapper.parent.mkdir()
    wrapper.write_text(WRAPPER.format(ssh=real))
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    return wrapper.parent / "ssh.log"


def ascendctl(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run([*ASCENDCTL, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def calls(log: Path) -> list[tuple[str, str]]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [(kind, host) for kind, _, host in (line.partition(" ") for line in lines)]


def logins(cluster: Cluster) -> dict[str, int]:
    """Connections each sshd accepted so far."""
    return {h.name: (h.workdir / "sshd.log").read_text().count("Accepted publickey") for h in cluster.hosts}


def masters_left() -> list[str]:
    """ssh processes still serving one of ascendctl's ControlPaths (a master shows it in its title)."""
    left = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ascendctl-ssh-" in text:
            left.append(text)
    return left


def test_preflight_exec_launch_and_collect_through_the_system_ssh(cluster: Cluster, tmp_path: Path, ssh_log: Path) -> None:
    for host in cluster.hosts:  # the control: plain ssh reaches every host
        assert cluster.ssh(host, "true").returncode == 0
    venv = tmp_path / "venv" / "bin"  # a stand-in torchrun beside the job's python: no torch needed for a tiny job
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    shutil.copy(JOBS / "stand_in_torchrun.sh", venv / "torchrun")
    (venv / "torchrun").chmod(0o755)
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"transport": "openssh", "slots": 1,
                                                                   "python": str(venv / "python")})
    ips = {h.ip for h in cluster.hosts}

    before = logins(cluster)
    code, out, err = ascendctl("preflight", "-i", str(inv), "--json")
    doc = json.loads(out)
    assert code == 0, (err, [(n["name"], [(c["id"], c["status"], c["summary"]) for c in n["checks"]
                                          if c["status"] not in ("pass", "warn", "skip")]) for n in doc["nodes"]])
    assert all(n["reachable"] for n in doc["nodes"])
    made = calls(ssh_log)
    runs = [host for kind, host in made if kind == "run"]
    assert set(runs) == ips and len(runs) > 2 * len(ips)  # the system ssh ran every command, several per node ...
    assert logins(cluster) == {name: count + 1 for name, count in before.items()}  # ... over one connection per node
    assert sorted(host for kind, host in made if kind == "control") == sorted(ips)  # each closed with `ssh -O exit`
    assert masters_left() == []

    code, out, _ = ascendctl("exec", "-i", str(inv), "--json", "--", "hostname; echo oops >&2; exit 3")
    nodes = json.loads(out)["nodes"]
    assert code == 3
    assert [(n["status"], n["exit_code"], n["stdout"], n["stderr"]) for n in nodes] == [
        ("failed", 3, f"{h.name}\n", "oops\n") for h in cluster.hosts]
    code, out, _ = ascendctl("exec", "-i", str(inv), "-w", "h01", "--json", "--command-timeout", "1", "--", "sleep 30")
    assert code == 3 and json.loads(out)["nodes"][0]["status"] == "timeout"

    code, out, err = ascendctl("launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--grace", "3",
                               "--log-dir", str(tmp_path / "logs"), "--", str(JOBS / "hello.py"))
    assert code == 0, out[-2000:] + err[-2000:]
    for rank, host in enumerate(cluster.hosts):
        assert f"hello {rank} []" in (tmp_path / "logs" / host.name / "launcher.log").read_text()

    code, out, err = ascendctl("collect", "-i", str(inv), "--json", "-o", str(tmp_path / "bundle"))
    assert code == 0, err
    assert [n["name"] for n in json.loads(out)["manifest"]["nodes"]] == ["h01", "h02", "h03"]
    assert all((tmp_path / "bundle" / h.name).is_dir() for h in cluster.hosts)
    assert {host for kind, host in calls(ssh_log) if kind == "run"} == ips
    assert masters_left() == []


def test_an_unknown_host_key_is_refused_with_the_file_named_until_accepting_is_asked_for(cluster: Cluster, tmp_path: Path,
                                                                                         ssh_log: Path) -> None:
    h01, h02 = cluster.host("h01"), cluster.host("h02")
    known = tmp_path / "known hosts"  # a space in the path: the value reaches ssh quoted
    known.write_text(next(line for line in cluster.known_hosts_all.read_text().splitlines() if line.startswith(h01.ip + " ")) + "\n")
    inv = cluster.write_inventory(tmp_path / "inv.yaml", hosts=["h01", "h02"],
                                  defaults={"transport": "openssh", "known_hosts": str(known), "connect_retries": 0})
    assert cluster.ssh(h01, "true", known_hosts=f'"{known}"').returncode == 0  # the control: ssh with the same file
    control = cluster.ssh(h02, "true", known_hosts=f'"{known}"')
    assert control.returncode == 255 and "Host key verification failed" in control.stderr

    code, out, _ = ascendctl("exec", "-i", str(inv), "--json", "--", "true")
    nodes: dict[str, Any] = {n["name"]: n for n in json.loads(out)["nodes"]}
    assert code == 4
    assert nodes["h01"]["status"] == "ok"
    assert nodes["h02"]["status"] == "host_key"
    # the key h02 offered, by its fingerprint, to verify before accepting it (ssh named none; asked again with -v)
    fingerprint = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(h02.host_key_pub)], capture_output=True,
                                 text=True, check=True).stdout.split()[1]
    assert nodes["h02"]["error"] == (f"unknown host key for root@{h02.ip} (ssh-ed25519 {fingerprint}) (ssh: Host key "
                                     f"verification failed); searched {known}")
    assert "--accept-new-host-keys" in nodes["h02"]["hint"]
    assert h02.ip not in known.read_text()  # nothing written without the opt-in

    code, out, _ = ascendctl("exec", "-i", str(inv), "--json", "--accept-new-host-keys", "--", "true")
    assert code == 0, out
    found = subprocess.run(["ssh-keygen", "-F", h02.ip, "-f", str(known)], capture_output=True, text=True)
    assert found.returncode == 0  # recorded where ssh records it
    assert cluster.ssh(h02, "true", known_hosts=f'"{known}"').returncode == 0
    assert {host for kind, host in calls(ssh_log) if kind == "run"} == {h01.ip, h02.ip}
