"""Topology majority diff and msprof summaries against the shared samples and CSVs built from msprof's headers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.parsers import ParseError
from ascendctl.parsers.npu_smi import parse_npu_topo, parse_nvidia_topo
from ascendctl.summaries import compare_topologies, parse_comm_statistic, parse_step_trace, summarize_bundle, summarize_msprof

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
