"""Supervise a running job: one event loop follows every node's launcher output and owns the teardown.

The loop reads every node's stream through `selectors` (no thread per node), hands each line to the
caller (without its node-side stamp) and to the triage engine (with it), and, when a launcher fails or a
node is lost, stops the others through the runner in a bounded pool while it keeps reading their last
words. The verdict of the failure is the triage engine's. Must not import typer or rich.
"""

from __future__ import annotations

import logging
import re
import selectors
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

from ascendctl.errors import AscendctlError, signal_name
from ascendctl.triage import LiveTriage, split_stamp
from ascendctl.triage.extract import PROGRESS_RX
from ascendctl.jobs.pace import CHECKPOINT_RX, HangTimeout, Pace, parse_hang_timeout
from ascendctl.jobs.record import FirstFailure, JobState
from ascendctl.jobs.runner import NodeEnded
from ascendctl.jobs.ssh_runner import with_stop_results
from ascendctl.models import LOST_TRACK, UNREACHABLE

if TYPE_CHECKING:
    from ascendctl.triage import TriageReport
    from ascendctl.jobs.record import JobRecord
    from ascendctl.jobs.runner import LineSink, NodeStream, NoticeSink, Runner, TeardownSink

log = logging.getLogger(__name__)

POLL = 0.25
SILENCE_CHECK = 1.0  # seconds between pumps of every stream, readable or not: a silent node's stream ends itself
DRAIN_AFTER_INTERRUPT = 5.0  # seconds to read the last words of nodes stopped after Ctrl-C


@dataclass(frozen=True, slots=True)
class HangPolicy:
    """When a running job counts as hung, and what then (`launch --hang-timeout S|auto --on-hang stop|report
    --progress RE`).

    A hang: no rank printed a progress line (a training step: triage's PROGRESS_RX, or `progress`) for as long as the
    job's pace allows (jobs/pace.py: a fixed timeout, or learned from the step intervals). Then every rank's stack is
    taken (`ascendctl stacks`), and with `stop` the job is torn down with the stacks' verdict (HANG)."""

    timeout: HangTimeout
    stop: bool = True
    progress: str | None = None
    first_step_factor: float = 3.0

    def matcher(self) -> re.Pattern[str]:
        return re.compile(self.progress) if self.progress else PROGRESS_RX

    def to_argv(self) -> list[str]:
        """The same policy as command-line options (a detached job's supervisor is given them)."""
        argv = ["--hang-timeout", str(self.timeout), "--on-hang", "stop" if self.stop else "report"]
        return argv + (["--progress", self.progress] if self.progress else [])


def hang_policy(timeout: str | None, on_hang: str = "stop", progress: str | None = None) -> HangPolicy | None:
    """The policy the command line asks for (None without --hang-timeout); UsageError for a bad --hang-timeout or
    --progress, or an --on-hang/--progress without --hang-timeout."""
    from ascendctl.errors import UsageError

    if on_hang not in ("stop", "report"):
        raise UsageError(f"--on-hang {on_hang!r}: expected stop or report")
    if timeout is None:
        if progress is not None or on_hang != "stop":
            raise UsageError("--on-hang and --progress need --hang-timeout SECONDS|auto")
        return None
    try:
        parsed = parse_hang_timeout(timeout)
    except ValueError as exc:
        raise UsageError(f"--hang-timeout {exc}") from None
    if progress is not None:
        try:
            re.compile(progress)
        except re.error as exc:
            raise UsageError(f"--progress {progress!r}: not a regular expression: {exc}") from None
    return HangPolicy(parsed, stop=on_hang == "stop", progress=progress)


@dataclass(frozen=True, slots=True)
class Supervised:
    """How a supervised job ended."""

    record: JobRecord
    interrupted: bool = False
    verdict: TriageReport | None = None
    stopped_by: str | None = None  # the stop signal that ended the supervision (the record's too, unless only watching)
    relieved: bool = False  # the supervisor was told to stop looking after the job (which runs on): nothing to record


def first_failure(report: TriageReport) -> FirstFailure:
    """The triage verdict as a job record keeps it."""
    f = report.first_failure
    return FirstFailure(
        reason=report.reason, node=f.node if f else None, rank=f.rank if f else None,
        category=report.category.value if report.category else None, headline=report.headline(), rule=report.rule,
        confidence=report.confidence, single_culprit=report.single_culprit, time=f.time if f else None,
        file=f.file if f else None, line=f.line if f else None, text=f.text if f else None,
        exit_code=f.exit_code if f else None, signal=f.signal if f else None,
        victims=tuple(report.victims),
        launcher_blamed=report.launcher_blamed, hints=report.hints, oom_kind=report.oom_kind)


class _Loop:
    """The state of one supervision (private)."""

    def __init__(self, runner: Runner, record: JobRecord, on_line: LineSink | None, notice: NoticeSink, grace: float,
                 names: list[str], silence: float | None = None, relieved: threading.Event | None = None,
                 on_teardown: TeardownSink | None = None, hang: HangPolicy | None = None,
                 on_hang: Callable[[JobRecord, bool], JobRecord] | None = None) -> None:
        self.runner = runner
        self.hang = hang
        self.on_hang = on_hang
        self.progress_rx = hang.matcher() if hang is not None else None
        self.pace = Pace(hang.timeout, time.monotonic(), hang.first_step_factor) if hang is not None else None
        self.hang_fired = False  # re-armed by the next progress line (--on-hang report)
        self.hung = False  # torn down because of a hang
        self.on_teardown = on_teardown
        self.relieved = relieved
        self.left = False  # the loop ended because it was relieved
        self.silence = silence
        self.checked = time.monotonic()
        self.record = record
        self.on_line = on_line
        self.notice = notice
        self.grace = grace
        self.live = LiveTriage()
        self.selector = selectors.DefaultSelector()
        self.pending = set(names)
        self.failures: list[NodeEnded] = []
        self.lost: set[str] = set()  # nodes whose stream was lost: the teardown still tries them
        self.stopper: threading.Thread | None = None
        self.stop_results: list[JobRecord] = []
        self.teardown_started: float | None = None

    def emit(self, node: str, line: str) -> None:
        self.live.line(node, line)
        text = split_stamp(line)[1]
        if self.progress_rx is not None and self.pace is not None:
            m = self.progress_rx.search(text)
            if m is not None and "rror" not in text:
                number = next((g for g in m.groups() if g is not None and g.isdigit()), None)
                self.pace.progress(time.monotonic(), int(number) if number is not None else None)
                self.hang_fired = False
            elif CHECKPOINT_RX.search(text):
                self.pace.checkpoint()
        if self.on_line is not None:
            self.on_line(node, text)

    def check_hang(self) -> None:
        """Fire the hang policy once no rank made progress for its timeout (a longer allowance before the first step)."""
        if self.hang is None or self.pace is None or self.hang_fired or self.stopper is not None or not self.pending:
            return
        allowance, how = self.pace.allowance()
        idle = self.pace.idle(time.monotonic())
        if idle < allowance:
            return
        self.hang_fired = True
        if self.pace.timeout.auto and self.pace.last is None:
            # auto learns from progress lines: with none at all it cannot tell a hang from a job whose steps print
            # nothing it reads (a progress bar, a trainer logging every 500 steps), and must not stop a healthy job
            self.notice(f"no progress line in {idle:.0f} s since the job started: --hang-timeout auto cannot judge this "
                        "job (give --progress REGEX, a line each step prints, or a number of seconds); watching on")
            return
        what = (f"since step {self.pace.step}" if self.pace.step is not None else "since its last progress line") \
            if self.pace.last is not None else "since it started, and none yet"
        self.notice(f"no rank made progress for {idle:.0f} s {what} (allowed: {allowance:.3g} s, {how}): a hang; "
                    "taking every rank's stack")
        after = self.on_hang(self.record, self.hang.stop) if self.on_hang is not None else self.record
        if not self.hang.stop:
            return  # --on-hang report: the job runs on; the stacks stay on the nodes
        self.record = after
        self.hung = True
        self.stop_rest("a hang: stopping the job on every node", None)

    def open(self, name: str) -> None:
        try:
            stream = self.runner.follow(self.record, name, silence=self.silence)
        except AscendctlError as exc:  # the node is not reachable any more: that is how it ended
            self.ended(NodeEnded(name, None, time.time(), exc.message))
            return
        self.selector.register(stream.fileno(), selectors.EVENT_READ, stream)

    def pump(self, stream: NodeStream) -> None:
        lines, ended = stream.pump()
        for line in lines:
            self.emit(stream.node, line)
        if ended is not None:
            try:
                self.selector.unregister(stream.fileno())
            except (KeyError, ValueError):
                pass
            self.ended(ended)

    def select(self) -> None:
        """Pump the streams with something to read; every SILENCE_CHECK seconds all of them (a dark node sends nothing)."""
        for key, _ in self.selector.select(timeout=POLL):
            self.pump(key.data)
        if self.silence is not None and time.monotonic() - self.checked >= SILENCE_CHECK:
            self.checked = time.monotonic()
            streams = self.selector.get_map()
            for key in list(streams.values()) if streams is not None else []:
                self.pump(key.data)

    def ended(self, ended: NodeEnded) -> None:
        self.pending.discard(ended.node)
        log.debug("%s: launcher ended (%s), %d still running", ended.node, ended.lost or ended.exit_code, len(self.pending))
        entry = self.record.node(ended.node)
        self.record = self.record.with_node(replace(entry, exit_code=ended.exit_code, ended=ended.when,
                                                    error=ended.lost and f"{UNREACHABLE}: {ended.lost}"))
        if ended.lost is not None:
            self.lost.add(ended.node)
        if ended.lost is not None or ended.exit_code != 0:
            self.failures.append(ended)

    def teardown_targets(self) -> list[str]:
        """Every node that may still run the job: those still followed, and those lost (perhaps still running)."""
        return sorted(self.pending | self.lost)

    def stop_rest(self, reason: str, failed: str | None) -> None:
        """Stop every node still running, in the background (the loop keeps reading their output)."""
        self.notice(reason)
        if self.on_teardown is not None:
            self.on_teardown(failed)
        self.teardown_started = time.time()
        targets = self.teardown_targets()
        record = self.record

        def work() -> None:
            self.stop_results.append(with_stop_results(record, self.runner.stop(record, targets, grace=self.grace)))
            log.debug("teardown of %d nodes done", len(targets))

        self.stopper = threading.Thread(target=work, daemon=True, name="teardown")
        self.stopper.start()

    def run(self, *, teardown_on_failure: bool) -> None:
        stop_deadline = float("inf")
        while self.pending:
            self.select()
            if self.relieved is not None and self.relieved.is_set() and self.stopper is None:
                self.left = True  # never in the middle of a teardown: that one runs to its end first
                return
            if teardown_on_failure:
                self.check_hang()
            if self.failures and self.stopper is None and teardown_on_failure and self.pending:
                first = self.failures[0]
                what = f"unreachable ({first.lost})" if first.lost else f"exited {first.exit_code}"
                self.stop_rest(f"{first.node}: launcher {what}; stopping the other nodes", first.node)
                stop_deadline = time.monotonic() + self.grace + 10
            if self.stopper is not None and not self.stopper.is_alive() and time.monotonic() > stop_deadline:
                break  # streams of nodes that stopped answering may never end

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.pending and time.monotonic() < deadline:
            self.select()

    def close(self) -> None:
        streams = self.selector.get_map()
        if streams is None:  # closed already
            return
        for key in list(streams.values()):
            key.data.close()
        self.selector.close()


MASTER_LOG_LINES = 20_000  # of a launcher's own log read for a failed job's verdict: its last lines (bounded memory)


def read_master_logs(runner: Runner, record: JobRecord, live: LiveTriage) -> None:
    """Feed the verdict what the launcher's own processes logged on the master node and never printed
    (`LauncherSpec.master_logs`: msrun's scheduler.log, where it names the node whose heartbeats stopped). After the
    teardown, best effort: a node that cannot be read leaves the verdict to the streamed lines."""
    from collections import deque
    from pathlib import PurePosixPath

    from ascendctl.launchers import LAUNCHERS

    spec = LAUNCHERS.get(record.launcher)
    master = next((n for n in record.nodes if n.rank == 0), None)
    if spec is None or not spec.master_logs or master is None or not master.log_dir:
        return
    folder = PurePosixPath(master.log_dir)
    for name in spec.master_logs:
        try:
            kept = deque(enumerate(runner.log_lines(record, master.name, str(folder / name)), 1), maxlen=MASTER_LOG_LINES)
        except AscendctlError as exc:
            log.info("%s: %s not read for the verdict: %s", master.name, folder / name, exc)
            continue
        for number, text in kept:
            live.line(master.name, text, file=f"{folder.name}/{name}", number=number)


def supervise(
    runner: Runner,
    record: JobRecord,
    *,
    on_line: LineSink | None = None,
    notice: NoticeSink | None = None,
    teardown_on_failure: bool = True,
    nodes: Sequence[str] | None = None,
    grace: float,
    silence: float | None = None,
    relieved: threading.Event | None = None,
    on_teardown: TeardownSink | None = None,
    before_stop: Callable[[JobRecord, bool], JobRecord] | None = None,
    hang: HangPolicy | None = None,
) -> Supervised:
    """Follow every started node until its launcher ends; on a failure or a stop signal stop the rest (unless only watching).

    `silence`: a node whose follower sends nothing, not even its heartbeat, for that many seconds is lost (a failure,
    like a launcher that exited non-zero: the others are stopped unless only watching).
    `relieved`: once set, the loop ends at the next turn (after a teardown it began) and the job is left as it is:
    how a detached job's supervisor steps aside.
    `on_teardown(node)`: told when the teardown begins, with the node whose failure began it (None after a stop signal).
    `before_stop(record, stopping)`: run after a stop signal, before the teardown (every rank's stack is taken there: a
    hang stopped by hand still gets its culprit); the record it returns (its verdict, if any) is kept.
    `hang`: when no rank made progress for its timeout, `before_stop` runs (the stacks; `stopping` is `hang.stop`), then
    with `hang.stop` the job is
    torn down and ends failed with the stacks' verdict (HANG); with report it runs on.
    A stop signal (KeyboardInterrupt: Ctrl-C, or SIGTERM/SIGHUP through interrupts.stop_on_signals) tears the job down on
    every node it may still run on, the ones lost included; the record says which signal (`stopped_by`).
    """
    say = notice or (lambda _msg: None)
    names = [n.name for n in record.nodes if n.pid is not None and (nodes is None or n.name in nodes)]
    loop = _Loop(runner, record, on_line, say, grace, names, silence, relieved, on_teardown, hang, before_stop)
    stopped_by: str | None = None
    try:
        for name in names:
            loop.open(name)
        loop.run(teardown_on_failure=teardown_on_failure)
    except KeyboardInterrupt as stop:
        stopped_by = signal_name(stop)
        if not teardown_on_failure:  # only watching (`logs -f`): a stop signal stops watching, never the job
            loop.close()
            return Supervised(record, interrupted=True, stopped_by=stopped_by)
        say(f"interrupted ({stopped_by}): stopping the job on every node; SIGKILL after {grace:g} s")
        if on_teardown is not None:
            on_teardown(None)
        if before_stop is not None:
            loop.record = before_stop(loop.record, True)
        if loop.stopper is not None:
            loop.stopper.join()
        loop.teardown_started = loop.teardown_started or time.time()
        loop.stop_results.append(with_stop_results(loop.record, runner.stop(loop.record, loop.teardown_targets(), grace=grace)))
        loop.drain(DRAIN_AFTER_INTERRUPT)
    finally:
        if loop.stopper is not None:
            loop.stopper.join()
        loop.close()
    if loop.left:
        return Supervised(record, relieved=True)
    record = loop.record
    for name in loop.pending:  # never heard back
        entry = record.node(name)
        record = record.with_node(replace(entry, error=entry.error or LOST_TRACK))
    for stopped in loop.stop_results:  # the signal each stopped node needed, or why the teardown could not reach it
        for entry in stopped.nodes:
            if entry.signal or entry.teardown_error:
                current = record.node(entry.name)
                record = record.with_node(replace(current, signal=entry.signal or current.signal,
                                                  teardown_error=entry.teardown_error))
    record = replace(record, ended=time.time(), teardown_started=loop.teardown_started or record.teardown_started)
    if stopped_by is not None:
        status = JobState.INTERRUPTED
    elif record.status == JobState.STOPPED:
        status = JobState.STOPPED
    elif loop.hung or loop.failures or not all(n.exit_code == 0 for n in record.nodes):
        status = JobState.FAILED
    else:
        status = JobState.SUCCEEDED
    # a hang the stacks named keeps their verdict: the logs of a job stopped for a hang show only the teardown
    kept = loop.hung and record.first_failure is not None
    if status == JobState.FAILED and not kept and stopped_by is None:
        read_master_logs(runner, record, loop.live)
    verdict = loop.live.report(record.to_dict()) if status == JobState.FAILED and not kept else None
    record = replace(record, status=status, first_failure=first_failure(verdict) if verdict else record.first_failure,
                     stopped_by=stopped_by)
    return Supervised(record, interrupted=stopped_by is not None, verdict=verdict, stopped_by=stopped_by)
