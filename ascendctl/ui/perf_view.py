"""Rendering of `ascendctl perf`: the verdict first, then the evidence (votes, the ranks' means, the spreads, the links),
or the JSON document (schemas/perf.schema.json). Unreadable files go to stderr as warnings naming them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendctl.perf.model import gbps
from ascendctl.ui import emit_json, out, warning

if TYPE_CHECKING:
    from ascendctl.perf.model import PerfReport

DIMENSION_NAMES = {"step": "step", "compute": "compute", "comm_not_overlapped": "communication not overlapped",
                   "free": "free"}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def evidence_lines(report: PerfReport) -> list[str]:
    """The evidence under the verdict, as plain lines (also what the tests read)."""
    lines = [f"read: {len(report.ranks)} rank(s) ({', '.join(report.kinds) or 'none'}); "
             f"{report.compared} call(s) compared by {report.vote_on}; {len(report.votes)} vote(s)"]
    for dropped in report.dropped:
        lines.append(f"left out of the vote: rank {dropped.rank}: {dropped.reason}")
    if report.straggler is not None:
        ops = ", ".join(f"{op} {count}" for op, count in report.straggler.ops.items())
        lines.append(f"votes for rank {report.straggler.rank}: {ops}")
        lines.append(f"host or device: {report.straggler.bound + '-bound: ' if report.straggler.bound else ''}"
                     f"{report.straggler.bound_why}")
    for vote in report.votes[:10]:
        lines.append(f"  {vote.key}: rank {vote.rank} {vote.ms:.3f} ms, median {vote.median_ms:.3f} ms "
                     f"({vote.test} {vote.statistic:.3g})")
    if len(report.votes) > 10:
        lines.append(f"  ... {len(report.votes) - 10} more vote(s) (--json lists them all)")
    lines.append("rank  steps  step ms  compute ms  comm ms  not overlapped ms  free ms  comm share  votes")
    for r in report.ranks:
        over = " > limit" if r.comm_share is not None and r.comm_share > report.comm_share_limit else ""
        lines.append(f"{r.rank:>4}  {r.steps:>5}  {_ms(r.step_ms):>7}  {_ms(r.compute_ms):>10}  {_ms(r.comm_ms):>7}  "
                     f"{_ms(r.comm_not_overlapped_ms):>17}  {_ms(r.free_ms):>7}  {_share(r.comm_share):>10}{over}  "
                     f"{r.votes:>5}")
    shares = [r for r in report.ranks if r.comm_share is not None and r.comm_share > report.comm_share_limit]
    if shares:
        lines.append(f"communication share: {len(shares)} rank(s) above {report.comm_share_limit:.0%} of the step "
                     "not overlapped by compute")
    for s in report.spreads:
        flag = "FLAGGED" if s.flagged else "ok"
        lines.append(f"spread {DIMENSION_NAMES[s.dimension]}: {s.spread:.1%} of the step (rank {s.min_rank} "
                     f"{s.min_ms:.2f} ms .. rank {s.max_rank} {s.max_ms:.2f} ms) {flag}")
    for link in report.links:
        if link.slow:
            lines.append(f"slow link {link.name}: {gbps(link.bandwidth_gbps)} GB/s, median of {link.transport} "
                         f"{gbps(link.median_gbps)} GB/s")
    return lines


def show_perf(report: PerfReport, *, as_json: bool, argv: list[str]) -> None:
    """Print the verdict and the evidence (or the JSON document) on stdout; unreadable files as warnings on stderr."""
    if as_json:
        emit_json(argv, report.exit_code, report.to_dict(), [p.to_dict() for p in report.problems])
        return
    for problem in report.problems:
        warning(problem.message, subject=problem.path)
    out.print(report.verdict, markup=False)
    for line in evidence_lines(report):
        out.print(line, markup=False)
