"""Launch benchmark: `ascendctl launch` against starting the same per-node commands with `pdsh`.

Builds 16 real test hosts (network namespaces with sshd; tests/cluster/harness.py). The launcher
is a stand-in `torchrun` next to the inventory's `python` that execs the script with sh, and the
script records `date +%s.%N` per host: the figure is ascendctl's own cost, not a framework import.
1. Start: time from running the command to the last worker's recorded start, median of --runs;
   ascendctl with --no-preflight (pdsh checks nothing either) and with the default preflight.
   pdsh runs, per host, exactly the start command ascendctl runs there (jobs/ssh_runner.start_command), its
   start payload decoded in place.
2. Teardown: one host's worker exits 1 after 1 s, the others ignore SIGTERM; the time from that
   exit to every host being clean (ascendctl's exit, then no process of the job anywhere).

Run as root from the repository root:  .venv/bin/python bench/launch.py [--runs 5] [--hosts 16] [--grace 2]
Targets (issue 5): start within 1.2x of pdsh; teardown within grace + 2 s.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import ASCENDCTL, ssh_tools

from ascendctl.inventory.load import load_inventory
from ascendctl.jobs.plan import LaunchOptions, build_plan
from ascendctl.jobs.ssh_runner import start_command, start_payload
from ascendctl.facts.endpoint import Endpoint
from tests.cluster.harness import build_cluster, cleanup_leftovers, require_root_linux

WORKER = """date +%s.%N > "$OUT/$(hostname)"
if [ "$MODE" = fail ]; then
    if [ "$(hostname)" = "$FAIL_HOST" ]; then sleep 1; exit 1; fi
    trap '' TERM; sleep 300
fi
"""
LAUNCHER = "#!/bin/sh\nfor a; do s=$a; done\nexec /bin/sh \"$s\"\n"


def last_start(out: Path, n: int, timeout: float = 60) -> float:
    deadline = time.time() + timeout
    while len(list(out.iterdir())) < n:
        if time.time() > deadline:
            raise SystemExit(f"only {len(list(out.iterdir()))}/{n} workers started")
        time.sleep(0.01)
    time.sleep(0.05)  # let the last writer finish its line
    return max(float(p.read_text().strip() or 0) for p in out.iterdir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--grace", type=float, default=2.0)
    args = parser.parse_args()
    require_root_linux()
    cleanup_leftovers()
    with tempfile.TemporaryDirectory(prefix="asct-bench-") as tmp, build_cluster(args.hosts, workdir=Path(tmp), wait_chrony=False) as cluster:
        root = Path(tmp)
        bin_dir = root / "venv" / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "torchrun").write_text(LAUNCHER)
        (bin_dir / "torchrun").chmod(0o755)
        (root / "work.sh").write_text(WORKER)
        inventory = cluster.write_inventory(root / "inv.yaml", defaults={"fanout": 64, "slots": 1, "python": str(bin_dir / "python")})
        env = {**os.environ, "XDG_STATE_HOME": str(root / "state")}
        _, pdsh_env = ssh_tools(cluster)
        ips = ",".join(h.ip for h in cluster.hosts)
        samples: dict[str, list[float]] = {"ascendctl --no-preflight": [], "ascendctl (preflight)": [], "pdsh": []}
        for run in range(args.runs + 1):  # the first round warms caches and is dropped
            for name in samples:
                out = root / f"out-{run}-{len(name)}"
                out.mkdir()
                job_env = ["--env", f"OUT={out}", "--env", "MODE=ok"]
                if name == "pdsh":
                    inv = load_inventory(inventory)
                    options = LaunchOptions("torchrun", (str(root / "work.sh"),), env=(f"OUT={out}", "MODE=ok"),
                                            log_dir=str(root / "pdsh-logs" / str(run)))
                    endpoints = {h.name: Endpoint(h.name, "eth0", h.ip, "eth0") for h in cluster.hosts}
                    plan = build_plan(inv, options, job_id=f"pdsh{run}", endpoints=endpoints)
                    # the same remote work as ascendctl's start: the payload (on ascendctl's stdin) decoded in place
                    by_host = " ".join(
                        f"{h.name}) printf %s {base64.b64encode(start_payload(p)).decode()} | base64 -d | {start_command(plan.job_id, p)};;"
                        for h, p in zip(cluster.hosts, plan.nodes))
                    argv = ["pdsh", "-f", "64", "-l", "root", "-w", ips, f"case $(hostname) in {by_host} esac"]
                    run_env = pdsh_env
                else:
                    flags = ["--no-preflight"] if "no-preflight" in name else []
                    argv = [*ASCENDCTL, "launch", "-i", str(inventory), "--launcher", "torchrun", "--log-dir",
                            str(root / "logs" / f"{run}-{len(name)}"), *flags, *job_env, "--", str(root / "work.sh")]
                    run_env = env
                started = time.time()
                proc = subprocess.Popen(argv, env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                ready = last_start(out, args.hosts)
                proc.wait(60)
                if proc.returncode != 0:
                    raise SystemExit(f"{name} failed ({proc.returncode}): {proc.stderr.read()[-2000:] if proc.stderr else ''}")
                if run:
                    samples[name].append(ready - started)
        med = {name: statistics.median(s) for name, s in samples.items()}
        print(f"{args.hosts} hosts, median of {args.runs}: time from command start to every worker running")
        for name, value in med.items():
            print(f"  {name:<26} {value:6.3f}s   ratio to pdsh {value / med['pdsh']:.2f}")

        # Teardown after one node fails.
        out = root / "out-fail"
        out.mkdir()
        fail_host = cluster.hosts[len(cluster.hosts) // 2].name
        argv = [*ASCENDCTL, "launch", "-i", str(inventory), "--launcher", "torchrun", "--no-preflight", "--grace", str(args.grace),
                "--log-dir", str(root / "logs" / "fail"), "--env", f"OUT={out}", "--env", "MODE=fail", "--env",
                f"FAIL_HOST={fail_host}", "--", str(root / "work.sh")]
        started = time.time()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        jobs_dir = root / "state" / "ascendctl" / "jobs"
        exit_file = root / "logs" / "fail" / fail_host / "exit_code"
        clean_at = None
        while proc.poll() is None or clean_at is None:
            if exit_file.exists():
                job_id = sorted(jobs_dir.glob("*.json"))[-1].stem
                left = marked(job_id)
                if not left and clean_at is None:
                    clean_at = time.time()
            if time.time() - started > 120:
                raise SystemExit("teardown did not finish in 120 s")
            time.sleep(0.02)
        done = time.time()
        record = json.loads(sorted(jobs_dir.glob("*.json"))[-1].read_text())
        failed_at = exit_file.stat().st_mtime
        print(f"teardown (grace {args.grace:g} s, target <= {args.grace + 2:g} s): exit {proc.returncode}, first failure "
              f"{record['first_failure']['node']}; every host clean {clean_at - failed_at:.2f}s after it failed, "
              f"ascendctl exited after {done - failed_at:.2f}s; {len(marked(record['id']))} processes of the job left; "
              f"signals: {sorted({n['signal'] for n in record['nodes'] if n['signal']})}")


def marked(job_id: str) -> list[str]:
    """Processes of the job on any host (the test hosts share one pid namespace)."""
    grep = f"grep -lzF {shlex.quote('ASCENDCTL_JOB=' + job_id + '/')} /proc/[0-9]*/environ"
    return subprocess.run(["sh", "-c", grep], capture_output=True, text=True).stdout.split()

if __name__ == "__main__":
    main()
