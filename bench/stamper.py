"""Stamper benchmark: lines/s of the node-side line stamper (ascendctl/sh/stamp_lines.sh), and whether it slows the job.

A Python worker prints N lines of 64 bytes as fast as it can (block-buffered print) into a pipe that the stamper reads;
the stamper writes launcher.log in a temporary directory, as on a node. Figures, medians of --runs: lines/s from the
worker's start to the stamper's end, and the worker's own time against the same worker printing into /dev/null (the
job is slowed by what its output costs). Stampers: python3 (wherever torchrun and msrun run, so on every training
node), the POSIX fallback of nodes without python3 (dash with GNU tools and mawk; busybox sh with busybox's tools), and
the bash `read -r` loop used before issue #30 (reproduced below; given --old-lines only: it takes 10-30k lines/s), and
`cat` (no stamps: what any reader of the pipe writing the file costs the worker, the floor).

Run from the repository root:  .venv/bin/python bench/stamper.py [--lines 2000000] [--old-lines 200000] [--runs 3]
Targets (issue #30): with python3 the worker slowed no more than by `cat`; the fallback >= 100,000 lines/s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO  # noqa: F401  (puts the repository on sys.path)

from ascendctl.remote.scripts import script

WORKER = r"""
import sys, time
n = int(sys.argv[1])
start = time.monotonic()
for i in range(n):
    print(f"step {i:09d} loss 0.123456 lr 0.000100 grad_norm 1.2345 tokens/s 9999")
sys.stdout.flush()
print(time.monotonic() - start, file=sys.stderr)
"""

# ascendctl/sh/stamp_lines.sh before issue #30: a line at a time through bash's `read` (a byte a read(2) on a pipe)
OLD_STAMPER = r"""trap '' TERM INT HUP
while IFS= read -r line || [ -n "$line" ]; do
    now=${EPOCHREALTIME:-}
    if [ -n "$now" ]; then
        printf '%(%Y-%m-%dT%H:%M:%S)T.%s | %s\n' "${now%.*}" "${now#*.}" "$line"
    else
        printf '%(%Y-%m-%dT%H:%M:%S)T.000000 | %s\n' -1 "$line"
    fi
done
"""
FALLBACK_TOOLS = ("awk", "cat", "date", "dd", "mktemp", "rm")


def tool_dir(root: Path, name: str, tools: dict[str, str]) -> str:
    """A PATH directory holding exactly these tools (a node without python3)."""
    directory = root / name
    directory.mkdir()
    for tool, target in tools.items():
        (directory / tool).symlink_to(target)
    return str(directory)


def run_once(argv: list[str], env: dict[str, str] | None, lines: int, out: Path) -> tuple[float, float, int]:
    """(seconds from the worker's start to the stamper's end, the worker's own seconds, lines written)."""
    read_end, write_end = os.pipe()
    with open(out, "wb") as log:
        started = time.monotonic()
        stamper = subprocess.Popen(argv, stdin=read_end, stdout=log, env=env)
        worker = subprocess.Popen([sys.executable, "-c", WORKER, str(lines)], stdout=write_end, stderr=subprocess.PIPE,
                                  text=True)
        os.close(read_end)
        os.close(write_end)
        _, err = worker.communicate()
        stamper.wait()
        took = time.monotonic() - started
    with open(out, "rb") as log:
        written = sum(chunk.count(b"\n") for chunk in iter(lambda: log.read(1 << 20), b""))
    return took, float(err.strip().splitlines()[-1]), written


def alone(lines: int) -> float:
    proc = subprocess.run([sys.executable, "-c", WORKER, str(lines)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=True)
    return float(proc.stderr.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--old-lines", type=int, default=200_000, help="lines for the old bash loop (it is slow)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="asct-stamper-") as tmp:
        root = Path(tmp)
        new = root / "stamp_lines.sh"
        new.write_text(script("stamp_lines.sh"))
        old = root / "old_stamp_lines.sh"
        old.write_text(OLD_STAMPER)
        gnu = {t: shutil.which(t) for t in FALLBACK_TOOLS}
        stampers: list[tuple[str, list[str], dict[str, str] | None, int]] = [
            ("python3 (new)", ["sh", str(new), tmp], None, args.lines),
        ]
        if all(gnu.values()) and shutil.which("dash"):
            path = tool_dir(root, "gnu", {t: p for t, p in gnu.items() if p})
            stampers.append(("dash + GNU tools, no python3 (new)", [shutil.which("dash") or "dash", str(new), tmp],
                             {"PATH": path}, args.lines))
        busybox = shutil.which("busybox")
        if busybox:
            path = tool_dir(root, "busybox", {t: busybox for t in FALLBACK_TOOLS})
            stampers.append(("busybox sh + tools, no python3 (new)", [busybox, "sh", str(new), tmp], {"PATH": path},
                             args.lines))
        stampers.append(("bash read loop (before #30)", ["bash", str(old)], None, args.old_lines))
        stampers.append(("cat, no stamps (the floor: a pipe and a file)", ["cat"], None, args.lines))
        print(f"{'stamper':46} {'lines':>9} {'lines/s':>11} {'worker s':>9} {'alone s':>8} {'slowed':>7}")
        for name, argv, env, lines in stampers:
            rates, ratios, worker_times, alone_times = [], [], [], []
            for _ in range(args.runs):
                took, worker, written = run_once(argv, env, lines, root / "launcher.log")
                if written < lines:
                    print(f"{name}: only {written} of {lines} lines written (dropped: see the log's notes)")
                base = alone(lines)
                rates.append(lines / took)
                worker_times.append(worker)
                alone_times.append(base)
                ratios.append(worker / base)
            print(f"{name:46} {lines:>9,} {statistics.median(rates):>11,.0f} {statistics.median(worker_times):>9.2f} "
                  f"{statistics.median(alone_times):>8.2f} {statistics.median(ratios):>6.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
