"""Rendering of `ascendctl triage`: the verdict and why, the first failure with its evidence, victims folded, hints.

Log text is printed with markup disabled, so a line holding `[/]` cannot break rendering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendctl.nodeset import fold, fold_numbers
from ascendctl.ui import emit_json, out

if TYPE_CHECKING:
    from ascendctl.triage import TriageReport

TIMELINE_ROWS = 12


def show_triage(report: TriageReport, *, as_json: bool, argv: list[str]) -> None:
    """Print the verdict (or the JSON document) on stdout."""
    if as_json:
        errors = [{"code": "unreadable", "node": None, "message": item} for item in report.unreadable]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    for line in verdict_lines(report):
        out.print(line, markup=False)
    for note in report.notes:
        out.print(f"note: {note}", markup=False)
    for hint in report.hints:
        out.print(f"hint: {hint}", markup=False)
    for item in report.unreadable:
        out.print(f"unreadable: {item}", markup=False)
    for item in report.skipped:
        out.print(f"skipped: {item}", markup=False)
    out.print(f"read {report.files_read} file(s), {report.bytes_read / 1e6:.1f} MB; {len(report.findings)} finding(s)"
              + (f", {report.suppressed} repeat(s) not listed" if report.suppressed else ""), markup=False)


def verdict_lines(report: TriageReport) -> list[str]:
    """The verdict, why, the evidence, what the launcher blamed, victims and a short timeline (shared with launch)."""
    lines = [f"verdict: {report.headline()} (confidence {report.confidence})",
             f"why: {report.reason} [rule {report.rule}]"]
    first = report.first_failure
    if first is not None:
        where = f"{first.file}:{first.line}" if first.line else first.file
        lines.append(f"first failure: {first.time or 'time unknown'} {where} [{first.signature}]")
        lines.append(f"  {first.text}")
    if report.launcher_blamed:
        lines.append(f"note: {report.launcher_blamed}")
    victims = report.folded_victims()
    if victims:
        lines.append("victims:")
        lines += [f"  {who}: {how}" for who, how in victims]
    rows = [r for r in report.timeline() if r.role in ("culprit", "co-failed")]
    if len(rows) > 1:
        lines.append("also failed on their own:")
        for r in rows[:TIMELINE_ROWS]:
            if r.role == "culprit":
                continue
            f = r.first_error
            what = f"{f.signature} at {f.time or '?'}" if f else (f"exit {r.exit_code}" if r.exit_code is not None else "?")
            lines.append(f"  {fold([r.node]) if r.node else '?'}"
                         + (f" rank {fold_numbers([r.rank])}" if r.rank is not None else "") + f": {what}")
    return lines
