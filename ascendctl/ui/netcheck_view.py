"""Rendering of `ascendctl netcheck`: the verdict, per-node medians, the measured pairs, or the JSON document."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from ascendctl.netcheck.verdict import SECOND
from ascendctl.nodeset import fold
from ascendctl.ui import emit_json, error, out

if TYPE_CHECKING:
    from ascendctl.netcheck import NetcheckReport
    from ascendctl.netcheck.verdict import NetcheckVerdict


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _subject(nodes: tuple[str, ...]) -> str:
    return " <-> ".join(nodes)


def _spread_line(verdict: NetcheckVerdict) -> str | None:
    """How noisy the healthy pairs are, and what it takes to be named slow."""
    spread = verdict.spread
    if spread is None or verdict.median_gbps is None:
        return None
    floor = f", counted as {spread.relative:.0%} (the floor)" if spread.relative > spread.measured_relative + 1e-9 else ""
    left = f", {spread.clipped} low one(s) left out" if spread.clipped else ""
    limit = verdict.rule.limit(spread)
    under = f"under {limit:.3g} Gbit/s" if limit > 0 else "nothing can be, with this spread"
    return (f"spread: the healthy pairs vary by {spread.measured_relative:.0%}{floor} ({spread.count} pair(s){left}; of the "
            f"logarithms, the larger of 1.4826 x MAD and the standard deviation); slow: below {verdict.threshold:g} x median "
            f"and more than {verdict.rule.spreads:g} spreads below it ({under}), on every look, at least {verdict.rule.looks}")


def _looks(values: tuple[float, ...]) -> str:
    return " ".join(_gbps(v) for v in values) or "-"


def show_netcheck(report: NetcheckReport, *, as_json: bool, argv: list[str]) -> None:
    """Print the verdict (slow nodes, slow links, broken pairs, how sure), the node table and the pair matrix."""
    verdict = report.verdict
    if as_json:
        errors = [{"code": p.status, "node": p.node, "message": p.message} for p in report.problems]
        emit_json(argv, report.exit_code, report.to_dict(), errors)
        return
    median = _gbps(verdict.median_gbps)
    second = f" (+{report.second_look_rounds} second look)" if report.second_look_rounds else ""
    first_rounds = len(report.rounds) - report.second_look_rounds
    out.print(f"netcheck: {len(report.endpoints)} node(s), {report.mode}, backend {report.backend} ({report.backend_reason}), "
              f"{first_rounds} round(s){second}, {report.size} bytes each way, cluster median {median} Gbit/s, "
              f"threshold {verdict.threshold:g} x median, {report.seconds:.1f}s", markup=False)
    line = _spread_line(verdict)
    if line:
        out.print(line, markup=False)
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
        if m.look == SECOND:
            note = "second look" + (f": {note}" if note else "")
        pairs.add_row(str(m.round + 1), escape(m.a), escape(m.b), _gbps(m.a_to_b), _gbps(m.b_to_a), escape(note))
    out.print(pairs)
    if verdict.suspects:
        table = Table(box=None, pad_edge=False, title="flagged by the first look (Gbit/s)", title_justify="left")
        for column in ("suspect", "first look", "second look", "known-good partners", "best look x median", "spreads below",
                       "outcome"):
            table.add_column(column)
        for s in verdict.suspects:
            partners = " ".join(f"{p}" for p in s.partners) or "-"
            controls = f" ({_looks(s.controls)})" if s.controls else ""
            table.add_row(escape(_subject(s.nodes)), _looks(s.first), _looks(s.second), escape(partners) + controls,
                          "-" if s.ratio is None else f"{s.ratio:.2f}", "-" if s.spreads is None else f"{s.spreads:.1f}",
                          escape(s.outcome))
        out.print(table)
    for s in verdict.suspects:
        if s.outcome == "slow" and s.kind == "node":
            error(f"slow node: slow with every partner, on both looks ({s.reason})", subject=s.nodes[0])
        elif s.outcome == "slow":
            error(f"slow link: slow between these two only, on both looks ({s.reason})", subject=_subject(s.nodes))
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
            return
        cleared = [s for s in verdict.suspects if s.outcome == "cleared"]
        noise = f"; {len(cleared)} flagged by the first look, fine on the second (noise)" if cleared else ""
        if verdict.inconclusive and verdict.spread is not None:
            doubtful = ", ".join(f"{_subject(s.nodes)} ({s.reason})" for s in verdict.inconclusive)
            out.print(f"[yellow]inconclusive[/]: the healthy pairs vary by {verdict.spread.measured_relative:.0%}; "
                      f"nothing is shown slow beyond that{escape(noise)}; low but not named: {escape(doubtful)}")
        else:
            out.print(f"[green]ok[/]: no slow node or link among {escape(fold(list(report.endpoints)))}{escape(noise)}")
