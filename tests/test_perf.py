"""`ascendctl perf`: the slow-rank vote, spreads, links and verdict from real torch.profiler traces (tests/data/perf/
INDEX.md says how each file was made) and format-true Ascend profiler output; hostile and broken inputs."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import ExitCode, UsageError
from ascendctl.perf import read
from ascendctl.perf.analyse import DIXON_Q95, analyse, links, low_outlier, perf, spreads, vote
from ascendctl.perf.model import LinkSample, RankMeans
from tests.json_schemas import assert_valid

DATA = Path(__file__).resolve().parent / "data" / "perf"
STRAGGLER, EVEN, ASCEND = DATA / "straggler", DATA / "even", DATA / "ascend"
runner = CliRunner()


def run(args: list[str]) -> Any:
    return runner.invoke(app, ["perf", *args])


def run_json(args: list[str]) -> tuple[int, dict[str, Any]]:
    result = run([*args, "--json"])
    document = json.loads(result.stdout)
    assert_valid("perf", document)
    assert document["exit_code"] == result.exit_code
    return result.exit_code, document


# --- real traces: torchrun, 4 ranks, gloo, rank 2 sleeping before every all_reduce ------------------------------------


def test_the_real_straggler_run_names_rank_2_in_most_all_reduce_calls() -> None:
    report = perf([STRAGGLER])
    assert report.kinds == ("torch",) and [r.rank for r in report.ranks] == [0, 1, 2, 3]
    assert report.compared == 8 and report.vote_on == "duration"
    assert report.straggler is not None and report.straggler.rank == 2
    assert report.straggler.votes >= 6 and set(report.straggler.ops) == {"all_reduce"}
    assert {v.rank for v in report.votes} == {2}
    # rank 2 spent its sleep in compute and waited least in the all_reduce
    assert report.straggler.compute_delta is not None and report.straggler.compute_delta > 1.0
    assert report.straggler.comm_delta is not None and report.straggler.comm_delta < -0.5
    assert report.verdict.startswith(f"rank 2 is the straggler in {report.straggler.votes} of 8 all_reduce calls: compute +")
    assert report.verdict.endswith("links: not measured")
    assert report.exit_code == ExitCode.CHECKS_FAILED
    by_rank = {r.rank: r for r in report.ranks}
    assert all(r.steps == 8 for r in report.ranks)
    assert by_rank[2].comm_share is not None and by_rank[0].comm_share is not None
    assert by_rank[2].comm_share < 0.15 < by_rank[0].comm_share
    flagged = {s.dimension for s in report.spreads if s.flagged}
    assert {"compute", "comm_not_overlapped"} <= flagged


def test_the_real_even_run_names_no_one() -> None:
    report = perf([EVEN])
    assert len(report.ranks) == 4 and report.compared == 8
    assert report.straggler is None
    assert report.verdict.startswith("no straggler in 8 collective calls compared across 4 ranks")
    assert report.exit_code == ExitCode.OK


def test_a_trace_names_its_steps_and_collectives_as_torch_wrote_them() -> None:
    profile = read.parse_trace(gzip.decompress((STRAGGLER / "rank2.pt.trace.json.gz").read_bytes()), "rank2.pt.trace.json",
                               "rank2")
    assert profile.rank == 2  # from distributedInfo.rank
    assert [s.step for s in profile.steps] == list(range(1, 9))
    assert [c.key for c in profile.calls] == [f"all_reduce@step{i}#0" for i in range(1, 9)]
    assert all(c.step == i + 1 for i, c in enumerate(profile.calls))
    for s in profile.steps:
        assert s.step_ms is not None and s.compute_ms is not None and s.comm_ms is not None and s.free_ms is not None
        assert s.compute_ms + s.comm_ms + s.free_ms == pytest.approx(s.step_ms, rel=1e-6)
        assert s.compute_ms > 50  # the 60 ms sleep inside forward_backward


def test_traces_that_start_at_different_steps_still_compare_the_same_calls(tmp_path: Path) -> None:
    shutil.copytree(STRAGGLER, tmp_path / "run")
    late = tmp_path / "run" / "rank0.pt.trace.json.gz"
    document = json.loads(gzip.decompress(late.read_bytes()))
    first = next(e for e in document["traceEvents"] if e.get("name") == "ProfilerStep#1")
    end = first["ts"] + first["dur"]
    document["traceEvents"] = [e for e in document["traceEvents"] if e.get("ph") != "X" or e["ts"] >= end]
    late.write_bytes(gzip.compress(json.dumps(document).encode()))
    report = perf([tmp_path / "run"])
    assert report.compared == 7 and not report.problems  # steps 2..8: rank 0 has no step 1
    assert report.straggler is not None and report.straggler.rank == 2
    assert {v.key for v in report.votes} <= {f"all_reduce@step{n}#0" for n in range(2, 9)}


def test_a_record_param_comms_trace_uses_seq_and_collective_name() -> None:
    events = [{"ph": "X", "name": "ProfilerStep#5", "cat": "user_annotation", "ts": 0, "dur": 1000, "tid": 1},
              {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": 10, "dur": 500, "tid": 1},
              {"ph": "X", "name": "record_param_comms", "cat": "cpu_op", "ts": 600, "dur": 300, "tid": 1,
               "args": {"Collective name": "allreduce", "Seq": 41, "Process Group Name": "0", "In msg nelems": 4096}},
              {"ph": "X", "name": "record_param_comms", "cat": "cpu_op", "ts": 950, "dur": 10, "tid": 1,
               "args": {"Collective name": "init", "Seq": 0}}]
    profile = read.parse_trace(json.dumps({"traceEvents": events}).encode(), "trace_rank7.pt.trace.json", "x")
    assert profile.rank == 7  # from the file name
    assert [(c.key, c.step, c.ms) for c in profile.calls] == [("allreduce#41", 5, 0.3)]
    step = profile.steps[0]
    assert (step.step_ms, step.compute_ms, step.comm_ms, step.free_ms) == pytest.approx((1.0, 0.5, 0.3, 0.2))


def test_on_a_gpu_the_nccl_kernel_is_the_call_and_the_other_kernels_are_compute() -> None:
    """Made-up events in the shape of a CUDA trace (no GPU here to record one): the CPU range and c10d's record of the
    same all_reduce only enqueue it; the kernel on the stream is where the rank waits."""
    events = [{"ph": "X", "name": "ProfilerStep#0", "cat": "user_annotation", "ts": 0, "dur": 2000, "tid": 1},
              {"ph": "X", "name": "record_param_comms", "cat": "cpu_op", "ts": 100, "dur": 20, "tid": 1,
               "args": {"Collective name": "allreduce", "Seq": 3}},
              {"ph": "X", "name": "nccl:all_reduce", "cat": "user_annotation", "ts": 100, "dur": 30, "tid": 1},
              {"ph": "X", "name": "ampere_sgemm_128x64_tn", "cat": "kernel", "ts": 50, "dur": 900, "tid": 7},
              {"ph": "X", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
               "cat": "kernel", "ts": 950, "dur": 700, "tid": 13}]
    profile = read.parse_trace(json.dumps({"distributedInfo": {"rank": 5}, "traceEvents": events}).encode(), "t", "t")
    assert [(c.key, c.ms) for c in profile.calls] == [("AllReduce@step0#0", 0.7)]
    step = profile.steps[0]
    assert (step.compute_ms, step.comm_ms, step.free_ms) == pytest.approx((0.9, 0.7, 0.4))


# --- Ascend profiler output (format-true, made by make_ascend.py from the real header) ---------------------------------


def test_ascend_output_names_rank_1_by_wait_and_the_slow_link_as_a_link() -> None:
    report = perf([ASCEND])
    assert report.kinds == ("ascend",) and report.vote_on == "wait" and report.compared == 12
    assert report.straggler is not None and (report.straggler.rank, report.straggler.votes) == (1, 12)
    assert report.straggler.ops == {"allReduce": 12}
    assert [link.name for link in report.slow_links] == ["2->3 HCCS"]
    assert len(report.links) == 4
    assert "slow link(s): 2->3 HCCS" in report.verdict
    by_rank = {r.rank: r for r in report.ranks}
    assert by_rank[1].compute_ms == pytest.approx(55.07, abs=0.01)  # step_trace_time.csv is in us
    assert all(s.flagged == (s.dimension in ("compute", "comm_not_overlapped")) for s in report.spreads)


def test_step_trace_time_alone_votes_per_step(tmp_path: Path) -> None:
    for csv in ASCEND.rglob("step_trace_time.csv"):
        target = tmp_path / csv.relative_to(ASCEND)
        target.parent.mkdir(parents=True)
        shutil.copy(csv, target)
        info = next(csv.parent.parent.glob("profiler_info_*.json"))
        shutil.copy(info, target.parent.parent / info.name)
    report = perf([tmp_path])
    assert report.vote_on == "step communication" and report.compared == 6
    assert report.straggler is not None and report.straggler.rank == 1
    assert report.verdict.startswith("rank 1 is the straggler in 6 of 6 steps") and "links: not measured" in report.verdict


def test_the_cluster_step_trace_file_gives_ranks_by_index(tmp_path: Path) -> None:
    rows = ["Step,Type,Index,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
            "Communication(Not Overlapped and Exclude Receive),Preparing"]
    for rank in range(4):
        rows.append(f"0,rank,{rank},{50000 if rank == 3 else 40000},100,0,{100 if rank == 3 else 9000},10,0,0,100,0")
    rows.append("0,stage,\"(0, 1, 2, 3)\",1,1,1,1,1,0,0,1,0")
    (tmp_path / "step_trace_time.csv").write_text("\n".join(rows) + "\n")
    report = perf([tmp_path])
    assert [r.rank for r in report.ranks] == [0, 1, 2, 3]
    assert report.straggler is None  # one step: one vote is never a verdict
    assert [v.rank for v in report.votes] == [3]


# --- the rules ------------------------------------------------------------------------------------------------------


def test_the_dixon_table_is_rorabacher_s_and_never_rises() -> None:
    assert [DIXON_Q95[n] for n in (3, 4, 5, 6, 7, 8, 9, 10)] == [0.970, 0.829, 0.710, 0.625, 0.568, 0.526, 0.493, 0.466]
    assert DIXON_Q95[30] == 0.298 and sorted(DIXON_Q95) == list(range(3, 101))
    values = [DIXON_Q95[n] for n in range(3, 101)]
    assert values == sorted(values, reverse=True)


def test_low_outlier_by_q_test_and_by_three_sigma() -> None:
    assert low_outlier([1.0, 10.0, 10.1, 10.2]) == ("dixon-q", pytest.approx(9 / 9.2))
    assert low_outlier([1.0, 2.0, 3.0, 4.0]) is None
    assert low_outlier([5.0, 5.0, 5.0]) is None and low_outlier([1.0, 9.0]) is None
    many = [10.0 + (i % 7) * 0.1 for i in range(150)]
    assert low_outlier(many) is None
    assert low_outlier([*many, 1.0]) is not None and low_outlier([*many, 1.0])[0] == "3-sigma"  # type: ignore[index]


def test_a_vote_needs_the_outlier_and_a_real_shortfall() -> None:
    compared = {"a#0": {0: ("a", 10.0), 1: ("a", 10.001), 2: ("a", 10.001), 3: ("a", 10.0011)},  # Q high, 0.01% short
                "a#1": {0: ("a", 10.0), 1: ("a", 10.1), 2: ("a", 2.0), 3: ("a", 10.2)}}
    assert [(v.key, v.rank) for v in vote(compared)] == [("a#1", 2)]


def test_spreads_flag_above_five_percent_of_the_step() -> None:
    def summary(rank: int, compute: float) -> RankMeans:
        return RankMeans(rank, 1, 100.0, compute, 10.0, 10.0, 1.0, 0.1, 0)

    found = {s.dimension: s for s in spreads([summary(0, 80.0), summary(1, 86.0), summary(2, 81.0)])}
    assert found["compute"].flagged and found["compute"].spread == pytest.approx(0.06)
    assert (found["compute"].min_rank, found["compute"].max_rank) == (0, 1)
    assert not found["step"].flagged


def test_a_transfer_listed_by_both_ends_counts_once_at_its_shortest() -> None:
    samples = [LinkSample(0, 1, "RDMA", "step1/op", 100.0, 10.0), LinkSample(0, 1, "RDMA", "step1/op", 100.0, 25.0),
               LinkSample(0, 1, "RDMA", "step2/op", 100.0, 10.0)]
    (link,) = links(samples)
    assert (link.size_mb, link.time_ms, link.bandwidth_gbps, link.slow) == (200.0, 20.0, 10.0, False)


# --- the command: exit codes, JSON, bad input --------------------------------------------------------------------------


def test_the_command_exit_codes_and_json() -> None:
    code, document = run_json([str(STRAGGLER)])
    assert code == 3 and document["status"] == "partial" and document["straggler"]["rank"] == 2
    assert document["links_measured"] is False
    code, document = run_json([str(EVEN)])
    assert code == 0 and document["straggler"] is None and document["votes"] == []
    code, document = run_json([str(ASCEND)])
    assert code == 3 and [link["slow"] for link in document["links"]].count(True) == 1
    result = run([str(STRAGGLER)])
    assert result.exit_code == 3 and result.stdout.splitlines()[0].startswith("rank 2 is the straggler")


def test_no_profiles_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    result = run([str(tmp_path)])
    assert result.exit_code == ExitCode.USAGE and "no profiles found" in result.stderr and result.stdout == ""
    with pytest.raises(UsageError):
        perf([tmp_path / "missing"])


def test_an_archive_is_read_like_its_directory(tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(STRAGGLER, arcname="bundle")
    report = perf([archive])
    assert report.straggler is not None and report.straggler.rank == 2 and not report.problems
    assert all(s.startswith(f"{archive}:") for sources in report.sources.values() for s in sources)


def broken_copy(tmp_path: Path, name: str, data: bytes) -> Path:
    """The straggler run with one file replaced by `data`."""
    shutil.copytree(STRAGGLER, tmp_path / "run")
    (tmp_path / "run" / name).write_bytes(data)
    return tmp_path / "run"


@pytest.mark.parametrize("data, message", [
    (gzip.compress(b'{"traceEvents": [')[:-9], "cannot decompress"),  # truncated .gz
    (gzip.compress(b'{"traceEvents": [{"ph": "X"'), "not JSON"),  # truncated JSON
    (gzip.compress(b"[" * 100_000 + b"]" * 100_000), "not JSON"),  # nesting deep enough to break the stdlib parser
    (gzip.compress(b'{"schemaVersion": 1}'), "no traceEvents list"),
    (gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": "x", "dur": null}]}'), "no ProfilerStep"),
    (b"\x00\x01garbage", "cannot decompress"),
], ids=["truncated-gzip", "truncated-json", "deep", "not-a-trace", "no-steps", "not-gzip"])
def test_a_broken_trace_is_named_and_the_others_are_still_judged(tmp_path: Path, data: bytes, message: str) -> None:
    run_dir = broken_copy(tmp_path, "rank3.pt.trace.json.gz", data)
    result = run([str(run_dir)])
    assert result.exit_code == ExitCode.ERROR, result.output
    assert f"{run_dir}/rank3.pt.trace.json.gz" in result.stderr and message in result.stderr
    assert "Traceback" not in result.output
    # the other three ranks are still judged (with 3 values Dixon's Q needs 0.970: rank 2 wins only some calls)
    assert "read: 3 rank(s) (torch); 8 call(s) compared" in result.stdout
    code, document = run_json([str(run_dir)])
    assert code == 1 and document["status"] == "error" and message in document["errors"][0]["message"]
    assert [r["rank"] for r in document["ranks"]] == [0, 1, 2] and {v["rank"] for v in document["votes"]} == {2}


def test_a_trace_without_a_rank_is_named(tmp_path: Path) -> None:
    run_dir = broken_copy(tmp_path, "rank3.pt.trace.json.gz", b"")
    (run_dir / "rank3.pt.trace.json.gz").unlink()
    document = json.loads(gzip.decompress((STRAGGLER / "rank3.pt.trace.json.gz").read_bytes()))
    del document["distributedInfo"]
    (run_dir / "worker.pt.trace.json").write_text(json.dumps(document))
    report = perf([run_dir])
    assert [p.message for p in report.problems] == ["no rank: neither distributedInfo.rank nor `rank<N>` in the file name"]


@pytest.mark.parametrize("text, message", [
    ("Step,Computing,Free\n1,abc,3\n", "line 2: column 'Computing' is not a number: 'abc'"),
    ("Step,Computing,Free\n1,-5,3\n", "line 2: column 'Computing' is not a duration"),
    ("Step,Computing\n1,2,3,4\n", "line 2: more cells than the header has columns"),
    ("a,b,c\n1,2,3\n", "not a step_trace_time.csv"),
    ("Step,Computing\n", "no step rows"),
], ids=["garbage", "negative", "ragged", "header", "empty"])
def test_a_garbage_csv_is_named_with_its_line(tmp_path: Path, text: str, message: str) -> None:
    target = tmp_path / "rank0" / "step_trace_time.csv"
    target.parent.mkdir()
    target.write_text(text)
    result = run([str(tmp_path)])
    assert result.exit_code == ExitCode.ERROR and str(target) in result.stderr and message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name, text, message", [
    ("communication.json", '{"step1": {"collective": {"op": {"Communication Time Info": {"Elapse Time(ms)": "x"}}}}}',
     "no numeric \"Elapse Time(ms)\""),
    ("communication.json", "[1, 2]", "the top level is not an object of steps"),
    ("communication_matrix.json", '{"step1": {"collective": {"op": {"0-1": {"Transit Size(MB)": 1}}}}}',
     "needs \"Transport Type\""),
])
def test_a_broken_communication_file_is_named(tmp_path: Path, name: str, text: str, message: str) -> None:
    target = tmp_path / "rank_0" / name
    target.parent.mkdir()
    target.write_text(text)
    result = run([str(tmp_path)])
    assert result.exit_code == ExitCode.ERROR and str(target) in result.stderr and message in result.stderr


def test_reading_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read, "TRACE_MAX_BYTES", 1000)
    report = perf([STRAGGLER])
    assert len(report.problems) == 4 and all("larger than" in p.message for p in report.problems)
    assert report.ranks == () and report.straggler is None and report.exit_code == ExitCode.ERROR


def test_analyse_with_one_rank_names_no_one() -> None:
    profile = read.parse_trace(gzip.decompress((EVEN / "rank0.pt.trace.json.gz").read_bytes()), "rank0", "rank0")
    report = analyse([profile])
    assert report.straggler is None and report.verdict == ("no straggler: 1 rank(s), nothing to compare; links: not measured; "
                                                           "profiles of 1 of the job's 4 ranks: the other 3 not compared")
    assert report.world_size == 4  # the trace's distributedInfo.world_size


def test_the_made_ascend_files_carry_the_real_step_trace_header() -> None:
    """tests/data/perf/ascend/ is made, not captured: its step_trace_time.csv header must be the captured one."""
    data = Path(__file__).resolve().parent / "data"
    sample = (data / "samples" / "ascend" / "msprof_summary_csv_headers_from_source.txt").read_text(encoding="utf-8")
    real = next(line for line in sample.splitlines() if line.startswith("Step,Computing,"))
    made = sorted((data / "perf" / "ascend").rglob("step_trace_time.csv"))
    assert len(made) == 4 and {p.read_text(encoding="utf-8").splitlines()[0] for p in made} == {real}


def test_a_time_that_is_not_a_finite_number_never_votes_and_never_crashes() -> None:
    # json.loads takes NaN and Infinity; statistics.pstdev raises AttributeError on them (the 3-sigma path, > 100 ranks)
    from ascendctl.perf.analyse import low_outlier

    for bad in (float("nan"), float("inf"), float("-inf")):
        assert low_outlier([1.0] * 150 + [bad, 0.5]) is None
        assert low_outlier([1.0, 1.1, bad, 0.2]) is None
    assert low_outlier([1.0] * 150 + [0.5]) is not None  # the same values without it still find the low one


def gpu_job(root: Path, *, host_delay: dict[int, float], compute: dict[int, float], ranks: int = 4, steps: int = 6) -> Path:
    """A GPU job's traces (torch.profiler's shape: ProfilerStep ranges on the main thread, kernels on a stream): each
    step a rank's host waits `host_delay[rank]` us before launching a compute kernel of `compute[rank]` us, then an
    NCCL all_reduce kernel that ends for every rank 500 us after the last one starts it."""
    root.mkdir(parents=True, exist_ok=True)
    events: dict[int, list[dict[str, Any]]] = {r: [] for r in range(ranks)}
    t = 1_000_000.0
    for step in range(1, steps + 1):
        arrive = {r: t + host_delay.get(r, 100.0) + compute.get(r, 5_000.0) for r in range(ranks)}
        end = max(arrive.values()) + 500.0
        for r in range(ranks):
            launch = t + host_delay.get(r, 100.0)
            events[r] += [
                {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": t,
                 "dur": end + 100.0 - t},
                {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32", "pid": 0, "tid": 7, "ts": launch,
                 "dur": compute.get(r, 5_000.0)},
                {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                 "pid": 0, "tid": 7, "ts": arrive[r], "dur": end - arrive[r]},
            ]
        t = end + 100.0
    for r, found in events.items():
        doc = {"distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks}, "traceEvents": found}
        (root / f"rank{r}.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return root


def test_a_gpu_straggler_is_device_bound_when_its_kernels_take_longer_and_host_bound_when_its_gpu_waits(
        tmp_path: Path) -> None:
    """Issue #31: where the device timeline allows (GPU kernels, Ascend's step trace), the straggler's lost time is
    its device's extra compute (device-bound) or its device idle before the work arrives (host-bound)."""
    device = perf([gpu_job(tmp_path / "device", host_delay={}, compute={2: 9_000.0})])
    assert device.straggler is not None and (device.straggler.rank, device.straggler.bound) == (2, "device")
    assert "device-bound" in device.verdict and "its device computes 4.0 ms more per step" in device.straggler.bound_why
    host = perf([gpu_job(tmp_path / "host", host_delay={1: 4_100.0}, compute={})])
    assert host.straggler is not None and (host.straggler.rank, host.straggler.bound) == (1, "host")
    assert "host-bound" in host.verdict and "its device sits idle 4.0 ms more per step" in host.straggler.bound_why
    cpu = perf([DATA / "straggler"])  # gloo on CPU: no device timeline, nothing said
    assert cpu.straggler is not None and cpu.straggler.bound is None and "-bound" not in cpu.verdict
    assert "no device timeline" in cpu.straggler.bound_why
    ascend = perf([DATA / "ascend"])  # rank 1 computes 13 ms more per step (make_ascend.py)
    assert ascend.straggler is not None and (ascend.straggler.rank, ascend.straggler.bound) == (1, "device")
