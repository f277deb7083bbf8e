"""Parsers of nccl-tests (and rccl-tests) result tables: `sendrecv_perf`, `all_reduce_perf`, ... Pure.

The table's column header (`#  size  count  type  [redop  root]  time  algbw  busbw  #wrong|error ...`)
says where each value is, so both layouts (with and without redop/root) and Open MPI's `--tag-output`
prefixes (`[1,0]<stdout>:`) are read the same way. Values are the out-of-place columns. Must not import
typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import ParseError

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


def gbit_per_s(gbytes_per_s: float) -> float:
    """nccl-tests' GB/s (10^9 bytes) as Gbit/s, the unit of the netcheck matrix."""
    return gbytes_per_s * 8
