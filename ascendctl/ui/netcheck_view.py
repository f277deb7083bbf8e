"""Rendering of `ascendctl netcheck`: the verdict, per-node medians, the measured pairs, or the JSON document."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..netcheck import NetcheckReport
from ..nodeset import fold
from . import emit_json, error, out


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def show_netcheck(report: NetcheckReport, *, as_json: bool, argv: list[str]) -> None:
    """Print the verdict (slow nodes, slow links, broken pairs), the node table and the pair matrix."""
    verdict = report.verdict
    if as_json:
        errors = [{"code": p.status, "node": p.node, "message": p.message} for p in report.problems]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    median = _gbps(verdict.median_gbps)
    out.print(f"netcheck: {len(report.endpoints)} node(s), {report.mode}, backend {report.backend} ({report.backend_reason}), "
              f"{len(report.rounds)} round(s), {report.size} bytes each way, cluster median {median} Gbit/s, "
              f"threshold {verdict.threshold:g} x median, {report.seconds:.1f}s", markup=False)
    nodes = Table(box=None, pad_edge=False, title="nodes", title_justify="left")
    for column in ("node", "median Gbit/s", "partners", "slow with", "status"):
        nodes.add_column(column)
    for n in verdict.nodes:
        style = {"ok": "green", "slow": "red", "broken": "red"}.get(n.status, "yellow")
        nodes.add_row(escape(n.node), _gbps(n.median_gbps), str(n.partners), str(n.slow_partners), f"[{style}]{n.status}[/]")
    out.print(nodes)
    if report.groups:
        rings = Table(box=None, pad_edge=False, title="rings (--quick, Gbit/s)", title_justify="left")
        for column in ("round", "nodes", "Gbit/s", "note"):
            rings.add_column(column)
        for g in report.groups:
            note = g.error or ("slow" if g.slow else "")
            rings.add_row(str(g.round + 1), escape(fold(list(g.nodes))), _gbps(g.gbps), escape(note))
        out.print(rings)
    pairs = Table(box=None, pad_edge=False, title="pairs (Gbit/s)", title_justify="left")
    for column in ("round", "a", "b", "a->b", "b->a", "note"):
        pairs.add_column(column)
    slow = set(verdict.slow_links)
    for m in report.measurements:
        note = m.error or ("slow link" if m.key() in slow else "")
        pairs.add_row(str(m.round + 1), escape(m.a), escape(m.b), _gbps(m.a_to_b), _gbps(m.b_to_a), escape(note))
    out.print(pairs)
    if verdict.slow_nodes:
        error(f"slow node: below {verdict.threshold:g} x median with every partner", subject=fold(list(verdict.slow_nodes)))
    for a, b in verdict.slow_links:
        error(f"slow link: below {verdict.threshold:g} x median between these two only", subject=f"{a} <-> {b}")
    if verdict.broken_nodes:
        error("no pair could be measured", subject=fold(list(verdict.broken_nodes)))
    for a, b, why in verdict.broken_links:
        error(f"not measured: {why}", subject=f"{a} <-> {b}")
    devices = report.devices
    if devices.pings:
        failed = [ping for ping in devices.pings if not ping.ok]
        out.print(f"device pings (hccn_tool): {len(devices.pings) - len(failed)} of {len(devices.pings)} got through", markup=False)
    for node, device, why in devices.broken_devices:
        error(f"broken device: {why}", subject=f"{node} device {device}")
    for link in devices.broken_links:
        error(f"device ping to {link.peer_ip} failed: {link.error}",
              subject=f"{link.node} device {link.device} -> {link.peer} device {link.device}")
    for p in report.problems:
        error(p.message, subject=p.node, level="error")
    if verdict.clean and devices.clean and not report.problems:
        if not report.measured:
            out.print(f"nothing measured: netcheck needs two nodes or more ({len(report.endpoints)} reachable)", markup=False)
        else:
            out.print(f"[green]ok[/]: no slow node or link among {escape(fold(list(report.endpoints)))}")
