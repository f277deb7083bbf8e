"""`ascendctl perf` reads the per-rank files in reader processes (issue #31's 1,024-rank bound): the answer, problems
and their order included, is byte-identical to the one-process reading, on the profiles of tests/data/perf and on a
generated 64-rank job with bad files among the good ones. Speed is measured in bench/perf.py, not here."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from ascendctl.perf import read
from ascendctl.perf.analyse import analyse

DATA = Path(__file__).resolve().parent / "data" / "perf"


class CountingPool(read.ProcessPoolExecutor):
    """The reader pool, counted: a test of the parallel path that never started one would prove nothing."""

    started = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        CountingPool.started += 1
        super().__init__(*args, **kwargs)


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file goes to the readers (none parsed here first), and pools are counted."""
    monkeypatch.setattr(read, "POOL_AFTER", 0)
    monkeypatch.setattr(read, "ProcessPoolExecutor", CountingPool)
    CountingPool.started = 0


def answer(paths: list[Path], readers: int) -> str:
    profiles, problems, found = read.read_profiles(paths, readers)
    report = analyse(profiles, problems)
    return json.dumps({"found": found, "report": report.to_dict(), "problems": [p.to_dict() for p in report.problems]},
                      sort_keys=True)


def make_job(root: Path, ranks: int = 64, steps: int = 4, ops: int = 5, slow: int = 17) -> None:
    """A torch.profiler-shaped job (as bench/perf.py writes, smaller): rank `slow` computes 30% more."""
    rng = random.Random(64)
    computes = [[[900.0 * (1.3 if r == slow else 1.0) * rng.uniform(0.97, 1.03) for r in range(ranks)]
                 for _ in range(ops)] for _ in range(steps)]
    for rank in range(ranks):
        events: list[dict[str, Any]] = []
        t = 1_000_000.0
        for step, step_ops in enumerate(computes, start=1):
            start = t
            for op in step_ops:
                finish = t + max(op) + 300.0
                events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t,
                               "dur": op[rank]})
                events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2,
                               "ts": t + op[rank], "dur": finish - t - op[rank]})
                t = finish
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                           "ts": start, "dur": t - start})
        if rank == ranks - 1:  # the largest file: the one over the cap in a test
            events.append({"ph": "M", "name": "process_name", "args": {"name": "x" * 10_000}})
        document = {"distributedInfo": {"rank": rank}, "traceEvents": events}
        (root / f"rank{rank}.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(document).encode()))


@pytest.mark.parametrize("name", ["straggler", "even", "ascend", "ascend64"])
def test_the_readers_give_the_answer_of_one_process_on_the_test_profiles(pooled: None, name: str) -> None:
    serial = answer([DATA / name], 1)
    assert CountingPool.started == 0
    assert answer([DATA / name], 2) == serial
    assert CountingPool.started == 1


def test_the_readers_give_the_answer_of_one_process_on_64_ranks_with_bad_files(
        pooled: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "job"
    job.mkdir()
    make_job(job)
    big = (job / "rank63.pt.trace.json.gz").read_bytes()
    monkeypatch.setattr(read, "TRACE_MAX_BYTES", len(gzip.decompress(big)) - 1)  # rank 63 only is refused, by its reader
    (job / "rank20.pt.trace.json.gz").write_bytes(b"\x1f\x8b not gzip")  # refused, in the middle
    (job / "rank30.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": 3}'))  # not a trace
    (job / "rank40.pt.trace.json").write_bytes(b"[" * 5_000)  # garbage JSON (nested too deeply), uncompressed
    # over the cap: refused as it is read, here, while the file before it may still be in a reader
    (job / "rank40z.pt.trace.json").write_bytes(gzip.decompress(big))
    shutil.copy(job / "rank5.pt.trace.json.gz", tmp_path / "rank5-again.pt.trace.json.gz")
    serial = answer([job], 1)
    document = json.loads(serial)
    assert document["report"]["straggler"]["rank"] == 17 and len(document["report"]["ranks"]) == 61
    assert [p["message"].split(": ", 1)[0].rsplit("/", 1)[-1] for p in document["problems"]] == [
        "rank20.pt.trace.json.gz", "rank30.pt.trace.json.gz", "rank40.pt.trace.json", "rank40z.pt.trace.json",
        "rank63.pt.trace.json.gz"]
    assert answer([job], 2) == serial and answer([job], 3) == serial
    with pytest.raises(read.MixedTasksError) as serial_refusal:
        read.read_profiles([job, tmp_path / "rank5-again.pt.trace.json.gz"], 1)
    with pytest.raises(read.MixedTasksError) as parallel_refusal:
        read.read_profiles([job, tmp_path / "rank5-again.pt.trace.json.gz"], 2)
    assert str(parallel_refusal.value) == str(serial_refusal.value)
    assert CountingPool.started == 3


def test_a_process_with_threads_reads_alone(pooled: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork copies the locks other threads hold (collect's SSH sessions): with threads, no pool, the same answer."""
    serial = answer([DATA / "straggler"], 1)
    monkeypatch.setattr(read.threading, "active_count", lambda: 2)
    assert answer([DATA / "straggler"], 2) == serial
    assert CountingPool.started == 0


def test_a_reader_that_dies_leaves_its_files_to_this_process(pooled: None, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = answer([DATA / "straggler"], 1)
    here, parse = os.getpid(), read._trace_parts

    def dies_in_a_reader(data: bytes, rel: str) -> read.TraceParts:
        if os.getpid() != here and "rank2" in rel:
            os._exit(9)  # as the kernel's OOM killer would end it
        return parse(data, rel)
    monkeypatch.setattr(read, "_trace_parts", dies_in_a_reader)  # the readers are forked: they see it
    assert answer([DATA / "straggler"], 2) == serial
    assert CountingPool.started == 1
