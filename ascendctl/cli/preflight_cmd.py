"""`ascendctl preflight`: is this cluster ready to train?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import HtmlOpt, JsonOpt, NodeOptions, argv_now, cli_errors, examples, node_options

IdsOpt = Annotated[Optional[list[str]], typer.Option(help="Check ids, comma-separated or repeated (docs/preflight.md lists them; "
                                                            "a wrong one is refused with the valid ids).", show_default=False)]


@app.command(epilog=examples(
    "ascendctl preflight -i cluster.yaml", "ascendctl preflight --only ntp,clock_skew,mtu,path_mtu",
    "ascendctl preflight -x n07 --json --junit preflight.xml   # CI gate", codes="0 ok, 1 error, 2 usage or bad inventory, 3 checks failed or not evaluated, 4 nodes unreachable, 130 interrupted"))
@cli_errors
@node_options("inventory", "connect_timeout", "command_timeout", "fanout", "accept_new_host_keys", "nodes", "exclude", "rerun_failed")
def preflight(
    only: IdsOpt = None,
    skip: IdsOpt = None,
    as_json: JsonOpt = False,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Also write JUnit XML (one testcase per node x check).",
                                                  show_default=False)] = None,
    html: HtmlOpt = None,
    launcher: Annotated[Optional[str], typer.Option("--launcher", help="msrun or torchrun: the `launcher` check looks for it on every node, as launch runs it.", show_default=False)] = None,
    script: Annotated[Optional[str], typer.Option("--script", help="With --launcher: the job's script, looked for in the job's working directory on every node.", show_default=False)] = None,
    quarantine_failed: Annotated[bool, typer.Option("--quarantine-failed", help="Quarantine the nodes where a check failed (reason: "
                                                    "'preflight: <checks>'; see `ascendctl nodes`).")] = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Check every node in parallel (NTP, clock skew, MTU and path MTU, name resolution, NPUs, links, versions, ...)."""
    from ascendctl.preflight.checks.model import job_target
    from ascendctl.preflight.checks.registry import select_checks
    from ascendctl.preflight.junit import junit_xml
    from ascendctl.preflight.run import run_preflight
    from ascendctl.inventory.retry import save_failures
    from ascendctl.ui import preflight_view, progress

    checks = select_checks(only, skip)
    if launcher is None and not any("launcher" in item.split(",") for item in only or ()):
        checks = tuple(c for c in checks if c.id != "launcher")  # no job to look for: not a row of skips
    inv = cluster.select("preflight")
    with progress("preflight", as_json=as_json) as sink:
        report = run_preflight(inv, checks, on_event=sink, job=job_target(launcher, script))
    save_failures("preflight", inv.source, report.node_outcomes)
    if junit is not None:
        junit.write_text(junit_xml(report), encoding="utf-8")
    preflight_view.show_preflight(report, as_json=as_json, argv=argv_now())
    if quarantine_failed:
        from ascendctl.preflight.quarantine import quarantine_failed_nodes
        from ascendctl.ui import nodes_view

        nodes_view.show_preflight_quarantine(quarantine_failed_nodes(inv, report))
    if html is not None:
        from ascendctl.report import write_report
        from ascendctl.ui import report_view

        report_view.show_written(write_report([], html, preflight=report))
    raise typer.Exit(int(report.exit_code))
