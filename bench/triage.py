"""Triage benchmark: `ascendctl triage` over a ~1 GB multi-node log set against `grep -E -c` with the same keywords.

Generates NODES node directories (8 rank logs each) in a temp dir from the shared sample lines
(`tests/data/samples/ascend/*.txt`) mixed with benign training/plog lines, one rank OOMing first and
the others timing out, then prints throughput, peak RSS and the ratio to grep. The temp dir is deleted.

Run from the repository root:  .venv/bin/python bench/triage.py [--mb 1024] [--nodes 16] [--runs 3] [--keep DIR]
Targets (issue 7): >= 150 MB/s, peak RSS < 200 MB, within 3x of grep -E -c.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ASCENDCTL, PYTHON, REPO

from ascendctl.triage.signatures import TRIGGERS
from ascendctl.triage.reader import GREP_TRIGGERS as _GREP_TRIGGERS

SAMPLES = REPO / "tests" / "data" / "samples" / "ascend"
# stdout is a pipe, not /dev/null: GNU grep stops at the first match when it sees /dev/null, which would flatter it.
RSS_WRAPPER = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")
BENIGN = (
    "[INFO] 2024-01-01 11:{m:02d}:{s:02d},{ms:03d} train.py:188 iteration {i:>8}/ 500000 | consumed samples: {c:>10} | "
    "elapsed time per iteration (ms): 812.{ms:03d} | learning rate: 2.9E-04 | global batch size: 512 | lm loss: 2.{ms:03d}E+00 | "
    "loss scale: 65536.0 | grad norm: 1.{ms:03d} | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "[INFO] HCCL({pid},python3):2024-01-01-11:{m:02d}:{s:02d}.{ms:03d}.{us:03d} [hccl_opbase_atrace_info.cc:56][{pid}]Entry-HcclAllReduce: "
    "tag[AllReduce_10.0.0.1%eth0_60000_0_1736576907435382], sendBuf[0x12e7bf550000], recvBuf[0x12e7bf550000], count[{c}], "
    "dataType[float32], op[sum], localRank[{r}], streamId[5],comm[0x331c9c00], deviceLogicId[{r}]",
    "[INFO] GE({pid},python3):2024-01-01-11:{m:02d}:{s:02d}.{ms:03d}.{us:03d} [graph_manager.cc:1201]{pid} RunGraph: graph_id[{r}] "
    "run success, cost {c} us, session_id 0",
    "[INFO] RUNTIME({pid},python3):2024-01-01-11:{m:02d}:{s:02d}.{ms:03d}.{us:03d} [stream.cc:1023] {pid} Synchronize: stream_id={r}, "
    "task_id={c}, device_id={r}, mem usage 51234 MiB",
    "[2024-01-01 11:{m:02d}:{s:02d},{ms:03d}] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]",
    "{i} samples/sec: 1234.{ms:03d} | tokens/sec: 81234 | MFU 0.41 | data loader {ms} ms | checkpoint: none | eval every 1000",
)


def sample_error_lines() -> list[str]:
    """Timeout lines from the shared samples: symptoms only, so the planted OOM stays the one root cause."""
    from ascendctl.triage.signatures import Category
    from ascendctl.triage import match_line

    lines = []
    for path in sorted(SAMPLES.glob("*.txt")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("# ") or not line.strip():
                continue
            sig = match_line(line)
            if sig is not None and sig.category is Category.COMM_TIMEOUT and "20" not in line[:40]:
                lines.append(line)
    return lines


def block(seed: int, size: int, errors: list[str], error_every: int) -> bytes:
    """About `size` bytes of benign lines with a sample error line every `error_every` lines."""
    rng = random.Random(seed)
    out: list[str] = []
    total = 0
    i = 0
    while total < size:
        if errors and i % error_every == error_every - 1:
            line = rng.choice(errors)
        else:
            line = BENIGN[i % len(BENIGN)].format(m=(i // 3600) % 60, s=(i // 60) % 60, ms=i % 1000, us=(i * 7) % 1000, i=i,
                                                  c=i * 512, pid=40000 + seed, r=seed % 8)
        out.append(line)
        total += len(line) + 1
        i += 1
    return ("\n".join(out) + "\n").encode()


def generate(root: Path, mb: int, nodes: int) -> int:
    errors = sample_error_lines()
    per_file = mb * 1024 * 1024 // (nodes * 8)
    blocks = [block(seed, 2 << 20, errors, 2000) for seed in range(4)]
    total = 0
    for n in range(1, nodes + 1):
        for local in range(8):
            rank = (n - 1) * 8 + local
            path = root / f"node{n:02d}" / "launcher" / f"rank{rank}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as fh:
                written = 0
                k = rank
                while written < per_file:
                    data = blocks[k % len(blocks)]
                    fh.write(data)
                    written += len(data)
                    k += 1
                if n == 3 and local == 5:
                    fh.write(b"RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 5; 60.97 GiB total capacity) "
                             b"2024-01-01 12:00:00,000\n")
                fh.write(f"[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective operation timeout: "
                         f"WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out. "
                         f"2024-01-01 12:10:00,000\n".encode())
                written = fh.tell()
            total += written
    return total


def run(argv: list[str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run([PYTHON, "-c", RSS_WRAPPER, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed: {proc.stderr[-2000:]}")
    return wall, int(proc.stdout.strip().splitlines()[-1]), proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="triage-bench-")) if args.keep is None else args.keep
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        size = generate(tmp, args.mb, args.nodes)
        print(f"generated {size / 1e6:.0f} MB in {args.nodes * 8} files under {tmp} ({time.perf_counter() - t0:.1f}s)")
        files = sorted(str(p) for p in tmp.rglob("*.log"))
        grep = ["grep", "-E", "-c", "-e", "|".join(f"({t})" for t in _GREP_TRIGGERS), *files]
        env_note = f"LC_ALL=C, {len(TRIGGERS)} keywords"
        os.environ["LC_ALL"] = "C"
        verdict = subprocess.run([*ASCENDCTL, "triage", str(tmp), "--json"], capture_output=True, text=True)
        doc = json.loads(verdict.stdout)
        ff = doc["first_failure"] or {}
        print(f"verdict: {doc['category']} node {ff.get('node')} rank {ff.get('rank')} ({len(doc['findings'])} findings listed)")
        ours, theirs, rss = [], [], []
        for _ in range(args.runs):
            wall, maxrss, _ = run([*ASCENDCTL, "triage", str(tmp), "--json"])
            ours.append(wall)
            rss.append(maxrss)
            wall, _, _ = run(grep)
            theirs.append(wall)
        a, g = statistics.median(ours), statistics.median(theirs)
        print(f"ascendctl triage: {a:.2f}s median of {args.runs} = {size / 1e6 / a:.0f} MB/s; peak RSS {max(rss) / 1024:.0f} MB "
              "(ru_maxrss of the largest process: ascendctl or its grep child)")
        print(f"grep -E -c ({env_note}): {g:.2f}s = {size / 1e6 / g:.0f} MB/s")
        print(f"ratio ascendctl / grep: {a / g:.2f}x")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
