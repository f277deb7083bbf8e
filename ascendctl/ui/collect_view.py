"""Rendering of `ascendctl collect`: per-node bundle table, summaries, unreachable nodes."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from ..collect import CollectReport
from ..nodeset import fold, group_by
from . import STATUS_STYLE, emit_json, error, out, warning


REFUSED_SHOWN = 5  # files refused on a node that get a warning line each; the manifest lists them all


def _size(n: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}G"


def show_collect(report: CollectReport, *, as_json: bool, argv: list[str]) -> None:
    """Print where the bundle is, what each node gave, and the topology/msprof summaries (or the JSON document)."""
    if as_json:
        errors = [{"code": n.status.value, "node": n.name, "message": n.error or ""} for n in report.nodes
                  if not n.status.reached or n.error]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    table = Table(title=None, box=None, pad_edge=False)
    for column in ("node", "status", "commands", "absent", "files", "truncated", "size"):
        table.add_column(column)
    for n in report.nodes:
        absent = sorted({c.tool for c in n.commands if c.status == "absent"})
        kept = [f for f in n.files if f.file is not None]
        table.add_row(escape(n.name), f"[{STATUS_STYLE[n.status]}]{n.status.value}[/]",
                      str(sum(1 for c in n.commands if c.status != "absent")), escape(",".join(absent) or "-"),
                      str(len(kept)), str(len(n.truncated)) + (" (capped)" if n.capped else ""), _size(n.bytes))
    out.print(table)
    _show_summary(report.summary)
    out.print(f"bundle: {escape(str(report.output))} ({_size(report.total_bytes)} from {len(report.nodes)} nodes)")
    for n in report.nodes:
        for r in n.refused:
            warning(f"refused archive member {r.member!r}: {r.reason}", subject=n.name)
        for f in n.refused_files[:REFUSED_SHOWN]:
            warning(f"not collected: {f.path!r}: {f.reason}", subject=n.name)
        if len(n.refused_files) > REFUSED_SHOWN:
            warning(f"not collected: {len(n.refused_files) - REFUSED_SHOWN} more files (manifest.json: refused_files)",
                    subject=n.name)
        for w in n.warnings:
            warning(w, subject=n.name)
    bad = [n for n in report.nodes if not n.status.reached]
    for (_, message), names in group_by(bad, key=lambda n: (n.status, n.error), name=lambda n: n.name):
        error(f"{message} (listed in manifest.json)", subject=fold(names))


def _show_summary(summary: dict[str, Any]) -> None:
    for topo in summary.get("topology", []):
        if not topo["outliers"]:
            out.print(f"topology ({topo['tool']}): {fold(topo['majority'])} identical", markup=False)
            continue
        out.print(f"topology ({topo['tool']}): majority {fold(topo['majority'])}", markup=False)
        for outlier in topo["outliers"]:
            cells = ", ".join(f"{c['row']}-{c['column']} {c['actual'] or 'missing'} (majority {c['expected'] or 'missing'})"
                              for c in outlier["cells"][:8])
            more = f" +{len(outlier['cells']) - 8} more" if len(outlier["cells"]) > 8 else ""
            out.print(f"  DIFFERS {outlier['node']}: {cells}{more}", markup=False, style="red")
    msprof = summary.get("msprof")
    if msprof and msprof["ranks"]:
        table = Table(title="msprof", box=None, pad_edge=False)
        for column in ("rank", "steps", "step ms", "compute ms", "comm ms", "comm %", "flags"):
            table.add_column(column)
        for r in msprof["ranks"]:
            flags = ",".join(f for f, on in (("comm", r["comm_flag"]), ("straggler", r["straggler"])) if on)
            table.add_row(escape(r["rank"]), str(r["steps"]), f"{r['step_us'] / 1000:.2f}", f"{r['compute_us'] / 1000:.2f}",
                          f"{r['comm_us'] / 1000:.2f}", f"{100 * r['comm_share']:.1f}", flags or "-")
        out.print(table)
