"""`ascendctl collect`: gather a triage bundle from every node."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from ascendctl.cli.app import app
from ascendctl.cli.common import JsonOpt, NodeOptions, argv_now, cli_errors, examples, node_options


@app.command(epilog=examples(
    "ascendctl collect last -o bundle.tar.gz", "ascendctl collect --since 2h --msprof /data/prof",
    "ascendctl collect -w 'n[01-08]' --max-node-size 50M", "ascendctl collect last --profile /data/prof",
    codes="0 ok, 1 error, 2 usage or bad inventory, 3 checks failed or not evaluated, 4 nodes unreachable, 130 interrupted"))
@cli_errors
@node_options("inventory", "connect_timeout", "command_timeout", "fanout", "accept_new_host_keys", "nodes", "exclude", "rerun_failed")
def collect(
    job: Annotated[Optional[str], typer.Argument(help="Job id (a unique prefix) or 'last': that job's nodes, from its record (-i must agree); default: no job, node state and recent logs.",
                                                 show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Bundle to write: NAME.tar.gz, or a directory.",
                                                   show_default=False)] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Logs newer than this: 2h, 30m, epoch or ISO time (default: job start, else 24h).",
                                                 show_default=False)] = None,
    msprof: Annotated[Optional[str], typer.Option("--msprof", help="Profiler output dir on the nodes; only its summary CSVs are taken.",
                                                  show_default=False)] = None,
    profile: Annotated[Optional[str], typer.Option("--profile", help="Per-rank profiles dir on the nodes (torch_npu *_ascend_pt, torch.profiler traces); only the newest profiling task's files that `ascendctl perf` reads are taken.",
                                                   show_default=False)] = None,
    max_node_size: Annotated[str, typer.Option("--max-node-size", help="Cap per node (newest files kept).")] = "200M",
    max_total_size: Annotated[Optional[str], typer.Option("--max-total-size", help="Cap for the whole bundle.",
                                                          show_default=False)] = None,
    comm_limit: Annotated[float, typer.Option("--comm-limit", help="Flag ranks whose communication exceeds this share of step time.",
                                              min=0.0, max=1.0)] = 0.15,
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Collect vendor-tool state, kernel messages, plogs, launcher logs and msprof summaries into one bundle."""
    from ascendctl.bundle.collect import CollectOptions, collect_bundle, parse_since, parse_size
    from ascendctl.inventory.load import load_inventory
    from ascendctl.jobs.reach import job_inventory
    from ascendctl.jobs.record import job_attempts, load_job, loop_of
    from ascendctl.inventory.retry import save_failures
    from ascendctl.ui import collect_view, progress

    record = load_job(None if job == "last" else job) if job else None
    if record is None:
        inv = cluster.select("collect")
    else:  # the job's own nodes, from its record's inventory unless -i is given (which must agree with the record)
        given = load_inventory(cluster.inventory, flags=cluster.flags) if cluster.inventory else None
        # a job's nodes are collected even when quarantined since: the culprit's logs are the ones that matter
        inv = cluster.select("collect", base=job_inventory(record, given, flags=cluster.flags), keep_quarantined=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    first = loop_of(record) if record is not None else None  # launch --restarts: the other attempts' records go along
    attempts = tuple(r for r in job_attempts(first) if record is None or r.id != record.id) if first else ()
    options = CollectOptions(
        output=output or Path(f"ascendctl-collect-{record.id if record else stamp}.tar.gz"), job=record, attempts=attempts,
        since=parse_since(since) if since else None, msprof_dir=msprof, profile_dir=profile, max_node_size=parse_size(max_node_size),
        max_total_size=parse_size(max_total_size) if max_total_size else None, comm_limit=comm_limit)
    with progress("collect", as_json=as_json) as sink:
        report = collect_bundle(inv, options, on_event=sink)
    save_failures("collect", inv.source, report.node_outcomes)
    collect_view.show_collect(report, as_json=as_json, argv=argv_now())
    raise typer.Exit(int(report.exit_code))
