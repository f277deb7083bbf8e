"""Rendering of `ascendctl launch`, `jobs`, `status`, `logs` and `stop`.

Node output is streamed to stdout as `[node] line`, one colour per node on a terminal and
plain in a pipe, its control characters shown escaped either way; notices and the failure
summary's error lines go to stderr.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from rich.text import Text

from typing import Any

from ascendctl.errors import ExitCode
from ascendctl.jobs.plan import plan_to_dict
from ascendctl.nodeset import fold, group_by
from ascendctl.ui import FOLD_NODES_ABOVE, emit_json, err, error, out, visible, warning, write_out
from ascendctl.ui.launch_folding import LaunchOutput, plan_text
from ascendctl.triage.model import fold_victims
from ascendctl.ui.triage_view import verdict_lines
from ascendctl.jobs.record import JobState

if TYPE_CHECKING:
    from ascendctl.jobs.record import JobListing, JobRecord
    from ascendctl.jobs.service import LaunchOutcome, LeftoverCheck, RestartLoop
    from ascendctl.jobs.plan import LaunchPlan
    from ascendctl.jobs.restart import Attempt

PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta",
           "bright_green", "bright_yellow", "bright_blue", "red")


def show_plan(plan: LaunchPlan, *, as_json: bool = False, argv: list[str] | None = None) -> None:
    """The dry-run text, byte for byte (control characters in inventory values shown escaped), past FOLD_NODES_ABOVE
    nodes with alike nodes folded into one block; or its JSON (every node)."""
    if as_json:
        emit_json(argv or [], ExitCode.OK, {"plan": plan_to_dict(plan)})
        return
    write_out(plan_text(plan))


def emit_record(record: JobRecord, code: ExitCode, argv: list[str], **extra: Any) -> None:
    """One job as the JSON document of `launch`, `status` and `stop` (the record as stored, secrets redacted)."""
    emit_json(argv, code, {"job": record.to_dict(), **extra})


def leftovers_to_dict(leftovers: Any) -> list[dict[str, Any]]:
    """What `status` found on nodes its teardown could not reach (JSON)."""
    return [{"node": c.node, "teardown_error": c.teardown_error, "pids": list(c.pids) if c.pids is not None else None,
             "error": c.error} for c in leftovers or ()]


def emit_jobs(listing: JobListing, argv: list[str]) -> None:
    """The jobs document: every readable record; each unreadable one an error naming its file (`path`)."""
    emit_json(argv, listing.exit_code, {"jobs": [r.to_dict() for r in listing.records]},
              errors=[{"message": bad.message, "hint": bad.hint, "path": str(bad.path)} for bad in listing.unreadable])


def emit_logs(lines: list[tuple[str, str]], code: ExitCode, argv: list[str]) -> None:
    emit_json(argv, code, {"lines": [{"node": node, "line": line} for node, line in lines]})


def show_batch_script(script: str) -> None:
    """The batch script `launch --backend slurm` would submit, byte for byte."""
    write_out(script)


def output_sink(*, to_stderr: bool = False) -> Callable[[str], None]:
    """A printer of a submitted job's output lines, as the launch inside the allocation printed them (stderr under --json)."""
    def sink(line: str) -> None:
        write_out(line + "\n", to_stderr=to_stderr)

    return sink


def line_sink(names: list[str], *, to_stderr: bool = False) -> Callable[[str, str], None]:
    """A thread-safe printer of `[node] line`; coloured per node only on a terminal (stderr when stdout is for JSON)."""
    lock = threading.Lock()
    colour = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    width = max((len(n) for n in names), default=0) + 2
    console = err if to_stderr else out
    terminal = console.is_terminal and not console.no_color

    def sink(node: str, line: str) -> None:
        prefix = f"[{node}]".ljust(width)
        with lock:
            if terminal:  # a Text is not passed through the console's render_str: sanitise here
                text = Text(visible(prefix), style=colour.get(node, "white"))
                text.append(" " + visible(line))
                console.print(text, markup=False, highlight=False)
            else:
                write_out(f"{prefix} {line}\n", to_stderr=to_stderr)

    return sink


def excluded_text(names: Sequence[str]) -> str:
    """Submit mode: the quarantined nodes the batch script excludes (said once)."""
    count = f"{len(names)} quarantined node{'s' if len(names) != 1 else ''}"
    return f"leaving out {count}: {fold(list(names))} (sbatch --exclude; ascendctl nodes; --include-quarantined to use them)"


def notice(message: str) -> None:
    """A one-line progress notice on stderr."""
    error(message, level="notice")


@contextmanager
def launch_output(names: list[str], *, to_stderr: bool = False) -> Iterator[LaunchOutput]:
    """The line and notice sinks of an attached launch (`.line`, `.notice`): past FOLD_NODES_ABOVE nodes, what the
    nodes a teardown stops print is folded, and shown when the block ends."""
    output = LaunchOutput(names, line_sink(names, to_stderr=to_stderr), notice, to_stderr=to_stderr)
    try:
        yield output
    finally:
        output.close()


def repeated_signal(name: str) -> None:
    """A stop signal while the teardown runs: it is not cut short (called from a signal handler)."""
    notice(f"{name} again: the teardown is finishing on every node (SIGKILL after the grace); not leaving processes behind")


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"


def _node_state(record: JobRecord) -> list[str]:
    """One line per node (rank, pid, how it ended, its log); past FOLD_NODES_ABOVE nodes, one line per state with the
    nodes folded (`n[0001-0998]  998 nodes  running`): 1,000 lines at every start, end and status helped nobody."""
    states = []
    for n in record.nodes:
        state = f"exit {n.exit_code}" if n.exit_code is not None else ("running" if record.status == JobState.RUNNING and not n.error else "unknown")
        extra = "".join([f", {n.signal} sent" if n.signal else "", f", {n.error}" if n.error else "",
                         f", teardown could not reach it: {n.teardown_error}" if n.teardown_error else ""])
        states.append((n, state + extra))
    if len(record.nodes) <= FOLD_NODES_ABOVE:
        return [f"  {n.name:<12} node rank {n.rank:<3} pid {n.pid or '-':<8} {state}  log {n.log}" for n, state in states]
    grouped = group_by(states, key=lambda item: item[1], name=lambda item: item[0].name)
    return [f"  {fold(names)}  {len(names)} node{'s' if len(names) > 1 else ''}  {state}" for state, names in grouped] + [
        f"  logs: {record.log_dir}/<node>/launcher.log; pids and ranks: `ascendctl status {record.id} --json`"]


def show_attempts(attempts: Sequence[Attempt], code: ExitCode) -> None:
    """launch --restarts: one line per attempt (its job, nodes, end, verdict) and what was decided after it."""
    from ascendctl.jobs.restart import Decision

    if len(attempts) < 2 and (not attempts or attempts[0].choice.decision == Decision.DONE):
        return
    out.print(f"attempts ({len(attempts)}):", markup=False)
    for a in attempts:
        verdict = f" ({a.headline})" if a.headline else ""
        step = f", last step {a.step}" if a.step is not None else ""
        out.print(f"  {a.number}. job {a.job_id} on {fold(list(a.nodes))}: {a.status}{verdict}{step} -> "
                  f"{a.choice.decision.value}: {a.choice.why}", markup=False)
    if code == ExitCode.DO_NOT_REQUEUE:
        out.print("exit 6: the job failed on its own error; do not requeue it (fix the error first)", markup=False)


def show_outcome(outcome: LaunchOutcome, *, restarts: int = 0) -> None:
    """The end-of-job summary: every node's exit, the first failure, where the logs are; detached, how to follow it
    (`restarts`: launch --detach --restarts N, its supervisor runs the restart loop)."""
    record = outcome.record
    if outcome.detached:
        out.print(f"job {record.id} started on {len(record.nodes)} nodes (detached)", markup=False)
        out.print("\n".join(_node_state(record)), markup=False)
        if restarts and record.supervisor is not None and record.supervisor.loop:
            out.print(f"restarts: on, up to {restarts} (its supervisor, pid {record.supervisor.pid}, runs the restart loop; "
                      f"`ascendctl status {record.id}` shows the attempts, `ascendctl stop {record.id}` stops the job and "
                      "the loop)", markup=False)
        elif restarts:
            out.print("restarts: off: the job has no supervisor to run the restart loop", markup=False)
        out.print(f"follow it: ascendctl logs {record.id} -f    stop it: ascendctl stop {record.id}", markup=False)
        return
    out.print(f"job {record.id}: {_status(record)}", markup=False)
    out.print("\n".join(_node_state(record)), markup=False)
    out.print(f"logs: {record.log_dir}/<node>/ on each node", markup=False)
    first = record.first_failure
    for line in verdict_lines(outcome.verdict) if outcome.verdict is not None else recorded_verdict_lines(record):
        out.print(line, markup=False)
    if first:
        hint = f"gather every log and the kernel messages with `ascendctl collect {record.id}`, then `ascendctl triage BUNDLE`"
        if first.node is not None:
            rank = f" (rank {first.rank})" if first.rank is not None else ""
            what = f"{first.category}: {first.reason}" if first.category else first.reason
            error(f"failed first: {what}", subject=f"{first.node}{rank}", hint=hint)
        else:
            error(f"failed: {first.headline or first.category}: {first.reason}", subject=f"job {record.id}", hint=hint)
    elif outcome.interrupted:
        unreached = [n.name for n in record.nodes if n.teardown_error]
        what = f"job stopped on every node except {', '.join(unreached)} (unreachable)" if unreached else "job stopped on every node"
        hint = (f"`ascendctl status {record.id}` asks them again" if unreached
                else f"gather the logs with `ascendctl collect {record.id}`")
        error(what, subject=f"interrupted by {outcome.stopped_by or 'SIGINT'}", hint=hint)
    if outcome.state_error is not None:
        exc = outcome.state_error
        done = ("the final record was still written, from the space reserved for it" if exc.saved else
                f"the record still says what it said before; `ascendctl status {record.id}` completes it once it can be written")
        error(f"{exc.message}; {done}", hint=exc.hint)


def recorded_verdict_lines(record: JobRecord) -> list[str]:
    """The verdict as the job record keeps it (saved by the launch or a detached job's supervisor): what `status` and
    `logs -f` show, the same lines as launch's where the record holds them."""
    f = record.first_failure
    if f is None:
        return []
    if not f.headline:
        return [f"first failure: {f.node}{f' rank {f.rank}' if f.rank is not None else ''}: {f.reason}"]
    lines = [f"verdict: {f.headline} (confidence {f.confidence})", f"why: {f.reason}" + (f" [rule {f.rule}]" if f.rule else "")]
    if f.text:
        where = f"{f.file}:{f.line}" if f.file and f.line else (f.file or "")
        lines += [f"first failure: {f.time or 'time unknown'} {where}".rstrip(), f"  {f.text}"]
    if f.launcher_blamed:
        lines.append(f"note: {f.launcher_blamed}")
    victims = fold_victims((v.node, v.rank, v.how) for v in f.victims)
    if victims:
        lines.append("victims:")
        lines += [f"  {who}: {how}" for who, how in victims]
    return lines


def supervisor_line(record: JobRecord, alive: bool | None) -> str | None:
    """Who looks after a running detached job: its supervisor (pid, host), or nobody (`alive` False: it is gone)."""
    sup = record.supervisor
    if record.status != JobState.RUNNING or sup is None:
        return None
    if alive is False:
        return (f"supervisor: gone (pid {sup.pid}, log {sup.log}); nothing tears the job down at its first failure: "
                f"`ascendctl logs {record.id} -f` starts a new one")
    return f"supervisor: pid {sup.pid} on {sup.host}{'' if alive else ' (not asked: another host)'}; log {sup.log}"


def _status(record: JobRecord) -> str:
    return f"{record.status} ({record.stopped_by})" if record.stopped_by and record.status == JobState.INTERRUPTED else record.status


def show_jobs(listing: JobListing) -> None:
    """One line per recorded job, newest last; a warning on stderr for each record that could not be read."""
    if listing.records:
        out.print(f"{'JOB':<22} {'STATUS':<12} {'LAUNCHER':<9} {'NODES':>5}  {'STARTED':<19}  SCRIPT", markup=False)
    elif not listing.unreadable:
        out.print("no jobs recorded", markup=False)
    for r in listing.records:
        f = r.first_failure
        verdict = f"  [{f.category or 'failed'}{f' on {f.node}' if f.node else ''}{f' rank {f.rank}' if f.rank is not None else ''}]" if f else ""
        out.print(f"{r.id:<22} {_status(r):<12} {r.launcher:<9} {len(r.nodes):>5}  {_when(r.started):<19}  {' '.join(r.script)}{verdict}"
                  f"{_attempt_tag(r)}", markup=False)
    for i, bad in enumerate(listing.unreadable):
        warning(f"unreadable job record, not listed: {bad.problem}", subject=str(bad.path),
                hint=bad.hint if i == len(listing.unreadable) - 1 else None)


def _attempt_tag(record: JobRecord) -> str:
    """`jobs`: an attempt of a job run with --restarts, and what was decided after it (`  (attempt 2 of J: done)`)."""
    if not (record.restart_of or record.decision):
        return ""
    first = f" of {record.restart_of}" if record.restart_of else ""
    decided = record.decided[0]
    return f"  (attempt {record.attempt}{first}{': ' + decided if decided else ''})"


def show_unasked(unasked: tuple[tuple[str, str], ...]) -> None:
    """Each node of a running job that could not be asked: its state is unknown (exit 4)."""
    for node, why in unasked:
        error(f"could not be asked whether the job still runs there: {why}", subject=node,
              hint="the job may still run there, or the node may be lost; ask again, or `ascendctl stop` the job")


def restart_loop_lines(loop: RestartLoop) -> list[str]:
    """`status`: the restart loop a job is an attempt of: where it stands, then one line per attempt."""
    last = loop.last
    where = {
        "running": f"attempt {last.attempt} (job {last.id}) runs",
        "waiting": f"waiting to start attempt {last.attempt + 1} at {_when(last.restart_at)}",
        "deciding": f"attempt {last.attempt} ended; deciding what next",
        "stopping": f"stopped by `ascendctl stop` at {_when(loop.stop_requested)}: no attempt starts after attempt {last.attempt}",
        "ended": f"ended after attempt {last.attempt}",
        "gone": (f"gone: its supervisor (pid {loop.supervisor}) is not running; no attempt after attempt {last.attempt} "
                 "will start"),
    }[loop.state]
    by = f"supervisor pid {loop.supervisor}" if loop.detached else "launch in the foreground"
    lines = [f"restart loop of job {loop.first} ({by}): {where}", f"attempts ({len(loop.attempts)}):"]
    for r in loop.attempts:
        lines.append(f"  {r.attempt}. job {r.id}: {_status(r)}" + (f" -> {r.decision}" if r.decision else ""))
    return lines


def show_status(record: JobRecord, leftovers: tuple[LeftoverCheck, ...] = (), *, supervisor_alive: bool | None = None,
                loop: RestartLoop | None = None) -> None:
    """One job in detail, the restart loop it is an attempt of, and what is left on the nodes its teardown could not reach."""
    out.print(f"job {record.id}: {_status(record)} ({record.launcher}, master {record.master_addr}:{record.master_port})",
              markup=False)
    out.print(f"started {_when(record.started)}, ended {_when(record.ended)}; logs under {record.log_dir}", markup=False)
    out.print("\n".join(_node_state(record)), markup=False)
    supervision = supervisor_line(record, supervisor_alive)
    if supervision:
        out.print(supervision, markup=False)
    if record.restart_of or record.decision:
        first = f" of job {record.restart_of}" if record.restart_of else ""
        out.print(f"attempt {record.attempt}{first} (launch --restarts); then: {record.decision or 'not decided yet'}",
                  markup=False)
    for line in recorded_verdict_lines(record):
        out.print(line, markup=False)
    for line in restart_loop_lines(loop) if loop is not None else []:
        out.print(line, markup=False)
    for check in leftovers:
        if check.pids is None:
            now = f"still unreachable ({check.error})"
        elif check.pids:
            now = (f"now reachable: job processes still running (pids {' '.join(map(str, check.pids))}); "
                   f"stop them with `ascendctl stop {record.id}`")
        else:
            now = "now reachable: nothing left"
        out.print(f"{check.node}: unreachable at teardown; {now}", markup=False)
