"""Summaries over a collected bundle: topology majority diff and msprof per-rank step breakdown.

Pure parsers and evaluators (text in, frozen records out) plus `summarize_bundle`, which
only reads files of a bundle directory (through layout.py's reader and names); `collect` prints them
and `triage` reads them. Must not import typer or rich.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ascendctl.bundle.layout import (CMD_NPU_TOPO, CMD_NVIDIA_TOPO, COMMANDS, FILES, MSPROF_DIRS, MSPROF_PROFILE,
                                     command_path, iter_bundle, msprof_kind, node_path)
from ascendctl.facts.parsers import ParseError
from ascendctl.errors import PathEscapeError
from ascendctl.outliers import Rule
from ascendctl.paths import child
from ascendctl.facts.parsers.npu_smi import parse_npu_topo, parse_nvidia_topo

if TYPE_CHECKING:
    from ascendctl.facts.parsers.npu_smi import TopoMatrix

log = logging.getLogger(__name__)

COMM_SHARE_LIMIT = 0.15  # communication above 15% of step time is flagged
# A straggler is slow by outliers.py's rule, the one rule of ascendctl (netcheck's too), mirrored for times: a rank's
# step time above the healthy ranks' median by more than 3 of their spreads (never counted as less than 5%) AND by at
# least 1.2x (the smallest slowdown worth naming: a tight cluster does not turn a few per cent into a straggler), in
# both halves of its steps (the second look).
STRAGGLER_RULE = Rule(higher_is_worse=True, min_effect=0.2)
STRAGGLER_FACTOR = 1 + STRAGGLER_RULE.min_effect  # the least factor over the median a straggler's step time is

TOPO_COMMANDS = {CMD_NPU_TOPO: parse_npu_topo, CMD_NVIDIA_TOPO: parse_nvidia_topo}  # command output -> its parser


# --- topology -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CellDiff:
    """One matrix cell that differs from the majority; '' when the row or column is missing."""

    row: str
    column: str
    expected: str
    actual: str

    def to_dict(self) -> dict[str, str]:
        return {"row": self.row, "column": self.column, "expected": self.expected, "actual": self.actual}


@dataclass(frozen=True, slots=True)
class TopoOutlier:
    """A node whose matrix differs from the majority's, with the differing cells."""

    node: str
    cells: tuple[CellDiff, ...]


@dataclass(frozen=True, slots=True)
class TopoSummary:
    """The majority matrix's nodes and every node that differs from it."""

    tool: str  # npu-smi | nvidia-smi
    majority: tuple[str, ...]
    outliers: tuple[TopoOutlier, ...]
    devices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "devices": list(self.devices),
            "majority": list(self.majority),
            "outliers": [{"node": o.node, "cells": [c.to_dict() for c in o.cells]} for o in self.outliers],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TopoSummary":
        """A summary back from `summary.json`; KeyError/ValueError/TypeError on garbage."""
        outliers = tuple(TopoOutlier(str(o["node"]), tuple(CellDiff(str(c["row"]), str(c["column"]), str(c["expected"]),
                                                                       str(c["actual"])) for c in o["cells"]))
                         for o in data["outliers"])
        return cls(str(data["tool"]), tuple(str(n) for n in data["majority"]), outliers,
                   tuple(str(d) for d in data.get("devices") or ()))


def matrix_cells(matrix: TopoMatrix) -> dict[tuple[str, str], str]:
    """(row, column) -> link type for every cell of the link matrix (affinity columns excluded)."""
    return {(row.name, column): link for row in matrix.rows for column, link in zip(matrix.columns, row.links)}


def compare_topologies(matrices: Mapping[str, TopoMatrix], *, tool: str = "npu-smi") -> TopoSummary:
    """Find the majority matrix (ties: the first node's in order) and flag every node that differs, cell by cell."""
    cells = {node: matrix_cells(m) for node, m in matrices.items()}
    keys = {node: tuple(sorted(c.items())) for node, c in cells.items()}
    if not keys:
        return TopoSummary(tool, (), ())
    counts = Counter(keys.values())
    best = max(counts.values())
    reference_key = next(k for k in keys.values() if counts[k] == best)
    reference_node = next(n for n, k in keys.items() if k == reference_key)
    reference = cells[reference_node]
    majority = tuple(n for n, k in keys.items() if k == reference_key)
    outliers = []
    for node, own in cells.items():
        if keys[node] == reference_key:
            continue
        diffs = [
            CellDiff(row, column, reference.get((row, column), ""), own.get((row, column), ""))
            for row, column in sorted(set(reference) | set(own), key=_cell_order)
            if reference.get((row, column)) != own.get((row, column))
        ]
        outliers.append(TopoOutlier(node, tuple(diffs)))
    return TopoSummary(tool, majority, tuple(outliers), matrices[reference_node].devices)


def _cell_order(cell: tuple[str, str]) -> tuple[Any, ...]:
    return tuple(_natural(part) for part in cell)


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


# --- msprof -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RankProfile:
    """One rank's step time split into computation and communication (microseconds per step)."""

    rank: str  # "<node>/<PROF dir> dev <id>"
    steps: int
    step_us: float  # median iteration time
    comm_us: float  # communication per step
    comm_share: float
    comm_flag: bool = False
    straggler: bool = False

    @property
    def compute_us(self) -> float:
        return max(self.step_us - self.comm_us, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "steps": self.steps, "step_us": round(self.step_us, 3),
                "compute_us": round(self.compute_us, 3), "comm_us": round(self.comm_us, 3),
                "comm_share": round(self.comm_share, 4), "comm_flag": self.comm_flag, "straggler": self.straggler}


@dataclass(frozen=True, slots=True)
class MsprofSummary:
    """Per-rank profiles, the median step time and the limits they were judged by.

    `straggler_factor`: the least factor over the median worth naming (1 + the rule's min_effect); `straggler_limit_us`:
    the step time above which a look is slow (that factor and `spreads` spreads over the healthy ranks' median, the
    larger); `step_spread`: how much the healthy ranks' step times vary (a fraction, the floor applied)."""

    ranks: tuple[RankProfile, ...]
    median_step_us: float
    comm_limit: float
    straggler_factor: float
    straggler_limit_us: float | None = None
    step_spread: float | None = None
    straggler_rule: Rule = STRAGGLER_RULE

    def to_dict(self) -> dict[str, Any]:
        rule = self.straggler_rule
        return {"ranks": [r.to_dict() for r in self.ranks], "median_step_us": round(self.median_step_us, 3),
                "comm_limit": self.comm_limit, "straggler_factor": self.straggler_factor,
                "straggler_limit_us": None if self.straggler_limit_us is None else round(self.straggler_limit_us, 3),
                "step_spread": None if self.step_spread is None else round(self.step_spread, 4),
                "straggler_rule": {"spreads": rule.spreads, "floor": rule.floor, "min_effect": round(rule.min_effect, 6),
                                   "looks": rule.looks},
                "comm_flagged": [r.rank for r in self.ranks if r.comm_flag],
                "stragglers": [r.rank for r in self.ranks if r.straggler]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MsprofSummary":
        """A summary back from `summary.json`; KeyError/ValueError/TypeError on garbage."""
        ranks = tuple(RankProfile(str(r["rank"]), int(r["steps"]), float(r["step_us"]), float(r["comm_us"]),
                                  float(r["comm_share"]), bool(r.get("comm_flag")), bool(r.get("straggler")))
                      for r in data["ranks"])
        limit, spread, rule = data.get("straggler_limit_us"), data.get("step_spread"), data.get("straggler_rule")
        return cls(ranks, float(data["median_step_us"]), float(data.get("comm_limit", COMM_SHARE_LIMIT)),
                   float(data.get("straggler_factor", STRAGGLER_FACTOR)), None if limit is None else float(limit),
                   None if spread is None else float(spread),
                   Rule(spreads=float(rule["spreads"]), floor=float(rule["floor"]), min_effect=float(rule["min_effect"]),
                        looks=int(rule["looks"]), higher_is_worse=True) if rule is not None else STRAGGLER_RULE)


def _rows(text: str) -> list[dict[str, str]]:
    return [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "N/A", "NA") else None
    except ValueError:
        return None


def parse_step_trace(text: str) -> dict[str, list[float]]:
    """step_trace CSV (current or legacy header) -> device id ('' when the file has none) -> iteration times (us)."""
    header = text.splitlines()[0] if text else ""
    if "Iteration Time(us)" not in header:
        raise ParseError("step_trace CSV without an 'Iteration Time(us)' column")
    steps: dict[str, list[float]] = {}
    for row in _rows(text):
        value = _number(row.get("Iteration Time(us)"))
        if value is not None:
            steps.setdefault(row.get("Device_id", ""), []).append(value)
    return steps


def parse_comm_statistic(text: str) -> dict[str, float]:
    """communication_statistic / hccl_statistic CSV -> device id ('' when none) -> total communication time (us)."""
    header = text.splitlines()[0] if text else ""
    if "Total Time(us)" not in header:
        raise ParseError("communication statistic CSV without a 'Total Time(us)' column")
    totals: dict[str, float] = {}
    for row in _rows(text):
        value = _number(row.get("Total Time(us)"))
        if value is not None:
            device = row.get("Device_id", "")
            totals[device] = totals.get(device, 0.0) + value
    return totals


def summarize_msprof(
    step_traces: Mapping[str, str],
    comm_stats: Mapping[str, str],
    *,
    comm_limit: float = COMM_SHARE_LIMIT,
    straggler_rule: Rule = STRAGGLER_RULE,
) -> MsprofSummary:
    """Per rank step/compute/comm times from CSV texts keyed by profile (a PROF_* dir); flags comm share and stragglers.

    A straggler (`straggler_rule`, outliers.py's rule): the healthy ranks' centre and spread come from every rank's
    median step time; a rank's two looks are the medians of the first and the second half of its steps, and it is a
    straggler only when both are slow (a rank with one step is looked at once: never named)."""
    ranks = []
    halves: list[list[float]] = []
    for source, text in sorted(step_traces.items()):
        try:
            steps = parse_step_trace(text)
            comm = parse_comm_statistic(comm_stats[source]) if source in comm_stats else {}
        except ParseError as exc:
            log.info("%s: %s", source, exc)
            continue
        for device, times in sorted(steps.items()):
            step = statistics.median(times)
            comm_total = comm.get(device, comm.get("", 0.0) if len(steps) == 1 else 0.0)
            per_step = comm_total / len(times)
            share = per_step / step if step > 0 else 0.0
            label = f"{source} dev {device}" if device else source
            ranks.append(RankProfile(label, len(times), step, per_step, share, comm_flag=share > comm_limit))
            half = (len(times) + 1) // 2
            halves.append([statistics.median(times[:half]), statistics.median(times[half:])] if len(times) > 1 else [step])
    median = statistics.median([r.step_us for r in ranks]) if ranks else 0.0
    # the rule compares logarithms: a step time of 0 (nothing timed) says nothing of the healthy ranks, and is never slow
    spread = straggler_rule.spread(r.step_us for r in ranks if r.step_us > 0)
    flagged = tuple(
        RankProfile(r.rank, r.steps, r.step_us, r.comm_us, r.comm_share, r.comm_flag,
                    spread is not None and straggler_rule.judge(looks, spread).outcome == "slow")
        for r, looks in zip(ranks, halves)
    )
    return MsprofSummary(flagged, median, comm_limit, 1 + straggler_rule.min_effect,
                         None if spread is None else straggler_rule.limit(spread),
                         None if spread is None else spread.relative, straggler_rule)


def _profile_key(node: str, relative: PurePosixPath) -> str:
    """The PROF_* directory (or the CSV's parent) a CSV belongs to, prefixed with its node."""
    parts = relative.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].startswith(MSPROF_PROFILE):
            return f"{node}/{parts[i]}"
    return f"{node}/{relative.parent.name}"


def _text(data: bytes) -> str:
    """A file's text as Path.read_text gives it: UTF-8 (bad bytes replaced), line ends made "\n"."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def summarize_perf(directory: Path) -> dict[str, Any] | None:
    """`ascendctl perf`'s verdict over the per-rank profiles a bundle holds (`collect --profile`), or None without any."""
    from ascendctl.perf.analyse import analyse
    from ascendctl.perf.model import MixedTasksError
    from ascendctl.perf.read import read_profiles

    try:
        profiles, problems, found = read_profiles([directory])
    except MixedTasksError as exc:  # refused, with the reason, in place of a verdict
        return analyse([]).summary_dict() | {"verdict": f"not judged: {exc.message}"}
    return analyse(profiles, problems).summary_dict() if found else None


def summarize_bundle(directory: Path, nodes: Sequence[str], *, comm_limit: float = COMM_SHARE_LIMIT,
                     straggler_rule: Rule = STRAGGLER_RULE) -> dict[str, Any]:
    """Topology, msprof and perf summaries of a bundle directory, as the data `summary.json` holds.

    Read through layout.py's reader: the nodes' topology outputs and the msprof summary CSVs under their files/,
    never through a link."""
    summary: dict[str, Any] = {"topology": [], "msprof": None, "perf": summarize_perf(directory)}
    names: dict[str, None] = {}  # the nodes, in order
    for node in nodes:
        try:
            child(directory, node)
            names[node] = None
        except PathEscapeError as exc:  # nothing of this node was written: child() refused it at collection too
            log.info("%s", exc)
    topo_paths = {command_path(name): name for name in TOPO_COMMANDS}

    def want(rel: str, is_dir: bool) -> bool:
        node, _, inside = rel.partition("/")
        if node not in names:
            return False
        if is_dir:  # the node, its commands/, everything under its files/
            return not inside or inside == COMMANDS or inside.split("/")[0] == FILES
        if inside in topo_paths:
            return True
        parts = PurePosixPath(rel).parts  # a summary CSV of msprof's, in one of its export folders
        return parts[1] == FILES and any(d in parts for d in MSPROF_DIRS) and msprof_kind(PurePosixPath(rel)) is not None

    outputs: dict[str, dict[str, str]] = {name: {} for name in TOPO_COMMANDS}  # command -> node -> text
    step_traces: dict[str, str] = {}
    comm_stats: dict[str, str] = {}
    for entry in iter_bundle(directory, want=want):
        node, _, inside = entry.path.partition("/")
        text = _text(entry.stream.read())
        if inside in topo_paths:
            outputs[topo_paths[inside]][node] = text
            continue
        relative = PurePosixPath(inside).relative_to(FILES)
        key = _profile_key(node, relative)
        if msprof_kind(relative) == "step_trace":
            step_traces[key] = text
        else:
            comm_stats[key] = text
    for name, parser in TOPO_COMMANDS.items():
        matrices = {}
        for node in names:
            if node in outputs[name]:
                try:
                    matrices[node] = parser(outputs[name][node])
                except ParseError as exc:
                    log.info("%s: %s", node_path(node, command_path(name)), exc)
        if matrices:
            summary["topology"].append(compare_topologies(matrices, tool=name.split(".")[0]).to_dict())
    if step_traces:
        summary["msprof"] = summarize_msprof(step_traces, comm_stats, comm_limit=comm_limit,
                                             straggler_rule=straggler_rule).to_dict()
    return summary
