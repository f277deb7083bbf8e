"""Rendering of `ascendctl collect`: per-node bundle table, summaries, unreachable nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rich.markup import escape
from rich.table import Table

from ascendctl.nodeset import fold, generic, group_by
from ascendctl.ui import FOLD_NODES_ABOVE, STATUS_STYLE, emit_json, error, out, warning

if TYPE_CHECKING:
    from ascendctl.bundle.collect import CollectReport, NodeBundle


REFUSED_SHOWN = 5  # files refused on a node that get a warning line each; the manifest lists them all


def _size(n: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}G"


def show_collect(report: CollectReport, *, as_json: bool, argv: list[str]) -> None:
    """Print where the bundle is, what each node gave, and the topology/msprof summaries (or the JSON document).

    Past FOLD_NODES_ABOVE nodes, nodes with the same outcome share a row, and warnings and errors that are the same
    but for the node's address share a line, each with its folded node set (the JSON document keeps every node)."""
    if as_json:
        errors = [{"code": n.status.value, "node": n.name, "message": n.error or ""} for n in report.nodes
                  if not n.status.reached or n.error]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    many = len(report.nodes) > FOLD_NODES_ABOVE
    out.print(_folded_table(report.nodes) if many else _node_table(report.nodes))
    _show_summary(report.summary, many=many)
    out.print(f"bundle: {escape(str(report.output))} ({_size(report.total_bytes)} from {len(report.nodes)} nodes)")
    if many:
        _show_folded_notes(report.nodes)
        return
    for n in report.nodes:
        for message in _notes(n):
            warning(message, subject=n.name)
    bad = [n for n in report.nodes if not n.status.reached]
    for (_, what), names in group_by(bad, key=lambda n: (n.status, n.error), name=lambda n: n.name):
        error(f"{what} (listed in manifest.json)", subject=fold(names))


def _node_table(nodes: tuple[NodeBundle, ...]) -> Table:
    table = Table(title=None, box=None, pad_edge=False)
    for column in ("node", "status", "commands", "absent", "files", "truncated", "size"):
        table.add_column(column)
    for n in nodes:
        kept = [f for f in n.files if f.file is not None]
        table.add_row(escape(n.name), f"[{STATUS_STYLE[n.status]}]{n.status.value}[/]",
                      str(sum(1 for c in n.commands if c.status != "absent")), escape(",".join(_absent(n)) or "-"),
                      str(len(kept)), str(len(n.truncated)) + (" (capped)" if n.capped else ""), _size(n.bytes))
    return table


def _absent(n: NodeBundle) -> list[str]:
    return sorted({c.tool for c in n.commands if c.status == "absent"})


def _folded_table(nodes: tuple[NodeBundle, ...]) -> Table:
    """One row per outcome (status, absent tools, files cut or not, capped or not), its nodes folded; the counts of
    its nodes as a range (`31-35`), the size as a range and a sum."""
    table = Table(title=None, box=None, pad_edge=False)
    for column in ("nodes", "status", "commands", "absent", "files", "truncated", "size"):
        table.add_column(column)
    by_name = {n.name: n for n in nodes}
    groups = group_by(nodes, key=lambda n: (n.status, tuple(_absent(n)), bool(n.truncated), n.capped), name=lambda n: n.name)
    for (status, absent, _, capped), names in groups:
        members = [by_name[name] for name in names]
        table.add_row(escape(f"{fold(names)} ({len(names)})"), f"[{STATUS_STYLE[status]}]{status.value}[/]",
                      _span([sum(1 for c in m.commands if c.status != "absent") for m in members]),
                      escape(",".join(absent) or "-"), _span([sum(1 for f in m.files if f.file is not None) for m in members]),
                      _span([len(m.truncated) for m in members]) + (" (capped)" if capped else ""),
                      _sizes([m.bytes for m in members]))
    return table


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def _sizes(values: list[int]) -> str:
    if len(values) == 1 or not any(values):
        return _size(values[0])
    low, high = min(values), max(values)
    each = f"{_size(low)} each" if low == high else f"{_size(low)}-{_size(high)}"
    return f"{each}, {_size(sum(values))} in all"


def _notes(n: NodeBundle) -> list[str]:
    """The warnings of one node: archive members refused, files not collected (REFUSED_SHOWN, then a count), its own."""
    notes = [f"refused archive member {r.member!r}: {r.reason}" for r in n.refused]
    notes += [f"not collected: {f.path!r}: {f.reason}" for f in n.refused_files[:REFUSED_SHOWN]]
    if len(n.refused_files) > REFUSED_SHOWN:
        notes.append(f"not collected: {len(n.refused_files) - REFUSED_SHOWN} more files (manifest.json: refused_files)")
    return notes + list(n.warnings)


def _show_folded_notes(nodes: tuple[NodeBundle, ...]) -> None:
    """Warnings, then unreached nodes' errors, each message once with its nodes (the same but for the node's address
    is the same: `nodeset.generic`); past FOLD_NODES_ABOVE messages of a kind, one line counts the rest."""
    notes = [(n, message) for n in nodes for message in _notes(n)]
    _folded_lines(warning, notes, "warnings", "manifest.json: refused, refused_files, warnings")
    bad = [(n, n.error or n.status.value) for n in nodes if not n.status.reached]
    _folded_lines(error, bad, "nodes not reached with other errors", "listed in manifest.json",
                  suffix=" (listed in manifest.json)")


def _folded_lines(say: Callable[..., None], items: list[tuple[NodeBundle, str]], rest: str, where: str, *,
                  suffix: str = "") -> None:
    groups = group_by(items, key=lambda item: generic(item[1], item[0].host), name=lambda item: item[0].name)
    own = {(n.name, generic(message, n.host)): message for n, message in items}
    for message, names in groups[:FOLD_NODES_ABOVE]:
        say(f"{own[(names[0], message)] if len(names) == 1 else message}{suffix}", subject=fold(names))
    left = [name for _, names in groups[FOLD_NODES_ABOVE:] for name in names]
    if left:
        say(f"{len(left):,} more {rest} ({where})", subject=fold(left))


def _show_summary(summary: dict[str, Any], *, many: bool = False) -> None:
    for topo in summary.get("topology", []):
        if not topo["outliers"]:
            out.print(f"topology ({topo['tool']}): {fold(topo['majority'])} identical", markup=False)
            continue
        out.print(f"topology ({topo['tool']}): majority {fold(topo['majority'])}", markup=False)
        differences = []
        for outlier in topo["outliers"]:
            cells = ", ".join(f"{c['row']}-{c['column']} {c['actual'] or 'missing'} (majority {c['expected'] or 'missing'})"
                              for c in outlier["cells"][:8])
            more = f" +{len(outlier['cells']) - 8} more" if len(outlier["cells"]) > 8 else ""
            differences.append((outlier["node"], cells + more))
        # past FOLD_NODES_ABOVE nodes, outliers that differ alike share a line
        lines = group_by(differences, key=lambda d: d[1], name=lambda d: d[0]) if many else [(d[1], [d[0]]) for d in differences]
        for what, names in lines:
            out.print(f"  DIFFERS {fold(names) if many else names[0]}: {what}", markup=False, style="red")
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
    perf = summary.get("perf")
    if perf:  # collect --profile: `ascendctl perf`'s verdict over the profiles taken
        named = perf["straggler"] is not None or bool(perf["slow_links"])
        out.print(f"perf: {perf['verdict']}", markup=False, style="red" if named else None)
        if perf["problems"]:
            out.print(f"  {len(perf['problems']) + perf['problems_more']} profile file(s) unreadable (first: "
                      f"{perf['problems'][0]})", markup=False)
