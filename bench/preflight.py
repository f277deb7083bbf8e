"""Preflight benchmark: every check on 16 and 64 real test hosts against `clush -w HOSTS true`.

Hosts carry the simulated npu-smi and hccn_tool, so the NPU checks do real work. Prints
median wall time of `ascendctl preflight`, of clush running `true` on the same hosts in
the same run, their ratio, and ascendctl's CPU per host.

Run as root from the repository root:  .venv/bin/python bench/preflight.py [--runs 5] [--sizes 16,64]
Targets: all checks in at most 1.5x the time of clush running `true` (issue 3), 1.0x (issue 17).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import ASCENDCTL, ssh_tools, timed

from tests.cluster.harness import HostSpec, build_cluster, cleanup_leftovers, require_root_linux
from tests.sim.hccn_tool import hccn_tool_script
from tests.sim.npu_smi import npu_smi_script


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
        samples: dict[str, list[tuple[float, float]]] = {"preflight": [], "clush": []}
        for _ in range(runs):
            samples["preflight"].append(timed(preflight, env))
            samples["clush"].append(timed(tools["clush"], env))
        return {
            "preflight": statistics.median(w for w, _ in samples["preflight"]),
            "clush": statistics.median(w for w, _ in samples["clush"]),
            "cpu_per_host_ms": statistics.median(c for _, c in samples["preflight"]) / n * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="16,64")
    args = parser.parse_args()
    require_root_linux()
    cleanup_leftovers()
    print(f"{'hosts':>5}  {'preflight':>10}  {'clush true':>10}  {'ratio':>6}  {'cpu/host':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench_size(n, args.runs)
        print(f"{n:>5}  {r['preflight']:>9.3f}s  {r['clush']:>9.3f}s  {r['preflight'] / r['clush']:>6.2f}  {r['cpu_per_host_ms']:>7.1f}ms")


if __name__ == "__main__":
    main()
