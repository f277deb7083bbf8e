"""`ascendctl exec`: run a command on every node."""

from __future__ import annotations

from typing import Annotated

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import NodeOptions, examples, JsonOpt, argv_now, cli_errors, node_options


@app.command("exec", epilog=examples(
    "ascendctl exec -- 'npu-smi info -t health -i 0'", "ascendctl exec -w @rack1 -x n07 --json -- uptime",
    "ascendctl exec --command-timeout 30 -- 'dmesg | tail -5'",
    "ascendctl exec --rerun-failed -- 'systemctl restart chronyd'   # only where the last exec failed or was unreachable",
    codes="0 ok, 1 error, 2 usage or bad inventory, 3 the command failed or timed out somewhere, 4 nodes unreachable, 130 interrupted"))
@cli_errors
@node_options("inventory", "connect_timeout", "command_timeout", "fanout", "accept_new_host_keys", "nodes", "exclude", "rerun_failed")
def exec_command(
    command: Annotated[list[str], typer.Argument(help="Command to run with /bin/sh on every node (after --).", show_default=False)],
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Run a shell command on every node; identical outputs are folded together."""
    from ascendctl.inventory.retry import save_failures
    from ascendctl.ui import exec_view, progress
    from ascendctl.execute import run_command

    inv = cluster.select("exec")
    with progress("exec", as_json=as_json) as sink:
        report = run_command(inv, " ".join(command), on_event=sink)
    save_failures("exec", inv.source, report.node_outcomes)
    exec_view.show_exec(report, as_json=as_json, argv=argv_now())
    raise typer.Exit(int(report.exit_code))
