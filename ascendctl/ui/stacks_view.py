"""Rendering of `ascendctl stacks`: the verdict first, then the classes, the merged tree, and what did not answer.

Frames come from the job's processes: printed with markup off through the shared consoles (terminal.visible).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendctl.nodeset import fold
from ascendctl.stacks.model import RANK_STATUSES, ranks_label
from ascendctl.stacks.text import short, tree_lines
from ascendctl.ui import emit_json, error, out

if TYPE_CHECKING:
    from ascendctl.stacks import StacksReport

TREE_LINES = 200  # the text tree stops here (--json has all of it)


def show_stacks(report: StacksReport, *, as_json: bool, argv: list[str]) -> None:
    """Print the stacks report (or its JSON document) on stdout; nodes that could not be asked on stderr."""
    if as_json:
        errors = [{"code": "unreachable" if n.unreachable else "error", "node": n.node, "message": n.error}
                  for n in report.nodes if n.error is not None]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
    else:
        out.print("\n".join(stacks_lines(report)), markup=False)
    for node in report.nodes:
        if node.error is not None:
            error(f"could not take its ranks' stacks: {node.error}", subject=node.node)


def stacks_lines(report: StacksReport) -> list[str]:
    """The text report: verdict, summary, classes, tree, ranks without a stack, notes."""
    verdict = report.verdict
    lines = [f"{'suspect' if verdict.kind == 'suspect' else 'verdict'}: {verdict.message}"]
    asked = [n for n in report.nodes if n.error is None]
    spread = f", signalled within {report.spread:.2f} s" if report.spread is not None else ""
    lines.append(f"job {report.job}: {len(report.stacked)} of {len(report.ranks)} rank(s) answered with a stack on "
                 f"{len(asked)} of {len(report.nodes)} node(s){spread}; took {report.took:.1f} s")
    lines += kept_lines(report)
    if report.classes:
        lines += ["", "classes (main thread, smallest first):"]
        rows = [(c.label, fold(list(c.nodes)), short(c.innermost) if c.innermost else "(no Python frame)",
                 "SUSPECT" if c.suspect else (f"waiting in {c.waiting.function}" if c.waiting else "")) for c in report.classes]
        widths = [max(len(row[i]) for row in rows) for i in range(2)]
        lines += [f"  {a.ljust(widths[0])}  {b.ljust(widths[1])}  {c}" + (f"  [{d}]" if d else "") for a, b, c, d in rows]
        lines += ["", "tree (outermost frame first; the ranks on each branch):"]
        tree = tree_lines(report.tree)
        if len(tree) > TREE_LINES:
            tree = tree[:TREE_LINES] + [f"... {len(tree) - TREE_LINES} more lines (--json has the whole tree)"]
        lines += tree
    silent = [r for r in report.ranks if r.main is None]
    if silent:
        lines.append("")
        lines += [f"no stack: rank {r.rank} on {r.node} (pid {r.pid}) {RANK_STATUSES.get(r.status, r.status)}" for r in silent]
    for node, ranks in report.missing:
        lines.append(f"no process: {ranks_label(ranks)} of the job record on {node}")
    for rank in report.ranks:
        lines += [f"note: rank {rank.rank} on {rank.node}: {note}" for note in rank.notes]
    if report.flight is not None:  # launch --flight-recorder
        lines += ["", f"flight recorder ({len(report.flight.ranks)} rank(s) dumped):"]
        lines += [f"  {line}" for line in report.flight.lines()]
    return lines


def kept_lines(report: StacksReport) -> list[str]:
    """Where each node kept this capture: one line when the folders differ only by the node's name."""
    kept = [(n.node, n.incident) for n in report.nodes if n.incident]
    if not kept:
        return []
    shapes = {incident.replace(f"/{node}/", "/<node>/") for node, incident in kept}
    if len(shapes) == 1:
        return [f"kept on each node in {shapes.pop()}"]
    return [f"kept on {node} in {incident}" for node, incident in kept]


