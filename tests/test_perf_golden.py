"""`ascendctl perf`'s answers are byte-identical to those recorded before its reader and vote were made faster (issue
#31's 1,024-rank bound): on the profiles of tests/data/perf and on generated jobs that take every path of the trace
reader (CPU ranges, GPU kernels, sequence numbers, malformed events, bad files) and of the vote (Dixon's Q up to 100
ranks, 3 sigma above). The answers are in tests/data/perf/golden/ (tests/data/perf/INDEX.md); after a change that
means to change an answer, write them again and say why:  .venv/bin/python -m tests.test_perf_golden --write
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from ascendctl.perf import read
from ascendctl.perf.analyse import analyse

DATA = Path(__file__).resolve().parent / "data" / "perf"
GOLDEN = DATA / "golden"
SHIPPED = ("straggler", "even", "ascend", "ascend64")
MADE = ("cpu64", "gpu64", "seq128")


def _noise(rng: random.Random, t: float) -> list[Any]:
    """Events a trace may hold that perf must step over or read as they are: other phases, bad numbers, odd names."""
    return [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        5, "text", None, [1, 2],
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "tid": 1, "ts": str(t), "dur": 3.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "tid": 1, "ts": t, "dur": -1.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "tid": 1, "ts": t, "dur": math.nan},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "tid": 1, "ts": True, "dur": 1.0},
        {"ph": "X", "cat": "cpu_op", "tid": 1, "ts": t + 1.5, "dur": 2.0},  # no name
        {"ph": "X", "cat": "cpu_op", "name": ["aten::add"], "tid": 1, "ts": t + 2, "dur": 2},  # a name of no string
        {"ph": "X", "cat": ["cpu_op"], "name": "aten::add", "tid": 1, "ts": t + 3, "dur": 2.0},
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#x", "tid": 1, "ts": t + 4, "dur": 1.25},
        {"ph": "X", "cat": "python_function", "name": "forward", "tid": 1, "ts": t, "dur": 50.0},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:", "tid": "main", "ts": t + 5, "dur": 2.5},
        {"ph": "i", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": t, "s": "t"},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "tid": 1, "ts": t + 6, "dur": 1.0,
         "args": {"Collective name": "init"}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": int(t) + 7, "dur": int(rng.uniform(1, 9))},
    ]


def make_cpu_job(root: Path, ranks: int = 64, steps: int = 4, ops: int = 5, slow: int = 17) -> None:
    """torch.profiler on CPU (gloo): nested cpu_op ranges, `gloo:all_reduce` ranges (and c10d's record of each, which
    the range outranks), a broadcast outside any step, steps listed out of order, malformed events; bad files."""
    rng = random.Random(6401)
    draws = [[[900.0 * (1.3 if r == slow else 1.0) * rng.uniform(0.97, 1.03) for r in range(ranks)]
              for _ in range(ops)] for _ in range(steps)]
    for rank in range(ranks):
        events: list[Any] = [{"ph": "X", "cat": "user_annotation", "name": "gloo:broadcast", "tid": 2, "ts": 10.0,
                              "dur": 40.0 + rank}]
        t, step_events = 1_000_000.0, []
        for step, step_ops in enumerate(draws, start=1):
            start = t
            for i, op in enumerate(step_ops):
                finish = t + max(op) + 300.0
                mine = op[rank]
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "tid": 1, "ts": t, "dur": mine})
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": t + 1, "dur": mine / 3})
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::relu", "tid": 1, "ts": t + mine / 2,
                               "dur": mine / 4})
                events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "tid": 1, "ts": t + mine,
                               "dur": 2.0, "args": {"Collective name": "allreduce", "Seq": step * 10 + i}})
                events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "tid": 2,
                               "ts": t + mine, "dur": finish - t - mine})
                if i == 2:
                    events.extend(_noise(rng, t))
                t = finish
            step_events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "tid": 1,
                                "ts": start, "dur": t - start})
        events.extend(reversed(step_events) if rank % 7 == 3 else step_events)
        document: dict[str, Any] = {"traceEvents": events}
        if rank % 5:
            document["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": ranks}
        (root / f"rank{rank}.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(document).encode()))
    (root / "rank64.pt.trace.json.gz").write_bytes(b"\x1f\x8b not gzip")
    (root / "rank65.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2'))
    (root / "rank66.pt.trace.json").write_bytes(b'{"traceEvents": [], "distributedInfo": {"rank": 66}}')
    (root / "rank67.pt.trace.json").write_bytes(b"[" * 5_000)


def make_gpu_job(root: Path, ranks: int = 64, steps: int = 3, ops: int = 4, slow: int = 40) -> None:
    """torch.profiler on GPUs (NCCL): compute kernels, `ncclDevKernel_*` kernels (which outrank `nccl:all_reduce` and
    c10d's records), cpu_ops on the host thread; rank `slow`'s kernels run 30% longer."""
    rng = random.Random(6402)
    for rank in range(ranks):
        events: list[Any] = []
        t = 5_000.0
        for step in range(1, steps + 1):
            start = t
            for i in range(ops):
                compute = 500.0 * (1.3 if rank == slow else 1.0) * rng.uniform(0.98, 1.02)
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 7, "ts": t, "dur": 20.0})
                events.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "tid": 20, "ts": t + 5,
                               "dur": compute})
                events.append({"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "tid": 20,
                               "ts": t + 5 + compute / 2, "dur": compute})  # overlaps the gemm
                events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "tid": 7, "ts": t + 30,
                               "dur": 3.0, "args": {"Collective name": "allreduce", "Seq": True}})
                events.append({"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "tid": 7, "ts": t + 31,
                               "dur": 4.0})
                begin = t + 5 + 1.5 * compute
                events.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
                               "tid": 21, "ts": begin, "dur": 1_000.0 + 300.0 * rng.random() - (begin - t)})
                t += 1_300.0
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "tid": 7, "ts": start,
                           "dur": t - start})
        document = {"distributedInfo": {"backend": "nccl", "rank": rank}, "traceEvents": events}
        (root / f"worker_rank{rank}.pt.trace.json").write_text(json.dumps(document))


def make_seq_job(root: Path, ranks: int = 128, steps: int = 2, ops: int = 3, slow: int = 99) -> None:
    """Only c10d's records (their `Seq` numbers the calls): 128 ranks, so the vote takes its 3-sigma path."""
    rng = random.Random(12801)
    for rank in range(ranks):
        events: list[Any] = []
        t, seq = 100.0, 0
        for step in range(1, steps + 1):
            start = t
            for op in ("all_reduce", "all_gather", "all_reduce")[:ops]:
                compute = 700.0 * (1.4 if rank == slow else 1.0) * rng.uniform(0.95, 1.05)
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "tid": 1, "ts": t, "dur": compute})
                events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "tid": 1, "ts": t + compute,
                               "dur": 1_200.0 - compute, "args": {"Collective name": op, "Seq": seq}})
                t, seq = t + 1_250.0, seq + 1
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "tid": 1, "ts": start,
                           "dur": t - start})
        (root / f"rank{rank}.pt.trace.json").write_text(json.dumps({"traceEvents": events}))


MAKERS = {"cpu64": make_cpu_job, "gpu64": make_gpu_job, "seq128": make_seq_job}


def answer(path: Path, readers: int) -> dict[str, Any]:
    """What `ascendctl perf --json` answers on `path`, the problems and the files found, and a digest of every record
    read (steps and calls of every rank), with `path` written as `<job>`."""
    profiles, problems, found = read.read_profiles([path], readers)
    report = analyse(profiles, problems)
    records = "\n".join(repr((p.rank, p.kind, p.steps, p.calls, p.links)) for p in profiles)
    text = json.dumps({"found": found, "report": report.to_dict(), "problems": [p.to_dict() for p in problems],
                       "records_sha256": hashlib.sha256(records.encode()).hexdigest()}, sort_keys=True, indent=0)
    return json.loads(text.replace(str(path), "<job>"))


def _answer_of(name: str, readers: int, work: Path) -> dict[str, Any]:
    if name in SHIPPED:
        return answer(DATA / name, readers)
    job = work / name
    job.mkdir()
    MAKERS[name](job)
    return answer(job, readers)


@pytest.mark.parametrize("name", SHIPPED + MADE)
def test_the_answer_is_the_one_recorded(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read, "POOL_AFTER", 4)  # the first files here, the rest in the readers
    expected = json.loads(gzip.decompress((GOLDEN / f"{name}.json.gz").read_bytes()))
    got = _answer_of(name, 2, tmp_path)
    for key in ("found", "problems", "records_sha256"):
        assert got[key] == expected[key], key
    for key in expected["report"]:  # one assertion per part of the report: a difference is shown where it is
        assert got["report"][key] == expected["report"][key], key
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


# --- the reader's paths, malformed input included -----------------------------------------------------------------


def _trace(events: list[Any], rank: int = 0) -> bytes:
    return json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": events}).encode()


STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "tid": 1, "ts": 0.0, "dur": 100.0}
MM = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": 10.0, "dur": 30.0}
ALL_REDUCE = {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "tid": 2, "ts": 50.0, "dur": 20.0}


def test_an_event_of_a_list_or_object_name_or_category_is_read_as_before() -> None:
    """The reader decides once per (name, cat) what an event is; a name or cat that cannot be a key is decided each
    time, the same way: a range of no string name on a thread is compute, one of no string category is nothing."""
    plain = read.parse_trace(_trace([STEP, MM, ALL_REDUCE]), "rank0.pt.trace.json", "t")
    odd = read.parse_trace(_trace([STEP, {**MM, "name": ["aten::mm"]}, {**MM, "ts": 80.0, "cat": {"c": 1}},
                                   ALL_REDUCE]), "rank0.pt.trace.json", "t")
    assert odd == plain and plain.steps[0].compute_ms == 0.03 and plain.steps[0].comm_ms == 0.02


def test_an_integer_time_too_large_for_a_float_is_an_event_without_a_time() -> None:
    """json reads 1 followed by 400 zeros as an int that float() refuses (OverflowError, once a crash of the whole
    command): the event is skipped, as one with a time of no number is."""
    plain = read.parse_trace(_trace([STEP, MM, ALL_REDUCE]), "rank0.pt.trace.json", "t")
    huge = _trace([STEP, MM, ALL_REDUCE, {**MM, "ts": 1}, {**ALL_REDUCE, "dur": 2}]).replace(
        b'"ts": 1,', b'"ts": 1' + b"0" * 400 + b",").replace(b'"dur": 2}', b'"dur": 2' + b"0" * 400 + b"}")
    assert b"0" * 400 in huge and read.parse_trace(huge, "rank0.pt.trace.json", "t") == plain


@pytest.mark.parametrize("event", [{**MM, "tid": [1]}, {**STEP, "name": "ProfilerStep#2", "ts": 200.0, "tid": {}}],
                         ids=["range", "step"])
def test_a_thread_id_of_a_list_or_object_is_a_problem_named_not_a_crash(tmp_path: Path, event: dict[str, Any]) -> None:
    shutil.copytree(DATA / "straggler", tmp_path / "run")
    (tmp_path / "run" / "rank1.pt.trace.json").write_bytes(_trace([STEP, MM, ALL_REDUCE, event], rank=1))
    (tmp_path / "run" / "rank1.pt.trace.json.gz").unlink()
    profiles, problems, _ = read.read_profiles([tmp_path / "run"], 1)
    assert [p.rank for p in profiles] == [0, 2, 3]
    assert [(Path(p.path).name, p.message) for p in problems] == [("rank1.pt.trace.json", read.NO_THREAD)]


def test_pstdev_is_statistics_pstdev_to_the_last_bit() -> None:
    """The vote's 3-sigma test above 100 ranks: the faster pstdev gives statistics.pstdev's float, bit for bit, on
    ranks' times and on the edges (zeros, negatives, a huge range, subnormals, ints, inf and NaN: statistics' own)."""
    from ascendctl.perf.analyse import pstdev
    rng = random.Random(31)
    cases: list[list[Any]] = [[rng.uniform(0.5, 1.5) * 10 ** rng.randint(-6, 6) * rng.choice((1, 1, -1))
                               for _ in range(rng.choice((1, 2, 3, 101, 1024)))] for _ in range(300)]
    cases += [[rng.uniform(900, 1100) for _ in range(1024)] for _ in range(20)]
    cases += [[1.0] * 200, [0.0] * 150, [-0.0, 0.0] * 60, [0.0, 1.0, 0.0], [1e-300, 1e300] * 60, [5e-324] * 101 + [1.0],
              [1e-310, 2e-310, 3e-308], [2.0**60, 1.0], [1e308, -1e308, 1e308], [1, 2, 3], [1.5, 2, 3.25]]
    for values in cases:
        assert pstdev(values).hex() == statistics.pstdev(values).hex(), values[:4]
    for values in ([1.0, math.inf, 2.0], [1.0, math.nan], []):
        with pytest.raises(Exception) as mine:
            pstdev(values)
        with pytest.raises(Exception) as theirs:
            statistics.pstdev(values)
        assert type(mine.value) is type(theirs.value)


def write() -> None:
    """Write tests/data/perf/golden/ from the code as it is (one process reading)."""
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for name in SHIPPED + MADE:
            text = json.dumps(_answer_of(name, 1, Path(work)), sort_keys=True, indent=0)
            (GOLDEN / f"{name}.json.gz").write_bytes(gzip.compress(text.encode(), 9, mtime=0))
            print(f"{name}: {len(text)} bytes")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    write()
