"""`ascendctl perf PATH...`: the slow rank, the slow link and the communication share, from every rank's profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import JsonOpt, argv_now, cli_errors, examples


@app.command("perf", epilog=examples(
    "ascendctl perf ./profiles/", "ascendctl perf bundle.tar.gz --json",
    "ascendctl perf rank0.pt.trace.json.gz rank1.pt.trace.json.gz",
    codes="0 nothing slow, 1 a profile could not be read, 2 usage or no profiles found, 3 a straggler or slow link named"))
@cli_errors
def perf_cmd(
    paths: Annotated[list[Path], typer.Argument(
        help="Directories, collect bundles or archives of per-rank profiles (*.pt.trace.json[.gz], step_trace_time.csv, "
             "communication.json, communication_matrix.json), or trace files.", show_default=False)],
    as_json: JsonOpt = False,
) -> None:
    """Name the straggler rank and the slow links from every rank's profile, with the communication share."""
    from ascendctl.perf.analyse import perf
    from ascendctl.ui import perf_view

    report = perf(paths)
    perf_view.show_perf(report, as_json=as_json, argv=argv_now())
    raise typer.Exit(int(report.exit_code))
