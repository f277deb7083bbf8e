"""Scale benchmark: `ascendctl exec -- true` on 250, 500 and 1,000 SSH endpoints against clush and pdsh.

Builds 20 real test hosts (network namespaces, one sshd each) holding 50 addresses each, so 1,000
distinct SSH endpoints (tests/cluster/harness.py, `extra_addresses`), and runs every tool under
`ulimit -n 1024` (`prlimit --nofile=1024:1024`) on the first N endpoints. For each tool and size it
prints the median wall time and client CPU per endpoint (the tool's process and its children:
clush and pdsh spend theirs in ssh processes); for ascendctl also the peak RSS and the most file
descriptors it held at once (sampled from /proc every 10 ms). The load average goes with the figures:
on a shared machine they are only comparable within one run.

Run as root from the repository root:  .venv/bin/python bench/scale.py [--runs 3] [--sizes 250,500,1000]
Targets (issue 17): wall <= 0.8x clush, CPU <= 10 ms per endpoint, RSS < 300 MB at 1,000.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from common import ASCENDCTL

from tests.cluster.harness import HostSpec, build_cluster, cleanup_leftovers, require_root_linux

HOSTS = 20
NOFILE = 1024


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float  # seconds, the process and its children
    rss_mb: float
    fds: int  # high-water mark of open file descriptors (the process itself)


def measure(argv: list[str], env: dict[str, str]) -> Sample:
    """Run argv under the fd limit; wall, CPU and peak RSS from wait4, the fd high-water mark from /proc."""
    start = time.perf_counter()
    proc = subprocess.Popen(["prlimit", f"--nofile={NOFILE}:{NOFILE}", "--", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    fds = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        try:  # prlimit execs the tool: the pid is the tool's
            fds = max(fds, len(os.listdir(f"/proc/{proc.pid}/fd")))
        except OSError:
            pass
        time.sleep(0.01)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {stderr[-2000:]}")
    # ru_maxrss of wait4's rusage covers the process and its waited-for descendants: for clush/pdsh, the largest ssh
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, fds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="250,500,1000")
    parser.add_argument("--tools", default="ascendctl,clush,pdsh")
    args = parser.parse_args()
    require_root_linux()
    cleanup_leftovers()
    sizes = [int(s) for s in args.sizes.split(",")]
    per_host = -(-max(sizes) // HOSTS) - 1
    # MaxStartups as on a node that serves one client: 64 handshakes at once on one of these sshds are 64 nodes' worth
    specs = [HostSpec(f"h{i:02d}", extra_addresses=per_host, chrony="none", sshd_config_extra=["MaxStartups 200:30:400"])
             for i in range(1, HOSTS + 1)]
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp, build_cluster(specs, workdir=Path(tmp), wait_chrony=False) as cluster:
        endpoints = cluster.endpoints()
        ssh_opts = (f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={cluster.known_hosts} "
                    f"-i {cluster.client_key}")
        env = {**os.environ, "PDSH_SSH_ARGS": f"{ssh_opts} -l%u %h", "PDSH_RCMD_TYPE": "ssh"}
        print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f} nofile={NOFILE} runs={args.runs}")
        print(f"{'endpoints':>9}  {'tool':<9}  {'wall':>8}  {'vs clush':>8}  {'cpu/endpt':>9}  {'peak RSS':>9}  {'fds max':>7}  {'load':>5}")
        for n in sizes:
            inventory = cluster.write_inventory(Path(tmp) / f"inv{n}.yaml", every_address=True, defaults={"fanout": 64})
            document = yaml.safe_load(inventory.read_text())
            inventory.write_text(yaml.safe_dump({**document, "nodes": document["nodes"][:n]}, sort_keys=False))
            ips = ",".join(ip for _, ip in endpoints[:n])
            commands = {
                "ascendctl": [*ASCENDCTL, "exec", "-i", str(inventory), "--", "true"],
                "clush": ["clush", "-f", "64", "-l", "root", "-o", ssh_opts, "-w", ips, "true"],
                "pdsh": ["pdsh", "-f", "64", "-l", "root", "-w", ips, "true"],
            }
            commands = {k: v for k, v in commands.items() if k in args.tools.split(",")}
            samples: dict[str, list[Sample]] = {name: [] for name in commands}
            loads = []
            for _ in range(args.runs):
                for name, argv in commands.items():  # interleaved so drift hits all tools alike
                    samples[name].append(measure(argv, env))
                loads.append(os.getloadavg()[0])
            clush = statistics.median(s.wall for s in samples["clush"]) if "clush" in samples else float("nan")
            for name, got in samples.items():
                wall = statistics.median(s.wall for s in got)
                cpu = statistics.median(s.cpu for s in got) / n * 1000
                rss = max(s.rss_mb for s in got)
                fds = max(s.fds for s in got)
                print(f"{n:>9}  {name:<9}  {wall:>7.2f}s  {wall / clush:>8.2f}  {cpu:>7.1f}ms  {rss:>6.0f} MB  {fds:>7}  "
                      f"{statistics.median(loads):>5.2f}", flush=True)


if __name__ == "__main__":
    main()
