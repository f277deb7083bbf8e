"""A job's pace: how long it may go without progress before it counts as hung (`launch --hang-timeout S|auto`). Pure.

Fixed (`--hang-timeout 600`): no progress line for that long, `first_step_factor` times that before the first one.
Learned (`--hang-timeout auto`, or `auto:FLOOR`): the intervals between the job's steps (the time from one new highest
step number to the next, over every rank's lines; lines without a number that come within MERGE_WINDOW of each other
are one step's) are learned after a warm-up (the first WARMUP intervals: compilation, caches); once MIN_LEARNED are
known the allowance is AUTO_FACTOR times their 99th percentile, never below the floor. Before the first step it is
AUTO_FIRST_STEP (loading, compiling and the first step are slow and their length unknown); with no progress line
at all by then, the supervisor says it cannot judge the job and keeps watching, never stops it (jobs/supervise.py); between the first step
and the end of the learning, twice AUTO_FACTOR times the longest interval yet (warm-up included), at least 3x the floor. A checkpoint save (CHECKPOINT_RX in a
line) multiplies the allowance by CHECKPOINT_FACTOR until the next step, and that step's interval is not learned. Must not import typer or rich.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass

AUTO_FLOOR = 30.0  # seconds: the least a learned allowance is (a GC pause or an evaluation must not count as a hang)
AUTO_FACTOR = 5.0  # times the p99 of the learned step intervals
AUTO_FIRST_STEP = 600.0  # seconds before the first step, learned mode (or 3x the floor, if that is more)
WARMUP = 2  # intervals not learned: the first steps compile and fill caches
MIN_LEARNED = 5  # intervals learned before the learned allowance applies
LEARNED_KEPT = 1000  # the newest intervals kept
MERGE_WINDOW = 0.5  # seconds: numberless progress lines closer than this are one step's (every rank prints it)
CHECKPOINT_FACTOR = 10.0
CHECKPOINT_RX = re.compile(r"(?i)\b(?:sav(?:e|es|ing)\b[^\n]{0,60}\bcheckpoint|checkpoint[^\n]{0,60}\bsav(?:e|ed|ing)\b"
                           r"|save_checkpoint|saving model)")


@dataclass(frozen=True, slots=True)
class HangTimeout:
    """`--hang-timeout` as given: seconds, or learned (`auto`) with a floor."""

    seconds: float  # the fixed allowance, or the learned one's floor
    auto: bool = False

    def __str__(self) -> str:
        return f"auto:{self.seconds:g}" if self.auto else f"{self.seconds:g}"


def parse_hang_timeout(text: str) -> HangTimeout:
    """`600`, `auto` or `auto:20` (a floor of 20 s); ValueError with the accepted forms otherwise."""
    word, _, floor = text.strip().partition(":")
    try:
        if word == "auto":
            seconds = float(floor) if floor else AUTO_FLOOR
            auto = True
        else:
            if floor:
                raise ValueError
            seconds, auto = float(word), False
    except ValueError:
        raise ValueError(f"{text!r}: expected SECONDS, auto or auto:FLOOR_SECONDS") from None
    if not math.isfinite(seconds) or seconds < 1:
        raise ValueError(f"{text!r}: at least 1 second")
    return HangTimeout(seconds, auto)


class Pace:
    """The progress a running job made and the allowance it gives (times: any monotonic clock, in seconds)."""

    def __init__(self, timeout: HangTimeout, started: float, first_step_factor: float = 3.0) -> None:
        self.timeout = timeout
        self.first_step_factor = first_step_factor
        self.started = started
        self.last: float | None = None  # the last step's time
        self.step: int | None = None  # the highest step number seen
        self.intervals: deque[float] = deque(maxlen=LEARNED_KEPT)
        self.seen = 0  # intervals seen, warm-up included
        self.longest = 0.0  # the longest of them
        self.saving = False  # a checkpoint save was announced since the last step

    def progress(self, now: float, step: int | None) -> None:
        """A progress line: a new step when its number is higher than any seen (or, without a number, when it comes
        more than MERGE_WINDOW after the last step); a rank repeating a step already seen is no progress."""
        if step is not None and self.step is not None and step <= self.step:
            return
        if step is None and self.last is not None and now - self.last < MERGE_WINDOW:
            return
        if step is not None:
            self.step = step
        if self.last is not None:
            self.seen += 1
            self.longest = max(self.longest, now - self.last)
            if self.seen > WARMUP and not self.saving:  # a step that included a checkpoint save is no step's pace
                self.intervals.append(now - self.last)
        self.last = now
        self.saving = False

    def checkpoint(self) -> None:
        """A checkpoint save was announced: the next step may come late."""
        self.saving = True

    def idle(self, now: float) -> float:
        return now - (self.last if self.last is not None else self.started)

    def allowance(self) -> tuple[float, str]:
        """Seconds without progress that make a hang, and how that was decided (for the notice)."""
        floor = self.timeout.seconds
        if not self.timeout.auto:
            seconds = floor if self.last is not None else floor * self.first_step_factor
            how = f"--hang-timeout {self.timeout}" + ("" if self.last is not None else f", x{self.first_step_factor:g} "
                                                                                      "before the first step")
        elif self.last is None:
            seconds = max(AUTO_FIRST_STEP, floor * self.first_step_factor)
            how = "--hang-timeout auto: before the first step"
        elif len(self.intervals) < MIN_LEARNED:
            seconds = max(floor * self.first_step_factor, 2 * AUTO_FACTOR * self.longest)
            how = f"--hang-timeout auto: still learning ({len(self.intervals)} of {MIN_LEARNED} step intervals)"
        else:
            p99 = percentile(self.intervals, 99)
            seconds = max(floor, AUTO_FACTOR * p99)
            how = (f"--hang-timeout auto: {AUTO_FACTOR:g} x the p99 step interval {p99:.3g} s over "
                   f"{len(self.intervals)} steps, floor {floor:g} s")
        if self.saving:
            seconds *= CHECKPOINT_FACTOR
            how += f", x{CHECKPOINT_FACTOR:g} while a checkpoint is saved"
        return seconds, how


def percentile(values: "deque[float] | list[float]", q: float) -> float:
    """The nearest-rank percentile (no interpolation: a value that was seen)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


__all__ = ["AUTO_FLOOR", "CHECKPOINT_RX", "HangTimeout", "Pace", "parse_hang_timeout", "percentile"]
