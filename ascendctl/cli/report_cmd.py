"""`ascendctl report PATH...`: one self-contained HTML page from bundles, triage and preflight documents."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import cli_errors, examples

HtmlOutOpt = Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")]


@app.command("report", epilog=examples(
    "ascendctl report bundle.tar.gz -o report.html", "ascendctl report triage.json preflight.json --open",
    "ascendctl triage bundle.tar.gz --html report.html", codes="0 written, 1 error (a file cannot be read or written), "
    "2 usage (an input is not a bundle, triage or preflight document)"))
@cli_errors
def report_cmd(
    paths: Annotated[list[Path], typer.Argument(
        help="Bundles from `ascendctl collect` (.tar.gz or directory), `triage --json` or `preflight --json` documents, "
             "or a job id (its attempts under launch --restarts).",
        show_default=False)],
    output: HtmlOutOpt = Path("report.html"),
    open_page: Annotated[bool, typer.Option("--open", help="Open the page in the default browser.")] = False,
) -> None:
    """Write one self-contained HTML report (verdict, timeline, preflight matrix, devices, performance); nothing fetched."""
    from ascendctl.report import write_report
    from ascendctl.ui import report_view

    written = write_report(paths, output)
    report_view.show_written(written)
    if open_page:
        typer.launch(written.path.resolve().as_uri())
    raise typer.Exit(int(written.exit_code))
