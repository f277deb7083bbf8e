"""`ascendctl inventory validate|show`."""

from __future__ import annotations

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
