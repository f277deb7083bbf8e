"""`ascendctl stacks [JOB]`: every rank's Python stack of a running job, merged, and the stuck rank named."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import JsonOpt, NodeOptions, argv_now, cli_errors, examples, node_options

StacksJobArg = Annotated[Optional[str], typer.Argument(help="Job id or a unique prefix (default: the newest job).",
                                                       show_default=False)]


@app.command("stacks", epilog=examples(
    "ascendctl stacks", "ascendctl stacks 20261123-1903 --json", "ascendctl stacks --wait 5",
    codes="0 stacks taken, 1 error (no rank answered, the job is not running, its record is unreadable), 2 no such job, "
          "4 a node could not be asked"))
@cli_errors
@node_options("inventory")
def stacks(
    job: StacksJobArg = None,
    wait: Annotated[float, typer.Option("--wait", min=0.1, max=60, metavar="SECONDS",
                                        help="How long each node waits for its ranks' dumps after signalling them.")] = 2.0,
    wait_pattern: Annotated[Optional[list[str]], typer.Option(
        "--wait-pattern", metavar="REGEX", show_default=False,
        help="A frame (`file:function`) that waits on other ranks, besides the built-in collectives, barriers and "
             "store waits (repeatable).")] = None,
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Take the Python stack of every rank of a running job at once, merge them and name the stuck rank."""
    from ascendctl.inventory.load import load_inventory
    from ascendctl.stacks.capture import job_stacks
    from ascendctl.stacks.merge import WAIT_PATTERNS
    from ascendctl.ui import stacks_view

    report = job_stacks(job, load_inventory(cluster.inventory) if cluster.inventory else None, wait=wait,
                        patterns=(*WAIT_PATTERNS, *(wait_pattern or ())))
    stacks_view.show_stacks(report, as_json=as_json, argv=argv_now())
    raise typer.Exit(int(report.exit_code))
