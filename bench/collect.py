"""Collect benchmark: `ascendctl collect` against `pdsh -R exec` + `ssh ... tar | tar` doing the same copy.

Builds N real test hosts (network namespaces with sshd; tests/cluster/harness.py), plants
--mb MB of plogs per host under /root/ascend/log/debug/plog (10 MB files; `--sparse` makes
them sparse, cheap to create, for large host counts), and prints the median wall time of
each tool and ascendctl's peak RSS (ru_maxrss of the ascendctl process).

Run as root from the repository root:  .venv/bin/python bench/collect.py [--hosts 8] [--mb 200] [--runs 3] [--sparse] [--gz]
Targets (issues 6 and 17): within 1.2x of pdsh + tar on 8 and 64 hosts, peak RSS < 150 MB.
64 hosts: --hosts 64 --mb 50 --sparse (sparse files keep the planting cheap; tar still sends every byte).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import ASCENDCTL, PYTHON

from tests.cluster.harness import Cluster, build_cluster, cleanup_leftovers, require_root_linux

PLOG = "/root/ascend/log/debug/plog"
RSS_WRAPPER = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")


def plant(cluster: Cluster, mb: int, sparse: bool, template: Path) -> None:
    files = mb // 10
    for host in cluster.hosts:
        make = ('truncate -s 10M "$f"' if sparse else f'cp {template} "$f"')
        script = f'mkdir -p {PLOG} && for i in $(seq 1 {files}); do f={PLOG}/plog-${{i}}_bench.log; {make}; done'
        result = cluster.run_on(host, script, timeout=300)
        if result.returncode != 0:
            raise SystemExit(f"{host.name}: planting failed: {result.stderr}")


def run_ascendctl(inventory: Path, out: Path, mb: int, gz: bool = False) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one collect into a fresh directory (or OUT.tar.gz)."""
    shutil.rmtree(out, ignore_errors=True)
    target = out.with_name(out.name + ".tar.gz") if gz else out
    target.unlink(missing_ok=True)
    argv = [PYTHON, "-c", RSS_WRAPPER, *ASCENDCTL, "collect", "-i", str(inventory), "-o", str(target),
            "--since", "1d", "--max-node-size", f"{mb + 50}M"]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"ascendctl collect failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, int(proc.stdout.strip().splitlines()[-1])


def run_pdsh(cluster: Cluster, out: Path, gz: bool = False) -> float:
    """pdsh's exec module runs `ssh host tar -cf - ... | tar -xf -` per host, 64 at a time (`| gzip -1 >` with --gz)."""
    shutil.rmtree(out, ignore_errors=True)
    for host in cluster.hosts:
        (out / host.ip).mkdir(parents=True)
    ssh = (f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={cluster.known_hosts} "
           f"-i {cluster.client_key} -l root")
    unpack = f"gzip -1 > {out}/%h/plog.tar.gz" if gz else f"tar -xf - -C {out}/%h"
    copy = f"{ssh} %h tar -cf - -C / {PLOG.lstrip('/')} | {unpack}"
    argv = ["pdsh", "-R", "exec", "-f", "64", "-w", ",".join(h.ip for h in cluster.hosts), "sh", "-c", copy]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pdsh failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sparse", action="store_true")
    parser.add_argument("--gz", action="store_true", help="ascendctl writes BUNDLE.tar.gz; pdsh pipes each tar through gzip -1")
    args = parser.parse_args()
    if not shutil.which("pdsh"):
        raise SystemExit("pdsh not found: apt-get install pdsh")
    require_root_linux()
    cleanup_leftovers()
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp_name:
        tmp = Path(tmp_name)
        template = tmp / "plog-template.log"
        with open(template, "wb") as f:
            f.write(os.urandom(10 * 2**20))
        with build_cluster(args.hosts, workdir=tmp / "cluster", wait_chrony=False) as cluster:
            inventory = cluster.write_inventory(tmp / "inv.yaml", defaults={"fanout": 64})
            plant(cluster, args.mb, args.sparse, template)
            ours: list[tuple[float, int]] = []
            theirs: list[float] = []
            for _ in range(args.runs):  # interleaved so drift hits both alike
                ours.append(run_ascendctl(inventory, tmp / "bundle", args.mb, args.gz))
                theirs.append(run_pdsh(cluster, tmp / "pdsh", args.gz))
            copied_ours = (tmp / "bundle.tar.gz").stat().st_size if args.gz else du(tmp / "bundle")
            copied_theirs = du(tmp / "pdsh")
    wall = statistics.median(w for w, _ in ours)
    rss = max(r for _, r in ours) / 1024
    pdsh = statistics.median(theirs)
    print(f"hosts={args.hosts} data/host={args.mb}MB{' (sparse)' if args.sparse else ''}{' .tar.gz' if args.gz else ''} runs={args.runs} "
          f"cpus={os.cpu_count()} self-rss={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}MB")
    print(f"ascendctl collect  {wall:7.2f}s  peak RSS {rss:6.1f} MB  copied {copied_ours / 2**20:8.1f} MB")
    print(f"pdsh + ssh tar{' | gzip' if args.gz else '    '} {pdsh:7.2f}s                     copied {copied_theirs / 2**20:8.1f} MB")
    print(f"ratio {wall / pdsh:.2f}")


if __name__ == "__main__":
    main()
