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
import statistics
import tempfile
from pathlib import Path

from common import ASCENDCTL, PYTHON, ssh_tools, timed

from tests.cluster.harness import build_cluster, cleanup_leftovers, require_root_linux


def bench_size(n: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp, build_cluster(n, workdir=Path(tmp), wait_chrony=False) as cluster:
        inventory = cluster.write_inventory(Path(tmp) / "inv.yaml", defaults={"fanout": 64})
        tools, env = ssh_tools(cluster)
        commands = {"ascendctl": [*ASCENDCTL, "exec", "-i", str(inventory), "--", "true"], **tools}
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
