"""A recorded job's nodes and how to reach them again: its inventory (the one it was launched with, its Slurm
allocation, or -i if it agrees) and the runner that started it. Used by status, logs, stop, collect JOB, stacks and the
detached supervisor."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping

from ascendctl.errors import UsageError
from ascendctl.inventory.load import BUILTIN_SOURCE, builtin_inventory, load_inventory
from ascendctl.jobs.ssh_runner import SSHRunner
from ascendctl.remote.group import NodeGroup

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory
    from ascendctl.jobs.record import JobRecord


def job_inventory(record: JobRecord, inventory: Inventory | None = None, *,
                  flags: Mapping[str, Any] | None = None) -> Inventory:
    """The nodes a job ran on and how to reach them, for `collect JOB`, `status`, `logs` and `stop`.

    The inventory given (-i), else the one the job was launched with (or its Slurm allocation), narrowed to the
    job's nodes (their inventory indexes kept). Without this, `collect last` with no -i collected this machine,
    and triage of that bundle named a wrong culprit. A UsageError when that inventory lacks one of the job's nodes
    or gives it another host: asking those hosts about this job would answer for other machines.
    """
    inv = inventory if inventory is not None else recorded_inventory(record, flags)
    if not record.nodes:  # a submitted job that has not started: its nodes are not known yet
        return inv
    by_name = {node.name: node for node in inv.nodes}
    missing = [n.name for n in record.nodes if n.name not in by_name]
    moved = [f"{n.name} is {n.host} in the job record, {by_name[n.name].host} there" for n in record.nodes
             if n.name in by_name and n.host and by_name[n.name].host != n.host]
    if missing or moved:
        from ascendctl.nodeset import fold

        why = [f"no node {fold(missing)}"] if missing else []
        raise UsageError(f"job {record.id} ran on {fold([n.name for n in record.nodes])}, but {inv.source} has "
                         + "; ".join(why + moved),
                         hint=f"leave out -i: the job's own inventory ({record.inventory}) is used"
                         if inventory is not None else "the inventory changed since the job ran; pass the one it ran with (-i)")
    names = {n.name for n in record.nodes}
    return replace(inv, nodes=tuple(node for node in inv.nodes if node.name in names))


def recorded_inventory(record: JobRecord, flags: Mapping[str, Any] | None) -> Inventory:
    """The inventory the job was launched with, loaded again (with today's command-line `flags`)."""
    if record.runner == "slurm" and record.slurm_job:
        # the allocation the job ran in, also when asked from outside it (its node list from scontrol show job)
        import os

        from ascendctl.inventory.load import allocation_inventory

        environ = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_JOB")}
        return allocation_inventory(flags=flags, environ={**environ, "SLURM_JOB_ID": record.slurm_job})
    if record.inventory == BUILTIN_SOURCE:
        return builtin_inventory(flags=flags)
    return load_inventory(None if record.inventory.startswith("<") else record.inventory, flags=flags)


def runner_for_record(record: JobRecord, inventory: Inventory) -> SSHRunner:
    if record.runner not in ("ssh", "slurm"):
        raise UsageError(f"job {record.id} was started by the {record.runner!r} runner, which this ascendctl does not have")
    if record.runner == "slurm":
        from ascendctl.jobs.slurm_runner import SlurmRunner

        return SlurmRunner(NodeGroup(inventory))
    return SSHRunner(NodeGroup(inventory))
