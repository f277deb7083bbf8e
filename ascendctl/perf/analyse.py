"""Who is slow, from every rank's profile: the slow-rank vote, the spread of each dimension, the communication share
and the slow links, then one verdict line. Pure arithmetic on perf.model records (docs/perf.md gives each rule its
source). Imports the foundation and perf.model only.
"""

from __future__ import annotations

import math
import re
import statistics
import sys
from collections import Counter, defaultdict
from typing import Callable, Iterable, Sequence

from ascendctl.perf.model import (CommCall, DimensionSpread, DroppedRank, LinkSample, LinkSummary, PerfProblem,
                                  PerfReport, RankInput, RankMeans, Straggler, Vote, gbps)

# Critical values of Dixon's Q (r10 = gap / range, the suspect at either end) at 95% confidence, by sample size n.
# n = 3..30: Rorabacher, D. B. (1991), "Statistical treatment for rejection of deviant values: critical values of
# Dixon's 'Q' parameter and related subrange ratios at the 95% confidence level", Anal. Chem. 63(2), 139-146, Table
# (r10, alpha = 0.05). n = 31..100 are not published there: tests/data/perf/dixon_q95.py computes them by Monte Carlo
# (400,000 draws per n, seed 20261126; it reproduces Rorabacher's n <= 30 within 0.003), rounded to 3 places and kept
# non-increasing.
DIXON_Q95: dict[int, float] = dict(zip(range(3, 101), (
    0.970, 0.829, 0.710, 0.625, 0.568, 0.526, 0.493, 0.466, 0.444, 0.426,  # n = 3..12
    0.410, 0.396, 0.384, 0.374, 0.365, 0.356, 0.349, 0.342, 0.337, 0.331,  # 13..22
    0.326, 0.321, 0.317, 0.312, 0.308, 0.305, 0.301, 0.298,  # 23..30
    0.294, 0.292, 0.289, 0.286, 0.284, 0.282, 0.280, 0.277, 0.275, 0.273,  # 31..40
    0.270, 0.269, 0.267, 0.265, 0.263, 0.262, 0.260, 0.259, 0.257, 0.255,  # 41..50
    0.254, 0.253, 0.252, 0.250, 0.249, 0.247, 0.247, 0.246, 0.245, 0.243,  # 51..60
    0.243, 0.241, 0.240, 0.239, 0.238, 0.238, 0.237, 0.236, 0.235, 0.234,  # 61..70
    0.233, 0.233, 0.232, 0.231, 0.229, 0.229, 0.228, 0.228, 0.227, 0.227,  # 71..80
    0.226, 0.225, 0.224, 0.223, 0.223, 0.223, 0.221, 0.221, 0.221, 0.220,  # 81..90
    0.219, 0.219, 0.218, 0.218, 0.218, 0.217, 0.216, 0.215, 0.215, 0.215,  # 91..100
)))
DIXON_MAX = 100  # above this many ranks: SIGMAS standard deviations below the mean (msprof-analyze's rule)
SIGMAS = 3.0
MIN_EFFECT = 0.05  # a vote also needs the voter this far below the median: jitter of microseconds is not a straggler
COMM_SHARE_LIMIT = 0.15  # communication not overlapped above this share of the step is worth looking at (issue #31)
SPREAD_LIMIT = 0.05  # ranks further apart than this share of the mean step, in one dimension, are flagged
LINK_SHORTFALL = 0.2  # a slow link is also this far below its transport's median (netcheck's --threshold 0.8)
DIMENSIONS = ("step", "compute", "comm_not_overlapped", "free")


# statistics.pstdev's last step (3.11 on): the correctly rounded square root of a fraction; None before 3.11, or if
# a later Python drops it (pstdev then computes it all: the same answer, slower)
_SQRT_OF_FRACTION: Callable[[int, int], float] | None = (getattr(statistics, "_float_sqrt_of_frac", None)
                                                         if sys.version_info >= (3, 11) else None)


def pstdev(values: Sequence[float]) -> float:
    """statistics.pstdev of floats, to the last bit, in half the time (1,000 calls of 1,024 ranks: 0.8 s there): the
    exact variance in integers rather than in Fractions (every value is an integer x over one power of two, 2**shift),
    then the same correctly rounded square root. Anything else (not floats, inf, NaN, all zero, a range of more than
    2**900) goes to statistics.pstdev itself."""
    if _SQRT_OF_FRACTION is None or not values or any(type(value) is not float for value in values):
        return statistics.pstdev(values)
    if not math.isfinite(sum(values)):  # inf or NaN among them (or a sum past the floats: statistics has no limit)
        return statistics.pstdev(values)
    tiny = min([abs(value) for value in values if value], default=0.0)
    huge = max(abs(min(values)), abs(max(values)))
    if tiny == 0.0:  # all zero
        return statistics.pstdev(values)
    low, high = math.frexp(tiny)[1], math.frexp(huge)[1]
    shift = 53 - low  # value * 2**shift is an integer, and a float holds it exactly: a 53-bit mantissa moved up
    if shift < 0 or shift > 1000 or high - low > 900:
        return statistics.pstdev(values)
    scale = 2.0 ** shift
    xs = [int(value * scale) for value in values]
    n, total = len(xs), sum(xs)
    # the population variance, exactly: (n * sum(x^2) - sum(x)^2) / (n * 2**shift)^2, in lowest terms as Fraction has it
    numerator, denominator = n * sum([x * x for x in xs]) - total * total, (n << shift) ** 2
    common = math.gcd(numerator, denominator)
    return _SQRT_OF_FRACTION(numerator // common, denominator // common)


def low_outlier(values: Sequence[float]) -> tuple[str, float] | None:
    """(test, statistic) when the smallest of `values` is an outlier low, else None: Dixon's Q at 95% for 3..100
    values, SIGMAS standard deviations below the mean above that; fewer than 3 values, or any that is not a finite
    number (a trace's `NaN` or `Infinity`: JSON readers accept them), are never judged."""
    return _low_outlier_of_sorted(sorted(values))


def _low_outlier_of_sorted(ordered: list[float]) -> tuple[str, float] | None:
    """low_outlier of `values` given sorted (the vote sorts them once, for its median too)."""
    n = len(ordered)
    if n < 3 or not all(map(math.isfinite, ordered)):
        return None
    if n <= DIXON_MAX:
        spread = ordered[-1] - ordered[0]
        if spread <= 0:
            return None
        q = (ordered[1] - ordered[0]) / spread
        return ("dixon-q", q) if q > DIXON_Q95[n] else None
    mean, sigma = statistics.fmean(ordered), pstdev(ordered)
    if sigma <= 0:
        return None
    z = (mean - ordered[0]) / sigma
    return ("3-sigma", z) if z > SIGMAS else None


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _summaries(profiles: Sequence[RankInput], votes: Counter[int]) -> list[RankMeans]:
    found = []
    for p in profiles:
        step, noc = _mean(s.step_ms for s in p.steps), _mean(s.comm_not_overlapped_ms for s in p.steps)
        share = noc / step if step and noc is not None else None
        found.append(RankMeans(p.rank, len(p.steps), step, _mean(s.compute_ms for s in p.steps),
                                 _mean(s.comm_ms for s in p.steps), noc, _mean(s.free_ms for s in p.steps), share,
                                 votes[p.rank]))
    return found


def _op_counts(profile: RankInput, steps: set[int] | None) -> tuple[tuple[str, int], ...]:
    """How many calls of each op the rank made (in `steps` only, when given: calls of no known step always count)."""
    return tuple(sorted(Counter(c.op for c in profile.calls
                                if steps is None or c.step is None or c.step in steps).items()))


def odd_ranks(profiles: Sequence[RankInput]) -> list[DroppedRank]:
    """The ranks whose collective calls (how many of each op) differ from those of most ranks: msprof-analyze leaves
    such a rank out of its slow-rank analysis, as its calls cannot be matched to the others'. Counted over the steps
    every rank profiled (traces may start at different steps); only when more than half of the ranks agree (else there
    is no "the others" to differ from) and some rank has calls at all."""
    stepped = [{s.step for s in p.steps} for p in profiles if p.steps]
    common = set.intersection(*stepped) if stepped else None
    counts = {p.rank: _op_counts(p, common) for p in profiles}
    if len(counts) < 3 or not any(counts.values()):
        return []
    usual, agree = Counter(counts.values()).most_common(1)[0]
    if 2 * agree <= len(counts):
        return []

    def said(ops: tuple[tuple[str, int], ...]) -> str:
        return ", ".join(f"{op} {n}" for op, n in ops) or "no collective calls"
    return [DroppedRank(rank, f"its collective calls ({said(ops)}) differ from the {agree} other ranks' ({said(usual)})")
            for rank, ops in sorted(counts.items()) if ops != usual]


def _compared(profiles: Sequence[RankInput]) -> tuple[str, dict[str, dict[int, tuple[str, float]]]]:
    """What the vote compares (`wait`, `duration`, `step communication`) and, per call seen on every rank, each rank's
    (op, value)."""
    ranks = {p.rank for p in profiles}
    calls: dict[str, dict[int, CommCall]] = defaultdict(dict)
    for p in profiles:
        for call in p.calls:
            calls[call.key].setdefault(p.rank, call)
    common = {key: by_rank for key, by_rank in calls.items() if len(by_rank) == len(ranks)}  # its keys are ranks
    if common:
        wait = all(c.wait_ms is not None for by_rank in common.values() for c in by_rank.values())
        return ("wait" if wait else "duration",
                {key: {r: (c.op, c.wait_ms if wait and c.wait_ms is not None else c.ms) for r, c in by_rank.items()}
                 for key, by_rank in common.items()})
    # no per-call data on every rank: each step's communication time is the call (step_trace_time.csv only)
    steps: dict[str, dict[int, tuple[str, float]]] = defaultdict(dict)
    for p in profiles:
        for s in p.steps:
            value = s.comm_ms if s.comm_ms is not None else s.comm_not_overlapped_ms
            if value is not None:
                steps[f"step#{s.step}"][p.rank] = ("step", value)
    return "step communication", {key: by_rank for key, by_rank in steps.items() if set(by_rank) == ranks}


def vote(compared: dict[str, dict[int, tuple[str, float]]]) -> list[Vote]:
    """msprof-analyze's slow-rank vote: in each call the rank that arrives last waits least, so the rank with the
    shortest time gets the call's vote when it is an outlier low (low_outlier) and MIN_EFFECT below the median."""
    votes = []
    for key, by_rank in sorted(compared.items(), key=lambda item: _natural(item[0])):
        ranks = sorted(by_rank)
        values = [by_rank[r][1] for r in ranks]
        ordered = sorted(values)
        judged = _low_outlier_of_sorted(ordered)
        if judged is None:
            continue
        low = ordered[0]
        rank = ranks[values.index(low)]  # the lowest rank of those with the shortest time (ranks are in order)
        half = len(ordered) // 2  # statistics.median, of the values already sorted
        median = ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
        if median <= 0 or (median - low) / median < MIN_EFFECT:
            continue
        votes.append(Vote(key, by_rank[rank][0], rank, low, median, judged[0], round(judged[1], 4)))
    return votes


def _natural(key: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


def _delta(mine: float | None, others: list[float | None]) -> float | None:
    center = _median(others)
    if mine is None or center is None:
        return None
    return mine / center - 1 if center > 0 else None


def _straggler(votes: list[Vote], compared: dict[str, dict[int, tuple[str, float]]],
               summaries: list[RankMeans], device: bool = False) -> Straggler | None:
    """The rank with votes in more than half of the calls compared (and at least two), or None."""
    counts = Counter(v.rank for v in votes)
    if not counts:
        return None
    rank, count = min(counts.items(), key=lambda item: (-item[1], item[0]))
    if count < 2 or 2 * count <= len(compared):
        return None
    ops = Counter(v.op for v in votes if v.rank == rank)
    comm: dict[int, list[float]] = defaultdict(list)
    for by_rank in compared.values():
        for r, (_, value) in by_rank.items():
            comm[r].append(value)
    means = {r: statistics.fmean(values) for r, values in comm.items()}
    others = [s for s in summaries if s.rank != rank]
    me = next(s for s in summaries if s.rank == rank)
    bound, why = _bound(me, others, device)
    return Straggler(rank, count, len(compared), dict(sorted(ops.items())),
                     _delta(me.compute_ms, [s.compute_ms for s in others]),
                     _delta(means.get(rank), [means.get(s.rank) for s in others]), bound, why)


BOUND_SHARE = 0.02  # of the others' median step: an excess of compute or device idle time below it tells nothing


def _bound(me: RankMeans, others: Sequence[RankMeans], device: bool) -> tuple[str | None, str]:
    """Host-bound or device-bound, from the straggler's device timeline against the other ranks' medians: the step it
    loses is either more work on its device (compute: device-bound) or its device sitting idle, waiting for the host
    to launch the work (free: host-bound: data loading, the Python side, operator dispatch)."""
    if not device:
        return None, "no device timeline in its profile (CPU ranges): host and device are not told apart"
    compute, free, step = (_median(getattr(s, f"{name}_ms") for s in others) for name in ("compute", "free", "step"))
    if me.compute_ms is None or me.free_ms is None or compute is None or free is None or not step:
        return None, "its compute or idle time is not measured"
    more_compute, more_idle = me.compute_ms - compute, me.free_ms - free
    if max(more_compute, more_idle) < BOUND_SHARE * step:
        return None, (f"neither its device's compute ({more_compute:+.1f} ms) nor its idle time ({more_idle:+.1f} ms per "
                      f"step) stands out against the others' median")
    if more_compute >= more_idle:
        return "device", (f"its device computes {more_compute:.1f} ms more per step than the others' median "
                          f"(idle {more_idle:+.1f} ms)")
    return "host", (f"its device sits idle {more_idle:.1f} ms more per step than the others' median, waiting for the "
                    f"host to launch work (compute {more_compute:+.1f} ms)")


def spreads(summaries: Sequence[RankMeans]) -> list[DimensionSpread]:
    """Per dimension (step, compute, communication not overlapped, free): max - min of the ranks' means, as a share of
    the mean step time; flagged above SPREAD_LIMIT."""
    found = []
    step = _mean(s.step_ms for s in summaries)
    for dimension in DIMENSIONS:
        values = [(getattr(s, f"{dimension}_ms"), s.rank) for s in summaries if getattr(s, f"{dimension}_ms") is not None]
        if len(values) < 2:
            continue
        low, high = min(values), max(values)
        base = step if step else high[0]
        spread = (high[0] - low[0]) / base if base else 0.0
        found.append(DimensionSpread(dimension, low[1], low[0], high[1], high[0], round(spread, 4), spread > SPREAD_LIMIT))
    return found


def links(samples: Iterable[LinkSample]) -> list[LinkSummary]:
    """Each link's bandwidth over every op it carried, the slow ones marked.

    The same transfer is listed by both ends (each rank's communication_matrix.json): its shortest time is the pure
    transfer (the longer one includes waiting), so one (op, link) counts once, at its minimum. A link is slow when its
    bandwidth is an outlier low among the links of its transport (low_outlier) and LINK_SHORTFALL below their median.
    """
    best: dict[tuple[str, int, int, str], tuple[float, float]] = {}
    for s in samples:
        key = (s.op, s.src, s.dst, s.transport)
        size, time = best.get(key, (s.size_mb, s.time_ms))
        best[key] = (max(size, s.size_mb), min(time, s.time_ms))
    totals: dict[tuple[int, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (_, src, dst, transport), (size, time) in best.items():
        totals[(src, dst, transport)][0] += size
        totals[(src, dst, transport)][1] += time
    bandwidth = {key: (size / time if time > 0 else None) for key, (size, time) in totals.items()}
    by_transport: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for link in totals:
        by_transport[link[2]].append(link)
    slow: set[tuple[int, int, str]] = set()
    medians: dict[str, float | None] = {}
    for transport, keys in by_transport.items():
        measured = [(bandwidth[k], k) for k in keys if bandwidth[k] is not None]
        values = [b for b, _ in measured if b is not None]
        medians[transport] = statistics.median(values) if values else None
        remaining = list(measured)
        while len(remaining) >= 3:  # every outlier low, one at a time (Dixon's Q judges the lowest)
            values = [b for b, _ in remaining if b is not None]
            lowest = min(remaining, key=lambda item: (item[0] or 0.0, item[1]))
            median = medians[transport]
            if low_outlier(values) is None or not median or (lowest[0] or 0.0) > (1 - LINK_SHORTFALL) * median:
                break
            slow.add(lowest[1])
            remaining.remove(lowest)
    return [LinkSummary(src, dst, transport, round(totals[(src, dst, transport)][0], 6),
                        round(totals[(src, dst, transport)][1], 6), bandwidth[(src, dst, transport)],
                        medians[transport], (src, dst, transport) in slow)
            for src, dst, transport in sorted(totals)]


def _percent(delta: float | None) -> str:
    return "not measured" if delta is None else f"{delta:+.0%}"


def verdict_line(straggler: Straggler | None, votes: list[Vote], compared: int, ranks: int, vote_on: str,
                 link_list: list[LinkSummary]) -> str:
    """The one-line verdict: the straggler and how it differs, or that there is none; then the links."""
    slow = [link for link in link_list if link.slow]
    if not link_list:
        link_text = "links: not measured"
    elif slow:
        link_text = "slow link(s): " + ", ".join(f"{link.name} {gbps(link.bandwidth_gbps)} GB/s (median "
                                                 f"{gbps(link.median_gbps)})" for link in slow)
    else:
        link_text = f"links: none slow of {len(link_list)}"
    what = {"wait": "communication wait", "duration": "communication", "step communication": "communication"}[vote_on]
    if straggler is not None:
        ops = "/".join(straggler.ops)
        unit = "steps" if vote_on == "step communication" else f"{ops} calls"
        bound = f", {straggler.bound}-bound" if straggler.bound else ""
        return (f"rank {straggler.rank} is the straggler in {straggler.votes} of {straggler.compared} {unit}: "
                f"compute {_percent(straggler.compute_delta)}, {what} {_percent(straggler.comm_delta)}{bound}; {link_text}")
    if ranks < 2:
        return f"no straggler: {ranks} rank(s), nothing to compare; {link_text}"
    unit = "steps" if vote_on == "step communication" else "collective calls"
    most = Counter(v.rank for v in votes).most_common(1)
    top = f" (most votes: rank {most[0][0]}, {most[0][1]})" if most else ""
    return f"no straggler in {compared} {unit} compared across {ranks} ranks{top}; {link_text}"


def analyse(profiles: Sequence[RankInput], problems: Sequence[PerfProblem] = ()) -> PerfReport:
    """The verdict and its evidence from every rank's profile."""
    dropped = odd_ranks(profiles)
    out = {d.rank for d in dropped}
    vote_on, compared = _compared([p for p in profiles if p.rank not in out])
    votes = vote(compared)
    summaries = _summaries(profiles, Counter(v.rank for v in votes))
    straggler = _straggler(votes, compared, summaries, all(p.device_timeline for p in profiles))
    link_list = links(s for p in profiles for s in p.links)
    line = verdict_line(straggler, votes, len(compared), len(profiles) - len(dropped), vote_on, link_list)
    if dropped:  # said on the verdict's line: the vote did not hear these ranks
        line += (f"; rank{'s' if len(dropped) > 1 else ''} {', '.join(str(d.rank) for d in dropped[:10])}"
                 f"{' ...' if len(dropped) > 10 else ''} left out of the vote (collective calls unlike the others')")
    world = max((p.world_size for p in profiles if p.world_size is not None), default=None)
    if world is not None and len(profiles) < world:  # a straggler among the ranks not given cannot be named
        line += f"; profiles of {len(profiles)} of the job's {world} ranks: the other {world - len(profiles)} not compared"
    return PerfReport(line, tuple(summaries), {p.rank: p.sources for p in profiles},
                      tuple(sorted({p.kind for p in profiles})), len(compared), vote_on, tuple(votes), straggler,
                      tuple(spreads(summaries)), COMM_SHARE_LIMIT, tuple(link_list), tuple(problems), tuple(dropped),
                      world)


def perf(paths: Iterable[object]) -> PerfReport:
    """Read every rank's profile under `paths` (directories, bundles, archives, trace files) and judge them.

    Raises UsageError when no profile file is found at all."""
    from pathlib import Path

    from ascendctl.errors import UsageError
    from ascendctl.perf.read import read_profiles

    given = [Path(str(p)) for p in paths]
    profiles, problems, found = read_profiles(given)
    if not found:
        missing = [p.message for p in problems if p.message == "no such file or directory"]
        raise UsageError(f"{', '.join(str(p) for p in given)}: no profiles found"
                         f"{' (' + problems[0].path + ': ' + problems[0].message + ')' if problems else ''}",
                         hint="give directories, bundles or archives holding *.pt.trace.json[.gz] (torch.profiler) or "
                              "step_trace_time.csv / communication.json / communication_matrix.json (torch_npu)"
                         if not missing else None)
    return analyse(profiles, problems)
