"""The records of `ascendctl perf`: what one rank's profile holds (steps, collective calls, links) and what the analysis
concludes. Frozen dataclasses with `to_dict` (CommCall a NamedTuple: there are a million of them); imports only the
foundation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ascendctl.errors import ExitCode, UsageError


class MixedTasksError(UsageError):
    """The profiles given are of more than one profiling task (one rank twice): refused, as msprof-analyze refuses
    them (one task per analysis); the message names the rank and both places."""


@dataclass(frozen=True, slots=True)
class StepTimes:
    """One step of one rank, in milliseconds; None where the profile does not say."""

    step: int
    step_ms: float | None
    compute_ms: float | None
    comm_ms: float | None
    comm_not_overlapped_ms: float | None
    free_ms: float | None


class CommCall(NamedTuple):
    """One collective call of one rank: `key` is the same on every rank for the same call (op and sequence number, or
    the op name msprof gives it); `ms` the time the rank spent in it; `wait_ms` its wait, where the profile says.
    A NamedTuple, not a frozen dataclass: 1,024 ranks of 1,000 calls are a million of them, and a frozen dataclass
    takes ten times as long to make (bench/perf.py)."""

    key: str
    op: str
    step: int | None
    ms: float
    wait_ms: float | None = None


@dataclass(frozen=True, slots=True)
class LinkSample:
    """Bytes moved over one link (source rank -> destination rank, transport) by one op (`op`: its step and name, the
    same in every rank's file that lists the link), and how long it took."""

    src: int
    dst: int
    transport: str
    op: str
    size_mb: float
    time_ms: float


@dataclass(frozen=True, slots=True)
class RankInput:
    """Everything read for one rank, and from which files."""

    rank: int
    kind: str  # "torch" (a Chrome trace) or "ascend" (torch_npu / msprof-analyze text output)
    sources: tuple[str, ...]
    steps: tuple[StepTimes, ...] = ()
    calls: tuple[CommCall, ...] = ()
    links: tuple[LinkSample, ...] = ()
    world_size: int | None = None  # the job's ranks as the profile says (a torch trace's distributedInfo.world_size)
    device_timeline: bool = False  # compute and free are the device's (GPU kernels; Ascend's step trace), not a CPU thread's


@dataclass(frozen=True, slots=True)
class PerfProblem:
    """A file that could not be read, or a profile that cannot be used; `path` names it."""

    path: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": "unreadable", "node": None, "message": f"{self.path}: {self.message}"}


@dataclass(frozen=True, slots=True)
class RankMeans:
    """One rank's means over its steps (ms), its communication share and its votes."""

    rank: int
    steps: int
    step_ms: float | None
    compute_ms: float | None
    comm_ms: float | None
    comm_not_overlapped_ms: float | None
    free_ms: float | None
    comm_share: float | None  # communication not overlapped / step time
    votes: int

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "steps": self.steps, "step_ms": self.step_ms, "compute_ms": self.compute_ms,
                "comm_ms": self.comm_ms, "comm_not_overlapped_ms": self.comm_not_overlapped_ms, "free_ms": self.free_ms,
                "comm_share": self.comm_share, "votes": self.votes}


@dataclass(frozen=True, slots=True)
class Vote:
    """One collective call in which `rank` was the outlier low (it arrived last, so it waited least)."""

    key: str
    op: str
    rank: int
    ms: float  # the voter's time
    median_ms: float  # the median over the ranks
    test: str  # "dixon-q" or "3-sigma"
    statistic: float  # Q, or how many standard deviations below the mean

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "op": self.op, "rank": self.rank, "ms": self.ms, "median_ms": self.median_ms,
                "test": self.test, "statistic": self.statistic}


@dataclass(frozen=True, slots=True)
class DimensionSpread:
    """How far apart the ranks are in one dimension (means over steps): max - min, as a fraction of the mean step."""

    dimension: str
    min_rank: int
    min_ms: float
    max_rank: int
    max_ms: float
    spread: float
    flagged: bool

    def to_dict(self) -> dict[str, Any]:
        return {"dimension": self.dimension, "min_rank": self.min_rank, "min_ms": self.min_ms, "max_rank": self.max_rank,
                "max_ms": self.max_ms, "spread": self.spread, "flagged": self.flagged}


@dataclass(frozen=True, slots=True)
class LinkSummary:
    """One link over every op that used it: size / time = bandwidth; `slow` when it is an outlier low among the links
    of its transport."""

    src: int
    dst: int
    transport: str
    size_mb: float
    time_ms: float
    bandwidth_gbps: float | None  # GB/s, as msprof writes it
    median_gbps: float | None  # of the links of the same transport
    slow: bool

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst} {self.transport}"

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "transport": self.transport, "size_mb": self.size_mb,
                "time_ms": self.time_ms, "bandwidth_gbps": self.bandwidth_gbps, "median_gbps": self.median_gbps,
                "slow": self.slow}


@dataclass(frozen=True, slots=True)
class Straggler:
    """The rank named slow: its votes out of the calls compared, the ops that voted, and how it differs from the others
    (its mean against the median of the other ranks' means, as a fraction; None where not measured)."""

    rank: int
    votes: int
    compared: int
    ops: dict[str, int]
    compute_delta: float | None
    comm_delta: float | None
    bound: str | None = None  # "device" or "host": what makes it late, where its device's timeline tells (else None)
    bound_why: str = ""  # the figures behind `bound`, or why it is not told

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "votes": self.votes, "compared": self.compared, "ops": dict(self.ops),
                "compute_delta": self.compute_delta, "comm_delta": self.comm_delta, "bound": self.bound,
                "bound_why": self.bound_why}


@dataclass(frozen=True, slots=True)
class DroppedRank:
    """A rank left out of the vote: its collective calls are not those of the other ranks (msprof-analyze's rule)."""

    rank: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class PerfReport:
    """The verdict of `ascendctl perf` and its evidence."""

    verdict: str
    ranks: tuple[RankMeans, ...]
    sources: dict[int, tuple[str, ...]]
    kinds: tuple[str, ...]
    compared: int  # collective calls (or steps) seen on every rank and compared
    vote_on: str  # "wait", "duration" or "step communication"
    votes: tuple[Vote, ...]
    straggler: Straggler | None
    spreads: tuple[DimensionSpread, ...]
    comm_share_limit: float
    links: tuple[LinkSummary, ...]
    problems: tuple[PerfProblem, ...] = field(default=())
    dropped: tuple[DroppedRank, ...] = field(default=())  # ranks left out of the vote, and why
    world_size: int | None = None  # the job's ranks as the profiles say; None: they do not say

    @property
    def slow_links(self) -> tuple[LinkSummary, ...]:
        return tuple(link for link in self.links if link.slow)

    @property
    def exit_code(self) -> ExitCode:
        from ascendctl.outcome import Outcome, exit_code_for

        outcomes = [Outcome.ERROR] if self.problems else []
        if self.straggler is not None or self.slow_links:
            outcomes.append(Outcome.FAILED)
        return exit_code_for(outcomes)

    def summary_dict(self) -> dict[str, Any]:
        """What collect's summary.json keeps: the verdict and what it names, bounded at any rank count."""
        flagged = [r.rank for r in self.ranks if r.comm_share is not None and r.comm_share > self.comm_share_limit]
        return {
            "verdict": self.verdict, "kinds": list(self.kinds), "ranks": len(self.ranks), "compared": self.compared,
            "vote_on": self.vote_on, "straggler": None if self.straggler is None else self.straggler.to_dict(),
            "slow_links": [link.to_dict() for link in self.slow_links], "links_measured": len(self.links),
            "comm_share_limit": self.comm_share_limit, "comm_flagged": len(flagged),
            "spreads_flagged": [s.dimension for s in self.spreads if s.flagged],
            "dropped": [d.to_dict() for d in self.dropped], "world_size": self.world_size,
            "problems": [f"{p.path}: {p.message}" for p in self.problems[:20]],
            "problems_more": max(0, len(self.problems) - 20),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "kinds": list(self.kinds),
            "ranks": [r.to_dict() for r in self.ranks],
            "sources": {str(rank): list(paths) for rank, paths in sorted(self.sources.items())},
            "compared": self.compared,
            "vote_on": self.vote_on,
            "votes": [v.to_dict() for v in self.votes],
            "straggler": None if self.straggler is None else self.straggler.to_dict(),
            "spreads": [s.to_dict() for s in self.spreads],
            "comm_share_limit": self.comm_share_limit,
            "links_measured": bool(self.links),
            "links": [link.to_dict() for link in self.links],
            "dropped": [d.to_dict() for d in self.dropped],
            "world_size": self.world_size,
        }


def gbps(value: float | None) -> str:
    """A bandwidth in GB/s as every view prints it: two decimals, or two significant digits below 0.1 (a gloo link over
    a shaped or slow network moves megabytes per second: 0.0026, not 0.00)."""
    value = value or 0.0
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"
