"""Rendering of `ascendctl exec` results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from ascendctl.models import NodeStatus
from ascendctl.nodeset import fold, generic, group_by
from ascendctl.ui import STATUS_STYLE, emit_json, error, out

if TYPE_CHECKING:
    from ascendctl.execute import ExecReport


def show_exec(report: ExecReport, *, as_json: bool, argv: list[str]) -> None:
    """Print exec results grouped by identical outcome, or the JSON document."""
    if as_json:
        errors = [
            {"code": n.status.value, "node": n.name, "message": n.error or f"exit {n.exit_code}"}
            for n in report.nodes
            if n.status != NodeStatus.OK
        ]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    for names, sample in report.groups():
        style = STATUS_STYLE[sample.status]
        status = sample.status.value if sample.exit_code is None else f"{sample.status.value}, exit {sample.exit_code}"
        out.rule(f"[bold]{escape(fold(names))}[/] ({len(names)}) [{style}]{status}[/]", align="left", characters="-")
        if sample.stdout:
            out.print(sample.stdout.rstrip("\n"), markup=False)
        if sample.stderr:
            out.print(sample.stderr.rstrip("\n"), markup=False, style="dim")
        if sample.error:
            out.print(f"{sample.status.value}: {sample.error}", markup=False, style=style)
            if sample.hint:
                out.print(f"  hint: {sample.hint}", markup=False)
    bad = [n for n in report.nodes if n.status != NodeStatus.OK]
    if bad:
        for (status, message), names in group_by(bad, key=lambda n: (n.status, generic(n.error, n.host)), name=lambda n: n.name):
            sample = next(n for n in bad if n.name == names[0])
            what = (sample.error if len(names) == 1 else message or "") if sample.error else f"exited {sample.exit_code}"
            level = "error" if status != NodeStatus.FAILED else "warning"
            error(what, subject=fold(names), level=level)
