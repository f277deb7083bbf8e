"""netcheck: rounds and wall time to isolate one slow node.

1. Schedule only (simulated): 16 and 64 nodes, one of them slow (10% bandwidth), every pair's bandwidth
   simulated; a round costs the time its slowest pair needs to move --size at its bandwidth (healthy 100 Gbit/s).
   For --pairs (default), --all-pairs and --quick: rounds, simulated wall time, and whether exactly the slow node
   was named (the same verdict code as the command). --quick twice: `quick` with a pairwise backend (tcp/torch:
   every ring link has its own rate) and `quick-mpi` with an aggregate one (hccl_test/nccl-tests: one figure per
   group, its all-reduce's bus bandwidth), both through schedule.QuickSearch as the command runs it.
2. Real: 8 test hosts (tests/cluster/harness.py, root needed), eth1 shaped to 400 Mbit, one to 40 Mbit;
   `ascendctl netcheck --backend tcp --size 6M` in each mode: rounds, wall time, verdict.

    python bench/netcheck.py [--real]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascendctl.netcheck.schedule import GroupResult, QuickSearch, pair_rounds, ring_links  # noqa: E402
from ascendctl.netcheck.verdict import Measurement, judge  # noqa: E402

HEALTHY_GBPS, SIZE_BYTES = 100.0, 64 * 2**20


def simulate(n: int, slow: int, mode: str) -> tuple[int, float, list[str], float]:
    names = [f"n{i:03d}" for i in range(n)]

    def bw(a: int, b: int) -> float:
        return HEALTHY_GBPS * (0.1 if slow in (a, b) else 1.0)

    measured: list[Measurement] = []
    wall = 0.0
    rounds: list[list[tuple[int, int]]] = []

    def run(pairs: list[tuple[int, int]]) -> None:
        nonlocal wall
        rounds.append(pairs)
        wall += max(SIZE_BYTES * 8 / (bw(a, b) * 1e9) for a, b in pairs)
        measured.extend(Measurement(names[a], names[b], bw(a, b), bw(a, b), len(rounds)) for a, b in pairs)

    started = time.perf_counter()
    reference, vouched = None, []
    if mode.startswith("quick"):
        per_link = mode == "quick"
        search = QuickSearch(n, per_link=per_link)
        while (groups := search.next_round()) is not None:
            results = []
            for g in groups:
                links = [(link, bw(*link)) for link in ring_links(g)]
                if per_link or len(g) == 2:
                    measured.extend(Measurement(names[a], names[b], v, v, len(rounds)) for (a, b), v in links)
                results.append(GroupResult(g, min(v for _, v in links), tuple(links) if per_link else ()))
            # a round lasts as long as its slowest group's ring: SIZE over its slowest link
            wall += max(SIZE_BYTES * 8 / (r.gbps * 1e9) for r in results if r.gbps)
            rounds.append([link for g in groups for link in ring_links(g)])
            search.record(results)
        reference, vouched = search.reference, [names[i] for i in search.cleared]
    else:
        for pairs in pair_rounds(n, all_pairs=mode == "all-pairs"):
            run(pairs)
    verdict = judge(names, measured, reference=reference, vouched=vouched)
    return len(rounds), wall, list(verdict.slow_nodes) + [f"{a}-{b}" for a, b in verdict.slow_links], time.perf_counter() - started


def real() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from cluster.harness import HostSpec, build_cluster, cleanup_leftovers

    cleanup_leftovers()
    with tempfile.TemporaryDirectory() as tmp, build_cluster(
            [HostSpec(f"h{i:02d}", cluster_nic=True, private_home=False, chrony="none") for i in range(1, 9)],
            workdir=Path(tmp) / "c", wait_chrony=False) as cluster:
        for host in cluster.hosts:
            rate = "40mbit" if host.name == "h05" else "400mbit"
            tbf = f"tbf rate {rate} burst 64kb latency 400ms"
            cluster.run_on(host, f"tc qdisc replace dev eth1 root {tbf}", check=True)
            subprocess.run(["tc", "qdisc", "replace", "dev", f"asct{cluster.index}w{host.index}", "root", *tbf.split()], check=True)
        inv = cluster.write_inventory(Path(tmp) / "inv.yaml", defaults={"interface": "eth1", "python": sys.executable,
                                                                         "command_timeout": 120})
        for mode in ("--pairs", "--all-pairs", "--quick"):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "ascendctl", "netcheck", "-i", str(inv), "--backend", "tcp",
                                   "--size", "6M", "--json", mode], capture_output=True, text=True)
            wall = time.perf_counter() - start
            doc = json.loads(proc.stdout)
            v = doc["verdict"]
            print(f"real 8 hosts {mode:12s} exit {proc.returncode} rounds {len(doc['rounds']):2d} wall {wall:6.1f}s "
                  f"slow nodes {v['slow_nodes']} slow links {v['slow_links']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real", action="store_true", help="also run on 8 real test hosts (root)")
    args = parser.parse_args()
    for n in (16, 64):
        for mode in ("pairs", "all-pairs", "quick", "quick-mpi"):
            rounds, wall, named, cpu = simulate(n, slow=n // 3, mode=mode)
            print(f"simulated {n:3d} nodes {mode:10s} rounds {rounds:3d}  simulated wall {wall:6.2f}s "
                  f"(64 MiB, 100 Gbit/s, slow node 10 Gbit/s)  named {named}  schedule+verdict {cpu * 1000:.1f} ms")
        rounds, wall, named, cpu = simulate(n, slow=-1, mode="quick-mpi")
        print(f"simulated {n:3d} nodes {'healthy':10s} quick-mpi rounds {rounds:3d}  simulated wall {wall:6.2f}s  named {named}")
    if args.real:
        real()


if __name__ == "__main__":
    main()
