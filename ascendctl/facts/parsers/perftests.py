"""Parsers of collective-benchmark result tables: nccl-tests (and rccl-tests) and CANN's hccl_test. Pure.

nccl-tests (`sendrecv_perf`, `all_reduce_perf`, ...): the table's column header (`#  size  count  type  [redop
root]  time  algbw  busbw  #wrong|error ...`) says where each value is, so both layouts (with and without
redop/root) and Open MPI's `--tag-output` prefixes (`[1,0]<stdout>:`) are read the same way. Values are the
out-of-place columns.

hccl_test (`all_reduce_test`, ...): a `data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): |
check_result:` header (the binary prints `aveg_time`, its documentation shows `avg_time`), then one row per
size, `8192 | 764.55 | 0.00998 | success` (or `failed`, or `NULL` when not checked); a rank whose result check
failed prints `local rank_id 3, check result failed, <row>`. Must not import typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ascendctl.facts.parsers import ParseError

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")


@dataclass(frozen=True, slots=True)
class PerfRow:
    """One size of a nccl-tests table (out-of-place): bytes, microseconds, algorithm and bus bandwidth in GB/s."""

    size: int
    time_us: float
    algbw: float
    busbw: float


@dataclass(frozen=True, slots=True)
class PerfTable:
    rows: tuple[PerfRow, ...]
    avg_busbw: float | None  # the `# Avg bus bandwidth` line, when the run got that far

    def at_size(self, size: int) -> PerfRow | None:
        return next((r for r in self.rows if r.size == size), None)

    @property
    def largest(self) -> PerfRow | None:
        return max(self.rows, key=lambda r: r.size) if self.rows else None


def parse_nccl_tests(text: str) -> PerfTable:
    """The out-of-place rows of a nccl-tests table; ParseError when there is no table header or no row."""
    columns: list[str] | None = None
    rows: list[PerfRow] = []
    avg: float | None = None
    for raw in text.splitlines():
        line = _TAG.sub("", raw).rstrip()
        stripped = line.strip()
        if stripped.startswith("#"):
            words = stripped.lstrip("#").split()
            if words[:2] == ["size", "count"] and "busbw" in words:
                columns = words
            found = _AVG.match(stripped)
            if found:
                avg = float(found.group(1))
            continue
        if columns is None or not stripped:
            continue
        words = stripped.split()
        if not words[0].isdigit():
            continue
        try:
            at = {name: columns.index(name) for name in ("size", "time", "algbw", "busbw")}
            rows.append(PerfRow(int(words[at["size"]]), float(words[at["time"]]), float(words[at["algbw"]]),
                                float(words[at["busbw"]])))
        except (IndexError, ValueError) as exc:
            raise ParseError(f"nccl-tests row {stripped[:80]!r}: {exc}") from None
    if columns is None:
        raise ParseError("no nccl-tests table header (# size count type ... busbw)")
    if not rows:
        raise ParseError("nccl-tests table has no rows")
    return PerfTable(tuple(rows), avg)


_HCCL_HEADER = re.compile(r"^\s*data_size\(Bytes\):\s*\|\s*(?:aveg|avg)_time\(us\):\s*\|\s*alg_bandwidth\(GB/s\):"
                          r"\s*\|\s*check_result:\s*$")
_HCCL_ROW = re.compile(r"^\s*(\d+)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|\s*(success|failed|NULL)\s*$")
_HCCL_RANK_FAILED = re.compile(r"^\s*local rank_id (\d+), check result failed,\s*(\d+)\s*\|")


@dataclass(frozen=True, slots=True)
class HcclRow:
    """One size of an hccl_test table: bytes per NPU, microseconds, algorithm bandwidth in GB/s, and the check."""

    size: int
    time_us: float
    algbw: float
    check: str  # success | failed | NULL (not checked)


@dataclass(frozen=True, slots=True)
class HcclTable:
    rows: tuple[HcclRow, ...]
    failed_ranks: tuple[tuple[int, int], ...]  # (rank, size) of each `local rank_id N, check result failed` line

    def at_size(self, size: int) -> HcclRow | None:
        return next((r for r in self.rows if r.size == size), None)

    @property
    def largest(self) -> HcclRow | None:
        return max(self.rows, key=lambda r: r.size) if self.rows else None


def parse_hccl_test(text: str) -> HcclTable:
    """The rows of an hccl_test table and the ranks whose check failed; ParseError when there is no header or no row.

    A row that starts like a table row but does not read as one is an error too (a cut-off or mangled table).
    """
    header = False
    rows: list[HcclRow] = []
    failed: list[tuple[int, int]] = []
    for raw in text.splitlines():
        line = _TAG.sub("", raw).rstrip()
        found = _HCCL_RANK_FAILED.match(line)
        if found:
            failed.append((int(found.group(1)), int(found.group(2))))
            continue
        if _HCCL_HEADER.match(line):
            header = True
            continue
        if not header or not line.strip()[:1].isdigit():
            continue
        row = _HCCL_ROW.match(line)
        if row is None:
            raise ParseError(f"hccl_test row {line.strip()[:80]!r}: expected 'bytes | us | GB/s | success|failed|NULL'")
        rows.append(HcclRow(int(row.group(1)), float(row.group(2)), float(row.group(3)), row.group(4)))
    if not header and not failed:
        raise ParseError("no hccl_test table header (data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:)")
    if not rows and not failed:
        raise ParseError("hccl_test table has no rows")
    return HcclTable(tuple(rows), tuple(failed))


def gbit_per_s(gbytes_per_s: float) -> float:
    """nccl-tests' and hccl_test's GB/s (10^9 bytes) as Gbit/s, the unit of the netcheck matrix."""
    return gbytes_per_s * 8
