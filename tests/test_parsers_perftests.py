"""nccl-tests / rccl-tests tables as people posted them (tests/data/netcheck/INDEX.md names each source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.parsers import ParseError
from ascendctl.parsers.perftests import PerfRow, gbit_per_s, parse_nccl_tests

DATA = Path(__file__).parent / "data" / "netcheck"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_sendrecv_between_two_nodes_new_layout() -> None:
    table = parse_nccl_tests(read("sendrecv_perf_2nodes_a40_nccl-tests-issue-214.txt"))
    assert [r.size for r in table.rows] == [256, 512, 1024, 2048, 4096]
    assert table.rows[-1] == PerfRow(4096, 30.74, 0.13, 0.13)
    assert table.largest == table.rows[-1] and table.at_size(1024) == PerfRow(1024, 34.24, 0.03, 0.03)
    assert table.avg_busbw is None  # the post stops before the summary


def test_sendrecv_old_layout_without_redop_and_root_and_a_row_cut_short() -> None:
    table = parse_nccl_tests(read("sendrecv_perf_2gpu_gtx1080_nccl-tests-issue-104.txt"))
    assert table.rows == (PerfRow(37748736, 6485.7, 5.82, 5.82),)
    assert gbit_per_s(table.rows[0].busbw) == pytest.approx(46.56)


def test_all_reduce_with_open_mpi_output_tags() -> None:
    table = parse_nccl_tests(read("all_reduce_perf_p5_mpirun_tagged_aws-k8s-tester-pr-503.txt"))
    assert [r.size for r in table.rows] == [8, 16, 32] and table.rows[2].time_us == 22.25


def test_rccl_all_reduce_busbw_differs_from_algbw() -> None:
    table = parse_nccl_tests(read("all_reduce_perf_8x_mi300x_rccl-tests_hpc-ai-envs-pr-30.txt"))
    assert table.rows == (PerfRow(8388608, 91.10, 92.08, 161.14),)


def test_avg_bus_bandwidth_line_is_read() -> None:
    text = read("sendrecv_perf_2nodes_a40_nccl-tests-issue-214.txt") + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 92.3405 \n"
    assert parse_nccl_tests(text).avg_busbw == pytest.approx(92.3405)


@pytest.mark.parametrize("text", ["", "mpirun: command not found\n",
                                  "#       size         count      type     time   algbw   busbw  error\n"])
def test_no_table_is_an_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_nccl_tests(text)


def test_garbage_row_is_an_error() -> None:
    header = "#       size         count      type     time   algbw   busbw  error\n"
    with pytest.raises(ParseError):
        parse_nccl_tests(header + "    1024   256   float   x.y   1.0\n")
