"""nccl-tests / rccl-tests tables as people posted them, and hccl_test's as its vendor documents it (tests/data/netcheck/INDEX.md names each source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.perftests import HcclRow, PerfRow, gbit_per_s, parse_hccl_test, parse_nccl_tests

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


# hccl_test: the vendor's documented output (tests/data/netcheck/INDEX.md) and mutations of it made here, each
# in a way the binary's print code (hccl_opbase_rootinfo_base) can print

HCCL = DATA / "hccl_test" / "all_reduce_test.doc.txt"


def hccl_doc() -> str:
    return HCCL.read_text()


def test_hccl_test_table_as_documented() -> None:
    table = parse_hccl_test(hccl_doc())
    assert len(table.rows) == 14 and table.failed_ranks == ()
    assert table.rows[0] == HcclRow(8192, 764.55, 0.00998, "success")
    assert table.largest == HcclRow(67108864, 2630.20, 23.76245, "success")
    assert table.at_size(1048576) == HcclRow(1048576, 1778.30, 0.54916, "success")
    assert gbit_per_s(table.rows[-1].algbw) == pytest.approx(190.0996)


def test_hccl_test_header_as_the_binary_prints_it() -> None:
    """The binary's header printf: "%-15s | %-12s | %-18s | %s" with `aveg_time(us):` (the docs show `avg_time`)."""
    header = "%-15s | %-12s | %-18s | %s" % ("data_size(Bytes):", "aveg_time(us):", "alg_bandwidth(GB/s):", "check_result:")
    row = "%-17d | %-14.2f | %-20.5f | success" % (67108864, 2630.20, 23.76245)
    table = parse_hccl_test(f"{header}\n{row}\n")
    assert table.rows == (HcclRow(67108864, 2630.2, 23.76245, "success"),)


def test_hccl_test_unchecked_rows_and_the_overflow_warning() -> None:
    text = hccl_doc().replace("| success", "| NULL")
    text = "Warning: The calculation result overflows, No verification is performed.\n" + text
    table = parse_hccl_test(text)
    assert {r.check for r in table.rows} == {"NULL"} and len(table.rows) == 14


def test_hccl_test_failed_checks_are_failures_naming_the_rank() -> None:
    from ascendctl.netcheck.backends import BackendOutputError, parse_hccl_test_gbps

    lines = hccl_doc().splitlines()
    failed_row = lines[-1].replace("success", "failed")
    table = parse_hccl_test("\n".join([*lines[:-1], failed_row]))
    assert table.rows[-1].check == "failed"
    with pytest.raises(BackendOutputError, match="result check failed at 67108864 bytes"):
        parse_hccl_test_gbps("\n".join([*lines[:-1], failed_row]), 67108864)
    rank_line = "local rank_id 3, check result failed, %-17d | %-14.2f | %-20.5f | failed" % (67108864, 2630.20, 23.76245)
    text = "\n".join([lines[0], rank_line, *lines[1:]])
    assert parse_hccl_test(text).failed_ranks == ((3, 67108864),)
    with pytest.raises(BackendOutputError, match="result check failed on rank 3"):
        parse_hccl_test_gbps(text, 67108864)
    # only the failing rank's own line, the root's table cut off by the failure
    assert parse_hccl_test(rank_line + "\n").failed_ranks == ((3, 67108864),)


def test_hccl_test_gbps_at_the_size_asked_else_the_largest() -> None:
    from ascendctl.netcheck.backends import parse_hccl_test_gbps

    assert parse_hccl_test_gbps(hccl_doc(), 1048576) == pytest.approx(0.54916 * 8)
    assert parse_hccl_test_gbps(hccl_doc(), 12345) == pytest.approx(23.76245 * 8)


@pytest.mark.parametrize("text,message", [
    ("", "no hccl_test table header"),
    ("mpirun: all_reduce_test: No such file or directory\n", "no hccl_test table header"),
    ("the minbytes is 8192, maxbytes is 67108864, iters is 20, warmup_iters is 5\n"
     "data_size(Bytes): |   avg_time(us): | alg_bandwidth(GB/s): | check_result:\n", "has no rows"),
    ("data_size(Bytes): |   avg_time(us): | alg_bandwidth(GB/s): | check_result:\n8192   |  764.5", "hccl_test row '8192   |  764.5'"),
    ("data_size(Bytes): |   avg_time(us): | alg_bandwidth(GB/s): | check_result:\n8192 | x | 0.1 | success\n", "hccl_test row"),
    ("\x00\xff garbage | | |\n", "no hccl_test table header"),
])
def test_hccl_test_not_a_table_is_a_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message.replace("(", r"\(").replace("|", r"\|")):
        parse_hccl_test(text)


def test_a_truncated_hccl_test_table_keeps_the_rows_it_has() -> None:
    lines = hccl_doc().splitlines()
    assert [r.size for r in parse_hccl_test("\n".join(lines[:5])).rows] == [8192, 16384, 32768]
