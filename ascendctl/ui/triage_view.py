"""Rendering of `ascendctl triage`: the verdict line, the first failure with its evidence, a folded per-node timeline, hints.

Log text is printed with markup disabled, so a line holding `[/]` cannot break rendering.
"""

from __future__ import annotations

from ..nodeset import fold
from ..triage import TriageReport
from . import emit_json, out


def show_triage(report: TriageReport, *, as_json: bool, argv: list[str]) -> None:
    """Print the verdict (or the JSON document) on stdout."""
    if as_json:
        errors = [{"code": "unreadable", "node": None, "message": item} for item in report.unreadable]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    category = report.category.value if report.category else "UNKNOWN"
    first = report.first_failure
    where = ""
    if first is not None:
        parts = [f"node {first.node}" if first.node else "", f"rank {first.rank}" if first.rank is not None else "",
                 f"device {first.device}" if first.device is not None else ""]
        where = " on " + ", ".join(p for p in parts if p) if any(parts) else ""
    out.print(f"verdict: {category}{where} ({report.reason})", markup=False)
    if first is not None:
        out.print(f"first failure: {first.time or 'time unknown'} {first.file}:{first.line} [{first.signature}]", markup=False)
        out.print(f"  {first.text}", markup=False)
    timeline = report.timeline()
    if timeline:
        out.print("timeline (first error per node):", markup=False)
        groups: dict[tuple[str, bool], list[str]] = {}
        starts: dict[tuple[str, bool], str | None] = {}
        for item in timeline:
            key = (item.category.value, item.victim)
            groups.setdefault(key, []).append(item.node)
            starts.setdefault(key, item.time)
        for (cat, victim), nodes in groups.items():
            out.print(f"  {fold(nodes)}: {cat}{' (victims)' if victim else ''}  from {starts[(cat, victim)] or '?'}", markup=False)
    for note in report.notes:
        out.print(f"note: {note}", markup=False)
    for hint in report.hints:
        out.print(f"hint: {hint}", markup=False)
    out.print(f"read {report.files_read} file(s), {report.bytes_read / 1e6:.1f} MB; {len(report.findings)} finding(s)"
              + (f", {report.suppressed} repeat(s) not listed" if report.suppressed else ""), markup=False)
