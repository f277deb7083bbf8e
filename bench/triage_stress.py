"""Run the real-host triage cases (tests/cluster/test_triage_hosts.py) several times: the same answer every time?

Each run launches the real failing jobs on real test hosts, collects them and triages the bundles; every case
appends its verdict (triage's and launch's: category, node, rank, rule) to $TRIAGE_STRESS_OUT/<test>.jsonl.
This prints, per case, the distinct verdicts seen and how often. Needs root (network namespaces); not run in CI.

Run from the repository root:  .venv/bin/python bench/triage_stress.py [--runs 5] [-k PATTERN]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("-k", default=None, help="only the cases matching this pytest -k expression")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="triage-stress-"))
    failed_runs = 0
    for run in range(1, args.runs + 1):
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/cluster/test_triage_hosts.py"]
        if args.k:
            argv += ["-k", args.k]
        proc = subprocess.run(argv, cwd=REPO, env={**os.environ, "TRIAGE_STRESS_OUT": str(out)}, capture_output=True, text=True)
        last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-200:]
        print(f"run {run}/{args.runs}: {last}", flush=True)
        failed_runs += proc.returncode != 0
    stable = True
    for path in sorted(out.glob("*.jsonl")):
        seen = Counter(json.dumps(json.loads(line), sort_keys=True) for line in path.read_text().splitlines())
        mark = "same every time" if len(seen) == 1 else "DIFFERENT ANSWERS"
        stable &= len(seen) == 1
        print(f"{path.stem}: {sum(seen.values())} run(s), {mark}")
        for verdict, count in seen.most_common():
            print(f"  {count}x {verdict}")
    print(f"verdicts in {out}")
    return 0 if stable and not failed_runs else 1


if __name__ == "__main__":
    sys.exit(main())
