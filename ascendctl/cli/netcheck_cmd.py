"""`ascendctl netcheck`: find the slow node or link before it slows the job."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import JsonOpt, NodeOptions, argv_now, cli_errors, node_options


@app.command()
@cli_errors
@node_options("inventory", "connect_timeout", "command_timeout", "fanout", "accept_new_host_keys")
def netcheck(
    quick: Annotated[bool, typer.Option("--quick", help="One ring across all nodes; only if it is slow, bisection to the slow node or link.")] = False,
    pairs: Annotated[bool, typer.Option("--pairs", help="Rounds of disjoint pairs: every node meets ceil(log2 N)+1 partners (default).")] = False,
    all_pairs: Annotated[bool, typer.Option("--all-pairs", help="Every pair once (N-1 rounds, circle method).")] = False,
    size: Annotated[str, typer.Option("--size", help="Bytes each way per pair (64M, 512K, 1G).")] = "64M",
    backend: Annotated[str, typer.Option("--backend", help="auto | hccl_test | nccl-tests | torch | tcp.")] = "auto",
    threshold: Annotated[float, typer.Option("--threshold", help="The smallest shortfall named: slow is below this fraction of the healthy median and beyond the healthy pairs' spread, on a first and a second look.", min=0.01, max=1.0)] = 0.8,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="Seconds one pair's measurement may take (default: command_timeout).", min=1.0, show_default=False)] = None,
    device_ping: Annotated[Optional[bool], typer.Option("--device-ping/--no-device-ping", help="hccn_tool pings between the device IPs of paired nodes (default: when every node has hccn_tool).", show_default=False)] = None,
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Measure bandwidth between pairs (or, --quick, rings) of nodes and name the slow nodes and links."""
    from ascendctl.errors import AscendctlError, ExitCode
    from ascendctl.netcheck import NetcheckOptions, run_netcheck
    from ascendctl.netcheck.backends import parse_size
    from ascendctl.ui import netcheck_view, progress

    if quick + pairs + all_pairs > 1:
        raise AscendctlError("choose one of --quick, --pairs, --all-pairs", exit_code=ExitCode.USAGE)
    try:
        nbytes = parse_size(size)
    except ValueError as exc:
        raise AscendctlError(f"--size: {exc}", exit_code=ExitCode.USAGE) from None
    mode = "quick" if quick else "all-pairs" if all_pairs else "pairs"
    inv = cluster.select()  # the inventory, without its quarantined nodes
    with progress("netcheck", as_json=as_json) as sink:
        report = run_netcheck(inv, NetcheckOptions(mode, nbytes, backend, threshold, timeout, device_ping), on_event=sink)
    netcheck_view.show_netcheck(report, as_json=as_json, argv=argv_now())
    raise typer.Exit(int(report.exit_code))
