"""Rendering of `ascendctl preflight`: folded node table, cluster checks, then failures with hints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from ascendctl.preflight.checks.model import Status
from ascendctl.nodeset import fold, group_by
from ascendctl.ui import emit_json, err, out

if TYPE_CHECKING:
    from ascendctl.preflight.checks.model import CheckResult
    from ascendctl.preflight.result import PreflightReport

STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.ERROR: "magenta", Status.SKIP: "dim"}
ORDER = (Status.FAIL, Status.ERROR, Status.WARN, Status.SKIP)


def _overall(checks: tuple[CheckResult, ...]) -> Status:
    statuses = {c.status for c in checks}
    for status in ORDER[:3]:
        if status in statuses:
            return status
    return Status.PASS


def _not_passing(checks: tuple[CheckResult, ...]) -> str:
    parts = []
    for status in ORDER:
        ids = [c.check for c in checks if c.status == status]
        if ids:
            parts.append(f"[{STYLE[status]}]{status.value}:[/] " + " ".join(ids))
    return "  ".join(parts) or "all pass"


def show_preflight(report: PreflightReport, *, as_json: bool, argv: list[str]) -> None:
    """The node table (identical rows folded), the cluster checks, then every problem with its hint."""
    if as_json:
        errors = [
            {"code": c.status.value, "node": n.name, "check": c.check, "message": c.summary}
            for n in report.nodes for c in n.checks if c.status in (Status.FAIL, Status.ERROR)
        ] + [{"code": c.status.value, "node": None, "check": c.check, "message": c.summary}
             for c in report.cluster if c.status in (Status.FAIL, Status.ERROR)]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    table = Table(box=None, pad_edge=False, title=f"preflight: {len(report.nodes)} node(s), {len(report.check_ids)} check(s), "
                  f"{report.duration:.1f}s", title_justify="left")
    table.add_column("nodes")
    table.add_column("result")
    table.add_column("not passing")
    rows = group_by(report.nodes, key=lambda n: tuple((c.check, c.status) for c in n.checks), name=lambda n: n.name)
    for _, names in rows:
        sample = next(n for n in report.nodes if n.name == names[0])
        overall = _overall(sample.checks)
        table.add_row(escape(fold(names)), f"[{STYLE[overall]}]{overall.value.upper() if overall != Status.PASS else 'pass'}[/]",
                      _not_passing(sample.checks))
    out.print(table)
    if report.cluster:
        out.print()
        cluster = Table(box=None, pad_edge=False, title="cluster", title_justify="left")
        for column in ("check", "result", "summary"):
            cluster.add_column(column)
        for check in report.cluster:
            cluster.add_row(check.check, f"[{STYLE[check.status]}]{check.status.value}[/]", escape(check.summary))
        out.print(cluster)
    problems = report.folded_problems()
    if problems:
        out.print()
        for check_ids, status, summary, hint, names in problems:
            out.print(f"[{STYLE[status]}]{status.value}[/] {escape(fold(names))}: {','.join(check_ids)}: {escape(summary)}")
            if hint:
                out.print(f"  hint: {escape(hint)}")
    if not report.ok:
        failed = sorted({n.name for n in report.nodes if any(c.status in (Status.FAIL, Status.ERROR) for c in n.checks)})
        unreachable = [n.name for n in report.nodes if not n.reachable]
        what = f"{fold(unreachable)} unreachable" if unreachable else f"checks failed on {fold(failed) or 'the cluster'}"
        err.print(f"ascendctl: error: preflight: {what}", markup=False)
