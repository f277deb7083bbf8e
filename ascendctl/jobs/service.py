"""Jobs: plan a launch (pure), start it through a Runner, supervise it, and look after it afterwards.

- record.py     the job record (typed, redacted, written atomically) that every job command reads
- plan.py       LaunchOptions -> LaunchPlan: per node the exact launcher command and environment (dry-run == run)
- runner.py     the Runner protocol: start, follow, stop, states, log_text, artifacts
- ssh_runner.py today's runner: launchers detached under setsid over each node's transport
- supervise.py  one event loop follows every node and owns the teardown; the verdict is the triage engine's
- detached.py   a detached job's supervisor process on the control host (the same loop, no terminal)

A Slurm runner goes in `slurm_runner.py` beside `ssh_runner.py`; `launch_job` picks the runner, nothing else
changes. Must not import typer or rich.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ascendctl.errors import AscendctlError, ExitCode, Interrupted, UsageError, signal_name
from ascendctl.remote.group import NodeGroup
from ascendctl.facts.endpoint import resolve_endpoints
from ascendctl.outcome import Outcome, exit_code_for, stop_outcome
from ascendctl.jobs.plan import DEFAULT_GRACE, DRY_RUN_JOB_ID, build_plan, check_script_first, default_log_dir
from ascendctl.jobs.record import FirstFailure, JobRecord, JobState, NodeJob, StateWriteError, list_jobs, load_job, new_job_id, read_jobs, save_job, state_dir
from ascendctl.inventory.settings import DEFAULT_SILENCE_LIMIT
from ascendctl.jobs.reach import job_inventory, runner_for_record
from ascendctl.jobs.ssh_runner import SSHRunner, with_stop_results
from ascendctl.jobs.hang import with_stacks
from ascendctl.jobs.supervise import HangPolicy, supervise
from ascendctl.models import EndKind, NodeEnd

if TYPE_CHECKING:
    from ascendctl.stacks.model import StacksReport
    from ascendctl.jobs.submit import SubmitOptions
    from ascendctl.errors import ExitCode
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.remote.transport.base import Transport
    from ascendctl.remote.transport.factory import TransportFactory
    from ascendctl.triage import TriageReport
    from ascendctl.jobs.plan import LaunchOptions, LaunchPlan, NodePlan, plan_to_dict, render_plan
    from ascendctl.jobs.record import JobError, JobListing, JobRecordError, jobs_dir
    from ascendctl.jobs.runner import LineSink, NodeEnded, NoticeSink, Runner, TeardownSink
    from ascendctl.jobs.ssh_runner import marker
    from ascendctl.jobs.supervise import Supervised
    from ascendctl.jobs.restart import LoopSpec, RestartOutcome, RestartPolicy
    from ascendctl.jobs.record import Supervisor
    from ascendctl.jobs.checkpoints import ResumePoint

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_GRACE", "DEFAULT_SILENCE_LIMIT", "DRY_RUN_JOB_ID", "FirstFailure", "JobError", "JobListing", "JobRecord", "JobRecordError",
    "LaunchOptions", "LaunchOutcome", "JobStatus", "LoopHost", "RestartLoop", "restart_loop", "supervise_restarts",
    "LaunchPlan", "LaunchRefused", "LeftoverCheck", "NodeEnded",
    "StateWriteError", "NodeJob", "NodePlan", "Runner", "SSHRunner", "Supervised", "build_plan", "default_log_dir", "dry_run",
    "job_inventory", "job_logs", "supervise_detached", "job_outcomes", "job_status", "jobs_dir", "launch_job", "list_jobs", "load_job", "marker",
    "new_job_id", "plan_to_dict", "read_jobs", "refresh_job", "refreshed_jobs", "render_plan", "save_job", "state_dir", "stop_job", "stop_outcomes", "submit_job",
]


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    """How a launch (or a follow of a detached job) ended."""

    record: JobRecord
    interrupted: bool = False
    detached: bool = False
    verdict: TriageReport | None = None  # the triage engine's answer when the job failed
    stopped_by: str | None = None  # the stop signal (SIGINT, SIGTERM, SIGHUP) when interrupted
    state_error: StateWriteError | None = None  # the job record could not be written (saved or not: see .saved)

    @property
    def exit_code(self) -> ExitCode:
        """128+signal interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP); 1 the record could not be written; 4 a node was
        lost; 5 the job ran and failed; 0 it succeeded (or started, detached)."""
        outcomes = [Outcome.ERROR] if self.state_error is not None else []
        if self.interrupted:
            return exit_code_for([*outcomes, stop_outcome(self.stopped_by or "SIGINT")])
        return exit_code_for([*outcomes, *job_outcomes(self.record, started_only=self.detached)])


class LaunchRefused(AscendctlError):
    """Preflight or the start on some node failed, so nothing (more) was started."""


def stop_outcomes(record: JobRecord) -> list[Outcome]:
    """What `stop` reports: the start's outcomes, and every node its teardown could not reach (never a clean 0 for a
    node nobody checked)."""
    return job_outcomes(record, started_only=True) + [Outcome.UNREACHABLE for n in record.nodes if n.teardown_error]


def job_outcomes(record: JobRecord, *, started_only: bool = False) -> list[Outcome]:
    """A job's outcomes: each node lost, and the job's own end (failed, interrupted) unless only its start counts."""
    ends = [NodeEnd.of_recorded(n.exit_code, n.error).kind for n in record.nodes]
    outcomes = [Outcome.UNREACHABLE for kind in ends if kind == EndKind.LOST]
    if EndKind.NOT_STARTED in ends:
        outcomes.append(Outcome.FAILED)
    if not started_only:
        if record.status == JobState.INTERRUPTED:
            outcomes.append(stop_outcome(record.stopped_by or "SIGINT"))
        else:
            outcomes.append(Outcome.JOB_FAILED if record.status == JobState.FAILED else Outcome.OK)
    return outcomes


LAUNCH_CHECKS = ("ssh", "master_port", "npu_stale_procs", "launcher")


def run_launch_preflight(inventory: Inventory, port: int, group: NodeGroup, options: LaunchOptions | None = None,
                         job_id: str | None = None) -> None:
    """ssh, master_port (the launch port), npu_stale_procs and the launcher and script on every node.

    Raise LaunchRefused listing each problem once with the nodes it is on, folded, and its hint.
    """
    from ascendctl.preflight.checks.model import JobTarget, Status
    from ascendctl.preflight.checks.registry import select_checks
    from ascendctl.nodeset import fold
    from ascendctl.preflight.run import run_preflight

    checked = replace(inventory, preflight=replace(inventory.preflight, master_port=port))
    job = None
    if options is not None:
        script = options.script[0] if options.script and not options.script[0].startswith("-") else None
        log_dir = options.log_dir or (default_log_dir(inventory, job_id) if job_id else None)
        job = JobTarget(options.launcher, script, log_dir)
    report = run_preflight(checked, select_checks(list(LAUNCH_CHECKS)), group=group, job=job)
    if report.ok:
        return
    problems = []
    for check_ids, status, summary, hint, names in report.folded_problems():
        if status in (Status.FAIL, Status.ERROR):
            problems.append(f"{fold(names)}: {','.join(check_ids)}: {summary}" + (f"\n  hint: {hint}" if hint else ""))
    problems += [f"cluster: {c.check}: {c.summary}" + (f"\n  hint: {c.hint}" if c.hint else "")
                 for c in report.cluster if c.status in (Status.FAIL, Status.ERROR)]
    raise LaunchRefused("preflight failed, nothing started:\n" + "\n".join(problems or ["see `ascendctl preflight`"]),
                        hint="fix the above, leave the nodes out with -x NODESET, or pass --no-preflight",
                        exit_code=report.exit_code)


def run_relaunch_preflight(inventory: Inventory, port: int, group: NodeGroup, previous: JobRecord, *, grace: float,
                           notice: NoticeSink) -> None:
    """Before attempt k > 1 of `launch --restarts`, instead of the full launch preflight (its launcher, script and NPU
    checks passed on attempt 1 and its master port test, a listener reached from every node, is most of its time):
    every node about to be used is reached (ssh), the master says whether the port is free (`ss -Hltn`, judged as
    preflight's master_port judges it), and the nodes attempt k-1 ran on are asked for its processes (its marker, as
    `status` looks for leftovers); any found are stopped (TERM, KILL after `grace`) and looked for again.
    LaunchRefused names every node that cannot be reached, a taken port, or a process that stays."""
    from ascendctl.nodeset import fold
    from ascendctl.preflight.checks.model import NodeFacts, ProbeContext
    from ascendctl.preflight.checks.network import master_port_free, ports_section
    from ascendctl.remote.probe import Section

    ctx = ProbeContext(inventory, inventory.preflight)

    def reach(node: Node, transport: Transport) -> tuple[bool | None, str] | None:
        command = ports_section(node, ctx)  # on the master only
        if command is None:
            transport.run("true")
            return None
        answer = transport.run(command)
        return master_port_free(NodeFacts(node, {"ports": Section(answer.stdout + answer.stderr, answer.exit_code)}), port)

    problems, unreached = [], set()
    for answer in group.run(reach).results:
        if answer.error is not None:
            unreached.add(answer.node)
            problems.append(f"{answer.node}: unreachable: {answer.error.message}")
        elif answer.value is not None and answer.value[0] is False:
            problems.append(f"{answer.node}: port {port} is already in use on the master ({answer.value[1]})")
        elif answer.value is not None and answer.value[0] is None:
            problems.append(f"{answer.node}: cannot tell whether port {port} is free on the master: {answer.value[1]}")
    ran = {n.name for n in previous.nodes}
    again = [name for name in inventory.names if name in ran and name not in unreached]
    runner = runner_for(inventory, group)
    left = {r.node: r for r in runner.leftovers(previous, again).results} if again else {}
    staying = [name for name, r in left.items() if r.value]
    if staying:
        notice(f"{fold(staying)}: processes of job {previous.id} (the previous attempt) still there: stopping them")
        runner.stop(previous, staying, grace=grace)
        left.update({r.node: r for r in runner.leftovers(previous, staying).results})
    for name, r in left.items():
        if r.error is not None:
            problems.append(f"{name}: cannot look for the previous attempt's processes: {r.error.message}")
        elif r.value:
            problems.append(f"{name}: processes of job {previous.id} (the previous attempt) still running: pids "
                            + " ".join(map(str, r.value)))
    if problems:
        raise LaunchRefused("relaunch preflight failed, nothing started:\n" + "\n".join(problems),
                            hint=f"see `ascendctl status {previous.id}`; the nodes can be left out with -x NODESET, or the "
                                 "checks with --no-preflight")


def runner_for(inventory: Inventory, group: NodeGroup) -> SSHRunner:
    """The runner for these nodes: one srun step inside a Slurm allocation, else launchers over SSH."""
    if inventory.allocation is not None:
        from ascendctl.jobs.slurm_runner import SlurmRunner

        return SlurmRunner(group)
    return SSHRunner(group)


def with_allocation_port(inventory: Inventory, options: LaunchOptions) -> LaunchOptions:
    """Inside an allocation the rendezvous port, unless given, is derived from the Slurm job id."""
    if inventory.allocation is None or options.master_port is not None:
        return options
    from ascendctl.slurm import master_port_for

    return replace(options, master_port=master_port_for(inventory.allocation.job_id))


def dry_run(inventory: Inventory, options: LaunchOptions, *, factory: TransportFactory | None = None) -> LaunchPlan:
    """The plan a launch would start: the nodes are asked for their cluster endpoints, nothing is started."""
    check_script_first(options)  # before any node is asked
    options = with_allocation_port(inventory, options)
    with NodeGroup(inventory, factory=factory) as group:
        return build_plan(inventory, options, job_id=DRY_RUN_JOB_ID, endpoints=resolve_endpoints(group))


def new_record(inventory: Inventory, plan: LaunchPlan, runner: str, supervisor: Supervisor | None = None,
               relaunch_of: JobRecord | None = None, restarts: int = 0) -> JobRecord:
    """The record of a job about to start (redacted environment); `supervisor`: the one that will follow it;
    `relaunch_of`: the attempt before it (launch --restarts `restarts`): this one is the next attempt of the same job."""
    from ascendctl.redact import redact_env

    return JobRecord(
        id=plan.job_id, launcher=plan.launcher, inventory=inventory.source, script=list(plan.script),
        master_addr=plan.master_addr, master_port=plan.master_port, log_dir=plan.log_dir,
        nodes=tuple(NodeJob(n.name, n.host, n.rank, n.command, redact_env(dict(n.environment.to_dict(redact=False)["env"])),
                            n.log, n.worker_log_dir, workers=n.workers, first_rank=n.first_rank, address=n.endpoint.ip)
                    for n in plan.nodes),
        started=time.time(), runner=runner, supervisor=supervisor,
        attempt=relaunch_of.attempt + 1 if relaunch_of else 1,
        restart_of=(relaunch_of.restart_of or relaunch_of.id) if relaunch_of else None, restarts=restarts)


def launch_job(
    inventory: Inventory,
    options: LaunchOptions,
    *,
    preflight: bool = True,
    detach: bool = False,
    on_line: LineSink | None = None,
    on_notice: NoticeSink | None = None,
    factory: TransportFactory | None = None,
    job_id: str | None = None,
    flags: Mapping[str, Any] | None = None,
    on_teardown: TeardownSink | None = None,
    stacks_on_stop: bool = True,
    relaunch_of: JobRecord | None = None,
    supervisor: Supervisor | None = None,
    loop: LoopSpec | None = None,
    restarts: int = 0,
) -> LaunchOutcome:
    """Preflight, resolve endpoints, plan, start every node's launcher, then supervise it: here, or (`detach`) in a
    supervisor process left on this host (jobs/detached.py). `flags`: the command line's connection settings, which
    the supervisor reloads the inventory with. `stacks_on_stop`: a stop signal first takes every rank's stack.
    `relaunch_of`: the previous attempt of `launch --restarts`: the reduced relaunch preflight replaces the full one.
    `supervisor` (detached): the restart loop's supervisor that will follow this attempt, named in its record; none is
    started then. `loop` (detached): the supervisor started runs the restart loop from this attempt on (LoopSpec).
    `restarts`: launch --restarts N, recorded (an attempt's record says it belongs to a loop from its start)."""
    from ascendctl.launchers import master_port

    check_script_first(options)  # before any node is asked
    job_id = job_id or new_job_id()
    notice = on_notice or (lambda _msg: None)
    options = with_allocation_port(inventory, options)
    group = NodeGroup(inventory, factory=factory)
    try:
        if preflight and relaunch_of is not None:
            run_relaunch_preflight(inventory, master_port(options.launcher, options.master_port), group, relaunch_of,
                                   grace=options.grace, notice=notice)
        elif preflight:
            run_launch_preflight(inventory, master_port(options.launcher, options.master_port), group, options, job_id)
        plan = build_plan(inventory, options, job_id=job_id, endpoints=resolve_endpoints(group))
        runner = runner_for(inventory, group)
        record = new_record(inventory, plan, runner.name, supervisor if detach else None, relaunch_of, restarts)
        save_job(record)  # a state dir that cannot take the record refuses here, before anything starts
        result: Supervised | None = None
        try:
            record = runner.start(plan, record, notice=notice)
            save_job(record)
            if record.status != JobState.RUNNING or detach:
                if detach and record.status == JobState.RUNNING and runner.name == "ssh" and supervisor is None:
                    record = _with_supervisor(record, options, flags or {}, notice, loop)
                return LaunchOutcome(record, detached=detach and record.status == JobState.RUNNING)
            result = supervise(runner, record, on_line=on_line, notice=notice, grace=options.grace,
                               silence=options.silence_limit, on_teardown=on_teardown,
                               before_stop=(lambda r, stopping: with_stacks(r, group, notice, stopping)) if stacks_on_stop else None,
                               hang=options.hang)
            return _finished(LaunchOutcome(result.record, interrupted=result.interrupted, verdict=result.verdict,
                                           stopped_by=result.stopped_by))
        except (KeyboardInterrupt, Interrupted) as stop:
            if result is not None:  # the job had ended; the signal only came before its record was saved
                return _finished(LaunchOutcome(result.record, interrupted=result.interrupted, verdict=result.verdict,
                                               stopped_by=result.stopped_by or signal_name(stop)))
            # Stopped while starting (some launchers may be up: the marker finds them even without a pid).
            return _finished(_tear_down(inventory, record, options.grace, notice, stopped_by=signal_name(stop)))
        except StateWriteError as exc:  # the job runs but its record cannot say so: stop it rather than lose it
            notice(f"{exc.message}: stopping the job on every node")
            return _finished(replace(_tear_down(inventory, record, options.grace, notice, stopped_by=None), state_error=exc))
    finally:
        group.close()


SUPERVISOR_FLAGS = ("connect_timeout", "command_timeout", "fanout")  # the command-line settings a supervisor is given


@dataclass(frozen=True, slots=True)
class LoopHost:
    """The supervisor that runs the restart loop of `launch --detach --restarts N`: attempt 1 (started by the launch,
    running), itself (named in every attempt's record), how it follows an attempt to its end, and how it waits between
    attempts (a `stop` cuts that short)."""

    first: JobRecord
    supervisor: Supervisor
    follow: Callable[[JobRecord], LaunchOutcome]
    sleep: Callable[[float], None]


def launch_with_restarts(inventory: Inventory, options: LaunchOptions, policy: RestartPolicy, *, preflight: bool = True,
                         on_line: LineSink | None = None, on_notice: NoticeSink | None = None,
                         factory: TransportFactory | None = None, flags: Mapping[str, Any] | None = None,
                         on_teardown: TeardownSink | None = None, stacks_on_stop: bool = True, detach: bool = False,
                         host: LoopHost | None = None) -> RestartOutcome:
    """`launch --restarts N`: launch_job per attempt, deciding after each (jobs/restart.py); a node replaced is
    quarantined in this inventory's node state. In the foreground; or (`detach`) attempt 1 is started detached and its
    supervisor runs this same loop (`host`: supervise_restarts), each later attempt started and followed there. A
    `stop` of any attempt stops the loop: no attempt starts after it."""
    from ascendctl.inventory.nodestate import quarantine_nodes
    from ascendctl.jobs.checkpoints import ResumePoint
    from ascendctl.jobs.record import loop_stop_requested
    from ascendctl.jobs.restart import STOPPED_BY_USER, LoopSpec, run_with_restarts
    from ascendctl.paths import current_user

    notice = on_notice or (lambda _msg: None)

    previous: list[JobRecord] = []  # the last attempt's record: a relaunch's preflight is the reduced one

    def attempt(nodes: Inventory, attempt_options: LaunchOptions) -> LaunchOutcome:
        relaunch_of = previous[-1] if previous else None
        if host is not None:  # in the loop's supervisor: start detached, naming itself; then follow it here
            outcome = launch_job(nodes, attempt_options, preflight=preflight, detach=True, on_notice=on_notice,
                                 factory=factory, flags=flags, relaunch_of=relaunch_of, supervisor=host.supervisor,
                                 restarts=policy.restarts)
            if outcome.record.status == JobState.RUNNING:
                if loop_stop_requested(host.first.id):  # stopped while it started: `stop` may not have seen it
                    notice(f"job {host.first.id}: {STOPPED_BY_USER} while attempt {len(previous) + 1} started: stopping it")
                    outcome = LaunchOutcome(stop_job(outcome.record.id, grace=attempt_options.grace, stacks=False))
                else:
                    outcome = host.follow(outcome.record)
        else:
            handover = LoopSpec(inventory.source, tuple(inventory.names), dict(flags or {}), options, policy, preflight,
                                stacks_on_stop) if detach and not previous else None
            outcome = launch_job(nodes, attempt_options, preflight=preflight, detach=handover is not None, on_line=on_line,
                                 on_notice=on_notice, factory=factory, flags=flags, on_teardown=on_teardown,
                                 stacks_on_stop=stacks_on_stop, relaunch_of=relaunch_of, loop=handover,
                                 restarts=policy.restarts)
            first = previous[0].id if previous else outcome.record.id
            if not outcome.detached and outcome.record.status == JobState.FAILED and loop_stop_requested(first):
                # `ascendctl stop` from elsewhere tore it down: what failed is the user's stop, not the job
                outcome = replace(outcome, record=replace(outcome.record, status=JobState.STOPPED))
        previous.append(outcome.record)
        return outcome

    def follow_first() -> LaunchOutcome:
        assert host is not None
        outcome = host.follow(host.first)
        previous.append(outcome.record)
        return outcome

    def stopped(first_id: str) -> str | None:
        return STOPPED_BY_USER if loop_stop_requested(first_id) else None

    def quarantine(node: str, reason: str, evidence: str) -> None:
        quarantine_nodes(inventory, [node], reason, by=current_user(), command="launch --restarts", evidence=evidence)
        notice(f"{node}: quarantined ({reason}); `ascendctl nodes release {node}` when it is fixed")

    def find_resume(nodes: Inventory) -> ResumePoint:
        """The first node scans the checkpoint directory (the same path on every node: shared storage)."""
        from ascendctl.jobs.checkpoints import SCAN_WAIT, resume_point
        from ascendctl.remote.scripts import remote

        directory = policy.checkpoint_dir or ""
        command, stdin = remote("checkpoint_scan.sh", directory, SCAN_WAIT)
        with NodeGroup(nodes, factory=factory) as group:
            answers = group.run(lambda node, transport: transport.run(command, stdin=stdin, timeout=SCAN_WAIT + 60),
                                nodes=[nodes.nodes[0]])
        answer = answers.results[0]
        if answer.error is not None or answer.value is None or not answer.value.ok:
            why = answer.error.message if answer.error is not None else "the scan failed"
            return ResumePoint(None, problem=f"{nodes.nodes[0].name}: {why}")
        return resume_point(directory, answer.value.stdout)

    return run_with_restarts(inventory, options, policy, launch=attempt, quarantine=quarantine, save=save_job, notice=notice,
                             find_resume=find_resume, sleep=host.sleep if host is not None else time.sleep,
                             follow=follow_first if host is not None else None, stopped=stopped)


STOP_WAIT = 60.0  # seconds, beyond the grace, the loop waits for `stop` to finish an attempt's record


def supervise_restarts(job_id: str, spec: LoopSpec, *, grace: float, silence: float | None,
                       hang: HangPolicy | None = None) -> int:
    """The supervisor of `launch --detach --restarts N` (`ascendctl supervise JOB --restart-loop`, its spec on stdin):
    follow attempt 1 and run the restart loop (launch_with_restarts, the foreground's) from there, with no terminal."""
    from ascendctl.inventory.selection import select_nodes
    from ascendctl.jobs.detached import Relieved, relieving, say, watch_detached
    from ascendctl.jobs.reach import recorded_inventory
    from ascendctl.jobs.record import loop_stop_requested

    relieved = relieving()
    first = load_job(job_id)
    if first.status != JobState.RUNNING or first.stop_requested or first.supervisor is None:
        say(f"job {job_id} is {first.status if not first.stop_requested else 'being stopped'}: nothing to look after")
        return 0
    inventory = select_nodes(recorded_inventory(first, spec.flags), names=spec.nodes)

    def follow(record: JobRecord) -> LaunchOutcome:
        watched = watch_detached(record, grace=grace, silence=silence, flags=spec.flags, hang=hang, stacks=with_stacks,
                                 relieved=relieved)
        if watched.relieved:
            raise Relieved
        final = watched.record
        deadline = time.monotonic() + grace + STOP_WAIT
        while final.status == JobState.RUNNING and time.monotonic() < deadline:  # `stop` tears it down: its end is stop's
            time.sleep(0.2)
            final = load_job(record.id)
        return LaunchOutcome(final, verdict=watched.verdict)

    def sleep(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and loop_stop_requested(first.id) is None:
            if relieved.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
                raise Relieved

    say(f"job {job_id}: the restart loop (up to {spec.policy.restarts} restarts) runs here")
    try:
        done = launch_with_restarts(inventory, spec.options, spec.policy, preflight=spec.preflight, on_notice=say,
                                    flags=spec.flags, stacks_on_stop=spec.stacks,
                                    host=LoopHost(first, first.supervisor, follow, sleep))
    except Relieved:
        say("relieved (SIGTERM/SIGINT): the attempt runs on without a supervisor; no attempt after it will start")
        return 0
    except AscendctlError as exc:  # a relaunch refused (its preflight), a record that cannot be written
        say(f"the restart loop ends: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else ""))
        return 1
    last = done.attempts[-1] if done.attempts else None
    say(f"the restart loop of job {job_id} ends after {len(done.attempts)} attempt(s)"
        + (f": {last.choice.decision.value}: {last.choice.why}" if last else ""))
    return 0


def _with_supervisor(record: JobRecord, options: LaunchOptions, flags: Mapping[str, Any], notice: NoticeSink,
                     loop: LoopSpec | None = None) -> JobRecord:
    """Leave a supervisor behind a detached job (running the restart loop with `loop`); when it cannot start, the job
    runs on unsupervised and that is said."""
    from ascendctl.jobs.detached import start_supervisor

    argv = ["--grace", f"{options.grace:g}"]
    if options.silence_limit is not None:
        argv += ["--silence-limit", f"{options.silence_limit:g}"]
    argv += [arg for key in SUPERVISOR_FLAGS if key in flags for arg in (f"--{key.replace('_', '-')}", str(flags[key]))]
    argv += options.hang.to_argv() if options.hang is not None else []
    try:
        return start_supervisor(record, argv) if loop is None else start_supervisor(record, argv, loop=loop.to_json())
    except AscendctlError as exc:
        notice(f"{exc.message}; {exc.hint}" if exc.hint else exc.message)
        return record


def supervise_detached(job_id: str, *, grace: float, silence: float | None, flags: Mapping[str, Any],
                       hang: HangPolicy | None = None, loop: bool = False) -> int:
    """`ascendctl supervise JOB` (started by `launch --detach`): become the job's supervisor and look after it; with
    `loop` (--restart-loop) run the restart loop whose spec came on stdin (supervise_restarts)."""
    from ascendctl.jobs.detached import daemonize, run_supervisor, say
    from ascendctl.jobs.restart import LoopSpec

    said = daemonize(job_id)
    if loop:
        try:
            spec = LoopSpec.from_json(said)
        except ValueError as exc:
            say(f"{exc}: looking after attempt 1 only, no restarts")
        else:
            return supervise_restarts(job_id, spec, grace=grace, silence=silence, hang=hang)
    return run_supervisor(job_id, grace=grace, silence=silence, flags=dict(flags), hang=hang, stacks=with_stacks)


def _tear_down(inventory: Inventory, record: JobRecord, grace: float, notice: NoticeSink, *, stopped_by: str | None) -> LaunchOutcome:
    """Stop every process of the job on every node (over fresh connections: an interrupted group is closed)."""
    if stopped_by is not None:
        notice(f"{stopped_by}: stopping the job on every node")
    with NodeGroup(inventory) as fresh:
        stopped = runner_for(inventory, fresh).stop(record, inventory.names, grace=grace)
    record = replace(with_stop_results(record, stopped), ended=time.time(), teardown_started=record.teardown_started or time.time(),
                     status=JobState.INTERRUPTED if stopped_by else JobState.STOPPED, stopped_by=stopped_by)
    return LaunchOutcome(record, interrupted=stopped_by is not None, stopped_by=stopped_by)


def _finished(outcome: LaunchOutcome) -> LaunchOutcome:
    """Save the final record; a state dir that cannot take it is reported (exit 1), the job is already torn down."""
    try:
        save_job(outcome.record)
    except StateWriteError as exc:
        return replace(outcome, state_error=exc)
    if outcome.state_error is not None:
        outcome.state_error.saved = True  # an earlier write failed, this one went through
    return outcome


def submit_job(
    options: LaunchOptions,
    submit_options: "SubmitOptions",
    *,
    preflight: bool = True,
    detach: bool = False,
    on_output: NoticeSink | None = None,
    on_notice: NoticeSink | None = None,
) -> LaunchOutcome:
    """Submit mode: sbatch a batch script that runs this launch inside its allocation, then follow its output."""
    from ascendctl.slurm import job_state, run_tool
    from ascendctl.jobs.submit import render_submission, submit, wait_for_record
    from ascendctl.slurm import ENDED_STATES

    check_script_first(options)  # before anything is submitted
    notice = on_notice or (lambda _msg: None)
    job_id = new_job_id()
    slurm_job = submit(render_submission(options, submit_options, job_id=job_id, preflight=preflight))
    notice(f"submitted as Slurm job {slurm_job}; job {job_id}")
    try:
        wait_for_record(job_id, slurm_job, notice=notice)
        if detach:
            return LaunchOutcome(load_job(job_id), detached=True)
        # the launch inside the allocation prints its `[node]` lines into the batch output file: follow that
        # (srun steps cannot read the nodes' logs once the allocation has ended)
        output = state_dir() / "slurm" / f"{job_id}.out"
        offset = 0
        while True:
            ended = load_job(job_id).status != JobState.RUNNING or job_state(slurm_job)["state"] in ENDED_STATES
            if output.exists():
                with open(output, "rb") as stream:
                    stream.seek(offset)
                    chunk = stream.read()
                complete = chunk[:chunk.rfind(b"\n") + 1] if not ended else chunk
                offset += len(complete)
                for line in complete.decode("utf-8", "replace").splitlines():
                    if on_output is not None:
                        on_output(line)
            if ended:
                break
            time.sleep(0.3)
    except (KeyboardInterrupt, Interrupted):
        notice(f"interrupted: cancelling Slurm job {slurm_job}")
        run_tool(["scancel", slurm_job])
        return LaunchOutcome(load_job(job_id) if job_id in {r.id for r in list_jobs()} else
                             _placeholder_record(job_id), interrupted=True)
    return LaunchOutcome(load_job(job_id))


def _placeholder_record(job_id: str) -> JobRecord:
    return JobRecord(id=job_id, launcher="", inventory="", script=[], master_addr="", master_port=0, log_dir="", nodes=(),
                     started=time.time(), status=JobState.INTERRUPTED, runner="slurm")


# -- jobs started earlier -------------------------------------------------------------------
def _with_states(record: JobRecord, states: dict[str, NodeEnd]) -> JobRecord:
    for name, end in states.items():
        entry = record.node(name)
        if end.kind == EndKind.EXITED:
            ended = end.when if end.when is not None else entry.ended  # when the node wrote its exit status
            record = record.with_node(replace(entry, exit_code=end.code, ended=ended))
        elif end.kind == EndKind.GONE and entry.exit_code is None and entry.signal is None:
            record = record.with_node(replace(entry, error=entry.error or end.why or "launcher gone without an exit status"))
    return record


def refresh_job(record: JobRecord, inventory: Inventory | None = None) -> JobRecord:
    """Ask each node of a running job whether its launcher is still running; save what changed."""
    return _refresh(record, inventory)[0]


def _refresh(record: JobRecord, inventory: Inventory | None) -> tuple[JobRecord, dict[str, str]]:
    """refresh_job, and why each node that could not be asked was not answered (by node name)."""
    if record.status != JobState.RUNNING:
        return record, {}
    inv = job_inventory(record, inventory)
    runner = runner_for_record(record, inv)
    try:
        results = runner.states(record, [n.name for n in record.nodes if n.name in inv.names])
    finally:
        runner.close()
    unasked = {r.node: r.error.message if r.error else "no answer" for r in results if r.value is None}
    record = _with_states(record, {r.node: r.value for r in results if r.value is not None})
    if all(n.exit_code is not None or n.error for n in record.nodes):
        ok = all(n.exit_code == 0 for n in record.nodes)
        ends = [n.ended for n in record.nodes if n.ended is not None]
        # when the job ended on its nodes, not when someone asked (time.time() only where no node could say)
        record = replace(record, status=JobState.SUCCEEDED if ok else JobState.FAILED, ended=max(ends) if ends else time.time())
        record = _record_end(record)
    return record, unasked


def _record_end(record: JobRecord) -> JobRecord:
    """Save the end of a job found by asking its nodes, unless someone else records it: a live supervisor (which
    saves it with the verdict), or `stop`; the record as it is then stored is returned in those cases."""
    from ascendctl.jobs.detached import supervisor_alive

    stored = load_job(record.id)
    if stored.status != JobState.RUNNING or stored.stop_requested:
        return stored
    if supervisor_alive(stored) is not False:
        return record  # shown as found, saved by its supervisor (with the verdict) in a moment
    save_job(replace(record, supervisor=stored.supervisor))
    return record


REFRESH_AT_ONCE = 8  # running jobs `jobs` asks at the same time (each asks its nodes through its own bounded group)


def refreshed_jobs(*, refresh: bool = True) -> JobListing:
    """Every job record (read_jobs), each one still recorded as running asked again on its nodes, as `status` does.

    A detached job that ended stayed `running` in `jobs` until someone ran `status JOB` on it. The questions go out
    in parallel, bounded by each node's connect and command timeouts; a job whose nodes cannot be asked (an
    inventory gone, a node unreachable) is listed as recorded.
    """
    listing = read_jobs()
    running = [record for record in listing.records if record.status == JobState.RUNNING]
    if not refresh or not running:
        return listing
    from concurrent.futures import ThreadPoolExecutor

    def ask(record: JobRecord) -> JobRecord:
        try:
            return refresh_job(record)
        except AscendctlError as exc:
            log.info("jobs: %s not refreshed: %s", record.id, exc)
            return record

    with ThreadPoolExecutor(max_workers=min(REFRESH_AT_ONCE, len(running))) as pool:
        fresh = {record.id: record for record in pool.map(ask, running)}
    return replace(listing, records=tuple(fresh.get(record.id, record) for record in listing.records))


@dataclass(frozen=True, slots=True)
class LeftoverCheck:
    """A node the teardown could not reach, asked again: the job's processes still there, or why it is still unreachable."""

    node: str
    teardown_error: str  # why the teardown could not reach it
    pids: tuple[int, ...] | None = None  # None while it is still unreachable
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RestartLoop:
    """Where the restart loop of a job run with `launch --restarts` stands, from its attempts' records and (detached)
    its supervisor: `running` (the last attempt runs), `waiting` (in its backoff: attempt+1 is due at `next_at`),
    `deciding` (the last attempt ended, nothing decided yet), `stopping` (`stop` asked, the loop has not ended yet),
    `ended` (its last decision is not a restart), `gone` (its supervisor is not running: no attempt will start)."""

    first: str  # the first attempt's id
    state: str
    attempts: tuple[JobRecord, ...]  # first to last
    detached: bool  # the loop runs in a detached job's supervisor (launch --detach --restarts)
    supervisor: int | None = None  # that supervisor's pid
    stop_requested: float | None = None  # when `stop` stopped the loop

    @property
    def last(self) -> JobRecord:
        return self.attempts[-1]

    @property
    def next_attempt(self) -> int | None:
        """The attempt the loop waits to start (state `waiting`)."""
        return self.last.attempt + 1 if self.state == "waiting" else None

    def to_dict(self) -> dict[str, Any]:
        return {"first": self.first, "state": self.state, "detached": self.detached, "supervisor": self.supervisor,
                "stop_requested": self.stop_requested, "next_attempt": self.next_attempt,
                "next_at": self.last.restart_at if self.state == "waiting" else None,
                "attempts": [{"attempt": r.attempt, "job": r.id, "status": r.status.value,
                              "decision": r.decided[0], "why": r.decided[1]} for r in self.attempts]}


def restart_loop(record: JobRecord) -> RestartLoop | None:
    """The restart loop `record` is an attempt of (None for a plain job), as its records and supervisor say now."""
    from ascendctl.jobs.detached import supervisor_alive
    from ascendctl.jobs.record import job_attempts, loop_of, loop_stop_requested

    first = loop_of(record)
    if first is None:
        return None
    attempts = tuple(record if r.id == record.id else r for r in job_attempts(first)) or (record,)
    last = attempts[-1]
    sup = next((r.supervisor for r in reversed(attempts) if r.supervisor is not None and r.supervisor.loop), None)
    stopped = loop_stop_requested(first)
    decided = last.decided[0]
    if decided and decided not in ("restart", "replace"):
        state = "ended"
    elif sup is not None and supervisor_alive(replace(last, supervisor=sup)) is False:
        state = "gone"
    elif stopped is not None:
        state = "stopping"
    elif last.status == JobState.RUNNING:
        state = "running"
    else:
        state = "waiting" if decided and last.restart_at is not None else "deciding"
    return RestartLoop(first, state, attempts, sup is not None, sup.pid if sup else None, stopped)


@dataclass(frozen=True, slots=True)
class JobStatus:
    """A job's record (refreshed while it runs) and what `status` found on the nodes its teardown could not reach."""

    record: JobRecord
    leftovers: tuple[LeftoverCheck, ...] = ()
    unasked: tuple[tuple[str, str], ...] = ()  # (node, why) for each node of a running job that could not be asked
    supervisor_alive: bool | None = None  # a running detached job's supervisor: alive, gone, or None (not asked / none)
    loop: RestartLoop | None = None  # launch --restarts: the loop this job is an attempt of

    @property
    def outcomes(self) -> list[Outcome]:
        """The job's outcomes (job_outcomes), and one node lost per node that could not be asked."""
        return job_outcomes(self.record) + [Outcome.UNREACHABLE for _ in self.unasked]

    @property
    def exit_code(self) -> ExitCode:
        """`status`'s exit code: the job's outcomes; for an attempt of a restart loop (`launch --detach --restarts N`
        gives the first attempt's id), the loop's: an attempt that ended says nothing while the loop may still start
        another (0), and once the loop has ended or is gone its last attempt's (6 when it ended on the job's own error)."""
        from ascendctl.jobs.restart import Decision, ended_exit_code
        from ascendctl.outcome import exit_code_for

        own = exit_code_for(self.outcomes)
        loop = self.loop
        if loop is None:
            return own
        if loop.state not in ("ended", "gone"):  # it may start another attempt: a running one says how it runs
            return own if self.record.status == JobState.RUNNING else ExitCode.OK
        last = own if loop.last.id == self.record.id else exit_code_for(job_outcomes(loop.last))
        try:
            decided: Decision | None = Decision(loop.last.decided[0])
        except ValueError:  # no decision recorded (the loop's supervisor died before it decided)
            decided = None
        return ended_exit_code(decided, last)


def job_status(job_id: str | None, inventory: Inventory | None = None) -> JobStatus:
    """The job's record, refreshed while it runs; nodes its teardown could not reach are asked what is left there."""
    from ascendctl.jobs.detached import supervisor_alive

    record, unasked = _refresh(load_job(job_id), inventory)
    alive = supervisor_alive(record) if record.status == JobState.RUNNING and record.supervisor is not None else None
    loop = restart_loop(record)
    if unasked:  # a running job whose node cannot be asked: that node's state is unknown, never "running" as recorded
        return JobStatus(record, unasked=tuple(unasked.items()), supervisor_alive=alive, loop=loop)
    unreached = {n.name: n.teardown_error for n in record.nodes if n.teardown_error} if record.status != JobState.RUNNING else {}
    if not unreached:
        return JobStatus(record, supervisor_alive=alive, loop=loop)
    inv = job_inventory(record, inventory)
    runner = runner_for_record(record, inv)
    try:
        results = runner.leftovers(record, [name for name in unreached if name in inv.names]).by_node()
    finally:
        runner.close()
    checks = []
    for name, why in unreached.items():
        result = results.get(name)
        if result is None:
            checks.append(LeftoverCheck(name, why, error="not in the inventory"))
        elif result.value is None:
            checks.append(LeftoverCheck(name, why, error=result.error.message if result.error else "no answer"))
        else:
            checks.append(LeftoverCheck(name, why, pids=result.value))
    return JobStatus(record, tuple(checks), supervisor_alive=alive, loop=loop)


def stop_job(job_id: str | None, *, grace: float = DEFAULT_GRACE, inventory: Inventory | None = None, stacks: bool = True,
             notice: NoticeSink | None = None) -> JobRecord:
    """Tear a (detached) job down on every node and record it as stopped; every rank's stack is taken first (`stacks`).

    An attempt of a job run with `launch --restarts` (any attempt's id): its restart loop is stopped first, so no
    attempt starts after it, and the attempt running now is the one torn down (none while the loop waits)."""
    from ascendctl.jobs.record import job_attempts, loop_of, request_loop_stop

    record = load_job(job_id)
    first = loop_of(record)
    if first is not None:
        request_loop_stop(first)
        running = [r for r in job_attempts(first) if r.status == JobState.RUNNING]
        if record.status != JobState.RUNNING and running:
            record = running[-1]
        (notice or (lambda _msg: None))(f"job {first}: its restart loop is stopped: no attempt starts after "
                                        f"attempt {record.attempt} (job {record.id})")
    inv = job_inventory(record, inventory)
    if record.status == JobState.RUNNING and not record.stop_requested:
        record = replace(record, stop_requested=time.time())  # from here the record is stop's: a supervisor leaves it
        save_job(record)
    runner = runner_for_record(record, inv)
    try:
        if stacks:
            record = with_stacks(record, runner.group, notice or (lambda _msg: None))
        # every node of the job, pid recorded or not: a launch killed while starting left a record without pids
        # and a job running on every node; teardown finds the processes by the job's marker, not by pid
        names = [n.name for n in record.nodes if n.name in inv.names]
        record = with_stop_results(record, runner.stop(record, names, grace=grace))
        record = _with_states(record, {r.node: r.value for r in runner.states(record, names) if r.value is not None})
    finally:
        runner.close()
    if first is not None and record.status != JobState.RUNNING:
        return record  # an attempt that had ended (the loop waits): its record is the loop's to finish, as it is stored
    if first is not None:
        stored = load_job(record.id)
        if stored.status != JobState.RUNNING or stored.decision is not None:
            return stored  # the loop saw the attempt end during the teardown and recorded its decision: that record stands
    if record.slurm_submitted and record.slurm_job:
        from ascendctl.slurm import run_tool

        run_tool(["scancel", record.slurm_job])  # the batch job ascendctl submitted ends with its launch
    status = record.status if record.status != JobState.RUNNING else JobState.STOPPED
    record = replace(record, status=status, ended=record.ended or time.time())
    save_job(record)
    return record


def job_logs(
    job_id: str | None,
    *,
    follow_logs: bool = False,
    nodes: str | None = None,
    on_line: LineSink | None = None,
    on_notice: NoticeSink | None = None,
    inventory: Inventory | None = None,
    silence_limit: float = DEFAULT_SILENCE_LIMIT,
) -> LaunchOutcome:
    """Print (or follow until the launchers end) the launcher logs of a job; following never stops the job.

    Following reattaches to a detached job: a running job whose supervisor is gone gets a new one (which tears the
    job down at its first failure), and at the end the record its supervisor saved (status, verdict) is returned.
    Without a supervisor, a follow of every node records the end it saw, verdict included (the same engine).

    `silence_limit`: while following, a node that sends nothing (not even its follower's heartbeat) that long is lost.

    `nodes`: a node set (`h[01-02]`) of the job's nodes to show; default all.
    """
    from ascendctl.nodeset import fold
    from ascendctl.inventory.selection import expand_nodeset
    from ascendctl.triage import split_stamp

    record = load_job(job_id)
    names = [n.name for n in record.nodes]
    chosen = set(expand_nodeset(nodes, {"all": tuple(names)})) if nodes else set(names)
    if chosen - set(names):
        raise UsageError(f"job {record.id} has no node {fold(sorted(chosen - set(names)))}", hint=fold(names))
    inv = job_inventory(record, inventory)
    runner = runner_for_record(record, inv)
    try:
        if follow_logs:
            return _follow(runner, record, on_line, on_notice or (lambda _msg: None), silence_limit,
                           [n for n in names if n in chosen] if chosen != set(names) else None)
        targets = [n for n in names if n in chosen and n in inv.names]
        for name in targets:  # line by line as read: a 1 GB log never sits in memory
            try:
                for line in runner.log_lines(record, name):
                    if on_line:
                        on_line(name, split_stamp(line)[1])
            except AscendctlError as exc:
                if on_line:
                    on_line(name, f"(unreachable: {exc.message})")
        return LaunchOutcome(record, detached=True)
    finally:
        runner.close()



def _follow(runner: Runner, record: JobRecord, on_line: LineSink | None, notice: NoticeSink, silence_limit: float,
            nodes: list[str] | None) -> LaunchOutcome:
    """`logs -f`: follow the job's nodes (never stopping it), then its end as recorded (by its supervisor, or here)."""
    from ascendctl.jobs.detached import VERDICT_WAIT, await_recorded_end, ensure_supervisor

    try:
        record, restarted = ensure_supervisor(record)
    except AscendctlError as exc:
        restarted = False
        notice(f"{exc.message}; nothing tears the job down at its first failure")
    if restarted:
        notice(f"job {record.id} had no supervisor left: started one (pid {record.supervisor.pid if record.supervisor else '?'})")
    watched = supervise(runner, record, on_line=on_line, teardown_on_failure=False, grace=DEFAULT_GRACE, nodes=nodes,
                        silence=silence_limit)
    if watched.interrupted:
        return LaunchOutcome(watched.record, interrupted=True, stopped_by=watched.stopped_by)
    if record.status != JobState.RUNNING:  # ended before: as recorded (its verdict included)
        return LaunchOutcome(record)
    grace = _supervisor_grace(record)
    final = await_recorded_end(record.id, grace + VERDICT_WAIT)
    if final.status == JobState.RUNNING:
        if nodes is not None or any(n.error for n in watched.record.nodes):
            # part of the job seen, or a node lost here (perhaps only from here): this follow's view, not recorded
            return LaunchOutcome(watched.record, verdict=watched.verdict)
        final = _record_end(replace(watched.record, supervisor=final.supervisor))
        return LaunchOutcome(final, verdict=watched.verdict)
    return LaunchOutcome(final)


def _supervisor_grace(record: JobRecord) -> float:
    """The grace the job's supervisor tears down with (the default when it has none or its options do not say)."""
    options = record.supervisor.options if record.supervisor else []
    try:
        return float(options[options.index("--grace") + 1])
    except (ValueError, IndexError):
        return DEFAULT_GRACE
