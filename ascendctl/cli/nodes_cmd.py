"""`ascendctl nodes [quarantine|release]`: the node state that lasts between commands (docs/nodes.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import JsonOpt, NodeOptions, argv_now, cli_errors, examples, node_options

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory

CODES = "0 ok, 1 the node state file cannot be read or written, or scontrol failed (the state itself is saved), 2 usage, bad inventory or unknown node"
nodes_app = typer.Typer(help="List, quarantine and release nodes: quarantined nodes are left out of every command that reaches nodes.",
                        invoke_without_command=True, no_args_is_help=False, rich_markup_mode=None)
app.add_typer(nodes_app, name="nodes")
NodesetArg = Annotated[str, typer.Argument(metavar="NODESET", help="Nodes in node-set syntax (n[03,07], @rack1); names or hosts.",
                                           show_default=False)]


@nodes_app.callback(epilog=examples("ascendctl nodes -i cluster.yaml", "ascendctl nodes --json",
                                    "ascendctl nodes quarantine 'n[03,07]' --reason 'ECC errors' --evidence 'job 20261126-1200 npu_ecc'",
                                    "ascendctl nodes release n03", codes=CODES))
@cli_errors
@node_options("inventory")
def nodes(ctx: typer.Context, as_json: JsonOpt = False, *, cluster: NodeOptions) -> None:
    """List every node of the inventory: ok, quarantined (since when, why, by whom, evidence) or spare (@spares)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = cluster.inventory  # `nodes -i FILE quarantine ...` as well as `nodes quarantine -i FILE ...`
        return
    from ascendctl.inventory.nodestate import load_node_state
    from ascendctl.ui import nodes_view

    inv = cluster.select()
    nodes_view.show_nodes(inv, load_node_state(inv), as_json=as_json, argv=argv_now())


@nodes_app.command("quarantine", epilog=examples("ascendctl nodes quarantine n07 --reason 'HCCL timeouts' --evidence 'job 20261126-1200 hccl_timeout'",
                                                 codes=CODES))
@cli_errors
@node_options("inventory")
def quarantine(
    ctx: typer.Context,
    nodeset: NodesetArg,
    reason: Annotated[str, typer.Option("--reason", help="Why (shown by `ascendctl nodes`; on Slurm the drain reason).", show_default=False)],
    evidence: Annotated[Optional[str], typer.Option("--evidence", help="What shows it, e.g. a job id and a triage category.",
                                                    show_default=False)] = None,
    *,
    cluster: NodeOptions,
) -> None:
    """Quarantine nodes: every command that reaches nodes leaves them out until they are released (on Slurm: drained)."""
    from ascendctl.inventory.nodestate import quarantine_nodes
    from ascendctl.paths import current_user
    from ascendctl.ui import nodes_view

    inv, names = _named(ctx, cluster, nodeset, stale=False)
    change = quarantine_nodes(inv, names, reason, by=current_user(), command="ascendctl nodes quarantine", evidence=evidence)
    raise typer.Exit(nodes_view.show_change(change, quarantined=True))


@nodes_app.command("release", epilog=examples("ascendctl nodes release 'n[03,07]'", codes=CODES))
@cli_errors
@node_options("inventory")
def release(ctx: typer.Context, nodeset: NodesetArg, *, cluster: NodeOptions) -> None:
    """Release quarantined nodes (on Slurm: resume them where the drain reason is still ascendctl's)."""
    from ascendctl.inventory.nodestate import release_nodes
    from ascendctl.ui import nodes_view

    inv, names = _named(ctx, cluster, nodeset, stale=True)
    raise typer.Exit(nodes_view.show_change(release_nodes(inv, names), quarantined=False))


def _named(ctx: typer.Context, cluster: NodeOptions, nodeset: str, *, stale: bool) -> tuple[Inventory, list[str]]:
    """The inventory (-i here or before the subcommand) and the node names NODESET stands for (UsageError naming unknown
    ones; `stale`: names gone from the inventory but still quarantined are taken too)."""
    from ascendctl.inventory.load import load_inventory
    from ascendctl.inventory.nodestate import named_nodes

    inv = load_inventory(cluster.inventory or (ctx.obj if isinstance(ctx.obj, str) else None))
    return inv, named_nodes(inv, nodeset, stale=stale)
