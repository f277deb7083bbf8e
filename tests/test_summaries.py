"""Topology majority diff and msprof summaries against the shared samples and CSVs built from msprof's headers."""

from __future__ import annotations

import math
import random
from pathlib import Path
from statistics import NormalDist

import pytest
from jsonschema import Draft202012Validator

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.npu_smi import parse_npu_topo, parse_nvidia_topo
from ascendctl.bundle.summaries import (STRAGGLER_RULE, MsprofSummary, compare_topologies, parse_comm_statistic, parse_step_trace,
                                  summarize_bundle, summarize_msprof)
from ascendctl.schemas import schema_for
from tests.json_schemas import registry

SAMPLES = Path(__file__).resolve().parent / "data/samples/ascend"
DATA = Path(__file__).resolve().parent / "data"
NPU_TOPO = (SAMPLES / "npu-smi-info-t-topo_910B_8npu.txt").read_text()
GPU_TOPO = (DATA / "nvidia-smi/topo_m_8gpu_nv12_10nic.txt").read_text()


def headers() -> dict[str, str]:
    """'## name' section -> the header row that follows it, from the shared msprof header sample."""
    found: dict[str, str] = {}
    section = None
    for line in (SAMPLES / "msprof_summary_csv_headers_from_source.txt").read_text().splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif section and line and not line.startswith("#"):
            found.setdefault(section, line)
            section = None
    return found


def header(prefix: str) -> str:
    return next(v for k, v in headers().items() if k.startswith(prefix))


def mutate(text: str, row: str, column_index: int, value: str) -> str:
    lines = []
    for line in text.splitlines():
        if line.startswith(row + " ") or line.startswith(row + "\t"):
            cells = line.split()
            cells[1 + column_index] = value
            line = "\t".join(cells)
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_identical_npu_matrices_have_no_outlier() -> None:
    matrix = parse_npu_topo(NPU_TOPO)
    summary = compare_topologies({"n1": matrix, "n2": matrix, "n3": matrix})
    assert summary.majority == ("n1", "n2", "n3") and summary.outliers == ()
    assert summary.devices == tuple(f"NPU{i}" for i in range(8))


def test_missing_hccs_link_is_flagged_with_the_differing_cells() -> None:
    good = parse_npu_topo(NPU_TOPO)
    bad = parse_npu_topo(mutate(mutate(NPU_TOPO, "NPU3", 5, "SYS"), "NPU5", 3, "SYS"))
    summary = compare_topologies({"n1": good, "n2": bad, "n3": good}).to_dict()
    assert summary["majority"] == ["n1", "n3"]
    assert summary["outliers"] == [{"node": "n2", "cells": [
        {"row": "NPU3", "column": "NPU5", "expected": "HCCS", "actual": "SYS"},
        {"row": "NPU5", "column": "NPU3", "expected": "HCCS", "actual": "SYS"},
    ]}]


def test_gpu_on_the_wrong_switch_is_flagged() -> None:
    good = parse_nvidia_topo(GPU_TOPO)
    moved = parse_nvidia_topo(mutate(GPU_TOPO, "GPU2", 8, "PXB"))
    summary = compare_topologies({"g1": good, "g2": good, "g3": moved}, tool="nvidia-smi")
    assert [o.node for o in summary.outliers] == ["g3"]
    assert [(c.row, c.column, c.expected, c.actual) for c in summary.outliers[0].cells] == [("GPU2", "NIC0", "SYS", "PXB")]


def test_tie_uses_the_first_node_as_reference() -> None:
    good = parse_npu_topo(NPU_TOPO)
    bad = parse_npu_topo(mutate(NPU_TOPO, "NPU0", 1, "PIX"))
    summary = compare_topologies({"a": good, "b": bad})
    assert summary.majority == ("a",) and [o.node for o in summary.outliers] == ["b"]


def step_csv(generation: str, device: int, times: list[float]) -> str:
    if generation == "current":
        head = header("step_trace_*.csv")
        rows = [f"{device},{i},0,0,0,{t},0,0,0,1" for i, t in enumerate(times, 1)]
    else:
        head = header("step_trace (legacy")
        rows = [f"{i},0,0,0,{t},0,0,0" for i, t in enumerate(times, 1)]
    return "\n".join([head, *rows]) + "\n"


def comm_csv(generation: str, device: int, totals: list[float]) -> str:
    head = header("communication_statistic")
    if generation == "current":
        rows = [f"{device},hcom_allReduce_{i},4,{t},1,2,3,50" for i, t in enumerate(totals)]
    else:  # hccl_statistic (older CANN): the same columns without Device_id
        head = head.removeprefix("Device_id,")
        rows = [f"hcom_allReduce_{i},4,{t},1,2,3,50" for i, t in enumerate(totals)]
    return "\n".join([head, *rows]) + "\n"


@pytest.mark.parametrize("generation", ["current", "legacy"])
def test_msprof_per_rank_breakdown_flags_comm_share_and_stragglers(generation: str) -> None:
    steps = {f"r{i}": step_csv(generation, i, [100.0, 100.0, 100.0]) for i in range(4)}
    steps["r3"] = step_csv(generation, 3, [130.0, 130.0, 130.0])
    comm = {f"r{i}": comm_csv(generation, i, [15.0, 15.0]) for i in range(4)}  # 30us over 3 steps = 10%
    comm["r1"] = comm_csv(generation, 1, [30.0, 30.0])  # 20%
    summary = summarize_msprof(steps, comm).to_dict()
    by_rank = {r["rank"].split()[0]: r for r in summary["ranks"]}
    assert by_rank["r0"]["step_us"] == 100.0 and by_rank["r0"]["comm_us"] == 10.0 and by_rank["r0"]["compute_us"] == 90.0
    assert by_rank["r1"]["comm_share"] == 0.2 and by_rank["r1"]["comm_flag"] is True
    assert [r.split()[0] for r in summary["comm_flagged"]] == ["r1"]
    assert [r.split()[0] for r in summary["stragglers"]] == ["r3"]
    assert summary["median_step_us"] == 100.0
    assert summarize_msprof(steps, comm, comm_limit=0.25).to_dict()["comm_flagged"] == []


def stragglers(times: dict[str, list[float]]) -> list[str]:
    """The ranks summarize_msprof names stragglers, given each rank's step times."""
    steps = {rank: step_csv("current", 0, values) for rank, values in times.items()}
    return [r.split()[0] for r in summarize_msprof(steps, {}).to_dict()["stragglers"]]


def test_stragglers_are_judged_by_the_outliers_rule_not_a_fixed_factor() -> None:
    """Noise alone names no straggler, however far the noisiest rank is above 1.2x the median; a clear one is named."""
    # 16 ranks whose step times spread by 12% (normal quantiles of the logarithms): the slowest is 1.25x the median,
    # which the old rule (above 1.2x the median) called a straggler; it is within 3 spreads of the others
    noisy = {f"r{i:02d}": [100.0 * math.exp(0.12 * NormalDist().inv_cdf((i + 0.5) / 16))] * 4 for i in range(16)}
    assert max(v[0] for v in noisy.values()) > 1.2 * 100.0
    assert stragglers(noisy) == []
    # one rank at twice the median among them: named, and nothing else
    assert stragglers({**noisy, "slow": [200.0] * 4}) == ["slow"]


@pytest.mark.parametrize("seed", range(20))
def test_noise_only_step_times_name_no_straggler_and_a_clear_one_is_named(seed: int) -> None:
    """64 ranks of 20 steps, each rank off by 3% and each step by 5% (lognormal): nothing named; one rank 1.5x: it alone."""
    rng = random.Random(seed)

    def rank(factor: float) -> list[float]:
        base = 100_000.0 * factor * math.exp(rng.gauss(0, 0.03))
        return [base * math.exp(rng.gauss(0, 0.05)) for _ in range(20)]

    healthy = {f"n{i:02d}/PROF_1": rank(1.0) for i in range(64)}
    assert stragglers(healthy) == []
    assert stragglers({**healthy, "n99/PROF_1": rank(1.5)}) == ["n99/PROF_1"]


def test_a_tight_cluster_names_no_small_difference_and_a_transient_is_not_a_straggler() -> None:
    tight = {f"r{i}": [100.0 + 0.1 * i] * 6 for i in range(8)}  # within 1%
    # 12% slower: far beyond the (tiny) spread, but below the smallest slowdown worth naming (1.2x) and the 5% floor's
    # 3 spreads: not a straggler; 25% slower is
    assert stragglers({**tight, "a": [112.0] * 6}) == []
    assert stragglers({**tight, "a": [125.0] * 6}) == ["a"]
    # the second look: a rank slow in the first half of its steps only (median 150: the old rule named it) is not named
    assert stragglers({**tight, "a": [200.0, 200.0, 200.0, 100.0, 100.0, 100.0]}) == []
    assert stragglers({**tight, "a": [200.0, 200.0, 200.0, 200.0, 200.0, 100.0]}) == ["a"]  # both halves slow
    assert stragglers({**tight, "a": [500.0]}) == []  # one step: one look, never confirmed


def test_msprof_summary_records_the_rule_and_reads_older_summaries() -> None:
    steps = {f"r{i}": step_csv("current", 0, [100.0, 100.0]) for i in range(4)}
    steps["r3"] = step_csv("current", 0, [300.0, 300.0])
    summary = summarize_msprof(steps, {})
    doc = summary.to_dict()
    assert doc["stragglers"] == ["r3 dev 0"] and doc["straggler_factor"] == pytest.approx(1.2)
    assert doc["straggler_rule"] == {"spreads": 3.0, "floor": 0.05, "min_effect": 0.2, "looks": 2}
    assert doc["step_spread"] == 0.05  # the three healthy ranks agree: the floor
    assert doc["straggler_limit_us"] == pytest.approx(120.0)  # 1.2x is more than 3 spreads of 5% (1.16x)
    back = MsprofSummary.from_dict(doc)
    assert back.to_dict() == doc and back.straggler_rule == STRAGGLER_RULE
    # what collect writes to summary.json (and prints with --json) is what its schema says
    summary_schema = Draft202012Validator({"$ref": schema_for("collect")["$id"] + "#/$defs/summary"}, registry=registry())
    for msprof in (doc, summarize_msprof({}, {}).to_dict()):
        assert [e.message for e in summary_schema.iter_errors({"topology": [], "msprof": msprof})] == []
    old = MsprofSummary.from_dict({"ranks": [], "median_step_us": 1.0, "comm_limit": 0.15, "straggler_factor": 1.2})
    assert old.straggler_limit_us is None and old.step_spread is None and old.straggler_rule == STRAGGLER_RULE
    assert summarize_msprof({}, {}).to_dict()["straggler_limit_us"] is None


def test_msprof_parsers_reject_other_csvs() -> None:
    with pytest.raises(ParseError):
        parse_step_trace(header("op_summary_*.csv") + "\n")
    with pytest.raises(ParseError):
        parse_comm_statistic(header("task_time") + "\n")
    assert parse_step_trace(step_csv("current", 5, [1.0, 2.0])) == {"5": [1.0, 2.0]}
    assert parse_comm_statistic(comm_csv("legacy", 0, [1.0, 2.5])) == {"": 3.5}


def test_summarize_bundle_reads_topology_and_msprof_from_a_bundle_dir(tmp_path: Path) -> None:
    for node in ("n1", "n2", "n3"):
        (tmp_path / node / "commands").mkdir(parents=True)
        text = NPU_TOPO if node != "n2" else mutate(NPU_TOPO, "NPU1", 2, "PIX")
        (tmp_path / node / "commands/npu-smi.topo.txt").write_text(text)
    prof = tmp_path / "n1/files/root/prof/PROF_01/mindstudio_profiler_output"
    prof.mkdir(parents=True)
    (prof / "step_trace_2026.csv").write_text(step_csv("current", 0, [100.0]))
    (prof / "hccl_statistic_2026.csv").write_text(comm_csv("legacy", 0, [50.0]))
    summary = summarize_bundle(tmp_path, ["n1", "n2", "n3"])
    assert summary["topology"][0]["outliers"][0]["node"] == "n2"
    assert summary["msprof"]["ranks"][0]["rank"] == "n1/PROF_01 dev 0"
    assert summary["msprof"]["comm_flagged"] == ["n1/PROF_01 dev 0"]
