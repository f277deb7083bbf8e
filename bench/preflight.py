"""Preflight benchmark: every check on 16 and 64 real test hosts against `clush -w HOSTS true`.

Hosts carry the simulated npu-smi and hccn_tool, so the NPU checks do real work. Prints
median wall time of `ascendctl preflight`, of clush running `true` on the same hosts in
the same run, their ratio, ascendctl's CPU per host, and the whole machine's CPU per host
during each command (from /proc/stat: the client plus everything the test hosts ran for it,
sshd and the probes included; the test hosts share this machine's cores with the client).

Run as root from the repository root:  .venv/bin/python bench/preflight.py [--runs 5] [--sizes 16,64]
Targets: all checks in at most 1.5x the time of clush running `true` (issue 3), 1.0x (issue 17).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from common import ASCENDCTL, ssh_tools, timed

from tests.cluster.harness import HostSpec, build_cluster, cleanup_leftovers, require_root_linux
from tests.sim.hccn_tool import hccn_tool_script
from tests.sim.npu_smi import npu_smi_script


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from /proc/stat."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in stat.readline().split()[1:8])
    # not steal (the hypervisor's) nor guest (already inside user)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed_machine(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall, client CPU, whole-machine CPU) of one run."""
    before = machine_busy()
    wall, cpu = timed(argv, env)
    return wall, cpu, machine_busy() - before


def bench_size(n: int, runs: int) -> dict[str, float]:
    specs = [
        HostSpec(f"h{i:02d}", tools={"npu-smi": npu_smi_script("910B4", clear_processes=True),
                                     "hccn_tool": hccn_tool_script({d: f"198.51.{100 + i // 32}.{(i % 32) * 8 + d}" for d in range(8)})})
        for i in range(1, n + 1)
    ]
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp, build_cluster(specs, workdir=Path(tmp)) as cluster:
        inventory = cluster.write_inventory(Path(tmp) / "inv.yaml", defaults={"fanout": 64, "accelerator": "ascend"})
        tools, env = ssh_tools(cluster)
        preflight = [*ASCENDCTL, "preflight", "-i", str(inventory)]
        timed(preflight, env, ok_codes=(0,))  # warm up; a failing check would make the figures meaningless
        samples: dict[str, list[tuple[float, float, float]]] = {"preflight": [], "clush": []}
        for _ in range(runs):
            samples["preflight"].append(timed_machine(preflight, env))
            samples["clush"].append(timed_machine(tools["clush"], env))
        return {
            "preflight": statistics.median(w for w, _, _ in samples["preflight"]),
            "clush": statistics.median(w for w, _, _ in samples["clush"]),
            "cpu_per_host_ms": statistics.median(c for _, c, _ in samples["preflight"]) / n * 1000,
            "machine_per_host_ms": statistics.median(m for _, _, m in samples["preflight"]) / n * 1000,
            "clush_machine_per_host_ms": statistics.median(m for _, _, m in samples["clush"]) / n * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="16,64")
    args = parser.parse_args()
    require_root_linux()
    cleanup_leftovers()
    print(f"{'hosts':>5}  {'preflight':>10}  {'clush true':>10}  {'ratio':>6}  {'cpu/host':>9}  {'machine/host':>12}  {'clush machine/host':>18}")
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench_size(n, args.runs)
        print(f"{n:>5}  {r['preflight']:>9.3f}s  {r['clush']:>9.3f}s  {r['preflight'] / r['clush']:>6.2f}  {r['cpu_per_host_ms']:>7.1f}ms"
              f"  {r['machine_per_host_ms']:>10.1f}ms  {r['clush_machine_per_host_ms']:>16.1f}ms")


if __name__ == "__main__":
    main()
