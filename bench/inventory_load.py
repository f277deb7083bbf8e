"""Benchmark: inventory load + validate at 10,000 and 100,000 nodes, and `inventory show` of 10,000 nodes.

Targets (issues 13 and 17): a 100,000-node inventory, given as ranges or as 100,000 explicit entries,
loads and validates in a few seconds; `ascendctl inventory show` of 10,000 nodes given as ranges in
under 1 s. Each measurement runs in a fresh process (so peak RSS is that run's own) and prints the
median of --runs runs:

- wall, cpu: load_inventory() of the generated file (YAML bounds check, parse, validation, expansion)
- rss:       peak RSS of that process (ru_maxrss: interpreter and imports included)
- show:      `python -m ascendctl inventory show -i INV` end to end, stdout to /dev/null

Wall times on a shared machine move with its load; cpu is the steadier figure.

Run: .venv/bin/python bench/inventory_load.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import PYTHON, REPO, timed

MEASURE = """
import json, resource, sys, time
from ascendctl.inventory.load import load_inventory
wall, cpu = time.perf_counter(), time.process_time()
inventory = load_inventory(sys.argv[1], environ={})
print(json.dumps({"nodes": len(inventory.nodes), "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_ranges(path: Path, nodes: int) -> None:
    path.write_text(f"defaults: {{user: root, slots: 8}}\nnodes:\n  - {{host: 'node[1-{nodes}]', name: 'n[1-{nodes}]'}}\n")


def write_explicit(path: Path, nodes: int) -> None:
    with path.open("w") as handle:
        handle.write("defaults: {user: root, slots: 8}\nnodes:\n")
        for i in range(nodes):
            handle.write(f"  - {{host: 10.{i >> 16}.{(i >> 8) & 255}.{i & 255}, name: n{i}}}\n")


def measure(path: Path, runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        proc = subprocess.run([PYTHON, "-c", MEASURE, str(path)], capture_output=True, text=True, cwd=REPO)
        if proc.returncode != 0:
            raise SystemExit(f"{path.name}: load failed: {proc.stderr[-2000:]}")
        samples.append(json.loads(proc.stdout))
    return {key: statistics.median(s[key] for s in samples) for key in ("nodes", "wall", "cpu", "rss_mb")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ascendctl-bench-inv-") as tmp:
        root = Path(tmp)
        print(f"{'inventory':<24}{'nodes':>8}{'wall s':>9}{'cpu s':>8}{'rss MB':>9}")
        for nodes in (10_000, 100_000):
            for kind, write in (("ranges", write_ranges), ("explicit", write_explicit)):
                path = root / f"{kind}-{nodes}.yaml"
                write(path, nodes)
                row = measure(path, args.runs)
                print(f"{kind + ' ' + str(nodes):<24}{int(row['nodes']):>8}{row['wall']:>9.2f}{row['cpu']:>8.2f}{row['rss_mb']:>9.0f}")
        show = root / "ranges-10000.yaml"
        walls = [timed([PYTHON, "-m", "ascendctl", "inventory", "show", "-i", str(show)])[0] for _ in range(args.runs)]
        print(f"inventory show, 10,000 nodes as ranges: {statistics.median(walls):.2f} s (target < 1 s)")


if __name__ == "__main__":
    sys.exit(main())
