"""netcheck: rounds and wall time to isolate one slow node, and how often the verdict is wrong.

1. Schedule only (simulated): 16 and 64 nodes, one of them slow (10% bandwidth), every pair's bandwidth
   simulated; a round costs the time its slowest pair needs to move --size at its bandwidth (healthy 100 Gbit/s).
   For --pairs (default), --all-pairs and --quick: rounds, simulated wall time, and whether exactly the slow node
   was named (the same verdict code as the command, second looks included). --quick twice: `quick` with a pairwise
   backend (tcp/torch: every ring link has its own rate) and `quick-mpi` with an aggregate one (hccl_test/nccl-tests:
   one figure per group, its all-reduce's bus bandwidth), both through schedule.QuickSearch as the command runs it.
2. Noise (simulated, `--runs N`): 8 nodes whose every measurement (each pair, each look) is off by a factor
   exp(N(0, `--noise`)) (lognormal: about +-`--noise`), healthy and with one node or one link at 10%; false positives
   (anything named that is not the fault) and misses (the fault not named) over N runs, through the command's verdict
   and second-look schedule.
3. Real (`--real`, root): 8 test hosts (tests/cluster/harness.py), `ascendctl netcheck --backend tcp --json` run
   `--runs` times per setup: `healthy` (no rate limit anywhere: the issue #32 setup), `node` (every eth1 at 200 Mbit,
   h05 at 20 Mbit both ways, tc tbf), `link` (every eth1 at 200 Mbit, h01 -> h08 at 20 Mbit: a pair of the first
   round); per setup the false positives, the misses, the inconclusive runs, the exit codes and the wall time.
   `--code DIR` runs the ascendctl found in DIR (e.g. an unpacked `git archive` of an older commit) on the same hosts.

    python bench/netcheck.py [--runs 300 --noise 0.2]
    python bench/netcheck.py --real --runs 10 [--setups healthy,node,link] [--mode pairs] [--size 8M] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEALTHY_GBPS, SIZE_BYTES = 100.0, 64 * 2**20


def simulate(n: int, mode: str, bw: Callable[[int, int], float]) -> tuple[int, float, list[str], str, float]:
    """Rounds, simulated wall time, what was named, the verdict's outcome, and the CPU time of schedule + verdict."""
    from ascendctl.netcheck.schedule import GroupResult, QuickSearch, pair_rounds, ring_links, with_second_looks
    from ascendctl.netcheck.verdict import Measurement, judge

    names = [f"n{i:03d}" for i in range(n)]
    measured: list[Measurement] = []
    wall = 0.0
    rounds = 0

    def run(pairs: list[tuple[int, int]]) -> None:
        nonlocal wall, rounds
        rounds += 1
        values = {(a, b): bw(a, b) for a, b in pairs}
        wall += max(SIZE_BYTES * 8 / (v * 1e9) for v in values.values())
        measured.extend(Measurement(names[a], names[b], v, v, rounds) for (a, b), v in values.items())

    started = time.perf_counter()
    spread, vouched = None, []
    if mode.startswith("quick"):
        per_link = mode == "quick"
        search = QuickSearch(n, per_link=per_link)
        while (groups := search.next_round()) is not None:
            results = []
            for g in groups:
                links = [(link, bw(*link)) for link in ring_links(g)]
                if per_link or len(g) == 2:
                    measured.extend(Measurement(names[a], names[b], v, v, rounds) for (a, b), v in links)
                results.append(GroupResult(g, min(v for _, v in links), tuple(links) if per_link else ()))
            # a round lasts as long as its slowest group's ring: SIZE over its slowest link
            wall += max(SIZE_BYTES * 8 / (r.gbps * 1e9) for r in results if r.gbps)
            rounds += 1
            search.record(results)
        spread, vouched = search.spread, [names[i] for i in search.cleared]
    else:
        for pairs in pair_rounds(n, all_pairs=mode == "all-pairs"):
            run(pairs)
    index = {name: i for i, name in enumerate(names)}

    def again(pairs: list[tuple[str, str]], r: int) -> list[Measurement]:
        nonlocal wall
        values = {(a, b): bw(index[a], index[b]) for a, b in pairs}
        wall += max(SIZE_BYTES * 8 / (v * 1e9) for v in values.values())
        return [Measurement(a, b, v, v, r) for (a, b), v in values.items()]

    verdict, second = with_second_looks(measured, lambda ms: judge(names, ms, spread=spread, vouched=vouched), again,
                                        first_round=rounds)
    rounds += len(second)
    named = list(verdict.slow_nodes) + [f"{a}-{b}" for a, b in verdict.slow_links]
    return rounds, wall, named, verdict.outcome, time.perf_counter() - started


def schedule_figures() -> None:
    for n in (16, 64):
        slow = n // 3

        def bw(a: int, b: int) -> float:
            return HEALTHY_GBPS * (0.1 if slow in (a, b) else 1.0)

        for mode in ("pairs", "all-pairs", "quick", "quick-mpi"):
            rounds, wall, named, _, cpu = simulate(n, mode, bw)
            print(f"simulated {n:3d} nodes {mode:10s} rounds {rounds:3d}  simulated wall {wall:6.2f}s "
                  f"(64 MiB, 100 Gbit/s, slow node 10 Gbit/s)  named {named}  schedule+verdict {cpu * 1000:.1f} ms")
        rounds, wall, named, _, _ = simulate(n, "quick-mpi", lambda a, b: HEALTHY_GBPS)
        print(f"simulated {n:3d} nodes {'healthy':10s} quick-mpi rounds {rounds:3d}  simulated wall {wall:6.2f}s  named {named}")


def noise_figures(runs: int, noise: float, seed: int) -> None:
    """False positives and misses of the verdict (second looks included) over `runs` noisy simulated runs of 8 nodes."""
    rng = random.Random(seed)
    n = 8
    faults: dict[str, tuple[set[int], set[frozenset[int]], list[str]]] = {
        "healthy": (set(), set(), []), "node": ({4}, set(), ["n004"]), "link": (set(), {frozenset((0, 7))}, ["n000-n007"])}
    for mode in ("pairs", "all-pairs", "quick", "quick-mpi"):
        for setup, (nodes, links, expected) in faults.items():
            false_positive = missed = inconclusive = 0
            for _ in range(runs):
                def bw(a: int, b: int) -> float:
                    slow = a in nodes or b in nodes or frozenset((a, b)) in links
                    return HEALTHY_GBPS * (0.1 if slow else 1.0) * math.exp(rng.gauss(0, noise))

                _, _, named, outcome, _ = simulate(n, mode, bw)
                false_positive += bool(set(named) - set(expected))
                missed += bool(set(expected) - set(named))
                inconclusive += outcome == "inconclusive"
            print(f"simulated noise {noise:.0%} 8 nodes {mode:9s} {setup:8s} runs {runs}: false positives {false_positive}, "
                  f"misses {missed}, inconclusive {inconclusive}")


SETUPS = {"healthy": ([], []), "node": (["h05"], []), "link": ([], [("h01", "h08")])}


def real(runs: int, setups: list[str], mode: str, size: str, code: Path) -> None:
    """`ascendctl netcheck` `runs` times per setup on 8 real test hosts; false positives, misses, inconclusive, wall time."""
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from cluster.harness import HostSpec, build_cluster, cleanup_leftovers
    from tests.cluster.test_netcheck_hosts import HEALTHY, SLOW, shape_host, shape_link, unshape_host

    cleanup_leftovers()
    env = {**os.environ, "PYTHONPATH": str(code)}
    with tempfile.TemporaryDirectory() as tmp, build_cluster(
            [HostSpec(f"h{i:02d}", cluster_nic=True, private_home=False, chrony="none") for i in range(1, 9)],
            workdir=Path(tmp) / "c", wait_chrony=False) as cluster:
        inv = cluster.write_inventory(Path(tmp) / "inv.yaml", defaults={"interface": "eth1", "python": sys.executable,
                                                                         "command_timeout": 120})
        for setup in setups:
            slow_nodes, slow_links = SETUPS[setup]
            for host in cluster.hosts:
                unshape_host(cluster, host)
                if setup != "healthy":
                    shape_host(cluster, host, SLOW if host.name in slow_nodes else HEALTHY)
            for a, b in slow_links:
                shape_link(cluster, cluster.host(a), cluster.host(b), SLOW)
            expected = set(slow_nodes) | {"-".join(sorted(link)) for link in slow_links}
            false_positive = missed = inconclusive = 0
            walls: list[float] = []
            codes: list[int] = []
            for k in range(runs):
                start = time.perf_counter()
                proc = subprocess.run([sys.executable, "-m", "ascendctl", "netcheck", "-i", str(inv), "--backend", "tcp",
                                       "--size", size, "--json", f"--{mode}"], capture_output=True, text=True, env=env,
                                      cwd=str(code))
                walls.append(time.perf_counter() - start)
                codes.append(proc.returncode)
                doc = json.loads(proc.stdout)
                v = doc["verdict"]
                named = (set(v["slow_nodes"]) | set(v["broken_nodes"]) | {"-".join(sorted(p)) for p in v["slow_links"]}
                         | {"-".join(sorted((x["a"], x["b"]))) for x in v["broken_links"]})
                wrong, lost = named - expected, expected - named
                false_positive += bool(wrong)
                missed += bool(lost)
                inconclusive += v.get("outcome") == "inconclusive"
                second = sum(1 for m in doc["matrix"] if m.get("look", 1) == 2)
                print(f"  {setup:8s} run {k + 1:2d}: exit {proc.returncode} named {sorted(named)} rounds {len(doc['rounds'])} "
                      f"(second-look pairs {second}) outcome {v.get('outcome', '-')} wall {walls[-1]:.1f}s", flush=True)
            print(f"real 8 hosts {setup:8s} --{mode} --size {size} runs {runs}: false positives {false_positive}, "
                  f"misses {missed}, inconclusive {inconclusive}, exit codes {sorted(set(codes))}, "
                  f"wall mean {sum(walls) / len(walls):.1f}s max {max(walls):.1f}s  (code: {code})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real", action="store_true", help="run on 8 real test hosts (root) instead of the simulations")
    parser.add_argument("--runs", type=int, default=None, help="runs per setup (real: 10; noise simulation: 300)")
    parser.add_argument("--noise", type=float, default=0.2, help="simulated noise: lognormal, this sigma (about a fraction)")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--setups", default="healthy,node,link", help="real: which setups (healthy, node, link)")
    parser.add_argument("--mode", default="pairs", choices=("pairs", "all-pairs", "quick"))
    parser.add_argument("--size", default="8M", help="real: --size of each measurement")
    parser.add_argument("--code", type=Path, default=ROOT, help="real: the ascendctl source tree to run (default: this one)")
    args = parser.parse_args()
    if args.real:
        setups = [s for s in args.setups.split(",") if s]
        unknown = [s for s in setups if s not in SETUPS]
        if unknown:
            parser.error(f"unknown setup(s) {unknown} (one of {', '.join(SETUPS)})")
        real(args.runs or 10, setups, args.mode, args.size, args.code.resolve())
        return
    schedule_figures()
    noise_figures(args.runs or 300, args.noise, args.seed)


if __name__ == "__main__":
    main()
