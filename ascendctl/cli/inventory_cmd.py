"""`ascendctl inventory validate|show`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from . import inventory_app
from .common import examples, ExcludeOpt, InventoryOpt, JsonOpt, NodesOpt, argv_now, cli_errors, load_selected

@inventory_app.command("validate", epilog=examples("ascendctl inventory validate -i cluster.yaml", "ascendctl inventory validate --json",
                                                  codes="0 valid, 2 the inventory has problems (each named with file, line and key)"))
@cli_errors
def inventory_validate(inventory: InventoryOpt = None, as_json: JsonOpt = False) -> None:
    """Check the inventory file and report every problem at once (exit 2 if any)."""
    from ..ui import inventory_view
    from ..inventory import load_inventory

    inventory_view.show_inventory_valid(load_inventory(inventory), as_json=as_json, argv=argv_now())


@inventory_app.command("show", epilog=examples("ascendctl inventory show -i cluster.yaml", "ascendctl inventory show -w @rack1 --json",
                                              codes="0 ok, 2 bad inventory or node set"))
@cli_errors
def inventory_show(inventory: InventoryOpt = None, as_json: JsonOpt = False, nodes: NodesOpt = None,
                   exclude: ExcludeOpt = None) -> None:
    """Show nodes after range expansion, the groups, and each effective setting with its source."""
    from ..ui import inventory_view

    inventory_view.show_inventory(load_selected(inventory, nodes, exclude), as_json=as_json, argv=argv_now())


@inventory_app.command("init", epilog=examples(
    "ascendctl inventory init --from-hostfile hostfile            # Open MPI, DeepSpeed, MPICH or plain",
    "ascendctl inventory init -w 'node[01-16]' -o cluster.yaml", "salloc -N4 ascendctl inventory init -o - > cluster.yaml",
    codes="0 written, 2 usage, a bad hostfile or node set, or the file exists (pass --force)"))
@cli_errors
def inventory_init(
    from_hostfile: Annotated[Optional[str], typer.Option("--from-hostfile", metavar="FILE", show_default=False,
                                                         help="Nodes from a hostfile (HOST slots=N, HOST:N or HOST lines).")] = None,
    nodes: Annotated[Optional[str], typer.Option("-w", "--nodes", metavar="NODESET", show_default=False,
                                                 help="Nodes from a node set, e.g. 'node[01-16]' (each name is its host).")] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="File to write; - for stdout.")] = "inventory.yaml",
    force: Annotated[bool, typer.Option("--force", help="Replace the file if it exists.")] = False,
) -> None:
    """Write a commented inventory from a hostfile, a node set or the current Slurm allocation."""
    from ..inventory_init import init_inventory
    from ..ui import inventory_view

    inventory_view.show_init(init_inventory(hostfile=from_hostfile, nodeset=nodes, output=output, force=force))
