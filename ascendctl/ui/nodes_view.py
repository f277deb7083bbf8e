"""Rendering of `ascendctl nodes`: each node's state (ok, quarantined, spare) with since, why, who and evidence;
and what `nodes quarantine|release` changed (the Slurm side included)."""

from __future__ import annotations

import shlex
import time
from typing import TYPE_CHECKING, Any

from ascendctl.errors import ExitCode
from ascendctl.nodeset import fold
from ascendctl.ui import FOLD_NODES_ABOVE, emit_json, error, out, print_columns, warning

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory
    from ascendctl.inventory.nodestate import NodeBook, NodeEntry, StateChange


def iso_time(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def entry_to_dict(entry: NodeEntry) -> dict[str, Any]:
    held = entry.quarantine
    return {"name": entry.name, "state": entry.state.value, "spare": entry.spare,
            "since": iso_time(held.since) if held else None, "reason": held.reason if held else None,
            "by": held.by if held else None, "command": held.command if held else None,
            "evidence": held.evidence if held else None}


def show_nodes(inventory: Inventory, book: NodeBook, *, as_json: bool, argv: list[str]) -> None:
    """Every node in inventory order; past FOLD_NODES_ABOVE nodes the ok and spare ones fold into one line per state."""
    entries = book.entries(inventory)
    if as_json:
        emit_json(argv, ExitCode.OK, {"inventory": inventory.source, "state_file": str(book.path),
                                      "nodes": [entry_to_dict(e) for e in entries]})
        return
    rows: list[tuple[str, ...]] = []
    fold_plain = len(entries) > FOLD_NODES_ABOVE
    plain: dict[str, list[str]] = {}
    for entry in entries:
        held = entry.quarantine
        if held is None and fold_plain:
            plain.setdefault(entry.state.value, []).append(entry.name)
            continue
        state = entry.state.value + (" (spare)" if held and entry.spare else "")
        rows.append((entry.name, state, time.strftime("%Y-%m-%d %H:%M", time.gmtime(held.since)) + " UTC" if held else "-",
                     held.reason if held else "-", (held.evidence or "-") if held else "-",
                     f"{held.by} ({held.command})" if held else "-"))
    rows = [(fold(names), state, "-", "-", "-", "-") for state, names in plain.items()] + rows
    held_count = sum(1 for e in entries if e.quarantine is not None)
    print_columns(f"nodes ({inventory.source}): {held_count} quarantined; state in {book.path}",
                  ("node", "state", "since", "reason", "evidence", "by"), rows)
    gone = book.gone(inventory)
    if gone:
        error(f"{fold(gone)}: quarantined but no longer in the inventory", level="notice",
              hint=f"`ascendctl nodes release {shlex.quote(fold(gone))}` forgets them")


def show_change(change: StateChange, *, quarantined: bool) -> int:
    """What a quarantine or release did (stdout), Slurm's refusals as warnings (stderr); the exit code: 1 if Slurm failed."""
    verb = "quarantined" if quarantined else "released"
    lines = []
    if change.changed:
        lines.append(f"{verb}: {fold(change.changed)}")
    if change.unchanged:
        lines.append(f"already {verb if quarantined else 'not quarantined'}: {fold(change.unchanged)}"
                     + (" (reason and evidence updated)" if quarantined else ""))
    done = [c.node for c in change.slurm if c.problem is None]
    if done:
        lines.append(f"{'drained' if quarantined else 'resumed'} in Slurm: {fold(done)}")
    out.print("\n".join(lines), markup=False)
    for problem in change.slurm_problems:
        warning(problem.problem or "", subject=problem.node,
                hint=None if problem.action == "keep" else f"the node stays {verb} for ascendctl; ask a Slurm operator to "
                + ("drain" if quarantined else "resume") + " it")
    failed = [p for p in change.slurm_problems if p.action != "keep"]
    return int(ExitCode.ERROR if failed else ExitCode.OK)


def show_preflight_quarantine(change: StateChange | None) -> None:
    """After `preflight --quarantine-failed`: which nodes it quarantined, on stderr (stdout holds the report)."""
    if change is None:
        error("no check failed: no node quarantined", level="notice")
        return
    names = fold(change.changed + change.unchanged)
    error(f"quarantined {names}: left out of every command that reaches nodes until `ascendctl nodes release {shlex.quote(names)}`",
          level="notice")
    for problem in change.slurm_problems:
        warning(problem.problem or "", subject=problem.node)
