"""The blame engine: one test per culprit rule, the facts it reads (launcher reports, job records, peers, progress,
stamps, time forms), and `launch`'s live feed agreeing with `triage` on the same lines.

Lines are in the formats the real tools print (torchrun/torch elastic, gloo, NCCL, HCCL, msrun/MindSpore, kernel);
tests/cluster/test_triage_hosts.py reads the same kinds of failures from real jobs on real test hosts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendctl.triage.signatures import Category
from ascendctl.triage import LiveTriage, parse_time, split_stamp, triage
from ascendctl.triage.engine import RULES


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def stamp(second: float, line: str) -> str:
    """A launcher-log line as `ascendctl launch` writes it on the node."""
    return f"2026-11-23T10:00:{second:09.6f} | {line}"


def gloo_closed(local: int, rank: int, peer: str) -> str:
    return (f"[default{local}]:[rank{rank}]:[rank{rank}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
            f"pair.cc:553] Connection closed by peer [{peer}]:40123. This is typically caused by a remote worker crashing.")


def gloo_timeout(local: int, rank: int) -> str:
    return (f"[default{local}]:[rank{rank}]:[rank{rank}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
            "unbound_buffer.cc:81] Timed out waiting 8000ms for recv operation to complete")


def failures_block(host: str, entries: list[tuple[int, int, int, int, str]], root: tuple[int, int, int, int, str]) -> list[str]:
    """torchrun's ChildFailedError report: (rank, local rank, exit code, pid, traceback) per failed worker."""
    def entry(index: int, e: tuple[int, int, int, int, str]) -> list[str]:
        rank, local, code, pid, tb = e
        return [f"[{index}]:", "  time      : 2026-11-23_10:00:05", f"  host      : {host}",
                f"  rank      : {rank} (local_rank: {local})", f"  exitcode  : {code} (pid: {pid})", "  error_file: <N/A>",
                f"  traceback : {tb}"]
    lines = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 60, "train.py FAILED", "-" * 60,
             "Failures:"]
    for i, e in enumerate(entries, 1):
        lines += entry(i, e)
    lines += ["-" * 60, "Root Cause (first observed failure):", *entry(0, root), "=" * 60]
    return lines


SIGTERM = "Signal 15 (SIGTERM) received by PID"
NO_TB = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"


def job_record(nodes: int = 3, workers: int = 2, **node_extra: dict[str, object]) -> dict[str, object]:
    entries = []
    for i in range(nodes):
        name = f"h{i + 1:02d}"
        entries.append({"name": name, "host": f"10.0.0.{11 + i}", "rank": i, "workers": workers, "first_rank": i * workers,
                        "address": f"192.168.0.{11 + i}", "env": {"HCCL_IF_IP": f"192.168.0.{11 + i}"},
                        **node_extra.get(name, {})})
    return {"id": "j1", "launcher": "torchrun", "nodes": entries}


def exit_without_traceback_bundle(root: Path) -> None:
    """The issue's case: rank 3 (h02, local 1) calls sys.exit(7); every other rank loses its peer at h02's address."""
    write(root / "job.json", [json.dumps(job_record())])
    write(root / "h01" / "launcher.log", [
        stamp(1.0, "[default0]:[rank0]:rank 0: step 1 loss: 0.7353"),
        stamp(4.8, gloo_closed(0, 0, "192.168.0.12")),
        stamp(4.9, gloo_closed(1, 1, "192.168.0.12")),
        *(stamp(5.5, line) for line in failures_block("h01", [(1, 1, 1, 301, NO_TB)], (0, 0, 1, 300, NO_TB))),
    ])
    write(root / "h02" / "launcher.log", [
        stamp(1.0, "[default0]:[rank2]:rank 2: step 1 loss: 0.7353"),
        stamp(4.9, gloo_closed(0, 2, "192.168.0.12")),
        stamp(5.0, "W1123 10:00:05.001000 200 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 302 "
                   "closing signal SIGTERM"),
        # torchrun's Root Cause names rank 2 (a victim); rank 3 is only in the Failures block, exit code 7
        *(stamp(5.5, line) for line in failures_block("h02", [(3, 1, 7, 303, NO_TB)], (2, 0, -15, 302, f"{SIGTERM} 302"))),
    ])
    write(root / "h03" / "launcher.log", [
        stamp(4.85, gloo_closed(0, 4, "192.168.0.12")),
        stamp(4.95, gloo_closed(1, 5, "192.168.0.12")),
    ])


def test_rank_exiting_7_without_a_traceback_is_the_culprit_not_the_rank_torchrun_blames(tmp_path: Path) -> None:
    exit_without_traceback_bundle(tmp_path / "b")
    report = triage([tmp_path / "b"])
    assert report.category is Category.EXCEPTION and report.rule == "bad_exit"
    assert report.first_failure is not None and (report.first_failure.node, report.first_failure.rank) == ("h02", 3)
    assert "exited with code 7" in report.reason and "point at it" in report.reason
    assert report.confidence == "high"
    assert {(v.node, v.rank) for v in report.victims} == {("h01", 0), ("h01", 1), ("h02", 2), ("h03", 4), ("h03", 5)}
    assert report.launcher_blamed is not None and "rank 2" in report.launcher_blamed
    ranks = {(r.node, r.rank): r for r in report.ranks}
    assert ranks[("h01", 0)].peer == "node h02" and ranks[("h02", 3)].role == "culprit" and ranks[("h02", 3)].exit_code == 7
    doc = report.to_dict()
    assert {"culprit_reason", "confidence", "victims", "ranks", "single_culprit", "oom_kind"} <= set(doc)
    assert doc["culprit_reason"] == "bad_exit"


def test_launch_live_feed_gives_the_same_verdict_as_triage_of_the_same_logs(tmp_path: Path) -> None:
    exit_without_traceback_bundle(tmp_path / "b")
    live = LiveTriage()
    for node in ("h01", "h02", "h03"):
        for line in (tmp_path / "b" / node / "launcher.log").read_text().splitlines():
            live.line(node, line)
    got = live.report(job_record())
    want = triage([tmp_path / "b"])
    assert (got.category, got.rule, got.culprit_node, got.culprit_rank) == (want.category, want.rule, want.culprit_node,
                                                                             want.culprit_rank)
    assert {(v.node, v.rank) for v in got.victims} == {(v.node, v.rank) for v in want.victims}


def test_own_error_beats_earlier_looking_timeouts_of_other_ranks_and_consequences_on_the_same_rank(tmp_path: Path) -> None:
    root = tmp_path / "b"
    write(root / "n1" / "rank0.log", [
        "[rank0]:[E1123 10:00:10.000000 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
        # what a watchdog timeout does next: a crash that is its consequence, not its cause
        "[rank0]:[E1123 10:00:11.000000] Fatal Python error: Aborted",
    ])
    write(root / "n2" / "rank1.log", [
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total capacity) "
        "2026-11-23 10:00:30,000",
    ])
    report = triage([root])
    assert report.category is Category.OOM and report.oom_kind == "device"
    assert report.first_failure is not None and report.first_failure.rank == 1 and report.rule == "own_error"
    ranks = {r.rank: r for r in report.ranks}
    assert ranks[0].role == "victim" and ranks[0].first_error is not None  # the crash is listed, as a consequence


def test_hang_the_rank_whose_progress_stopped_first_while_the_others_timed_out(tmp_path: Path) -> None:
    root = tmp_path / "b"
    for rank in range(4):
        lines = [f"rank {rank}: step {s} loss: 0.5" for s in range(1, 12 if rank != 2 else 11)]
        if rank != 2:
            lines.append(gloo_timeout(0, rank).replace("[default0]:", ""))
        write(root / f"n{rank}" / f"rank{rank}.log", lines)
    report = triage([root])
    assert report.category is Category.COMM_TIMEOUT and report.rule == "hang"
    assert report.first_failure is not None and report.first_failure.rank == 2
    assert "step 10" in report.reason and "step 11" in report.reason


def test_hang_without_progress_names_the_one_rank_that_did_not_time_out(tmp_path: Path) -> None:
    root = tmp_path / "b"
    write(root / "job.json", [json.dumps(job_record(nodes=2, workers=2))])
    write(root / "h01" / "launcher.log", [gloo_timeout(0, 0), gloo_timeout(1, 1)])
    write(root / "h02" / "launcher.log", [
        gloo_timeout(0, 2),
        "W1123 10:00:05.001000 200 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 303 closing signal SIGTERM",
        *failures_block("h02", [(3, 1, -15, 303, f"{SIGTERM} 303")], (2, 0, 1, 302, NO_TB)),
    ])
    report = triage([root])
    assert report.rule == "hang" and report.first_failure is not None and (report.culprit_node, report.culprit_rank) == ("h02", 3)


def test_every_rank_timing_out_together_has_no_single_culprit_and_network_hints(tmp_path: Path) -> None:
    root = tmp_path / "b"
    write(root / "job.json", [json.dumps(job_record())])
    for n in range(3):
        write(root / f"h{n + 1:02d}" / "launcher.log", [stamp(9.0 + n / 10, gloo_timeout(i, 2 * n + i)) for i in range(2)])
    report = triage([root])
    assert report.category is Category.COMM_TIMEOUT and report.first_failure is None and not report.single_culprit
    assert report.rule == "everyone_timed_out" and report.headline() == "COMM_TIMEOUT, no single culprit"
    assert any("MTU" in h for h in report.hints)
    assert len(report.victims) == 6


def test_nan_on_every_rank_at_one_step_has_no_single_culprit_but_nan_on_one_rank_first_names_it(tmp_path: Path) -> None:
    everywhere = tmp_path / "all"
    for rank in range(4):
        write(everywhere / f"n{rank}" / "train.log", [f"rank {rank}: step 7 loss: nan"])
    report = triage([everywhere])
    assert (report.category, report.first_failure, report.rule) == (Category.NAN, None, "nan_everywhere")
    first = tmp_path / "one"
    write(first / "n0" / "train.log", ["[rank0]: iteration 6 | lm loss: 1.2 ", "[rank0]: iteration 7 | lm loss: nan"])
    write(first / "n1" / "train.log", ["[rank1]: iteration 8 | lm loss: nan"])
    report = triage([first])
    assert report.category is Category.NAN and report.culprit_rank == 0 and report.rule == "own_error"


# each emitter's own line for one halving (tests/test_triage_upstream_messages.py cites them): DeepSpeed's ZeRO optimizer,
# DeepSpeed's fused/unfused fp16 optimizer, Colossal-AI's dynamic grad scaler
HALVING_LINES = ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {half}",
                 "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Reducing dynamic loss scale from {scale} to {half}",
                 "Overflow occurs, the loss scale is adjusted to {half}.")


@pytest.mark.parametrize("form", HALVING_LINES)
def test_a_loss_scale_halved_at_every_step_is_a_nan_failure_a_few_halvings_are_not(tmp_path: Path, form: str) -> None:
    def halvings(n: int) -> list[str]:
        scale = 65536
        lines = []
        for _ in range(n):
            lines.append(form.format(scale=scale, half=scale // 2))
            scale //= 2
        return lines
    write(tmp_path / "collapse" / "rank0.log", halvings(9))
    report = triage([tmp_path / "collapse"])
    assert report.category is Category.NAN and report.first_failure is not None
    assert report.first_failure.signature == "fp16.loss_scale_collapse" and "halved 9 times" in report.first_failure.text
    write(tmp_path / "normal" / "rank0.log", halvings(3))
    report = triage([tmp_path / "normal"])
    assert report.first_failure is None and report.category is Category.UNKNOWN


def test_a_job_stopped_from_outside_has_no_culprit(tmp_path: Path) -> None:
    write(tmp_path / "torchrun.log", [
        "W1123 10:00:05.000000 100 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, "
        "shutting down workers",
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 100 got signal: 15",
    ])
    report = triage([tmp_path / "torchrun.log"])
    assert report.category is Category.UNKNOWN and report.first_failure is None and report.rule == "stopped_first"


def test_a_launcher_exiting_127_on_one_node_is_a_launch_failure_there_whatever_the_order_of_the_logs(tmp_path: Path) -> None:
    root = tmp_path / "b"
    write(root / "job.json", [json.dumps(job_record(nodes=2, h01={"exit_code": 1, "ended": 1790000010.0, "signal": "SIGTERM"},
                                                    h02={"exit_code": 127, "ended": 1790000001.0}))])
    write(root / "h01" / "launcher.log", ["[default0]:[rank0]:rank 0/4 started"])
    write(root / "h02" / "launcher.log", ["sh: 1: torchrun: not found"])
    report = triage([root])
    assert report.category is Category.LAUNCH and report.culprit_node == "h02"


def test_a_rank_killed_with_sigkill_and_no_kernel_record_is_host_memory_with_low_confidence(tmp_path: Path) -> None:
    write(tmp_path / "n1" / "torchrun.log", failures_block("n1", [(1, 1, -15, 11, f"{SIGTERM} 11")],
                                                          (0, 0, -9, 10, "Signal 9 (SIGKILL) received by PID 10")))
    report = triage([tmp_path])
    assert report.category is Category.OOM and report.oom_kind == "host" and report.culprit_rank == 0
    assert report.confidence == "low" and any("OOM killer" in h for h in report.hints)


def test_msrun_worker_exit_is_joined_to_its_rank_by_pid_and_the_schedulers_timed_out_node_is_not_blamed(tmp_path: Path) -> None:
    write(tmp_path / "n1" / "launcher.log", [
        "[WARNING] DISTRIBUTED(3202,7f1bd7430b80,python):2026-11-23-15:36:17.734.780 [mindspore/ccsrc/cluster/topology/"
        "cluster_context.cc:428] PostProcess] This node 1 rank id: 1",
        "[WARNING] DISTRIBUTED(3200,7fb9ba400b80,python):2026-11-23-15:36:16.098.209 [mindspore/ccsrc/cluster/topology/"
        "cluster_context.cc:316] BuildCluster] Topology build timed out., retry(1/60).",
        "[ERROR] ME(3195:139807558605696,MainProcess):2026-11-23-15:36:22.488.000 [mindspore/parallel/cluster/process_entity/"
        "_api.py:365] Worker process 3202 exit with exception. Error code: 7.",
        "[WARNING] ME(3195:139807558605696,MainProcess):2026-11-23-15:36:22.489.000 [mindspore/parallel/cluster/process_entity/"
        "_api.py:370] There's worker exits with exception, kill all other workers.",
        "[ERROR] DISTRIBUTED(3199,7f7d95b9e6c0,python):2026-11-23-15:36:51.034.929 [mindspore/ccsrc/cluster/topology/"
        "meta_server_node.cc:548] UpdateTopoState] The node: 0 is timed out. It may exit with exception, please check this node's log.",
    ])
    report = triage([tmp_path])
    assert report.category is Category.EXCEPTION and report.culprit_rank == 1 and report.rule == "bad_exit"
    assert report.launcher_blamed is not None and "rank 0" in report.launcher_blamed
    # the normal start-up retry warning is not a communication error
    assert not [f for f in report.findings if "retry(1/60)" in f.text]


def test_peers_named_by_address_map_to_nodes_through_collects_facts(tmp_path: Path) -> None:
    root = tmp_path / "b"
    for n, addr in ((1, "10.1.0.1"), (2, "10.1.0.2"), (3, "10.1.0.3")):
        write(root / f"n{n}" / "facts.json", [json.dumps({"name": f"n{n}", "host": f"n{n}", "addresses": [addr]})])
    for n in (1, 3):
        write(root / f"n{n}" / "train.log", [
            f"n{n}:1234:1300 [0] NCCL INFO NET/IB : Got completion from peer 10.1.0.2<58210> with status=12 opcode=0 len=0 "
            f"vendor err 129 (Recv) localGid ::ffff:10.1.0.{n} remoteGidsfe80::1 [rank{n}]"])
    write(root / "n2" / "train.log", ["[rank2]: step 5 loss 2.1"])
    report = triage([root])
    assert report.rule == "peer_votes" and report.culprit_node == "n2"


def test_rule_table_is_documented_and_ordered() -> None:
    ids = [rule_id for rule_id, _, _ in RULES]
    assert ids[:5] == ["own_error", "same_error_everywhere", "bad_exit", "exits_only", "node_lost"]
    assert all(doc for _, _, doc in RULES)


@pytest.mark.parametrize("line,expected", [
    ("E1123 06:38:52.617000 2977 torch/distributed/run.py:874] x", "0000-11-23T06:38:52.617000"),
    ("[rank0]:[E1123 06:38:52.617000 ProcessGroupNCCL.cpp:607] y", "0000-11-23T06:38:52.617000"),
    ("11/23/2026 15:35:08 - INFO - transformers.trainer - z", "2026-11-23T15:35:08.000000"),
    ("  time      : 2026-11-23_15:35:08", "2026-11-23T15:35:08.000000"),
    ("[ERROR] ME(3195:1398,MainProcess):2026-11-23-15:36:22.488.000 [x]", "2026-11-23T15:36:22.488000"),
])
def test_more_time_forms(line: str, expected: str) -> None:
    assert parse_time(line) == expected


def test_launch_stamps_are_split_off_and_give_the_time_of_unstamped_lines() -> None:
    assert split_stamp("2026-11-23T10:00:01.000001 | [rank0]: hello") == ("2026-11-23T10:00:01.000001", "[rank0]: hello")
    assert split_stamp("2026-11-23 10:00:01 | not ours") == (None, "2026-11-23 10:00:01 | not ours")
    live = LiveTriage()
    live.line("h1", stamp(3.5, "[rank0]: ValueError: bad shape"))
    report = live.report(None)
    assert report.first_failure is not None and report.first_failure.time == "2026-11-23T10:00:03.500000"
    assert report.first_failure.text == "[rank0]: ValueError: bad shape"


def test_the_rank_a_monitored_barrier_names_is_the_culprit_not_the_monitor_the_others_point_at(tmp_path: Path) -> None:
    """Issue #26: rank 0 (the monitor) says which rank never arrived; the other ranks' errors name rank 0 only to say
    where to look. The monitor's list wins over their pointers; with wait_all_ranks it may name several."""
    write(tmp_path / "output.log", [
        "[rank1]: RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv "
        "from rank 0. Please check rank 0 logs for faulty rank.",
        "[rank3]: RuntimeError: Rank 3 successfully reached monitoredBarrier, but received errors while waiting for send/recv "
        "from rank 0. Please check rank 0 logs for faulty rank.",
        "[rank0]: RuntimeError: [Rank 0]: Rank 2 failed to pass monitoredBarrier in 30000 ms",
        "[rank0]:  Original exception: ",
        "[rank0]: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms for recv operation",
    ])
    report = triage([tmp_path])
    assert (report.rule, report.category, report.culprit_rank) == ("absent_named", Category.COMM_TIMEOUT, 2)
    assert "failed to pass monitoredBarrier" in report.first_failure.text if report.first_failure else False

    many = tmp_path / "many"
    write(many / "output.log", [f"[rank{r}]: RuntimeError: Rank {r} successfully reached monitoredBarrier, but received errors "
                                "while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
                                for r in (1, 2, 4, 6, 7)]
          + ["[rank0]: [E1126 10:00:00.000000 ProcessGroupWrapper.cpp:100] [Rank 0]: Ranks 3, 5 failed to pass monitoredBarrier "
             "in 30000 ms"])
    report = triage([many])
    assert (report.rule, report.culprit_rank) == ("absent_named", 3) and "also absent: ranks 5" in report.reason

    only_pointers = tmp_path / "pointers"
    write(only_pointers / "output.log", [f"[rank{r}]: RuntimeError: Rank {r} successfully reached monitoredBarrier, but received "
                                         "errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank."
                                         for r in (1, 2, 3)])
    assert triage([only_pointers]).culprit_rank != 0  # the monitor is where to look, not who failed


def test_the_ranks_a_desync_report_names_as_lagging_are_the_culprit(tmp_path: Path) -> None:
    """torch's desync report (TORCH_NCCL_DESYNC_DEBUG=1) lists the lagging ranks after the watchdog timeout."""
    write(tmp_path / "output.log", [
        "[rank0]:[E1126 10:00:00.100000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=90, OpType=ALLREDUCE, NumelIn=6, NumelOut=6, Timeout(ms)=600000) ran for 600086 milliseconds before timing out.",
        "[rank0]:[E1126 10:00:00.200000 ProcessGroupNCCL.cpp:1937] Rank 0",
        "         - [0] Timeout at collective: ALLREDUCE, #90",
        "         - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        "             [2] joined but didn't finish collective #41 (count from 1)",
        "         - Snapshot of ranks' latest states:",
    ])
    report = triage([tmp_path])
    assert (report.rule, report.category, report.culprit_rank) == ("absent_named", Category.COMM_TIMEOUT, 2)
    assert "desync report" in report.reason


def test_a_silent_rank_0_is_named_when_every_other_rank_timed_out(tmp_path: Path) -> None:
    """No job record: the ranks are 0..the highest seen, so rank 0 (tokenizing, saving) that said nothing is the absentee."""
    write(tmp_path / "output.log", [
        f"[E ProcessGroupNCCL.cpp:457] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=1800000) ran for 1800035 milliseconds before timing out." for r in (1, 2, 3)])
    report = triage([tmp_path])
    assert (report.rule, report.culprit_rank) == ("hang", 0), report.reason


# --- issue #26, this stop: node names in syslog lines and Ray's report, a killed process the others point at,
# Megatron's missing loss, a card held by another process

def test_a_kernel_line_from_syslog_names_the_node_that_logged_it(tmp_path: Path) -> None:
    write(tmp_path / "paste.log", [
        "Aug 26 15:28:16 gpu-node7 kernel: [87474.832707] NVRM: Xid (PCI:0000:17:00): 79, pid=1234, GPU has fallen off the bus.",
    ])
    report = triage([tmp_path / "paste.log"])
    assert report.category == Category.HARDWARE
    assert report.first_failure is not None and report.first_failure.node == "gpu-node7"


def test_a_log_level_and_module_after_a_time_is_no_host(tmp_path: Path) -> None:
    write(tmp_path / "paste.log", ["2026-01-20T08:13:25 INFO trainer: RuntimeError: CUDA error: an illegal memory access"])
    report = triage([tmp_path / "paste.log"])
    assert report.first_failure is not None and report.first_failure.node is None


def test_rays_memory_monitor_names_the_node_by_its_address(tmp_path: Path) -> None:
    write(tmp_path / "driver.log", [
        "(raylet) [2026-01-20 08:13:25,391 E 2105 2105] (raylet) node_manager.cc:3099: 1 Workers (tasks / actors) killed due "
        "to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 87d772fad6, IP: 10.22.68.9) over the "
        "last time period.",
    ])
    report = triage([tmp_path / "driver.log"])
    assert report.category == Category.OOM
    assert report.first_failure is not None and report.first_failure.node == "10.22.68.9"


STORE_BROKEN = ("RuntimeError: [{r}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
                "store by key '0', but store->get('0') got error: Broken pipe. This may indicate a possible application "
                "crash on rank 0 or a network set up issue.")
DS_KILLED = ("[2023-12-27 11:01:09,316] [ERROR] [launch.py:321:sigkill_handler] ['python', '-u', 'train.py', "
             "'--local_rank=7'] exits with return code = -9")


def test_a_killed_process_of_unknown_rank_is_the_silent_rank_the_others_point_at(tmp_path: Path) -> None:
    write(tmp_path / "out.log", [STORE_BROKEN.format(r=6), STORE_BROKEN.format(r=5), DS_KILLED])
    report = triage([tmp_path / "out.log"])
    assert report.category == Category.OOM and report.rule == "bad_exit"
    assert report.first_failure is not None and report.first_failure.rank == 0


def test_the_rank_pointed_at_is_not_blamed_for_a_kill_when_it_logged_an_error_of_its_own(tmp_path: Path) -> None:
    write(tmp_path / "out.log", ["[rank0]: ValueError: bad shape in the tokenizer", STORE_BROKEN.format(r=6), DS_KILLED])
    report = triage([tmp_path / "out.log"])
    # rank 0 is blamed for what it said (the exception), not for a SIGKILL the launcher reported of another process
    assert (report.rule, report.category) == ("own_error", Category.EXCEPTION)
    assert report.first_failure is not None and report.first_failure.rank == 0
    assert report.first_failure.signature == "python.exception"


def test_megatron_iteration_lines_that_lose_their_loss_are_nan(tmp_path: Path) -> None:
    line = (" iteration {i}/    8000 | consumed samples: {s} | elapsed time per iteration (ms): 7613.1 | learning rate: "
            "6.680E-06 | global batch size:    64 |{loss} loss scale: 1.0 | grad norm: 0.752 | number of skipped iterations:"
            "   {skipped} | number of nan iterations:   0 |")
    write(tmp_path / "a.log", [line.format(i=3383, s=216512, loss=" lm loss: 7.334521E-01 |", skipped=0),
                               line.format(i=3384, s=216576, loss="", skipped=0)])
    assert triage([tmp_path / "a.log"]).category == Category.NAN
    # every iteration of the interval skipped (an fp16 overflow): no loss is printed, and that is no NaN
    write(tmp_path / "b.log", [line.format(i=3383, s=216512, loss=" lm loss: 7.334521E-01 |", skipped=0),
                               line.format(i=3384, s=216576, loss="", skipped=1)])
    assert triage([tmp_path / "b.log"]).category != Category.NAN


def test_a_card_another_process_holds_is_a_launch_problem_not_an_oom(tmp_path: Path) -> None:
    write(tmp_path / "a.log", ["RuntimeError: mindspore/ccsrc/runtime/device/ascend/ascend_memory_manager.cc:62 "
                               "MallocDeviceMemory] Malloc device memory failed, size[32212254720], ret[207001], Device 6 may "
                               "be other processes occupying this card, check as: ps -ef|grep python"])
    assert triage([tmp_path / "a.log"]).category == Category.LAUNCH


def test_a_line_naming_only_its_device_belongs_to_the_rank_that_device_pairs_with(tmp_path: Path) -> None:
    write(tmp_path / "n01" / "plog.log", [
        "[INFO] HCCL(1234,python):2026-01-01-10:00:00.000.000 [hcom.cc:100][1234]hcom init by file success, rank[3], "
        "device[6], server_id[n01]",
        "[ERROR] DRV(5678,dmp_daemon):2026-01-01-10:05:00.000.000 [device_error_proc.cc:1] Device: 6 reported a memory "
        "UCE error (hbm multi-bit ECC)",
    ])
    got = triage([tmp_path / "n01" / "plog.log"])
    assert got.first_failure is not None and got.first_failure.rank == 3, got.first_failure


IB_STATUS12 = ("kp-ddp-worker-0:97:152 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
               "10.216.210.236<43380> with error 12, opcode 0, len 0, vendor err 129 (Send)")


def test_an_rdma_completion_error_is_a_fabric_verdict_that_names_the_link(tmp_path: Path) -> None:
    write(tmp_path / "w0.log", [IB_STATUS12])
    report = triage([tmp_path / "w0.log"])
    assert report.category == Category.COMM_TIMEOUT and report.fabric
    assert "fabric" in report.headline()
    assert any("link between kp-ddp-worker-0 and 10.216.210.236" in h for h in report.hints), report.hints
    assert report.to_dict()["fabric"] is True


def test_a_timeout_without_fabric_evidence_is_not_called_fabric(tmp_path: Path) -> None:
    write(tmp_path / "b" / "h01" / "launcher.log", [stamp(1.0, gloo_timeout(0, 0)), stamp(1.1, gloo_timeout(1, 1))])
    report = triage([tmp_path / "b"])
    assert report.category == Category.COMM_TIMEOUT and not report.fabric
    assert "fabric" not in report.headline() and report.to_dict()["fabric"] is False


def test_a_nic_link_going_down_is_a_fabric_fault_of_that_node(tmp_path: Path) -> None:
    write(tmp_path / "paste.log", ["Mar  3 10:00:01 node17 kernel: [1234.5] mlx5_core 0000:3b:00.0 ens1f0: Link down"])
    report = triage([tmp_path / "paste.log"])
    assert report.category == Category.HARDWARE and report.fabric and report.culprit_node == "node17"
    assert any("node17's NIC and link" in h for h in report.hints), report.hints


def test_a_rank_in_the_name_of_a_folder_far_above_the_log_is_not_the_logs_rank(tmp_path: Path) -> None:
    from pathlib import PurePosixPath
    from ascendctl.triage.extract import attribute_path_full
    far = PurePosixPath("h02/files/data/exp_rank_0_sweep/logs/h02/launcher.log")
    assert attribute_path_full(far, bundle=True)[1] is None
    near = PurePosixPath("h02/files/data/exp/rank_3/plog/plog-123_456.log")
    assert attribute_path_full(near, bundle=True)[1] == 3


def test_a_missing_module_names_the_node_whose_setup_lacks_it_not_the_rank_that_printed_it(tmp_path: Path) -> None:
    write(tmp_path / "b" / "h02" / "launcher.log", [
        stamp(1.0, "[default1]:[rank3]:ModuleNotFoundError: No module named 'tbe.common.repository_manager'"),
    ])
    report = triage([tmp_path / "b"])
    assert report.category == Category.LAUNCH and report.rule == "own_error"
    assert report.first_failure is not None and (report.culprit_node, report.culprit_rank) == ("h02", None)


def test_torch_npus_error_header_after_an_exception_says_whose_exception_it_was(tmp_path: Path) -> None:
    write(tmp_path / "out.log", [
        "Traceback (most recent call last):",
        '  File "train.py", line 18, in step',
        "    dist.all_reduce(input)",
        '  File "/usr/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 2050, in all_reduce',
        "    work = group.allreduce([tensor], opts)",
        "RuntimeError: Tensors must be contiguous",
        "[ERROR] 2024-08-18-22:15:47 (PID:23232, Device:0, RankID:3) ERR02002 DIST invalid type",
    ])
    report = triage([tmp_path / "out.log"])
    assert report.category == Category.EXCEPTION and report.culprit_rank == 3, report.first_failure


def test_the_store_wait_of_old_torch_names_the_rank_it_waited_for_despite_its_spelling(tmp_path: Path) -> None:
    write(tmp_path / "out.log", ["RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via "
                                 "c10d key-value store by key '0', but store->get('0') got error: Socket Timeout"])
    report = triage([tmp_path / "out.log"])
    assert report.category == Category.COMM_TIMEOUT and report.culprit_rank == 0, report.first_failure


def test_a_cann_heading_is_refined_by_the_layer_its_traceback_names(tmp_path: Path) -> None:
    heading = ("ERROR 02-11 11:32:58 engine.py:389] call aclnnPromptFlashAttentionV3 failed, detail:EZ1001: [PID: 312378] "
               "2025-02-11-11:32:58.201.638 PromptFlashAttention LaunchAicore failed.")
    below = ["ERROR 02-11 11:32:58 engine.py:389]         TraceBack (most recent call last):",
             "ERROR 02-11 11:32:58 engine.py:389]         Cannot find bin of op PromptFlashAttention, integral key 0/1/|bf16/ND/.",
             "ERROR 02-11 11:32:58 engine.py:389]         PromptFlashAttention LaunchAicore failed."]
    write(tmp_path / "a.log", [heading, *below])
    report = triage([tmp_path / "a.log"])
    assert report.category == Category.LAUNCH
    assert report.first_failure is not None and report.first_failure.signature == "cann.op_kernel_missing"
    # the same heading alone is the program's error; a known line far below it is another report, not its traceback
    write(tmp_path / "b.log", [heading])
    assert triage([tmp_path / "b.log"]).category == Category.EXCEPTION
    write(tmp_path / "c.log", [heading, *["INFO step done"] * 12, below[1]])
    report = triage([tmp_path / "c.log"])
    assert report.first_failure is not None and report.first_failure.line == 1


def test_horovods_stall_inspector_names_the_missing_rank(tmp_path: Path) -> None:
    # operations.cc (before 0.20): "<tensor> [missing ranks: 1]", printed by the coordinator (rank 0) under mpirun
    write(tmp_path / "old.log", [
        "[1,0]<stderr>:[2019-04-13 13:53:31.851506: W horovod/common/operations.cc:588] HorovodBroadcast_dense_1_bias_0 "
        "[missing ranks: 1]",
        "[1,0]<stderr>:[2019-04-13 13:54:31.854655: W horovod/common/operations.cc:588] One or more tensors were submitted "
        "to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 "
        "seconds."])
    report = triage([tmp_path / "old.log"])
    assert report.category == Category.COMM_TIMEOUT
    assert report.first_failure is not None and report.first_failure.rank == 1
    # stall_inspector.cc: "Missing ranks:" then one line per missing rank with the tensors it has not submitted
    write(tmp_path / "new" / "rank1.log", [
        "[2021-02-02 21:19:07.345988: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be "
        "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 10 "
        "seconds. This may indicate that different ranks are trying to submit different tensors.",
        "Missing ranks:",
        "0: [cond_1/then/_10/DistributedSGD_Allreduce/cond/HorovodAllreduce_grads_0]"])
    report = triage([tmp_path / "new"])
    assert report.category == Category.COMM_TIMEOUT
    assert report.first_failure is not None and report.first_failure.rank == 0


def test_a_step_slurm_could_not_launch_on_a_node_is_a_launch_failure_of_that_node(tmp_path: Path) -> None:
    write(tmp_path / "job.out", ["srun: error: Task launch for 36.0 failed on node cn131: Job credential expired",
                                 "srun: error: Application launch failed: Job credential expired"])
    report = triage([tmp_path / "job.out"])
    assert report.category == Category.LAUNCH
    assert report.first_failure is not None and report.first_failure.node == "cn131"


def test_a_multi_host_runners_prefix_names_the_host_and_keeps_each_hosts_traceback_apart(tmp_path: Path) -> None:
    # pdsh / DeepSpeed's runner: "host: line"; two hosts' tracebacks interleave in one file
    write(tmp_path / "pdsh.log", [
        "worker-2: Traceback (most recent call last):",
        "worker-1: Traceback (most recent call last):",
        'worker-2:   File "/w/train.py", line 10, in <module>',
        "worker-2:     dist.all_reduce(t)",
        'worker-1:   File "/w/data.py", line 5, in load',
        "worker-1: FileNotFoundError: [Errno 2] No such file or directory: '/data/shard_7.bin'"])
    report = triage([tmp_path / "pdsh.log"])
    assert report.category == Category.EXCEPTION
    assert report.first_failure is not None and report.first_failure.node == "worker-1"
    # a CANN code is not a host: "EH9999: Inner Error!" stays the error line it is
    write(tmp_path / "cann.log", ["EH9999: Inner Error!", "EL0004: [PID: 553] 2025-09-17-04:55:13.065.712 Failed to allocate memory."])
    report = triage([tmp_path / "cann.log"])
    assert report.category == Category.OOM and report.first_failure is not None and report.first_failure.node is None


def test_the_node_msruns_scheduler_saw_time_out_is_the_culprit_on_the_node_msrun_started_it(tmp_path: Path) -> None:
    """Issue #26 (the real case: tests/cluster/test_triage_hosts.py, a rank frozen): MindSpore's scheduler names the node
    whose heartbeats stopped; the others' communication kernels then fail (victims, not their own error). The rank's
    node is the one whose msrun started it. msrun's own summary ("Time out nodes are ['3']") is read the same way."""
    ms = "[ERROR] DISTRIBUTED(1715,7ffa,python):2026-11-27-10:25:49.084.843 [mindspore/ccsrc/cluster/topology/"
    write(tmp_path / "h01" / "launcher.log", [
        "Start worker process with rank id:0, log file:/logs/h01/workers/worker_0.log. Environment variable [RANK_ID=0] is exported.",
        "Start worker process with rank id:1, log file:/logs/h01/workers/worker_1.log. Environment variable [RANK_ID=1] is exported.",
        "[WORKER 0] RuntimeError: Launch kernel failed, name:Default/AllReduce-op0",
    ])
    write(tmp_path / "h01" / "workers" / "scheduler.log", [
        ms + "meta_server_node.cc:548] UpdateTopoState] The node: 3 is timed out. It may exit with exception, please check "
        "this node's log.",
    ])
    write(tmp_path / "h02" / "launcher.log", [
        "Start worker process with rank id:2, log file:/logs/h02/workers/worker_2.log. Environment variable [RANK_ID=2] is exported.",
        "Start worker process with rank id:3, log file:/logs/h02/workers/worker_3.log. Environment variable [RANK_ID=3] is exported.",
        "RuntimeError: Launch kernel failed, name:Default/AllReduce-op0",
    ])
    report = triage([tmp_path])
    assert (report.rule, report.category, report.culprit_rank, report.culprit_node) == (
        "absent_named", Category.COMM_TIMEOUT, 3, "h02"), report.reason
    assert "msrun's scheduler names it as the node whose heartbeats stopped" in report.reason

    summary = tmp_path / "summary"
    write(summary / "h01" / "launcher.log", [
        "Start worker process with rank id:0, log file:/l/worker_0.log. Environment variable [RANK_ID=0] is exported.",
        "Start worker process with rank id:1, log file:/l/worker_1.log. Environment variable [RANK_ID=1] is exported.",
        "Start worker process with rank id:2, log file:/l/worker_2.log. Environment variable [RANK_ID=2] is exported.",
        "Start worker process with rank id:3, log file:/l/worker_3.log. Environment variable [RANK_ID=3] is exported.",
        "[ERROR] ME(16:28,MainProcess):2025-03-10-09:40:38.720.000 [mindspore/parallel/cluster/process_entity/_api.py:331] "
        "Scheduler process 162146 exit with exception.",
        "[ERROR] ME(16:28,MainProcess):2025-03-10-09:40:38.722.000 [mindspore/parallel/cluster/process_entity/_api.py:431] "
        "Time out nodes are ['2']",
    ])
    report = triage([summary])
    assert (report.rule, report.culprit_rank, report.culprit_node) == ("absent_named", 2, "h01"), report.reason


def test_a_communication_kernel_that_failed_is_a_victim_and_another_kernel_its_own_error(tmp_path: Path) -> None:
    from ascendctl.triage.extract import match_line

    for op in ("Default/AllReduce-op0", "Gradients/Default/network/AllGather-op12", "HcomAllReduce", "Default/Send-op3"):
        sig = match_line(f"RuntimeError: Launch kernel failed, name:{op}")
        assert sig is not None and sig.id == "mindspore.comm_kernel_failed" and sig.category == Category.COMM_TIMEOUT, op
    for op in ("Default/MatMul-op0", "Default/SendFoo-op1", "Default/ReduceMean-op4"):
        sig = match_line(f"RuntimeError: Launch kernel failed, name:{op}")
        assert sig is not None and sig.id != "mindspore.comm_kernel_failed", op


def test_slurms_oom_kill_count_printed_as_the_step_ends_is_not_later_than_the_exception_it_caused(tmp_path: Path) -> None:
    """slurmstepd prints its OOM-kill count when the step ends, below everything the job printed (Slurm's task/cgroup
    plugin; both its older and its newer wording): its place in the log is no time, so the worker that died of it
    and the exception that followed are its consequences, not an earlier error of their own."""
    for summary in ("slurmstepd: error: Detected 8 oom-kill event(s) in step 59137890.batch cgroup. Some of your "
                    "processes may have been killed by the cgroup out-of-memory handler.",
                    "slurmstepd: error: Detected 1 oom_kill event in StepId=412.0. Some of the step tasks have been OOM "
                    "Killed."):
        folder = tmp_path / str(len(summary))
        write(folder / "slurm-412.out", [
            "Traceback (most recent call last):",
            '  File "/home/u/train.py", line 40, in <module>',
            "    results = ray.get(futures)",
            "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
            summary,
        ])
        report = triage([folder])
        assert report.category == Category.OOM and report.first_failure is not None, report.reason
        assert report.first_failure.text.startswith("slurmstepd: error: Detected"), report.first_failure


def test_slurms_oom_count_and_sruns_report_of_the_node_are_one_event_placed_on_that_node(tmp_path: Path) -> None:
    """slurmstepd counts the OOM kill without a place; srun's own report (launch_slurm.c `_task_finish`) names the node."""
    write(tmp_path / "slurm-440575.out", [
        "slurmstepd: error: Detected 1 oom_kill event in StepId=440575.0. Some of the step tasks have been OOM Killed.",
        "srun: error: nid001277: tasks 1-3: Out Of Memory",
        "srun: Terminating StepId=440575.0",
        "slurmstepd: error: *** STEP 440575.0 ON nid001277 CANCELLED AT 2023-12-05T07:16:01 ***",
    ])
    report = triage([tmp_path])
    assert report.category is Category.OOM and report.oom_kind == "host"
    assert (report.culprit_node, report.culprit_rank) == ("nid001277", None)


def test_mpiruns_first_process_to_exit_is_the_culprit_and_horovods_shutdown_is_a_victims_line(tmp_path: Path) -> None:
    """Open MPI names the first process that exited non-zero on two lines; Horovod's SHUT_DOWN_ERROR on the other rank
    says that rank was shut down by someone else's exception (horovod/common/common.h)."""
    write(tmp_path / "mpirun.log", [
        "[1,1]<stderr>:  File \"/opt/conda/lib/python3.6/site-packages/horovod/torch/mpi_ops.py\", line 436, in synchronize",
        "[1,1]<stderr>:    mpi_lib.horovod_torch_wait_and_clear(handle)",
        "[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an "
        "attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
        "-" * 74,
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        "  Process name: [[50371,1],0]",
        "  Exit code:    1",
        "-" * 74,
    ])
    report = triage([tmp_path])
    assert report.rule == "bad_exit" and report.culprit_rank == 0, report.reason
    assert report.first_failure is not None and report.first_failure.signature == "mpirun.first_exit"
    assert {v.rank for v in report.victims} == {1}


def test_a_traceback_through_deepspeeds_update_scale_is_the_loss_scale_at_its_minimum_even_cut_short(tmp_path: Path) -> None:
    write(tmp_path / "train.log", [
        "[2023-09-15 14:11:34,418] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
        "Attempted loss scale: 65536, reducing to 32768",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.9/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 1717, in step',
        "    self._update_scale(self.overflow)",
        '  File "/usr/lib/python3.9/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 1968, in _update_scale',
        "    self.loss_scaler.update_scale(has_overflow)",
    ])
    report = triage([tmp_path])
    assert report.category is Category.NAN and report.first_failure is not None
    assert report.first_failure.signature == "deepspeed.loss_scale_min_raised"


def test_nccls_internal_error_and_its_cuda_failures_are_not_the_network(tmp_path: Path) -> None:
    """ncclInternalError (3) and ncclUnhandledCudaError say NCCL itself or a CUDA call failed (NCCL's own result codes):
    the node that printed them, EXCEPTION; a peer's connection lines around them are not a verdict of their own."""
    write(tmp_path / "a" / "out.log", [
        "1: node-2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4",
        "1: node-2:4827:6900 [4] NCCL INFO bootstrap.cc:554 -> 3",
        "1: node-2:4827:6900 [4] NCCL INFO transport.cc:204 -> 3",
        "2: node-3:4871:7029 [2] NCCL INFO Channel 00/1 : 1[2] -> 0[2] [send] via NET/Socket/0",
    ])
    report = triage([tmp_path / "a"])
    assert report.category is Category.EXCEPTION and report.culprit_node == "node-2"
    write(tmp_path / "b" / "worker.log", [
        "ERROR 03-28 21:38:23 ray_utils.py:44] torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
        "c10d/ProcessGroupNCCL.cpp:1333, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
        "ERROR 03-28 21:38:23 ray_utils.py:44] ncclUnhandledCudaError: Call to CUDA function failed.",
        "ERROR 03-28 21:38:23 ray_utils.py:44] Cuda failure 'invalid argument'",
    ])
    assert triage([tmp_path / "b"]).category is Category.EXCEPTION


@pytest.mark.parametrize("func,category", [("_parse_args", Category.LAUNCH), ("parse_args_into_dataclasses", Category.LAUNCH),
                                           ("_load_dataset", Category.EXCEPTION)])
def test_an_exception_the_programs_argument_parsing_raised_is_the_launch_not_one_rank(
        tmp_path: Path, func: str, category: Category) -> None:
    """The innermost frame is where it was raised: in argument parsing, the job's arguments (every rank has them, so no
    rank is named); anywhere else, the rank's own exception."""
    write(tmp_path / "train.log", [
        "[rank4]: Traceback (most recent call last):",
        '[rank4]:   File "/opt/app/train.py", line 12, in <module>',
        "[rank4]:     main()",
        f'[rank4]:   File "/opt/app/swift/llm/base.py", line 36, in {func}',
        "[rank4]:     raise ValueError(f'remaining_argv: {remaining_argv}')",
        "[rank4]: ValueError: remaining_argv: ['--use_fused_rmsnorm', '--use_fused_swiglu']",
    ])
    report = triage([tmp_path])
    assert report.category is category
    assert report.culprit_rank == (None if category is Category.LAUNCH else 4)


def test_a_setup_error_every_rank_reports_is_one_cause_however_far_apart_the_reports(tmp_path: Path) -> None:
    """Six ranks on three nodes reject the same arguments as each starts, over 1.75 s (a loaded machine): not the node
    whose ranks spoke first, the job's arguments (a node-wide signature is not grouped by a one-second window)."""
    for n in range(3):
        lines = []
        for i in range(2):
            rank = 2 * n + i
            at = (1.2, 0.0, 1.75)[n] + i / 10  # h02 first, h01 1.2 s later, h03 last
            lines += [stamp(at, f"[default{i}]:[rank{rank}]: Traceback (most recent call last):"),
                      stamp(at, f'[default{i}]:[rank{rank}]:   File "/opt/app/train.py", line 20, in parse_args'),
                      stamp(at, f"[default{i}]:[rank{rank}]:     raise ValueError(f\"remaining_argv: {{unknown}}\")"),
                      stamp(at, f"[default{i}]:[rank{rank}]: ValueError: remaining_argv: ['--use_fused_rmsnorm']")]
        write(tmp_path / f"h{n + 1:02d}" / "launcher.log", lines)
    report = triage([tmp_path])
    assert report.category is Category.LAUNCH
    assert (report.culprit_node, report.culprit_rank) == (None, None), report.reason


def test_a_rank_table_error_is_the_jobs_setting_not_the_rank_that_read_it_first(tmp_path: Path) -> None:
    """Every rank reads the same rank table: the rank that reported it first is not where it started."""
    write(tmp_path / "node_0" / "rank_0.log", [
        "[ERROR] 2025-05-21-11:57:54 (PID:927000, Device:0, RankID:0) ERR02200 DIST call hccl api failed.",
        "EI0014: 2025-05-21-11:57:54.000.000 The ranktable information check failed, Reason:[devices have same "
        "superDeviceId[0x3000000] in superPod[super_pod_id_0]].",
    ])
    report = triage([tmp_path])
    assert report.category is Category.LAUNCH and report.culprit_rank is None


def test_a_node_the_launcher_could_not_reach_over_ssh_is_where_the_launch_failed(tmp_path: Path) -> None:
    """pdsh (DeepSpeed's multi-node runner) reports the node OpenSSH could not reach; no rank ever ran there."""
    write(tmp_path / "deepspeed.log", [
        "[2023-05-02 10:00:00,000] [INFO] [runner.py:540:main] cmd = pdsh -S -f 1024 -w node-0011,node-0012 ...",
        "node-0012: ssh: connect to host node-0012 port 22: No route to host",
        "pdsh@node-0011: node-0012: ssh exited with exit code 255",
    ])
    report = triage([tmp_path])
    assert report.category is Category.LAUNCH and (report.culprit_node, report.culprit_rank) == ("node-0012", None)


# HCCL's fault guide (hicann/hccl docs, cluster_info_nego.md: tests/data/samples/ascend/hccl_log_lines_...txt): rank 3
# entered the communicator init at 11:59:56, the other three at 11:56:36; theirs is a 120 s connect timeout
HCCL_DOC = Path(__file__).resolve().parent / "data/samples/ascend/hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt"


def _init_entry(rank: int) -> str:
    return next(line for line in HCCL_DOC.read_text(encoding="utf-8").splitlines()
                if "[op_base.cc:1293]" in line and f"Entry-HcclCommInitRootInfoInner:ranks[4], rank[{rank}]," in line)


def _agent_timeout(pid: str, when: str) -> str:  # the agent's own line, as the same page shows it (another run's time)
    return (f"[ERROR] HCCL({pid},all_reduce_test):2025-11-20-{when}.000.000 [topoinfo_exchange_agent.cc:190] [{pid}]"
            "[InitGroupStage][RanktableDetect]topo exchange agent get socket timeout! timeout[120] ")


@pytest.mark.parametrize("timeouts", [True, False])
def test_the_rank_that_entered_hccl_init_after_the_others_timed_out_is_the_one_they_waited_for(
        tmp_path: Path, timeouts: bool) -> None:
    """Every rank that came on time reports the init's socket timeout; the late rank's own entry says when it came."""
    for rank in range(4):
        entry = _init_entry(rank)
        pid = entry.split("HCCL(", 1)[1].split(",", 1)[0]
        lines = [entry]
        if timeouts and rank != 3:
            lines.append(_agent_timeout(pid, "11:58:36"))
        if not timeouts:  # every rank's error came later, untimed (a wrapper's message)
            lines.append("RuntimeError: The HCCL execution has encountered an exception: topo exchange agent get socket "
                         "timeout")
        write(tmp_path / "node0" / f"plog-{pid}_20251120115636.log", lines)
    report = triage([tmp_path])
    assert report.category is Category.COMM_TIMEOUT and report.rule == "late_to_init", report.reason
    assert (report.culprit_node, report.culprit_rank) == ("node0", 3), report.reason
    assert "11:59:56" in report.reason


def test_ranks_that_entered_hccl_init_together_name_no_late_rank(tmp_path: Path) -> None:
    for rank in range(4):
        entry = _init_entry(rank).replace("11:59:56", "11:56:36")
        pid = entry.split("HCCL(", 1)[1].split(",", 1)[0]
        write(tmp_path / "node0" / f"plog-{pid}_20251120115636.log", [entry, _agent_timeout(pid, "11:58:36")])
    report = triage([tmp_path])
    assert report.category is Category.COMM_TIMEOUT and report.rule != "late_to_init", report.reason
