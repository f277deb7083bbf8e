"""Shared helpers for the benchmarks: the CLI to time, timing with child CPU, clush/pdsh command lines."""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PYTHON = sys.executable
_CLI = Path(PYTHON).with_name("ascendctl")
ASCENDCTL = [str(_CLI)] if _CLI.exists() else [PYTHON, "-m", "ascendctl"]

# ascendctl as `pip install .` leaves it: byte-compiled. The repository's editable install under
# PYTHONDONTWRITEBYTECODE=1 (set on some CI machines) would compile every module on every run we time.
compileall.compile_dir(str(REPO / "ascendctl"), quiet=1)


def timed(argv: list[str], env: dict[str, str] | None = None, ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Run argv; return (wall seconds, CPU seconds of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok_codes:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ssh_tools(cluster: Any) -> tuple[dict[str, list[str]], dict[str, str]]:
    """clush and pdsh command lines for `true` on every host of a test cluster, and their environment."""
    for tool in ("clush", "pdsh"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt-get install clustershell pdsh")
    ips = ",".join(h.ip for h in cluster.hosts)
    ssh_opts = f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={cluster.known_hosts} -i {cluster.client_key}"
    env = {**os.environ, "PDSH_SSH_ARGS": f"{ssh_opts} -l%u %h", "PDSH_RCMD_TYPE": "ssh"}
    commands = {
        "clush": ["clush", "-f", "64", "-l", "root", "-o", ssh_opts, "-w", ips, "true"],
        "pdsh": ["pdsh", "-f", "64", "-l", "root", "-w", ips, "true"],
    }
    return commands, env


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in stat.readline().split()[1:8])
    # not steal (the hypervisor's) nor guest (already inside user)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed_machine(argv: list[str], env: dict[str, str], ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    """(wall, client CPU, whole-machine CPU) of one run. Whole-machine CPU also counts what the client's detached
    children do (an ssh ControlPersist master is never waited for, so the client's own CPU misses it) and the test
    hosts' sshd and commands, which share this machine's cores."""
    before = machine_busy()
    wall, cpu = timed(argv, env, ok_codes)
    return wall, cpu, machine_busy() - before

