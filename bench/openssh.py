"""The openssh transport against the Paramiko transport and `clush -w HOSTS true`, on the same real test hosts.

Builds 16 real test hosts (network namespaces with sshd; tests/cluster/harness.py) and times, interleaved run by run,
`ascendctl exec -- true` with `transport: ssh` (Paramiko), with `transport: openssh` (the system ssh, multiplexed),
the same with an ssh config choosing `KexAlgorithms curve25519-sha256` (Paramiko's key exchange; OpenSSH 9 defaults
to sntrup761x25519, which costs the client several times the CPU), and clush running `true` (one ssh per host). Prints the median wall time, the ratio to clush, ascendctl's own CPU per
host (the process and the children it waited for: an openssh ControlPersist master is detached and never waited
for, so its share shows only in the next column) and the whole machine's CPU per host (/proc/stat: client, ssh
masters, and the hosts' sshd, which share this machine's cores).

Run as root from the repository root:  .venv/bin/python bench/openssh.py [--runs 7] [--sizes 16]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import ASCENDCTL, ssh_tools, timed, timed_machine

from tests.cluster.harness import build_cluster, cleanup_leftovers, require_root_linux


def bench_size(n: int, runs: int) -> dict[str, tuple[float, float, float]]:
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp, build_cluster(n, workdir=Path(tmp), wait_chrony=False) as cluster:
        tools, env = ssh_tools(cluster)
        commands = {"clush true": tools["clush"]}
        # OpenSSH 9's default key exchange (sntrup761x25519, post-quantum) costs the client far more CPU per connection
        # than curve25519, which Paramiko uses: the last row shows the openssh transport with the site choosing that
        curve = Path(tmp) / "ssh_config_curve25519"
        curve.write_text("Host *\n  KexAlgorithms curve25519-sha256\n")
        for name, defaults in (("ssh", {"transport": "ssh"}), ("openssh", {"transport": "openssh"}),
                               ("openssh, curve", {"transport": "openssh", "ssh_config": str(curve)})):
            inventory = cluster.write_inventory(Path(tmp) / f"{len(commands)}.yaml", defaults={"fanout": 64, **defaults})
            commands[f"exec ({name})"] = [*ASCENDCTL, "exec", "-i", str(inventory), "--", "true"]
        for argv in commands.values():
            timed(argv, env)  # warm caches once; a failure ends the benchmark
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():  # interleaved so drift hits every tool alike
                samples[name].append(timed_machine(argv, env))
        return {name: tuple(statistics.median(s[i] for s in runs_of) for i in range(3))  # type: ignore[misc]
                for name, runs_of in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sizes", default="16")
    args = parser.parse_args()
    require_root_linux()
    cleanup_leftovers()
    print(f"{'hosts':>5}  {'command':<24} {'wall':>8}  {'vs clush':>8}  {'own cpu/host':>12}  {'machine cpu/host':>16}")
    for n in (int(s) for s in args.sizes.split(",")):
        result = bench_size(n, args.runs)
        clush = result["clush true"][0]
        for name, (wall, cpu, machine) in result.items():
            print(f"{n:>5}  {name:<24} {wall:>7.3f}s  {wall / clush:>7.2f}x  {cpu / n * 1000:>10.1f}ms  {machine / n * 1000:>14.1f}ms")


if __name__ == "__main__":
    main()
