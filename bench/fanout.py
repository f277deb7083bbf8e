"""Fan-out benchmark: `ascendctl exec -- true` against `clush` and `pdsh` on the same real test hosts.

Builds 16 and 64 real test hosts (network namespaces with sshd; tests/cluster/harness.py),
runs each tool several times per size, and prints median wall time, the ratio of
ascendctl to the faster of clush and pdsh, and ascendctl's own CPU per host.
Also compares `ascendctl --version` with `python -c "import typer"`.

Run as root from the repository root:  .venv/bin/python bench/fanout.py [--runs 5] [--sizes 16,64]
Targets (issue 2): ratio <= 1.2, CPU <= 20 ms per host, --version <= 2x import typer.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.cluster.harness import build_cluster, cleanup_leftovers, require_root_linux  # noqa: E402

PYTHON = sys.executable
ASCENDCTL = [str(Path(PYTHON).with_name("ascendctl"))] if Path(PYTHON).with_name("ascendctl").exists() else [PYTHON, "-m", "ascendctl"]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run argv; return (wall seconds, CPU seconds of the child and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_size(n: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp, build_cluster(n, workdir=Path(tmp), wait_chrony=False) as cluster:
        inventory = cluster.write_inventory(Path(tmp) / "inv.yaml", defaults={"fanout": 64})
        ips = ",".join(h.ip for h in cluster.hosts)
        ssh_opts = f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={cluster.known_hosts} -i {cluster.client_key}"
        env = {**os.environ, "PDSH_SSH_ARGS": f"{ssh_opts} -l%u %h", "PDSH_RCMD_TYPE": "ssh"}
        commands = {
            "ascendctl": [*ASCENDCTL, "exec", "-i", str(inventory), "--", "true"],
            "clush": ["clush", "-f", "64", "-l", "root", "-o", ssh_opts, "-w", ips, "true"],
            "pdsh": ["pdsh", "-f", "64", "-l", "root", "-w", ips, "true"],
        }
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        timed(commands["ascendctl"], env)  # warm caches once
        for _ in range(runs):
            for name, argv in commands.items():  # interleaved so drift hits all tools alike
                samples[name].append(timed(argv, env))
        med = {name: statistics.median(w for w, _ in s) for name, s in samples.items()}
        cpu = statistics.median(c for _, c in samples["ascendctl"])
        return {**med, "cpu_per_host_ms": cpu / n * 1000}


def bench_version(runs: int) -> tuple[float, float]:
    version = [timed([*ASCENDCTL, "--version"])[0] for _ in range(runs)]
    typer_import = [timed([PYTHON, "-c", "import typer"])[0] for _ in range(runs)]
    return statistics.median(version), statistics.median(typer_import)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="16,64")
    args = parser.parse_args()
    require_root_linux()
    for tool in ("clush", "pdsh"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt-get install clustershell pdsh")
    cleanup_leftovers()
    print(f"{'hosts':>5}  {'ascendctl':>10}  {'clush':>8}  {'pdsh':>8}  {'ratio':>6}  {'cpu/host':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench_size(n, args.runs)
        ratio = r["ascendctl"] / min(r["clush"], r["pdsh"])
        print(f"{n:>5}  {r['ascendctl']:>9.3f}s  {r['clush']:>7.3f}s  {r['pdsh']:>7.3f}s  {ratio:>6.2f}  {r['cpu_per_host_ms']:>7.1f}ms")
    version, typer_import = bench_version(max(args.runs, 5))
    print(f"ascendctl --version {version * 1000:.0f} ms; python -c 'import typer' {typer_import * 1000:.0f} ms; "
          f"ratio {version / typer_import:.2f}")


if __name__ == "__main__":
    main()
