"""Triage on hostile inputs (issues #13, #30): a .tar.gz of many small files against the same files as a directory,
the peak RSS of a gzip holding one huge line, and a gzip bomb of empty lines (read to its bound, exit 3).

Each run is `ascendctl triage` in a child; wall time and the child's peak RSS (ru_maxrss of it or its grep child)
are printed. Files are generated in a temp dir, deleted at the end.

Run from the repository root:  .venv/bin/python bench/triage_inputs.py [--files 100000] [--line-mb 3072] [--bomb-mb 1024]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path

from common import ASCENDCTL, PYTHON

RSS_WRAPPER = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")
OOM = "[rank3]: RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB 2024-01-01 12:00:01"


def measure(paths: list[Path], ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `ascendctl triage PATHS`."""
    start = time.perf_counter()
    proc = subprocess.run([PYTHON, "-c", RSS_WRAPPER, *ASCENDCTL, "triage", *map(str, paths)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"triage failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, int(proc.stdout.split()[-1]) / 1024


def many_files(root: Path, count: int) -> Path:
    """`count` small rank logs over 16 nodes, one of which runs out of memory."""
    for i in range(count):
        path = root / f"node{i % 16:02d}" / f"w{i}" / "worker.log"
        path.parent.mkdir(parents=True)
        text = "".join(f"[rank{i % 8}]: iteration {n} | lm loss: 2.1 2024-01-01 11:00:0{n}\n" for n in range(5))
        path.write_text(text + (OOM + "\n" if i == count // 2 else ""))
    return root


def huge_line_gz(path: Path, megabytes: int) -> Path:
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = b"x" * (1 << 20)
    with path.open("wb") as out:
        out.write(comp.compress(OOM.encode() + b" "))
        for _ in range(megabytes):
            out.write(comp.compress(block))
        out.write(comp.compress(b"\n") + comp.flush())
    return path


def newline_bomb(path: Path, megabytes: int) -> Path:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\n" * (1 << 20)
    with path.open("wb") as out:
        for _ in range(megabytes):
            out.write(comp.compress(block))
        out.write(comp.flush())
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--line-mb", type=int, default=3072)
    parser.add_argument("--bomb-mb", type=int, default=1024)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="triage-inputs-"))
    try:
        root = many_files(tmp / "bundle", args.files)
        archive = tmp / "bundle.tar.gz"
        with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
            tar.add(root, arcname="bundle")
        print(f"{args.files} small files: {archive.stat().st_size / 1e6:.1f} MB .tar.gz")
        wall_dir, rss_dir = measure([root])
        print(f"  directory: {wall_dir:.1f}s, peak RSS {rss_dir:.0f} MB")
        wall_tar, rss_tar = measure([archive])
        print(f"  .tar.gz:   {wall_tar:.1f}s, peak RSS {rss_tar:.0f} MB ({wall_tar / wall_dir:.2f}x the directory)")
        shutil.rmtree(root)
        gz = huge_line_gz(tmp / "rank3.log.gz", args.line_mb)
        wall, rss = measure([gz])
        print(f"one {args.line_mb} MB line in a {gz.stat().st_size / 1e6:.1f} MB .gz: {wall:.1f}s, peak RSS {rss:.0f} MB")
        bomb = newline_bomb(tmp / "rank0.log.gz", args.bomb_mb)
        wall, rss = measure([bomb], ok=(3,))  # 3: read to the expansion bound, the rest named as unread
        print(f"{args.bomb_mb} MB of empty lines in a {bomb.stat().st_size / 1e6:.1f} MB .gz: {wall:.1f}s, peak RSS {rss:.0f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
