"""`ascendctl inventory validate|show`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ascendctl.cli.app import inventory_app
from ascendctl.cli.common import JsonOpt, NodeOptions, argv_now, cli_errors, examples, node_options

@inventory_app.command("validate", epilog=examples("ascendctl inventory validate -i cluster.yaml", "ascendctl inventory validate --json",
                                                  codes="0 valid, 2 the inventory has problems (each named with file, line and key)"))
@cli_errors
@node_options("inventory")
def inventory_validate(as_json: JsonOpt = False, *, cluster: NodeOptions) -> None:
    """Check the inventory file and report every problem at once (exit 2 if any)."""
    from ascendctl.ui import inventory_view
    from ascendctl.inventory.load import load_inventory

    inventory_view.show_inventory_valid(load_inventory(cluster.inventory), as_json=as_json, argv=argv_now())


@inventory_app.command("show", epilog=examples("ascendctl inventory show -i cluster.yaml", "ascendctl inventory show -w @rack1 --json",
                                              codes="0 ok, 2 bad inventory or node set"))
@cli_errors
@node_options("inventory", "nodes", "exclude")
def inventory_show(as_json: JsonOpt = False, *, cluster: NodeOptions) -> None:
    """Show nodes after range expansion, the groups, each effective setting with its source, and what the ssh config
    decides for each node (file:line)."""
    from ascendctl.ui import inventory_view

    inventory = cluster.select()
    taken = {}
    if any(node.transport == "ssh" for node in inventory.nodes):  # paramiko's config reader: only when a node uses it
        from ascendctl.remote.transport.ssh import ssh_config_taken

        taken = ssh_config_taken(inventory)
    inventory_view.show_inventory(inventory, ssh_config=taken, as_json=as_json, argv=argv_now())


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
    from ascendctl.inventory.starter import init_inventory
    from ascendctl.ui import inventory_view

    inventory_view.show_init(init_inventory(hostfile=from_hostfile, nodeset=nodes, output=output, force=force))
