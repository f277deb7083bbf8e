"""`ascendctl triage` of real failures: jobs started with `ascendctl launch` on real test hosts fail,
`ascendctl collect JOB` gathers a real bundle, and `ascendctl triage --json` reads it back (no planted
logs, no mocks). Each test asserts the verdict's category, node and rank.

Jobs run as in tests/cluster/test_launch_hosts.py: the hosts share this machine's filesystem (the
venv's python, torchrun and msrun) and pid namespace. They also share its kernel, so every host's
`dmesg` shows every host's kernel messages; see the OOM test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cluster.harness import Cluster, HostSpec

JOBS = Path(__file__).resolve().parent.parent / "jobs"
ASCENDCTL = [sys.executable, "-m", "ascendctl"]
NO_KERNEL_LOG = "#!/bin/sh\nexit 0\n"  # a dmesg that shows nothing: this host's own kernel saw nothing


def hosts(n: int = 3, *, kernel_log: tuple[str, ...] = ()) -> list[HostSpec]:
    """The venv's python may live under /root (pyenv), so the hosts keep this machine's home.

    The hosts share this machine's kernel, whose log holds every test's kernel messages (an OOM kill
    of an earlier test would be in the next job's window). Each host gets its own quiet kernel: a
    dmesg that shows nothing, except the hosts in `kernel_log`, which keep the real one.
    """
    return [HostSpec(f"h{i:02d}", private_home=False, tools={} if f"h{i:02d}" in kernel_log else {"dmesg": NO_KERNEL_LOG})
            for i in range(1, n + 1)]


def inventory(cluster: Cluster, tmp_path: Path) -> Path:
    return cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 2, "python": sys.executable,
                                                                    "command_timeout": 60})


def start(inv: Path, tmp_path: Path, launcher: str, script: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`ascendctl launch` of a job on every host (2 workers each); `env` goes to the job through --env."""
    job_env = [f"--env={k}={v}" for k, v in {**env, "PYTHONUNBUFFERED": "1"}.items()]
    argv = [*ASCENDCTL, "launch", "-i", str(inv), "--launcher", launcher, "--log-dir", str(tmp_path / "logs"),
            "--grace", "3", "--cluster-timeout", "30", "--no-preflight", *job_env, "--", str(JOBS / script)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def launch(inv: Path, tmp_path: Path, launcher: str, script: str, env: dict[str, str]) -> str:
    """Run the job to its end; it must fail (exit 1) with h02 named as the node that failed first."""
    out, err = start(inv, tmp_path, launcher, script, env).communicate(timeout=120)
    assert "ascendctl: error: h02 (rank 3): failed first" in err, out[-3000:] + err[-3000:]
    return out + err


def collect_and_triage(inv: Path, tmp_path: Path, *since: str) -> dict[str, Any]:
    """`ascendctl collect last` into a bundle directory, then `ascendctl triage --json` of that bundle."""
    bundle = tmp_path / "bundle"
    result = subprocess.run([*ASCENDCTL, "collect", "last", "-i", str(inv), "-o", str(bundle), *since],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [n["status"] for n in manifest["nodes"]] == ["ok", "ok", "ok"]
    result = subprocess.run([*ASCENDCTL, "triage", "--json", str(bundle)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    (tmp_path / "triage.json").write_text(json.dumps(doc, indent=1))  # kept for debugging
    return doc


def brief(doc: dict[str, Any]) -> str:
    """The verdict and the findings, one line each, for assertion messages."""
    lines = [f"{doc['category']} {doc['first_failure']} -- {doc['reason']}"]
    lines += [f"  {f['category']} {f['signature']} {f['node']} rank {f['rank']} {f['time']}: {f['text'][:110]}"
              for f in doc["findings"]]
    return "\n".join(lines)


def verdict(doc: dict[str, Any]) -> tuple[str, str | None, int | None]:
    first = doc["first_failure"] or {}
    return str(doc["category"]), first.get("node"), first.get("rank")


def in_bundle(doc: dict[str, Any], tmp_path: Path, node: str) -> bool:
    """The first failure was read from this node's directory of the bundle."""
    return str(doc["first_failure"]["file"]).startswith(str(tmp_path / "bundle" / node) + "/")


def test_torchrun_rank_that_raises_first_is_named_and_the_other_ranks_are_its_victims(cluster_factory: Any,
                                                                                     tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    launch(inv, tmp_path, "torchrun", "allreduce_torch.py", {"JOB_TIMEOUT": "20", "JOB_FAIL_RANK": "3", "JOB_SLEEP": "2"})
    doc = collect_and_triage(inv, tmp_path)
    assert verdict(doc) == ("UNKNOWN", "h02", 3), brief(doc)
    assert doc["first_failure"]["text"] == "[rank3]: RuntimeError: rank 3 fails on purpose", brief(doc)
    assert in_bundle(doc, tmp_path, "h02") and "victims" in doc["reason"]
    # the ranks waiting in the all-reduce saw their peer go away: gloo errors on other ranks, h01 and h03 included
    victims = {(f["node"], f["rank"]) for f in doc["findings"] if f["category"] == "COMM_TIMEOUT"}
    assert {"h01", "h03"} <= {node for node, _ in victims} and ("h02", 3) not in victims, brief(doc)


def test_msrun_rank_that_raises_first_is_named_from_its_traceback(cluster_factory: Any,
                                                                  tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    launch(inv, tmp_path, "msrun", "allreduce_ms.py", {"GLOG_v": "3", "JOB_FAIL_RANK": "3", "JOB_SLEEP": "2"})
    doc = collect_and_triage(inv, tmp_path)
    assert verdict(doc) == ("UNKNOWN", "h02", 3), brief(doc)
    assert doc["first_failure"]["text"] == "RuntimeError: rank 3 fails on purpose" and in_bundle(doc, tmp_path, "h02"), brief(doc)
    # the worker's own log names it by its file name (msrun also copies that line into its launcher log)
    assert any(f["file"].endswith("/logs/h02/workers/worker_3.log") and (f["node"], f["rank"]) == ("h02", 3)
               for f in doc["findings"] if f["signature"] == "python.exception"), brief(doc)
    # the other ranks were stopped, not failed: no error of theirs is blamed
    raised = {(f["node"], f["rank"]) for f in doc["findings"] if f["signature"] == "python.exception"}
    assert raised <= {("h02", 3), ("h02", None)}, brief(doc)  # None: msrun's own "Distributed job exited" line


def test_torch_loss_going_nan_on_one_rank_is_named(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(hosts())
    inv = inventory(cluster, tmp_path)
    launch(inv, tmp_path, "torchrun", "nan_torch.py", {"JOB_TIMEOUT": "20", "JOB_NAN_RANK": "3"})
    doc = collect_and_triage(inv, tmp_path)
    assert verdict(doc) == ("NAN", "h02", 3), brief(doc)
    assert doc["first_failure"]["text"] == "rank 3: step 3 loss: nan" and in_bundle(doc, tmp_path, "h02"), brief(doc)
    assert doc["first_failure"]["line"] < min(f["line"] for f in doc["findings"] if f["signature"] == "loss.not_finite")
    # the healthy ranks logged finite losses up to the step where rank 3 stopped, then lost their peer
    assert {f["node"] for f in doc["findings"] if f["category"] == "COMM_TIMEOUT"} >= {"h01", "h03"}, brief(doc)
    assert not [f for f in doc["findings"] if f["category"] == "NAN" and f["rank"] != 3], brief(doc)


def memory_cgroup(name: str) -> Path:
    """A new cgroup v1 memory group under this process's own (the hosts see no cgroup fs: `ip netns exec`
    remounts /sys, so the test moves the pid from the root namespace)."""
    own = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
               if line.split(":", 2)[1] == "memory")
    group = Path("/sys/fs/cgroup/memory") / own.lstrip("/") / name
    group.mkdir()
    return group


def test_rank_killed_by_the_kernel_oom_killer_in_a_memory_cgroup_is_named(cluster_factory: Any, tmp_path: Path) -> None:
    # The hosts share one kernel. On a real cluster only h02's kernel would log h02's OOM kill,
    # so only h02 reads the real kernel log; h01's and h03's kernels saw nothing.
    cluster: Cluster = cluster_factory(hosts(kernel_log=("h02",)))
    assert "dmesg" in cluster.run_on("h02", ["sh", "-c", "command -v dmesg"]).stdout
    assert cluster.run_on("h02", ["dmesg", "-T"]).returncode == 0, "the kernel log is not readable here"
    inv = inventory(cluster, tmp_path)
    group = memory_cgroup(f"asct-oom-{os.getpid()}")
    go = tmp_path / "go"
    started = time.time()
    proc = start(inv, tmp_path, "torchrun", "oom_torch.py",
                 {"JOB_TIMEOUT": "20", "JOB_OOM_RANK": "3", "JOB_OOM_GO": str(go)})
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        # two workers writing at once can share one prefixed line: "[h02] rank 2/6 started pid 1rank 3/6 started pid 2"
        while (m := re.search(r"^\[h02\] .*?rank 3/6 started pid (\d+)", "\n".join(seen[-3:]), re.M)) is None:
            line = proc.stdout.readline()
            assert line and time.time() - started < 90, "\n".join(seen[-30:])
            seen.append(line.rstrip("\n"))
        pid = int(m.group(1))
        (group / "memory.limit_in_bytes").write_text(str(200 * 2**20))
        (group / "cgroup.procs").write_text(str(pid))  # already used memory stays charged where it was
        go.touch()
        out, err = proc.communicate(timeout=120)
        oom_control = (group / "memory.oom_control").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for _ in range(50):  # the killed rank may take a moment to leave the group
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    assert "ascendctl: error: h02 (rank 3): failed first" in err, "\n".join(seen) + out[-3000:] + err[-3000:]
    assert re.search(r"^oom_kill 1$", oom_control, re.M), oom_control  # the kernel OOM killer did it, once
    # the window starts at this launch, so an OOM kill of an earlier run is not in the bundle
    doc = collect_and_triage(inv, tmp_path, "--since", str(int(started) - 2))
    assert verdict(doc) == ("OOM", "h02", 3), brief(doc)
    assert in_bundle(doc, tmp_path, "h02") and f"{pid}" in doc["first_failure"]["text"], brief(doc)
    kernel = [f for f in doc["findings"] if f["signature"].startswith("kernel.oom")]
    assert kernel and {(f["node"], f["rank"]) for f in kernel} == {("h02", 3)}, brief(doc)
    # torchrun saw rank 3 die of SIGKILL
    assert any(f["signature"].startswith("torchrun.") and f["rank"] == 3 and "exitcode -9" in f["text"]
               for f in doc["findings"]), brief(doc)
