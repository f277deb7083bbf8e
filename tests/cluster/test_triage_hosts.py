"""Triage of real failures: jobs started with `ascendctl launch` on real test hosts fail, `ascendctl collect`
gathers a real bundle, `ascendctl triage --json` reads it back (no planted logs, no mocks).

Each case asserts the category, the culprit node and rank (or that there is no single culprit), the
rule that decided, the victims, and that `launch`'s own failure summary says the same: one engine.

Jobs run as in tests/cluster/test_launch_hosts.py: the hosts share this machine's filesystem (the
venv's python, torchrun and msrun) and pid namespace. They also share its kernel, so every host's
`dmesg` shows every host's kernel messages; see `hosts()`. Verdicts are written to
$TRIAGE_STRESS_OUT/<test>.json when set (bench/triage_stress.py compares them across runs).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.harness import Cluster, HostSpec
from tests.cluster.test_launch_hosts import job_processes, last_job

JOBS = Path(__file__).resolve().parent.parent / "jobs"
ASCENDCTL = [sys.executable, "-m", "ascendctl"]
NO_KERNEL_LOG = "#!/bin/sh\nexit 0\n"  # a dmesg that shows nothing: this host's own kernel saw nothing


def hosts(n: int = 3, *, kernel_log: tuple[str, ...] = (), **spec: Any) -> list[HostSpec]:
    """The venv's python may live under /root (pyenv), so the hosts keep this machine's home.

    The hosts share this machine's kernel, whose log holds every test's kernel messages (an OOM kill
    of an earlier test would be in the next job's window). Each host gets its own quiet kernel: a
    dmesg that shows nothing, except the hosts in `kernel_log`, which keep the real one.
    """
    return [HostSpec(f"h{i:02d}", private_home=False, tools={} if f"h{i:02d}" in kernel_log else {"dmesg": NO_KERNEL_LOG},
                     **spec) for i in range(1, n + 1)]


def inventory(cluster: Cluster, tmp_path: Path) -> Path:
    return cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 2, "python": sys.executable,
                                                                    "command_timeout": 60})


def start(inv: Path, tmp_path: Path, launcher: str, script: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`ascendctl launch` of a job on every host (2 workers each); `env` goes to the job through --env."""
    job_env = [f"--env={k}={v}" for k, v in {**env, "PYTHONUNBUFFERED": "1"}.items()]
    argv = [*ASCENDCTL, "launch", "-i", str(inv), "--launcher", launcher, "--log-dir", str(tmp_path / "logs"),
            "--grace", "3", "--cluster-timeout", "30", "--no-preflight", *job_env, "--", str(JOBS / script)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@dataclass
class Case:
    """One real failure: what launch said, its job record, and triage's document of the collected bundle."""

    out: str
    err: str
    job: dict[str, Any]
    doc: dict[str, Any]

    def brief(self) -> str:
        """The verdicts and the findings, one line each, for assertion messages."""
        doc = self.doc
        lines = [f"triage: {doc['category']} {doc['first_failure']} -- {doc['reason']} [{doc['culprit_reason']}]",
                 f"launch: {self.job.get('first_failure')}"]
        lines += [f"  {f['category']} {f['signature']} {f['node']} rank {f['rank']} {f['time']}: {f['text'][:110]}"
                  for f in doc["findings"]]
        return "\n".join(lines) + "\n" + self.err[-2000:]


def collect_and_triage(inv: Path, tmp_path: Path, *since: str) -> dict[str, Any]:
    """`ascendctl collect last` into a bundle directory, then `ascendctl triage --json` of that bundle."""
    bundle = tmp_path / "bundle"
    result = subprocess.run([*ASCENDCTL, "collect", "last", "-i", str(inv), "-o", str(bundle), *since],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert {n["status"] for n in manifest["nodes"]} == {"ok"}
    result = subprocess.run([*ASCENDCTL, "triage", "--json", str(bundle)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    (tmp_path / "triage.json").write_text(json.dumps(doc, indent=1))  # kept for debugging
    return doc


def run_case(cluster: Cluster, tmp_path: Path, script: str, env: dict[str, str], *, launcher: str = "torchrun",
             timeout: float = 150) -> Case:
    """Launch the job to its end (it must fail: exit 5, the job ran and failed), collect it, triage it."""
    inv = inventory(cluster, tmp_path)
    started = time.time()
    proc = start(inv, tmp_path, launcher, script, env)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 5, out[-3000:] + err[-3000:]  # the job ran and failed
    job = last_job()
    assert job["status"] == "failed"
    assert job_processes(cluster, script) == [], "the job left processes behind"
    case = Case(out, err, job, collect_and_triage(inv, tmp_path, "--since", str(int(started) - 2)))
    record(case)
    return case


def record(case: Case) -> None:
    target = os.environ.get("TRIAGE_STRESS_OUT")
    if target:
        test = os.environ.get("PYTEST_CURRENT_TEST", "case").split(" ")[0].rsplit("::", 1)[-1]
        Path(target).mkdir(parents=True, exist_ok=True)
        ff = case.doc["first_failure"] or {}
        summary = {"category": case.doc["category"], "node": ff.get("node"), "rank": ff.get("rank"),
                   "rule": case.doc["culprit_reason"],
                   "launch": {k: (case.job.get("first_failure") or {}).get(k) for k in ("category", "node", "rank", "rule")}}
        with open(Path(target) / f"{test}.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(summary) + "\n")


def verdict(case: Case) -> tuple[str, str | None, int | None]:
    first = case.doc["first_failure"] or {}
    return str(case.doc["category"]), first.get("node"), first.get("rank")


def launch_verdict(case: Case) -> tuple[str, str | None, int | None]:
    first = case.job["first_failure"] or {}
    return str(first.get("category")), first.get("node"), first.get("rank")


def victims(case: Case) -> set[tuple[str | None, int | None]]:
    return {(v["node"], v["rank"]) for v in case.doc["victims"]}


def agree(case: Case) -> None:
    """launch's failure summary and triage of the bundle give the same answer (same engine, same facts)."""
    assert launch_verdict(case) == verdict(case), case.brief()
    assert case.job["first_failure"]["rule"] == case.doc["culprit_reason"], case.brief()


def in_bundle(case: Case, tmp_path: Path, node: str) -> bool:
    """The first failure was read from this node's directory of the bundle."""
    return str(case.doc["first_failure"]["file"]).startswith(str(tmp_path / "bundle" / node) + "/")


def others(culprit_node: str, culprit_rank: int) -> set[tuple[str, int]]:
    """Every other rank of the 3 x 2 job."""
    return {(f"h{n + 1:02d}", 2 * n + i) for n in range(3) for i in range(2)} - {(culprit_node, culprit_rank)}


# ---------------------------------------------------------------------------------------------- torchrun


def test_rank_that_exits_7_without_a_traceback_is_named_not_its_victims(cluster_factory: Any, tmp_path: Path) -> None:
    # The issue's case: every other rank dies of `Connection closed by peer [<h02's address>]`, and torchrun's
    # Root Cause blocks name victims; rank 3 printed nothing, only its exit code 7 in torchrun's Failures block.
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "20", "JOB_FAULT": "exit", "JOB_FAULT_RANK": "3"})
    assert verdict(case) == ("EXCEPTION", "h02", 3), case.brief()
    assert case.doc["culprit_reason"] == "bad_exit" and "exited with code 7" in case.doc["reason"], case.brief()
    assert case.doc["first_failure"]["text"].startswith("torchrun "), case.brief()
    assert victims(case) == others("h02", 3), case.brief()
    assert "h02 (rank 3): failed first: EXCEPTION: " in case.err, case.err
    agree(case)


def test_rank_that_raises_mid_training_is_named_and_the_others_are_its_victims(cluster_factory: Any, tmp_path: Path) -> None:
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "20", "JOB_FAULT": "raise", "JOB_FAULT_RANK": "3"})
    assert verdict(case) == ("EXCEPTION", "h02", 3), case.brief()
    # high, or medium when a victim's error reached the shared launcher log in the same stamp just before the exception
    # (two processes' output interleaves as it comes: a loaded machine's three-lane run saw it once)
    assert case.doc["culprit_reason"] == "own_error" and case.doc["confidence"] in ("high", "medium"), case.brief()
    assert case.doc["first_failure"]["text"].endswith("RuntimeError: rank 3: bad batch at step 2"), case.brief()
    assert in_bundle(case, tmp_path, "h02")
    # every rank named a victim is another rank; a rank the teardown stopped before it logged its own error names no
    # error and is not listed (a loaded clean-clone run: rank 5 on h03 stopped 2 s after the exception, silent)
    assert victims(case) <= others("h02", 3) and len(victims(case)) >= 2, case.brief()
    ranks = {(r["node"], r["rank"]): r for r in case.doc["ranks"]}
    assert ranks[("h02", 3)]["role"] == "culprit" and ranks[("h01", 0)]["role"] == "victim", case.brief()
    agree(case)


def test_rank_that_hangs_is_named_although_it_never_errs(cluster_factory: Any, tmp_path: Path) -> None:
    # rank 4 stops calling collectives at step 2; every other rank times out in the all-reduce after 8 s
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "8", "JOB_FAULT": "hang", "JOB_FAULT_RANK": "4"})
    assert verdict(case) == ("COMM_TIMEOUT", "h03", 4), case.brief()
    assert case.doc["culprit_reason"] == "hang" and "timed out waiting" in case.doc["reason"], case.brief()
    assert (("h03", 4) not in victims(case)) and {("h01", 0), ("h02", 2)} <= victims(case), case.brief()
    agree(case)


def test_rank_0_busy_saving_while_the_others_wait_in_the_all_reduce_is_named(cluster_factory: Any, tmp_path: Path) -> None:
    # issue #26: rank 0 (where a trainer saves its checkpoint) stops calling collectives at step 2 and logs nothing, as
    # a rank writing a checkpoint does; the five others time out in the all-reduce. Rank 0 hosts nothing torchrun's
    # agent does not (the store is the agent's), so it is named as the rank that did not come, not as a store victim.
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "8", "JOB_FAULT": "hang", "JOB_FAULT_RANK": "0"})
    assert verdict(case) == ("COMM_TIMEOUT", "h01", 0), case.brief()
    agree(case)


def test_rank_that_stalls_before_a_monitored_barrier_is_the_one_rank_0_names(cluster_factory: Any, tmp_path: Path) -> None:
    # issue #26: as above, with dist.monitored_barrier before each all-reduce: rank 0 (the monitor) says "Rank 4 failed
    # to pass monitoredBarrier"; the other ranks' errors name rank 0 only as where to look, and must not make it the culprit
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "8", "JOB_FAULT": "hang", "JOB_FAULT_RANK": "4", "JOB_MONITORED": "1"})
    assert verdict(case) == ("COMM_TIMEOUT", "h03", 4), case.brief()
    assert case.doc["culprit_reason"] == "absent_named" and "failed to pass" in case.doc["reason"], case.brief()
    agree(case)


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
    assert cluster.run_on("h02", ["dmesg", "-T"]).returncode == 0, "the kernel log is not readable here"
    inv = inventory(cluster, tmp_path)
    group = memory_cgroup(f"asct-oom-{os.getpid()}")
    go = tmp_path / "go"
    started = time.time()
    proc = start(inv, tmp_path, "torchrun", "oom_torch.py", {"JOB_TIMEOUT": "20", "JOB_OOM_RANK": "3", "JOB_OOM_GO": str(go)})
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        # two workers writing at once can share one prefixed line
        while (m := re.search(r"rank 3/6 started pid (\d+)", "\n".join(seen[-3:]))) is None:
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
    assert re.search(r"^oom_kill 1$", oom_control, re.M), oom_control  # the kernel OOM killer did it, once
    job = last_job()
    # launch saw rank 3 die of SIGKILL with nothing of its own: host memory, named without the kernel log
    assert "h02 (rank 3): failed first: OOM: " in err, out[-3000:] + err[-3000:]
    # the window starts at this launch, so an OOM kill of an earlier run is not in the bundle
    case = Case(out, err, job, collect_and_triage(inv, tmp_path, "--since", str(int(started) - 2)))
    record(case)
    assert verdict(case) == ("OOM", "h02", 3), case.brief()
    assert case.doc["oom_kind"] == "host" and case.doc["culprit_reason"] == "own_error", case.brief()
    assert in_bundle(case, tmp_path, "h02") and f"{pid}" in case.doc["first_failure"]["text"], case.brief()
    kernel = [f for f in case.doc["findings"] if f["signature"].startswith("kernel.oom")]
    assert kernel and {f["node"] for f in kernel} == {"h02"}, case.brief()
    # the lines naming the killed pid are joined to rank 3; "python invoked oom-killer" names no pid
    assert {f["rank"] for f in kernel if f["signature"] != "kernel.oom_invoked"} == {3}, case.brief()
    # the bundle has the kernel's word, launch only the SIGKILL: same culprit, same category
    assert launch_verdict(case) == verdict(case), case.brief()


def test_rank_killed_by_sigkill_with_no_message_is_named_not_its_victims(cluster_factory: Any, tmp_path: Path) -> None:
    # issue #26: rank 3 dies of SIGKILL at step 2 and says nothing (no kernel log either: not an OOM kill here); the
    # others lose their peer in the all-reduce. Only torchrun's exit report says what happened to it.
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "20", "JOB_FAULT": "kill", "JOB_FAULT_RANK": "3"})
    assert verdict(case) == ("OOM", "h02", 3), case.brief()  # the usual sender of a bare SIGKILL: the OOM killer
    assert "SIGKILL" in case.doc["reason"] and case.doc["confidence"] != "high", case.brief()
    assert ("h02", 3) not in victims(case) and victims(case) <= others("h02", 3), case.brief()
    agree(case)


def test_nan_on_every_rank_at_the_same_step_has_no_single_culprit(cluster_factory: Any, tmp_path: Path) -> None:
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py", {"JOB_TIMEOUT": "20", "JOB_FAULT": "nan",
                                                                              "JOB_FAULT_STEP": "3"})
    assert verdict(case) == ("NAN", None, None) and case.doc["single_culprit"] is False, case.brief()
    assert case.doc["culprit_reason"] == "nan_everywhere", case.brief()
    assert any("loss scale" in h for h in case.doc["hints"]), case.brief()
    assert "failed: NAN, no single culprit" in case.err, case.err
    agree(case)


def test_mtu_black_hole_on_the_data_path_has_no_single_culprit_and_points_at_the_network(cluster_factory: Any,
                                                                                        tmp_path: Path) -> None:
    # Every host has MTU 9000, but the switch (the bridge ports) passes nothing above 1500 bytes: connection
    # setup and small messages pass, full-size frames vanish without an ICMP error. A bridge port's MTU alone
    # does not stop TCP here (segmentation offload hands it 64 KB super-frames), so each port also gets a
    # token-bucket qdisc whose bucket holds 1600 bytes: the kernel drops every larger frame, as a switch would.
    # The first all-reduce of 1 MB stalls on every rank until the gloo timeout.
    cluster = cluster_factory(hosts(mtu=9000, bridge_mtu=1500))
    for host in cluster.hosts:
        subprocess.run(["tc", "qdisc", "add", "dev", host.veth, "root", "tbf", "rate", "1gbit", "burst", "1600",
                        "latency", "100ms"], check=True)
    case = run_case(cluster, tmp_path, "faults_torch.py", {"JOB_TIMEOUT": "8", "JOB_NUMEL": str(256 * 1024)})
    assert verdict(case) == ("COMM_TIMEOUT", None, None) and case.doc["single_culprit"] is False, case.brief()
    assert case.doc["culprit_reason"] == "everyone_timed_out", case.brief()
    assert any("MTU" in h for h in case.doc["hints"]), case.brief()
    agree(case)


def test_module_missing_on_one_node_is_a_launch_failure_there(cluster_factory: Any, tmp_path: Path) -> None:
    dep = tmp_path / "dep"
    dep.mkdir()
    (dep / "asct_dep.py").write_text("VALUE = 1\n")
    specs = [HostSpec(f"h{i:02d}", private_home=False, tools={"dmesg": NO_KERNEL_LOG},
                      env={} if i == 2 else {"PYTHONPATH": str(dep)}) for i in range(1, 4)]
    case = run_case(cluster_factory(specs), tmp_path, "faults_torch.py", {"JOB_TIMEOUT": "20", "JOB_FAULT": "import"})
    category, node, rank = verdict(case)
    # both ranks of h02 fail at once with the same error: the node is named, no rank of it went first
    assert (category, node) == ("LAUNCH", "h02") and rank in (2, 3, None), case.brief()
    assert "No module named 'asct_dep'" in case.doc["first_failure"]["text"], case.brief()
    assert not any(v["node"] == "h02" for v in case.doc["victims"] if v["rank"] is not None and "communication" in v["how"])
    agree(case)


def test_arguments_the_script_rejects_on_every_rank_are_the_launch_not_a_rank(cluster_factory: Any, tmp_path: Path) -> None:
    """Every rank's own argument parsing raises (a ValueError in parse_args, not argparse's usage error): the job's
    arguments, no rank or node went first."""
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "20", "JOB_FAULT": "args", "JOB_ARGS": "--steps=5 --use_fused_rmsnorm"})
    assert verdict(case) == ("LAUNCH", None, None), case.brief()
    assert "remaining_argv" in str(case.doc["findings"]), case.brief()
    agree(case)


def test_an_npu_fault_event_in_one_nodes_device_log_is_named_from_the_bundle(cluster_factory: Any, tmp_path: Path) -> None:
    """Rank 3's device reports an HBM multi-bit ECC error in h02's device log and the rank dies without a word: launch
    sees only its exit; collect brings the node's device log and triage names that node's hardware, with the cause
    MindCluster's knowledge base gives the event."""
    event_log = "/var/log/npu/slog/dev-os-1/run/event/event_0.log"  # every host's own (rank 3 is h02's device 1)
    case = run_case(cluster_factory(hosts(files={event_log: ""})), tmp_path, "faults_torch.py",
                    {"JOB_TIMEOUT": "20", "JOB_FAULT": "npu_event", "JOB_FAULT_RANK": "3", "JOB_EVENT_LOG": event_log})
    assert launch_verdict(case) == ("EXCEPTION", "h02", 3), case.brief()
    assert verdict(case)[:2] == ("HARDWARE", "h02"), case.brief()
    assert case.doc["first_failure"]["signature"] == "npu.event.hardware" and in_bundle(case, tmp_path, "h02"), case.brief()
    assert "Multi-bit ECC errors when accessing the HBM" in case.doc["reason"], case.brief()


# ---------------------------------------------------------------------------------------------- msrun


def test_msrun_rank_that_raises_is_named(cluster_factory: Any, tmp_path: Path) -> None:
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_ms.py", {"GLOG_v": "2", "JOB_FAULT": "raise",
                                                                          "JOB_FAULT_RANK": "3"}, launcher="msrun")
    assert verdict(case) == ("EXCEPTION", "h02", 3), case.brief()
    assert case.doc["first_failure"]["text"].endswith("RuntimeError: rank 3: bad batch") and in_bundle(case, tmp_path, "h02")
    agree(case)


def test_msrun_rank_that_exits_7_without_a_message_is_named(cluster_factory: Any, tmp_path: Path) -> None:
    # msrun's scheduler then names another rank "the first one timed out": a victim its launcher killed
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_ms.py", {"GLOG_v": "2", "JOB_FAULT": "exit",
                                                                          "JOB_FAULT_RANK": "3"}, launcher="msrun")
    assert verdict(case) == ("EXCEPTION", "h02", 3), case.brief()
    assert "exited with code 7" in case.doc["reason"], case.brief()
    agree(case)


def test_msrun_rank_frozen_is_the_node_the_scheduler_saw_time_out(cluster_factory: Any, tmp_path: Path) -> None:
    # issue #26: rank 3 stops (SIGSTOP) after init: no error, no output, no heartbeat. msrun's scheduler (h01's
    # workers/scheduler.log) says "The node: 3 is timed out" and aborts the cluster; the others' AllReduce kernels fail
    # ("Launch kernel failed, name:Default/AllReduce-op0": victims, not their own error). Rank 3's node comes from
    # h02's msrun line "Start worker process with rank id:3".
    case = run_case(cluster_factory(hosts()), tmp_path, "faults_ms.py", {"GLOG_v": "2", "JOB_FAULT": "freeze",
                                                                          "JOB_FAULT_RANK": "3", "MS_NODE_TIMEOUT": "15"},
                    launcher="msrun", timeout=240)
    assert verdict(case) == ("COMM_TIMEOUT", "h02", 3), case.brief()
    assert case.doc["culprit_reason"] == "absent_named" and "msrun's scheduler" in case.doc["reason"], case.brief()
    assert "The node: 3 is timed out" in case.doc["first_failure"]["text"] and in_bundle(case, tmp_path, "h01")
    assert ("h02", 3) not in victims(case), case.brief()
    # the scheduler's own log is on h01's disk, never printed unless msrun on h01 outlives the teardown: launch reads
    # it once the job is down (LauncherSpec.master_logs) and agrees
    agree(case)


def test_launcher_missing_on_one_node_is_a_launch_failure_there_not_on_the_first_node(cluster_factory: Any,
                                                                                       tmp_path: Path) -> None:
    # h02's python is the system's, next to which there is no torchrun: its launcher exits 127 at once
    cluster: Cluster = cluster_factory(hosts(2))
    inv = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"slots": 2, "python": sys.executable, "command_timeout": 60},
                                  nodes_extra={"h02": {"python": "/usr/bin/python3"}})
    proc = start(inv, tmp_path, "torchrun", "faults_torch.py", {"JOB_TIMEOUT": "20"})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5, out[-3000:] + err[-3000:]  # the job ran and failed
    job = last_job()
    assert [n["exit_code"] for n in job["nodes"]][1] == 127, job["nodes"]
    case = Case(out, err, job, collect_and_triage(inv, tmp_path))
    record(case)
    category, node, _ = verdict(case)
    assert (category, node) == ("LAUNCH", "h02"), case.brief()
    assert "h02: failed first: LAUNCH: " in err or "h02 (rank" in err, err
    agree(case)
