"""Benchmark: HCCL rank table for 1,024 nodes x 16 devices, device IPs given in the inventory.

Target (issue 4): under 1 s including inventory load. Measures, as the median of --runs runs:

- load:   load_inventory() of the generated YAML file
- build:  render_rank_table() (no node is contacted: device_ips are in the inventory),
          i.e. gathering, validation and the dict build
- dump:   json.dumps(indent=4) of the table
- total:  the three together, in one process (the target)
- cli:    `python -m ascendctl render ranktable -i INV -o FILE` end to end, as a subprocess
          (interpreter start and imports included)

Run: .venv/bin/python bench/render.py [--nodes 1024] [--devices 16] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ascendctl.inventory.load import load_inventory  # noqa: E402
from ascendctl.render import rank_table_json, render_rank_table  # noqa: E402


def write_inventory(path: Path, nodes: int, devices: int) -> None:
    """One flow-style line per node; host 10.x.y.z, device d on 172.(16+d).x.y-ish /24s, all unique."""
    lines = [f"defaults: {{slots: {devices}, interface: eth0}}", "nodes:"]
    for n in range(nodes):
        hi, lo = divmod(n + 1, 250)
        ips = ", ".join(f"172.{16 + d}.{hi}.{lo + 1}" for d in range(devices))
        lines.append(f"  - {{host: 10.1.{hi}.{lo + 1}, name: node{n:04d}, device_ips: [{ips}]}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        inventory_path = Path(tmp) / "inventory.yaml"
        write_inventory(inventory_path, args.nodes, args.devices)
        size_kib = inventory_path.stat().st_size / 1024
        times: dict[str, list[float]] = {"load": [], "build": [], "dump": [], "total": [], "cli": []}
        text = ""
        for _ in range(args.runs):
            t0 = time.perf_counter()
            inventory = load_inventory(inventory_path, environ={})
            t1 = time.perf_counter()
            result = render_rank_table(inventory, version="1.0")
            t2 = time.perf_counter()
            assert result.table is not None, [str(p) for p in result.problems[:5]]
            text = rank_table_json(result.table)
            t3 = time.perf_counter()
            times["load"].append(t1 - t0)
            times["build"].append(t2 - t1)
            times["dump"].append(t3 - t2)
            times["total"].append(t3 - t0)
        out = Path(tmp) / "rank_table.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ASCENDCTL_")}
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ascendctl", "render", "ranktable", "-i", str(inventory_path), "-o", str(out)],
                           check=True, cwd=REPO, env=env, stderr=subprocess.DEVNULL)
            times["cli"].append(time.perf_counter() - t0)
        assert out.read_text() == text

    ranks = args.nodes * args.devices
    print(f"rank table: {args.nodes} nodes x {args.devices} devices = {ranks} ranks; "
          f"inventory {size_kib:.0f} KiB, table {len(text) / 1024:.0f} KiB; median of {args.runs} runs (min-max)")
    for key, values in times.items():
        print(f"  {key:<6} {statistics.median(values) * 1000:8.1f} ms   ({min(values) * 1000:.1f}-{max(values) * 1000:.1f})")
    verdict = "OK" if statistics.median(times["total"]) < 1.0 else "OVER TARGET"
    print(f"target: total < 1000 ms: {verdict}")


if __name__ == "__main__":
    main()
