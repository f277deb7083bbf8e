"""Relaunch preflight benchmark (`launch --restarts`): the full launch preflight that attempt 1 runs against the
reduced one that runs before each relaunch (ssh, master port, no process of the previous attempt left).

Each run opens a fresh NodeGroup (as every attempt does: connections are part of the cost) and runs one preflight:
jobs/service.run_launch_preflight (LAUNCH_CHECKS: ssh, master_port with its listener test from every node,
npu_stale_procs, launcher) or jobs/service.run_relaunch_preflight (every node reached, `ss -Hltn` on the master for the
port, then the previous attempt's processes looked for by its marker on every node it ran on). The previous attempt is a real finished job of a stand-in launcher.
Prints the median and min wall time of each over --runs.

Run as root from the repository root:  .venv/bin/python bench/relaunch_preflight.py [--hosts 8] [--runs 5] [--parts]
(--hosts 0: 3 local nodes through the local transport, no test hosts).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import REPO  # noqa: F401  (puts the repository on sys.path)

from ascendctl.inventory.load import load_inventory
from ascendctl.jobs.plan import LaunchOptions
from ascendctl.jobs.service import launch_job, run_launch_preflight, run_relaunch_preflight
from ascendctl.jobs.ssh_runner import SSHRunner
from ascendctl.launchers import master_port
from ascendctl.remote.group import NodeGroup

LAUNCHER = "#!/bin/sh\necho started; exit 0\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parts", action="store_true", help="also time the leftover look alone, and connecting alone")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="asct-relaunch-"))
    bin_dir = work / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "torchrun").write_text(LAUNCHER)
    (bin_dir / "torchrun").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    (work / "train.py").write_text("")
    cluster = None
    if args.hosts:
        from tests.cluster.harness import build_cluster, cleanup_leftovers, require_root_linux

        require_root_linux()
        cleanup_leftovers()
        cluster = build_cluster([_spec(i) for i in range(1, args.hosts + 1)], workdir=work / "cluster")
        path = cluster.write_inventory(work / "inv.yaml", defaults={"slots": 1, "python": str(bin_dir / "python")})
    else:
        path = work / "inv.yaml"
        path.write_text(f"defaults: {{transport: local, slots: 1, python: {bin_dir}/python}}\n"
                        "nodes:\n  - {name: 'n[1-3]', host: '127.0.0.[1-3]'}\n")
    try:
        inv = load_inventory(path)
        options = LaunchOptions("torchrun", (str(work / "train.py"),), log_dir=str(work / "logs"))
        previous = launch_job(inv, options, preflight=False).record
        port = master_port("torchrun", None)
        runs = {"full (attempt 1)": lambda g: run_launch_preflight(inv, port, g, options, "bench"),
                "reduced (relaunch)": lambda g: run_relaunch_preflight(inv, port, g, previous, grace=1, notice=print)}
        if args.parts:  # where the time goes
            runs |= {"  leftovers only": lambda g: SSHRunner(g).leftovers(previous, inv.names),
                     "  connect only": lambda g: g.run(lambda node, t: t.run("true"))}
        figures: dict[str, list[float]] = {name: [] for name in runs}
        for i in range(args.runs):
            order = list(runs.items())
            for name, run in (order if i % 2 == 0 else order[::-1]):  # alternate the order: no side gains from it
                started = time.perf_counter()
                with NodeGroup(inv) as group:
                    run(group)
                figures[name].append(time.perf_counter() - started)
        where = f"{args.hosts} test hosts over SSH" if args.hosts else "3 local nodes"
        for name, values in figures.items():
            print(f"{name:20s} {where}: median {statistics.median(values):.3f} s, min {min(values):.3f} s "
                  f"({args.runs} runs)")
    finally:
        if cluster is not None:
            cluster.teardown()


def _spec(i: int) -> object:
    from tests.cluster.harness import HostSpec

    return HostSpec(f"h{i:02d}", private_home=False)


if __name__ == "__main__":
    main()
