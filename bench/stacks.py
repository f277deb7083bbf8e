"""Stacks benchmark: the wall time of `ascendctl stacks` on a running job, on real test hosts.

Builds --hosts real test hosts (network namespaces with sshd; tests/cluster/harness.py) and launches, with
`ascendctl launch --detach`, --ranks Python workers on each through a stand-in torchrun next to the inventory's
`python` (it starts the workers with torchrun's RANK and LOCAL_RANK, so `launch`'s stacks hook registers in each).
The workers are plain Python run by the system's python3 (no torch: 64 torch imports would measure this machine's
cores, not stacks; and hosts with a home of their own, see below): one
sleeps in its "training step", the others wait in a stand-in collective (--wait-pattern names it). Then
`ascendctl stacks --json` runs --runs times (after one warm-up run that is dropped): the figure is the command's whole
wall time (start of the process to its exit, as a user waits for it), with the spread between the nodes' signals.
Where py-spy is installed, a pdsh loop of `py-spy dump` over every rank is timed beside it (not here: no py-spy).

Run as root from the repository root:  .venv/bin/python bench/stacks.py [--hosts 8] [--ranks 2] [--runs 5]
Target (issue 27): 16 hosts x 4 ranks in < 3 s wall.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ASCENDCTL, ssh_tools

from tests.cluster.harness import HostSpec, build_cluster, cleanup_leftovers, require_root_linux

LAUNCHER = (Path(__file__).resolve().parent.parent / "tests" / "jobs" / "stand_in_torchrun.sh").read_text()
WORKER = """
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_collective

def train_step(rank):
    if rank == int(os.environ["STUCK_RANK"]):
        open(os.path.join(os.environ["READY_DIR"], str(rank)), "w").close()
        time.sleep(3600)
    bench_collective.all_reduce(rank)

train_step(int(os.environ["RANK"]))
"""
COLLECTIVE = """
import os, time

def all_reduce(rank):
    open(os.path.join(os.environ["READY_DIR"], str(rank)), "w").close()
    time.sleep(3600)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--ranks", type=int, default=2, help="ranks per host")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    require_root_linux()
    cleanup_leftovers()
    world = args.hosts * args.ranks
    # The workers need no package: the system's python3 runs them, so the hosts keep private homes. A venv's python under
    # /root (pyenv) would need this machine's home, whose .bashrc (pyenv init) made a `true` round on 16 hosts take 2.2 s
    # instead of 0.08 s: the login shell of every SSH command, not stacks, would be measured.
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    private = not python.startswith("/root/") and not os.path.realpath(python).startswith("/root/")
    specs = [HostSpec(f"h{i:02d}", private_home=private) for i in range(1, args.hosts + 1)]
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp, \
            build_cluster(specs, workdir=Path(tmp), wait_chrony=False) as cluster:
        root = Path(tmp)
        bin_dir = root / "venv" / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "python").symlink_to(python)
        (bin_dir / "torchrun").write_text(LAUNCHER)
        (bin_dir / "torchrun").chmod(0o755)
        (root / "worker.py").write_text(WORKER)
        (root / "bench_collective.py").write_text(COLLECTIVE)
        ready = root / "ready"
        ready.mkdir()
        inventory = cluster.write_inventory(root / "inv.yaml", defaults={"fanout": 64, "slots": args.ranks,
                                                                         "python": str(bin_dir / "python")})
        env = {**os.environ, "XDG_STATE_HOME": str(root / "state")}
        launch = subprocess.run([*ASCENDCTL, "launch", "-i", str(inventory), "--launcher", "torchrun", "--no-preflight",
                                 "--detach", "--log-dir", str(root / "logs"), "--env", f"READY_DIR={ready}",
                                 "--env", f"STUCK_RANK={world - 1}", "--json", "--", str(root / "worker.py")],
                                env=env, capture_output=True, text=True, timeout=300)
        if launch.returncode != 0:
            raise SystemExit(f"launch failed: {launch.stderr[-2000:]}")
        job = json.loads(launch.stdout)["job"]["id"]
        try:
            deadline = time.monotonic() + 120
            while len(list(ready.iterdir())) < world:
                if time.monotonic() > deadline:
                    raise SystemExit(f"only {len(list(ready.iterdir()))}/{world} ranks started")
                time.sleep(0.1)
            walls, spreads, verdict = [], [], ""
            argv = [*ASCENDCTL, "stacks", job, "--json", "--wait-pattern", r"bench_collective\.py:all_reduce$"]
            for run in range(args.runs + 1):  # the first run warms caches and is dropped
                start = time.perf_counter()
                done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
                wall = time.perf_counter() - start
                document = json.loads(done.stdout)
                if done.returncode != 0 or len(document["ranks"]) != world:
                    raise SystemExit(f"stacks failed ({done.returncode}): {done.stderr[-2000:]}")
                if run:
                    walls.append(wall)
                    spreads.append(document["spread"])
                verdict = document["verdict"]["message"]
            print(f"ascendctl stacks: {world} ranks on {args.hosts} hosts ({args.ranks} per host), {args.runs} runs: "
                  f"median {statistics.median(walls):.2f} s wall (min {min(walls):.2f}, max {max(walls):.2f}); "
                  f"the nodes signalled their ranks within {statistics.median(spreads):.2f} s (median)")
            print(f"verdict: {verdict}")
            if shutil.which("py-spy"):
                _, pdsh_env = ssh_tools(cluster)
                ips = ",".join(h.ip for h in cluster.hosts)
                # the hosts share one pid namespace: each dumps its own node's ranks (its marker names it)
                loop = ("for p in $(grep -lzxF ASCENDCTL_JOB=" + job + "/$(hostname) /proc/[0-9]*/environ | cut -d/ -f3); "
                        "do grep -qz '^LOCAL_RANK=' /proc/$p/environ && py-spy dump --pid $p; done")
                start = time.perf_counter()
                subprocess.run(["pdsh", "-f", "64", "-l", "root", "-w", ips, loop], env=pdsh_env, capture_output=True)
                print(f"pdsh loop of py-spy dump: {time.perf_counter() - start:.2f} s wall")
            else:
                print("pdsh loop of py-spy dump: not timed (py-spy is not installed on this machine)")
        finally:
            stop = subprocess.run([*ASCENDCTL, "stop", job, "--grace", "2"], env=env, capture_output=True, text=True,
                                  timeout=300)
            print(f"stop: exit {stop.returncode}")


if __name__ == "__main__":
    main()
