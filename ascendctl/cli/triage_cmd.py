"""`ascendctl triage PATH...`: why did the job die, and where did it start."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import examples, HtmlOpt, JsonOpt, argv_now, cli_errors


@app.command("triage", epilog=examples(
    "ascendctl triage bundle.tar.gz", "ascendctl triage /var/log/train/ --json", "ascendctl triage n01.log.gz n02.log.gz",
    codes="0 a verdict, 1 error (unreadable input), 2 usage, 130 interrupted"))
@cli_errors
def triage_cmd(
    paths: Annotated[list[Path], typer.Argument(
        help="Bundles from `ascendctl collect` (.tar.gz or directory), directories or log files.", show_default=False)],
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
) -> None:
    """Name the root cause of a failed job, its first failing node and rank, the evidence, and what to do."""
    from ascendctl.report import is_bundle
    from ascendctl.triage import triage
    from ascendctl.ui import triage_view

    report = triage(paths)
    triage_view.show_triage(report, as_json=as_json, argv=argv_now())
    if html is not None:
        from ascendctl.report import write_report
        from ascendctl.ui import report_view

        report_view.show_written(write_report([p for p in paths if is_bundle(p)], html, triage=report))
    raise typer.Exit(int(report.exit_code))
