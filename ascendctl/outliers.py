"""What "slow" means: a figure beyond the noise of its healthy peers, seen so on every look. One rule for all of ascendctl.

netcheck's pairs, its `--quick` rings and groups and the device-plane backends (hccl_test, nccl-tests) judge by it; a
profile's slow rank (step times, where higher is worse) can call it the same way. Figures are compared as logarithms by
default (rates and times vary by ratios: 10x slower is as far below as 10x faster is above). The healthy figures'
centre and spread are robust: the median, and 1.4826 x the median absolute deviation (a standard deviation when the
noise is normal; the standard deviation of the kept figures when larger), with a slow group apart left out first (slow
figures pull only one way, and may be half of them in a small cluster); the spread never counts as less than `floor`
(a tight cluster does not turn a few per cent into a verdict). A look is slow when it lies more than `spreads` spreads
from the centre on the bad side AND beyond the smallest shortfall worth naming (`min_effect`: netcheck's
1 - --threshold); a suspect is slow only when every look at it is, and it was looked at at least `looks` times. Pure,
standard library only; imports nothing from ascendctl.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

MAD_TO_SIGMA = 1.4826  # the median absolute deviation of normal noise x this = its standard deviation
SPREADS = 3.0  # how many spreads beyond the centre a look must lie (3 sigma, as msprof-analyze's slow-rank rule)
FLOOR = 0.05  # the least spread assumed (of the logarithms: about 5%), whatever the healthy figures show
MIN_EFFECT = 0.2  # the smallest relative shortfall worth naming (netcheck --threshold 0.8)
LOOKS = 2  # a verdict needs this many looks, all slow
TINY = 1e-12  # a figure of 0 (nothing moved) is this, for the logarithm: as slow as it gets

SLOW, NOISE, OK = "slow", "noise", "ok"  # one look: beyond the noise and the minimum effect; worse than the minimum
# effect but within the noise; neither


@dataclass(frozen=True, slots=True)
class Spread:
    """The healthy figures: their centre (median, in the figures' unit), their spread (robust sigma, at least the floor;
    in the rule's scale: of the logarithms, a fraction of the centre, or in the figures' unit), how many."""

    center: float
    sigma: float  # the spread judged by: max(measured_sigma, the floor)
    measured_sigma: float  # what the healthy figures showed: _sigma (in the rule's scale)
    count: int  # healthy figures (after the bad side was left out)
    clipped: int  # figures left out as not healthy (on the bad side, beyond the noise)
    log: bool = True  # whether sigma is of the logarithms

    @property
    def relative(self) -> float:
        """The spread judged by, as a fraction of the centre."""
        return self.sigma if self.log else self.sigma / abs(self.center) if self.center else math.inf

    @property
    def measured_relative(self) -> float:
        """The spread the healthy figures showed, as a fraction of the centre (the floor not applied)."""
        return self.measured_sigma if self.log else self.measured_sigma / abs(self.center) if self.center else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"center": self.center, "relative": round(self.relative, 4),
                "measured_relative": round(self.measured_relative, 4), "count": self.count, "clipped": self.clipped}


@dataclass(frozen=True, slots=True)
class Judgement:
    """A suspect's looks against the healthy spread: `slow` (every look, and at least `looks` of them), `ok` (a look
    that is fine: the suspicion was noise), else `inconclusive` (low, but within the noise, or seen only once)."""

    outcome: str  # slow | inconclusive | ok
    looks: tuple[float, ...]
    classes: tuple[str, ...]  # each look: slow | noise | ok
    ratio: float  # the least bad look / centre
    spreads: float  # how many spreads the least bad look lies beyond the centre on the bad side (negative: good side)


@dataclass(frozen=True, slots=True)
class Rule:
    """The rule: `spreads` spreads and `min_effect` beyond the centre, on the bad side (lower, or with higher_is_worse,
    higher), on at least `looks` looks; the spread never below `floor`; figures compared as logarithms (`log`: they
    must be positive) or as they are (then `floor` and `min_effect` are fractions of the centre)."""

    spreads: float = SPREADS
    floor: float = FLOOR
    min_effect: float = MIN_EFFECT
    looks: int = LOOKS
    higher_is_worse: bool = False
    log: bool = True

    def _t(self, value: float) -> float:
        """A figure on the rule's scale, turned so that lower is worse."""
        x = math.log(max(value, TINY)) if self.log else value
        return -x if self.higher_is_worse else x

    def _back(self, t: float) -> float:
        x = -t if self.higher_is_worse else t
        return math.exp(x) if self.log else x

    def _effect(self, center: float) -> float:
        """How far below `center` (on the rule's scale) the minimum effect lies."""
        if not self.log:
            return self.min_effect * abs(center)
        shortfall = 1 - self.min_effect if not self.higher_is_worse else 1 / (1 + self.min_effect)
        return -math.log(max(shortfall, TINY))

    def _floor(self, center: float) -> float:
        return self.floor if self.log else self.floor * abs(center)

    def _slow(self, t: float, center: float, sigma: float) -> bool:
        return t < center - self._effect(center) and t < center - self.spreads * sigma

    def spread(self, values: Iterable[float], *, trust_best: bool = False) -> Spread | None:
        """The healthy figures' centre and spread among `values` (None when there are none).

        The spread: of all the figures, or, when they fall apart in two (sorted, one step down of more than twice the
        minimum effect, with at least half of them above it: one slow node of 4 is in half the pairs), of those above
        the step (`trust_best`: the best figure is known to be healthy, so whatever the number above the first such
        step: few figures of which most may be bad, as --quick's ring and halves). The centre: the median of the
        figures that are not slow against it, found by repetition, with the spread of `_sigma`."""
        data = sorted((self._t(v) for v in values), reverse=True)  # best first
        if not data:
            return None
        start = data
        for i in range(1 if trust_best else (len(data) + 1) // 2, len(data)):
            if data[i - 1] - data[i] > 2 * self._effect(statistics.median(data[:i])):
                start = data[:i]  # a group apart below: slow, however many
                break
        kept = start
        for step in range(len(data) + 1):
            center = statistics.median(kept)
            sigma = max(_sigma(start, kept if step else (), center), self._floor(center))
            now = [t for t in data if not self._slow(t, center, sigma)]
            if now == kept or not now:
                break
            kept = now
        center = statistics.median(kept)
        measured = _sigma(start, kept, center)
        return Spread(self._back(center), max(measured, self._floor(center)), measured, len(kept), len(data) - len(kept),
                      self.log)

    def _center(self, spread: Spread) -> float:
        return self._t(spread.center)

    def distance(self, value: float, spread: Spread) -> float:
        """How many spreads `value` lies beyond the centre on the bad side (negative: on the good side)."""
        return (self._center(spread) - self._t(value)) / spread.sigma if spread.sigma else 0.0

    def limit(self, spread: Spread) -> float:
        """The figure beyond which a look is slow (both conditions at once)."""
        center = self._center(spread)
        return self._back(min(center - self.spreads * spread.sigma, center - self._effect(center)))

    def look(self, value: float, spread: Spread) -> str:
        """One look: `slow` (beyond both the noise and the minimum effect), `noise` (beyond the minimum effect only), `ok`."""
        center, t = self._center(spread), self._t(value)
        if t >= center - self._effect(center):
            return OK
        return SLOW if self._slow(t, center, spread.sigma) else NOISE

    def judge(self, looks: Sequence[float], spread: Spread) -> Judgement:
        """Every look at one suspect, judged together: slow only when every look is slow and there are enough of them."""
        classes = tuple(self.look(v, spread) for v in looks)
        if not looks:
            return Judgement("inconclusive", (), (), 1.0, 0.0)
        best = max(looks, key=self._t)
        if all(c == SLOW for c in classes) and len(looks) >= self.looks:
            outcome = "slow"
        elif OK in classes:
            outcome = "ok"
        else:
            outcome = "inconclusive"
        ratio = best / spread.center if spread.center else 1.0
        return Judgement(outcome, tuple(looks), classes, ratio, self.distance(best, spread))


def _sigma(start: Sequence[float], kept: Sequence[float], center: float) -> float:
    """The spread around `center`: 1.4826 x the median absolute deviation of the figures it started from, or the
    standard deviation of those kept as healthy when larger (none given: the first step, when a slow group may still be
    among them and would inflate it). The MAD alone is robust but wobbly on a few figures (from 16 pairs with 20% noise
    it says 8% one time in twenty, and noise then looks slow); the standard deviation of the kept ones is steady, and
    cutting the tail of noise at 3 spreads hardly shrinks it, so leaving figures out does not talk the spread down."""
    mad = MAD_TO_SIGMA * statistics.median(abs(t - center) for t in start)
    if not kept:
        return mad
    return max(mad, math.sqrt(sum((t - center) ** 2 for t in kept) / len(kept)))
