"""Triage: why did the job die, and where did it start?

One engine for `ascendctl triage` (bundles, directories, log files) and for the failure summary
of `ascendctl launch` (the lines it streams plus the job record): extract findings from
candidate lines (extract.py), model the job per rank and infer the culprit by an ordered rule
table (engine.py). Must not import typer or rich.
"""

from __future__ import annotations

import os
import re
import threading
from collections import deque
from pathlib import PurePosixPath
from typing import Any, Iterable, Mapping

from ascendctl.errors import AscendctlError
from ascendctl.triage.signatures import trigger_pattern
from ascendctl.triage.engine import RULES, report
from ascendctl.triage.extract import Extraction, attribute_path, attribute_path_full, match_line
from ascendctl.triage.model import Finding, RankSummary, Source, TriageReport, Victim
from ascendctl.triage.reader import Reader, candidate_lines_python
from ascendctl.triage.times import parse_time, split_stamp

_TRIGGER = re.compile(trigger_pattern())


def triage(paths: Iterable[str | os.PathLike[str]], *, job: Mapping[str, Any] | None = None) -> TriageReport:
    """Read bundles, directories or log files once each and return the verdict with its evidence.

    `job` is a job record (as `ascendctl launch` writes it) when the paths do not hold one.
    """
    ex = Extraction()
    Reader(ex).read(list(paths))
    if not ex.files and not ex.stack_files:  # no verdict at all rather than a confident one over nothing
        unreadable, skipped = ex.listed()
        problems = "; ".join(unreadable) or "no text log files found"
        if skipped:
            problems += f" (skipped: {'; '.join(skipped)})"
        raise AscendctlError(f"nothing could be read: {problems}", hint="pass a bundle from `ascendctl collect`, a directory or log files")
    if job is not None and ex.job is None:
        ex.job = dict(job)
    return report(ex)


class LiveTriage:
    """The same engine fed line by line while `ascendctl launch` streams each node's launcher log.

    Only candidate lines (the prefilter's) are kept, plus the last lines of each node for its progress,
    so memory stays small for long jobs. Thread-safe: one follower thread per node calls `line`.
    """

    TAIL_LINES = 200

    def __init__(self) -> None:
        self._ex = Extraction()
        self._lock = threading.Lock()
        self._sources: dict[str, Source] = {}
        self._numbers: dict[str, int] = {}
        self._tails: dict[str, deque[str]] = {}

    def _source(self, node: str, file: str) -> Source:
        key = f"{node}\0{file}"
        if key not in self._sources:
            _, rank, local, device, pid = attribute_path_full(PurePosixPath(file), bundle=False)
            self._ex.order += 1
            self._sources[key] = Source(f"{node}:{file}", node, rank, device, pid, local_rank=local, order=self._ex.order)
            self._numbers[key] = 0
            self._tails[key] = deque(maxlen=self.TAIL_LINES)
            self._ex.files += 1
        return self._sources[key]

    def line(self, node: str, text: str, *, file: str = "launcher.log", number: int | None = None) -> None:
        """One line of a node's log, as streamed (a launch stamp in front is understood)."""
        with self._lock:
            src = self._source(node, file)
            key = f"{node}\0{file}"
            self._numbers[key] = number if number is not None else self._numbers[key] + 1
            self._ex.bytes_read += len(text) + 1
            self._tails[key].append(text)
            if _TRIGGER.search(text):
                self._ex.line(src, self._numbers[key], text[:65536])

    def report(self, job: Mapping[str, Any] | None) -> TriageReport:
        """The verdict over everything fed so far, with the job record's exits and addresses."""
        with self._lock:
            for key, src in self._sources.items():
                self._ex.flush_torchrun(src)
                self._ex.tail(src, "\n".join(self._tails[key]).encode())
            self._ex.job = dict(job) if job is not None else None
            return report(self._ex)


def scan_paths(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Finding], dict[str, Any]]:
    """Read every path once; return the findings and what was read (for benchmarks)."""
    ex = Extraction()
    Reader(ex).read(list(paths))
    return ex.findings, {"files": ex.files, "bytes": ex.bytes_read}


__all__ = ["RULES", "Finding", "LiveTriage", "RankSummary", "TriageReport", "Victim", "attribute_path", "candidate_lines_python",
           "match_line", "parse_time", "scan_paths", "split_stamp", "triage"]
