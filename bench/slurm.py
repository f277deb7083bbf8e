"""Slurm benchmark: `ascendctl exec -- true` inside an allocation (one srun step) vs `srun true` vs ascendctl over SSH.

Builds N real test hosts (network namespaces with sshd; tests/cluster/harness.py), runs a real Slurm on
them (munged, slurmctld, one slurmd per host; tests/cluster/slurm_harness.py), holds an N-node allocation
and times, interleaved, on the same hosts:

  ascendctl-slurm  `ascendctl exec -- true` with the allocation's variables (nodes from the allocation,
                   the fan-out as ONE `srun --overlap` step)
  srun             `srun --jobid=J --overlap -N N -n N --ntasks-per-node=1 true`, the floor for a step
  ascendctl-ssh    `ascendctl exec -i inv.yaml -- true` over SSH to the same hosts

Prints median wall time and median CPU (the command and its children: ascendctl, srun, ssh; not slurmd or
slurmstepd, which run outside the timed process tree) per tool and size.

Run as root from the repository root:  .venv/bin/python bench/slurm.py [--runs 5] [--sizes 3,16]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import ASCENDCTL, timed

from tests.cluster.harness import HostSpec, build_cluster, cleanup_leftovers, require_root_linux
from tests.cluster.slurm_harness import start_slurm


def bench_size(n: int, runs: int) -> dict[str, tuple[float, float]]:
    specs = [HostSpec(f"h{i:02d}", private_home=False) for i in range(1, n + 1)]
    with tempfile.TemporaryDirectory(prefix="asct-bench-slurm-") as tmp, \
            build_cluster(specs, workdir=Path(tmp), wait_chrony=False) as cluster:
        inventory = cluster.write_inventory(Path(tmp) / "inv.yaml", defaults={"fanout": 64})
        slurm = start_slurm(cluster, workdir=Path(tmp) / "slurm")
        try:
            job = slurm.hold(n)
            inside = slurm.allocation_env(job)
            inside.pop("ASCENDCTL_INVENTORY", None)
            outside = slurm.env()
            commands = {
                "ascendctl-slurm": ([*ASCENDCTL, "exec", "--", "true"], inside),
                "srun": (["srun", f"--jobid={job}", "--overlap", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1",
                          "--quiet", "true"], outside),
                "ascendctl-ssh": ([*ASCENDCTL, "exec", "-i", str(inventory), "--", "true"], outside),
            }
            for argv, env in commands.values():  # warm caches once
                timed(argv, env)
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for _ in range(runs):
                for name, (argv, env) in commands.items():  # interleaved so drift hits all alike
                    samples[name].append(timed(argv, env))
            return {name: (statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
                    for name, s in samples.items()}
        finally:
            slurm.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="3,16")
    args = parser.parse_args()
    require_root_linux()
    cleanup_leftovers()
    names = ("ascendctl-slurm", "srun", "ascendctl-ssh")
    print(f"{'hosts':>5}  " + "  ".join(f"{name + ' wall/cpu':>26}" for name in names) + "  slurm/srun  slurm/ssh")
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench_size(n, args.runs)
        cells = "  ".join(f"{r[name][0]:>14.3f}s /{r[name][1]:>7.3f}s" for name in names)
        print(f"{n:>5}  {cells}  {r['ascendctl-slurm'][0] / r['srun'][0]:>10.2f}  "
              f"{r['ascendctl-slurm'][0] / r['ascendctl-ssh'][0]:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
