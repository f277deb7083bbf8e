"""Rendering of `ascendctl render hostfile|ranktable|env` results.

Rendered files go to stdout byte for byte (no Rich wrapping or markup; control characters
shown escaped, as everywhere on the terminal; `-o FILE` gets them exact); notes and problems
go to stderr, one line each.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ascendctl.errors import ExitCode
from ascendctl.jobs.environment import env_snippet, redacted_names
from ascendctl.paths import write_text_atomic
from ascendctl.nodeset import fold, fold_numbers, group_by
from ascendctl.ui import emit_json, err, error, write_out

if TYPE_CHECKING:
    from ascendctl.jobs.environment import NodeEnvironment
    from ascendctl.facts.device_check import Problem
    from ascendctl.render import RankTableCheck, RankTableResult


def _note(message: str) -> None:
    err.print(f"ascendctl: {message}", markup=False)


def show_problems(problems: Sequence[Problem]) -> None:
    """`ascendctl: error: <nodes>: device <N>: <what>` lines, in the order found; the same problem on many nodes and
    devices is one line (`n[001-200]: device 0-15: no device IP`), its hint once (--json keeps every problem)."""
    devices: dict[tuple[str | None, str, str | None, str | None], list[int]] = {}
    for p in problems:  # per node: the devices that have this problem
        devices.setdefault((p.where, p.message, p.hint, p.node), []).extend([] if p.device is None else [p.device])
    grouped = group_by(devices.items(), key=lambda item: (*item[0][:3], tuple(item[1])), name=lambda item: item[0][3] or "")
    for (where, message, hint, ids), nodes in grouped:
        subject = [part for part in (where, fold([n for n in nodes if n])) if part]
        if ids:
            subject.append(f"device {fold_numbers(ids)}")
        error(message, subject=": ".join(subject) or None, hint=hint)


def show_hostfile(text: str, *, fmt: str, nodes: int, output: Path | None, as_json: bool, argv: list[str]) -> None:
    if as_json:
        emit_json(argv, ExitCode.OK, {"format": fmt, "file": os.fspath(output) if output else None, "nodes": nodes, "content": text})
    elif output is None:
        write_out(text)
    else:
        _note(f"wrote {output} ({fmt}, {nodes} node(s))")


def show_rank_table(result: RankTableResult, *, output: Path | None, as_json: bool, argv: list[str]) -> None:
    """The table on stdout (or a note naming the file it went to), else every problem."""
    if as_json:
        emit_json(argv, result.exit_code, _rank_table_data(result, output), [p.to_dict() for p in result.problems])
        return
    if result.table is None:
        show_problems(result.problems)
        error(f"{len(result.problems)} problem(s); nothing written", subject="ranktable")
        return
    if output is None:
        write_out(result.text())
    else:
        _note(f"wrote {output} (version {result.table['version']}, {result.table['server_count']} server(s), {result.ranks} rank(s))")


def _rank_table_data(result: RankTableResult, output: Path | None) -> dict[str, Any]:
    nodes = []
    for item in result.nodes:
        status = item.error.status.value if item.error else ("failed" if item.value and item.value.failure else "ok")
        entry: dict[str, Any] = {"name": item.node, "status": status}
        if item.value is not None:
            entry["devices"] = [{"device_id": d.device_id, "device_ip": d.ip, "source": d.source or None} for d in item.value.devices]
            if item.value.super_pod_id is not None:
                entry["super_pod_id"] = item.value.super_pod_id
        nodes.append(entry)
    return {
        "file": os.fspath(output) if output is not None and result.table is not None else None,
        "ranks": result.ranks,
        "rank_table": result.table,
        "nodes": nodes,
    }


def show_check(report: RankTableCheck, *, as_json: bool, argv: list[str]) -> None:
    if as_json:
        emit_json(argv, report.exit_code, report.to_dict(), [p.to_dict() for p in report.problems])
        return
    if report.problems:
        show_problems(report.problems)
        error(f"{len(report.problems)} problem(s)", subject=report.source)
        return
    write_out(f"{report.source}: ok, version {report.version}, {report.servers} server(s), {report.ranks} rank(s) match the cluster\n")


def show_env(envs: Sequence[NodeEnvironment], *, as_json: bool, argv: list[str], output: Path | None = None) -> None:
    """Secret values never reach stdout; with `output` the file gets them, readable only by its owner."""
    if output is not None:
        write_text_atomic(output, env_snippet(envs), private=True)
    hidden = redacted_names(envs)
    if as_json:
        data: dict[str, object] = {"nodes": [item.to_dict() for item in envs]}
        if output is not None:
            data["output"] = str(output)
        emit_json(argv, ExitCode.OK, data)
        return
    if output is None:
        write_out(env_snippet(envs, redact=True))
        if hidden:
            error(f"{', '.join(hidden)}: shown as <redacted>; write them to a private file with -o FILE", level="notice")
    else:
        error(f"wrote {len(envs)} node(s) to {output} (mode 0600)", level="notice")
