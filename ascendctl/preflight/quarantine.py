"""`preflight --quarantine-failed`: the nodes where a check failed become quarantined (inventory/nodestate.py), with the
reason `preflight: <failed check ids>` and the checks' summaries as evidence. Must not import typer or rich."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendctl.preflight.checks.model import Status

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory
    from ascendctl.inventory.nodestate import StateChange
    from ascendctl.preflight.result import PreflightReport

COMMAND = "ascendctl preflight --quarantine-failed"


def failed_checks(report: PreflightReport) -> dict[str, tuple[tuple[str, ...], str]]:
    """Node name -> (the ids of its failed checks, their summaries), for each node where a check failed (an unreachable
    node's checks were not evaluated: it is not among them), in inventory order."""
    found = {}
    for node in report.nodes:
        failed = [c for c in node.checks if c.status == Status.FAIL]
        if failed:
            found[node.name] = (tuple(c.check for c in failed), "; ".join(f"{c.check}: {c.summary}" for c in failed))
    return found


def quarantine_failed_nodes(inventory: Inventory, report: PreflightReport) -> StateChange | None:
    """Quarantine every node where a preflight check failed; None when none failed."""
    from ascendctl.inventory.nodestate import quarantine_each
    from ascendctl.paths import current_user

    failed = failed_checks(report)
    if not failed:
        return None
    why = {name: ("preflight: " + ", ".join(ids), evidence) for name, (ids, evidence) in failed.items()}
    return quarantine_each(inventory, why, by=current_user(), command=COMMAND)
