"""`ascendctl launch`, `jobs`, `status`, `logs`, `stop`: run msrun/torchrun jobs on every node and look after them."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from ascendctl.cli.app import app
from ascendctl.errors import ExitCode, UsageError
from ascendctl.inventory.settings import DEFAULT_SILENCE_LIMIT, MIN_SILENCE_LIMIT
from ascendctl.launchers import DEFAULT_CLUSTER_TIMEOUT, default_ports_help
from ascendctl.cli.common import JsonOpt, NodeOptions, argv_now, cli_errors, examples, node_options

JobArg = Annotated[Optional[str], typer.Argument(help="Job id or a unique prefix (default: the newest job).", show_default=False)]
GraceOpt = Annotated[float, typer.Option("--grace", help="Seconds between SIGTERM and SIGKILL at teardown.", min=0)]
HangTimeoutOpt = Annotated[Optional[str], typer.Option(
    "--hang-timeout", metavar="SECONDS|auto", show_default=False,
    help="A hang: no rank prints a progress line (a training step) for this long (3x before the first one); `auto`: 5x "
         "the p99 of the job's own step intervals once learned, at least 30 s (`auto:FLOOR` sets that), 10 min before the "
         "first step, 10x while a checkpoint is saved. Then every rank's stack is taken (`ascendctl stacks`) and, with "
         "--on-hang stop, the job is stopped with that verdict (exit 5).")]
OnHangOpt = Annotated[str, typer.Option("--on-hang", metavar="stop|report",
                                        help="With --hang-timeout: stop the job (default), or only report the hang and its stacks.")]
ProgressOpt = Annotated[Optional[str], typer.Option(
    "--progress", metavar="REGEX", show_default=False,
    help="With --hang-timeout: what a progress line looks like (default: a step/iteration number, as triage reads them).")]
SilenceOpt = Annotated[float, typer.Option(
    "--silence-limit", metavar="SECONDS", min=MIN_SILENCE_LIMIT,
    help="A followed node that sends nothing this long, not even its follower's heartbeat (every few seconds while the job "
         "is quiet), is lost: exit 4 (launch also stops the others).")]


class Backend(str, Enum):
    ssh = "ssh"
    slurm = "slurm"


class Launcher(str, Enum):
    """`--launcher`'s choices: the names of launchers.LAUNCHERS (tests/test_launchers.py holds them equal)."""

    msrun = "msrun"
    torchrun = "torchrun"


@app.command(context_settings={"allow_interspersed_args": False}, epilog=examples(
    "ascendctl launch --launcher torchrun --dry-run -- train.py --epochs 3",
    "ascendctl launch -i cluster.yaml --launcher msrun --env HCCL_BUFFSIZE=200 -- train.py",
    "ascendctl launch -x n07 --launcher torchrun --detach -- train.py",
    "ascendctl launch --launcher torchrun --restarts 3 --spares n08 -- train.py", codes="0 ok, 1 error, 2 usage or bad inventory, 3 preflight failed, 4 nodes unreachable, 5 the job failed, 6 with --restarts: failed on its own error (do not requeue), 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP (job torn down)"))
@cli_errors
@node_options("inventory", "connect_timeout", "command_timeout", "fanout", "accept_new_host_keys", "nodes", "exclude")
def launch(
    script: Annotated[list[str], typer.Argument(help="Training script and its arguments (after --).", show_default=False)],
    launcher: Annotated[Launcher, typer.Option("--launcher", help="msrun (MindSpore) or torchrun (PyTorch).", case_sensitive=False)],
    nproc_per_node: Annotated[Optional[int], typer.Option("--nproc-per-node", min=1, help="Workers per node (default: the node's slots).", show_default=False)] = None,
    master_addr: Annotated[Optional[str], typer.Option("--master-addr", help="Default: the first node's cluster-interface address.", show_default=False)] = None,
    master_port: Annotated[Optional[int], typer.Option("--master-port", min=1, max=65535, help=f"Default: {default_ports_help()}.", show_default=False)] = None,
    log_dir: Annotated[Optional[str], typer.Option("--log-dir", help="Job log directory on every node (default: <preflight log_dir>/ascendctl-<user>/<job>).", show_default=False)] = None,
    env: Annotated[Optional[list[str]], typer.Option("--env", help="NAME=VALUE exported on every node (repeatable; wins over the inventory). A bare NAME takes its value from this environment, keeping secrets out of argv.", show_default=False)] = None,
    rank_table: Annotated[Optional[str], typer.Option("--rank-table", help="Rank table path on the nodes (RANK_TABLE_FILE; a relative path is made absolute here).", show_default=False)] = None,
    rdzv: Annotated[bool, typer.Option("--rdzv", help="torchrun: c10d rendezvous instead of static node ranks.")] = False,
    cluster_timeout: Annotated[int, typer.Option("--cluster-timeout", min=1, help="msrun --cluster_time_out (seconds).")] = DEFAULT_CLUSTER_TIMEOUT,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print each node's command line and environment; start nothing.")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="Start and return; follow later with `ascendctl logs JOB -f`.")] = False,
    no_preflight: Annotated[bool, typer.Option("--no-preflight", help="Skip the ssh/master_port/npu_stale_procs checks.")] = False,
    grace: GraceOpt = 10.0,
    silence_limit: SilenceOpt = DEFAULT_SILENCE_LIMIT,
    no_stacks: Annotated[bool, typer.Option("--no-stacks", help="On Ctrl-C, SIGTERM or SIGHUP stop at once, without taking every rank's stack first (`ascendctl stacks`).")] = False,
    hang_timeout: HangTimeoutOpt = None,
    on_hang: OnHangOpt = "stop",
    progress: ProgressOpt = None,
    buffered: Annotated[bool, typer.Option("--buffered", help="Leave Python's output buffering alone (default: PYTHONUNBUFFERED=1, so lines stream as printed).")] = False,
    flight_recorder: Annotated[bool, typer.Option("--flight-recorder", help="Turn on torch's Flight Recorder on every rank; `ascendctl stacks` then also names the ranks that never joined a collective.")] = False,
    backend: Annotated[Optional[Backend], typer.Option("--backend", help="ssh (the inventory's nodes), or slurm: outside an allocation, sbatch a batch script that launches inside it (inside one, the allocation is used either way).", case_sensitive=False, show_default=False)] = None,
    partition: Annotated[Optional[str], typer.Option("--partition", help="--backend slurm: sbatch --partition.", show_default=False)] = None,
    time_limit: Annotated[Optional[str], typer.Option("--time", help="--backend slurm: sbatch --time (e.g. 2:00:00).", show_default=False)] = None,
    account: Annotated[Optional[str], typer.Option("--account", help="--backend slurm: sbatch --account.", show_default=False)] = None,
    restarts: Annotated[Optional[int], typer.Option("--restarts", min=0, metavar="N", help="Relaunch a failed job up to N times in all, as its verdict decides: in place (transient), on a spare instead of a faulty node (quarantined), or not at all (the job's own error: exit 6, do not requeue). Default: the inventory's restart.restarts, else 0. docs/launch.md#restarts.", show_default=False)] = None,
    restart_backoff: Annotated[Optional[float], typer.Option("--restart-backoff", min=0, metavar="SECONDS", help="With --restarts: seconds before the first relaunch, doubled each time (at most 300). Default: restart.backoff, else 10.", show_default=False)] = None,
    spares: Annotated[Optional[str], typer.Option("--spares", metavar="NODESET", help="With --restarts: the nodes held back to replace a faulty one (default: the inventory's @spares group).", show_default=False)] = None,
    allow_shrink: Annotated[Optional[bool], typer.Option("--allow-shrink/--no-allow-shrink", help="With --restarts: without a spare, relaunch on the remaining nodes (a smaller world). Default: restart.allow_shrink, else no.", show_default=False)] = None,
    no_progress_attempts: Annotated[Optional[int], typer.Option("--no-progress-attempts", min=1, metavar="K", help="With --restarts: stop after K attempts in a row whose highest training step did not rise. Default: restart.no_progress_attempts, else 3.", show_default=False)] = None,
    checkpoint_dir: Annotated[Optional[str], typer.Option("--checkpoint-dir", metavar="DIR", help="With --restarts: where the job writes its checkpoints (the same path on every node); every worker gets ASCENDCTL_RESUME_FROM, the newest complete one (one being written or cut short is skipped and named).", show_default=False)] = None,
    job_id: Annotated[Optional[str], typer.Option("--job-id", hidden=True, help="Job id to use (set by a submitted batch script).")] = None,
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Launch an msrun or torchrun job on every node; stream its output; tear everything down on failure."""
    from ascendctl.interrupts import stop_on_signals
    from ascendctl.jobs.plan import LaunchOptions
    from ascendctl.jobs.service import dry_run as plan_only, launch_job
    from ascendctl.ui import launch_view

    from ascendctl.jobs.supervise import hang_policy

    options = LaunchOptions(launcher.value, tuple(script), nproc_per_node, master_addr, master_port, log_dir, tuple(env or ()),
                            rank_table, rdzv, cluster_timeout, grace, buffered, silence_limit,
                            hang_policy(hang_timeout, on_hang, progress), flight_recorder=flight_recorder)
    from ascendctl.inventory.load import load_inventory
    from ascendctl.inventory.selection import select_nodes
    from ascendctl.slurm import allocation_job_id

    flags = cluster.flags
    whole = load_inventory(cluster.inventory, flags=flags, submit=True)
    if (backend == Backend.slurm or (backend is None and whole.backend == "slurm")) and not allocation_job_id():
        from ascendctl.jobs.service import submit_job
        from ascendctl.jobs.submit import render_submission, submit_options

        from ascendctl.inventory.nodestate import submit_exclusions
        from ascendctl.jobs.restart import policy_for, restarts_asked_by

        if policy_for(whole.restart, restarts=restarts, backoff=restart_backoff, spares=spares, allow_shrink=allow_shrink,
                      no_progress=no_progress_attempts, checkpoint_dir=checkpoint_dir) is not None:
            raise UsageError("restarts run inside a Slurm allocation, not in submit mode (asked by "
                             f"{restarts_asked_by(whole.restart, restarts)}; the submitting launch follows one job id)",
                             hint="salloc -N K ascendctl launch --restarts N ..., or --restarts 0 to submit without "
                             "restarts (the inventory's restart.restarts is then off)")
        # submit mode: -w/--nodes is how many nodes to ask sbatch for (else the inventory's slurm.nodes); the
        # quarantined nodes (of the Slurm cluster, of the inventory) are sbatch --exclude, said once
        held = () if cluster.include_quarantined else tuple(submit_exclusions(whole))
        wanted = submit_options(whole, cluster.nodes, partition, time_limit, account, exclude=held,
                                include_quarantined=bool(cluster.include_quarantined))
        if held:
            launch_view.notice(launch_view.excluded_text(held))
        if dry_run:
            if as_json:
                raise UsageError("--dry-run of a submission prints its batch script, which is not JSON", hint="drop --json")
            launch_view.show_batch_script(render_submission(options, wanted, job_id="<job>", preflight=not no_preflight).script)
            raise typer.Exit(int(ExitCode.OK))
        # with --json, the job's output goes to stderr, as in a launch inside the allocation: stdout holds only the document
        outcome = submit_job(options, wanted, preflight=not no_preflight, detach=detach,
                             on_output=launch_view.output_sink(to_stderr=as_json), on_notice=launch_view.notice)
        if as_json:
            launch_view.emit_record(outcome.record, outcome.exit_code, argv_now(), detached=outcome.detached)
        else:
            launch_view.show_outcome(outcome)
        raise typer.Exit(int(outcome.exit_code))
    if not whole.nodes:
        raise UsageError(f"{whole.source}: `backend: slurm` outside an allocation: nothing to launch on with --backend ssh",
                         hint="drop --backend ssh to submit, or run inside salloc/sbatch")
    inv = cluster.select(base=whole)
    from ascendctl.jobs.restart import policy_for, restarts_asked_by, spare_names

    # each flag given wins over the inventory's `restart:` key (docs/launch.md#restarts)
    policy = policy_for(inv.restart, restarts=restarts, backoff=restart_backoff, spares=spares, allow_shrink=allow_shrink,
                        no_progress=no_progress_attempts, checkpoint_dir=checkpoint_dir)
    if policy is not None:
        if inv.allocation is not None and detach:  # the loop would outlive the command that holds the allocation
            raise UsageError(f"restarts with --detach run on SSH nodes (asked by {restarts_asked_by(inv.restart, restarts)}); "
                             "inside a Slurm allocation the loop runs in the foreground",
                             hint="drop --detach (salloc/sbatch holds the allocation while it runs)")
        held = spare_names(inv, policy)
        if dry_run and held:  # the first attempt runs without the spares
            inv = select_nodes(inv, exclude=",".join(held))
    if dry_run:
        launch_view.show_plan(plan_only(inv, options), as_json=as_json, argv=argv_now())
        raise typer.Exit(int(ExitCode.OK))
    if policy is not None:
        from ascendctl.jobs.service import launch_with_restarts

        with stop_on_signals(launch_view.repeated_signal), launch_view.launch_output(inv.names, to_stderr=as_json) as output:
            restarted = launch_with_restarts(inv, options, policy, preflight=not no_preflight, on_line=output.line,
                                             on_notice=output.notice, flags=flags, on_teardown=output.teardown,
                                             stacks_on_stop=not no_stacks, detach=detach)
        if as_json:
            launch_view.emit_record(restarted.last.record, restarted.exit_code, argv_now(), detached=restarted.last.detached,
                                    attempts=[a.to_dict() for a in restarted.attempts])
        else:
            launch_view.show_outcome(restarted.last, restarts=policy.restarts)
            launch_view.show_attempts(restarted.attempts, restarted.exit_code)
        raise typer.Exit(int(restarted.exit_code))
    # with --json, node output still streams ([node] lines) but to stderr; stdout holds only the document.
    # SIGTERM, SIGHUP and Ctrl-C tear the job down on every node; on a big job what the stopped nodes print is folded
    with stop_on_signals(launch_view.repeated_signal), launch_view.launch_output(inv.names, to_stderr=as_json) as output:
        outcome = launch_job(inv, options, preflight=not no_preflight, detach=detach, on_line=output.line,
                             on_notice=output.notice, job_id=job_id, flags=flags, on_teardown=output.teardown,
                             stacks_on_stop=not no_stacks)
    if as_json:
        launch_view.emit_record(outcome.record, outcome.exit_code, argv_now(), detached=outcome.detached)
    else:
        launch_view.show_outcome(outcome)
    raise typer.Exit(int(outcome.exit_code))


@app.command(epilog=examples("ascendctl jobs", "ascendctl jobs --json",
                             codes="0 ok, 1 error (also: some job record could not be read; it is named, the others are listed)"))
@cli_errors
def jobs(as_json: JsonOpt = False,
         no_refresh: Annotated[bool, typer.Option("--no-refresh", help="Show the records as saved; do not ask the nodes of running jobs.")] = False) -> None:
    """List the jobs `ascendctl launch` recorded; those recorded as running are asked on their nodes first."""
    from ascendctl.jobs.service import refreshed_jobs
    from ascendctl.ui import launch_view

    listing = refreshed_jobs(refresh=not no_refresh)
    if as_json:
        launch_view.emit_jobs(listing, argv_now())
    else:
        launch_view.show_jobs(listing)
    raise typer.Exit(int(listing.exit_code))


@app.command(epilog=examples("ascendctl status", "ascendctl status 20261123-1903 --json", codes="0 ok, 1 error (also: its record is unreadable), 2 no such job, 4 nodes unreachable, 5 the job failed, 6 (launch --restarts) the job failed on its own error: do not requeue"))
@cli_errors
@node_options("inventory")
def status(job: JobArg = None, as_json: JsonOpt = False, *, cluster: NodeOptions) -> None:
    """Show a job's nodes, pids, exit codes and logs (asks the nodes while it runs, and those its teardown could not reach)."""
    from ascendctl.inventory.load import load_inventory
    from ascendctl.jobs.service import job_status
    from ascendctl.ui import launch_view

    found = job_status(job, load_inventory(cluster.inventory) if cluster.inventory else None)
    code = found.exit_code
    if as_json:
        launch_view.emit_record(found.record, code, argv_now(), leftovers=launch_view.leftovers_to_dict(found.leftovers),
                                unasked=[{"node": node, "message": why} for node, why in found.unasked],
                                restarts=found.loop.to_dict() if found.loop else None)
    else:
        launch_view.show_status(found.record, found.leftovers, supervisor_alive=found.supervisor_alive, loop=found.loop)
    launch_view.show_unasked(found.unasked)
    raise typer.Exit(int(code))


@app.command(epilog=examples("ascendctl logs -f", "ascendctl logs JOB -w h02", codes="0 ok, 1 error (also: its record is unreadable), 2 no such job, 4 nodes unreachable, 5 the job failed, 130 detached"))
@cli_errors
@node_options("inventory")
def logs(
    job: JobArg = None,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Follow until the launchers end (Ctrl-C detaches).")] = False,
    node: Annotated[Optional[str], typer.Option("-w", "--nodes", "--node", metavar="NODESET", help="Only these nodes (node-set syntax).", show_default=False)] = None,
    silence_limit: SilenceOpt = DEFAULT_SILENCE_LIMIT,
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Print or follow a job's launcher logs, `[node]`-prefixed."""
    from ascendctl.errors import UsageError
    from ascendctl.interrupts import stop_on_signals
    from ascendctl.inventory.load import load_inventory
    from ascendctl.jobs.service import job_logs
    from ascendctl.jobs.record import load_job
    from ascendctl.ui import launch_view

    if as_json and follow:
        raise UsageError("--json prints one document at the end: it cannot --follow", hint="drop -f, or follow without --json")
    names = [n.name for n in load_job(job).nodes]
    lines: list[tuple[str, str]] = []
    sink = (lambda name, line: lines.append((name, line))) if as_json else launch_view.line_sink(names)
    with stop_on_signals():  # SIGTERM and SIGHUP stop following like Ctrl-C; the job keeps running
        outcome = job_logs(job, follow_logs=follow, nodes=node, on_line=sink, on_notice=launch_view.notice,
                           inventory=load_inventory(cluster.inventory) if cluster.inventory else None, silence_limit=silence_limit)
    if as_json:
        launch_view.emit_logs(lines, outcome.exit_code, argv_now())
    elif follow and not outcome.interrupted:  # Ctrl-C only detached: the job runs on, nothing ended to sum up
        launch_view.show_outcome(outcome)
    raise typer.Exit(int(outcome.exit_code))


@app.command(epilog=examples("ascendctl stop", "ascendctl stop JOB --grace 30", codes="0 ok, 1 error (also: its record is unreadable), 2 no such job, 4 nodes unreachable, 130 interrupted"))
@cli_errors
@node_options("inventory")
def stop(job: JobArg = None, grace: GraceOpt = 10.0, as_json: JsonOpt = False,
         no_stacks: Annotated[bool, typer.Option("--no-stacks", help="Do not take every rank's stack first (`ascendctl stacks`).")] = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Stop a (detached) job on every node: every rank's stack first (a hang's culprit), then SIGTERM, SIGKILL after --grace; with --restarts, its restart loop too."""
    from ascendctl.inventory.load import load_inventory
    from ascendctl.jobs.service import stop_job, stop_outcomes
    from ascendctl.outcome import exit_code_for
    from ascendctl.ui import launch_view

    record = stop_job(job, grace=grace, inventory=load_inventory(cluster.inventory) if cluster.inventory else None, stacks=not no_stacks,
                      notice=launch_view.notice)
    code = exit_code_for(stop_outcomes(record))
    if as_json:
        launch_view.emit_record(record, code, argv_now())
    else:
        launch_view.show_status(record)
    raise typer.Exit(int(code))


@app.command(hidden=True)
@cli_errors
@node_options("connect_timeout", "command_timeout", "fanout")
def supervise(
    job: Annotated[str, typer.Argument(help="The job to look after.")],
    grace: GraceOpt = 10.0,
    silence_limit: SilenceOpt = DEFAULT_SILENCE_LIMIT,
    hang_timeout: HangTimeoutOpt = None,
    on_hang: OnHangOpt = "stop",
    progress: ProgressOpt = None,
    restart_loop: Annotated[bool, typer.Option("--restart-loop", help="Run the restart loop of `launch --detach --restarts N`, its spec on stdin.")] = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Look after a detached job (started by `launch --detach`): tear it down at its first failure, record the verdict."""
    from ascendctl.jobs.service import supervise_detached
    from ascendctl.jobs.supervise import hang_policy

    raise typer.Exit(supervise_detached(job, grace=grace, silence=silence_limit, flags=cluster.flags,
                                        hang=hang_policy(hang_timeout, on_hang, progress), loop=restart_loop))
