"""A detached job keeps the foreground's promises: a supervisor process on the control host looks after it.

`launch --detach` returns once every launcher runs; without a terminal following it, nothing tore the job down at its
first failure (a job whose node failed still ran on the others) and nothing computed the verdict. So the launch leaves
a supervisor behind: `ascendctl supervise JOB` (hidden), in its own session (a closed terminal, a logout or a lost SSH
session to the control host does not reach it), reparented to init at once (double fork: no zombie, no parent to
outlive), its pid in the job record. It runs the foreground's supervise loop with no terminal: the first failure tears
the job down on every node, the verdict is the triage engine's, and the record it saves holds both. Its own messages
go to a log file beside the job records.

`logs -f` reattaches (it follows the output, then shows the verdict the supervisor recorded, and starts a new
supervisor for a running job whose supervisor is gone); `status` and `jobs` read the record. `stop` marks the record
first (`stop_requested`): the supervisor then leaves the record to `stop`. SIGTERM or SIGINT relieve the supervisor
(the job runs on, unsupervised: `status` says so); SIGHUP is ignored.

With `launch --detach --restarts N` the supervisor (`--restart-loop`, the loop's spec on its stdin: restart.LoopSpec)
also runs the restart loop (jobs/service.supervise_restarts: the foreground's launch_with_restarts), following each
attempt with `watch_detached`; every attempt's record names it, and `status` says the loop is gone when it is.

Must not import typer or rich.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ascendctl.errors import AscendctlError
from ascendctl.jobs.record import JobState, Supervisor, load_job, save_job, state_dir

if TYPE_CHECKING:
    from ascendctl.jobs.supervise import HangPolicy, Supervised
    from ascendctl.remote.group import NodeGroup

    from typing import TypeAlias

    StacksTaker: TypeAlias = Callable[[JobRecord, NodeGroup, Callable[[str], None], bool], JobRecord]
    from ascendctl.jobs.record import JobRecord


LOOP_OPTION = "--restart-loop"  # `supervise`: read the restart loop's spec on stdin and run the loop
MAX_SPEC = 1 << 20  # bytes of it read at most
GO_WAIT = 60.0  # seconds a new supervisor waits for the launch to record it before it starts anyway
PID_WAIT = 30.0  # seconds the launch waits for the supervisor to say its pid
VERDICT_WAIT = 15.0  # seconds `logs -f` waits, beyond the grace, for the supervisor to record the end it saw


def supervisor_log(job_id: str) -> Path:
    """Where the supervisor of `job_id` writes its messages."""
    return state_dir() / "supervisors" / f"{job_id}.log"


def start_supervisor(record: JobRecord, options: Sequence[str], *, loop: bytes | None = None) -> JobRecord:
    """Start the supervisor of a running detached job; return the record naming it, saved.

    The supervisor waits until that record is saved (the launch closes its stdin), so it never reads or writes a
    record that does not know it yet. `options`: its command-line options (`--grace`, `--silence-limit`, timeouts).
    `loop`: the restart loop's spec (restart.LoopSpec), written on its stdin before the go (`--restart-loop`): it then
    runs the loop of `launch --detach --restarts N`.
    AscendctlError when it cannot be started: the job runs, unsupervised, and the caller says so.
    """
    path = supervisor_log(record.id)
    options = [*options, *([LOOP_OPTION] if loop is not None else [])]
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(path, "ab") as sink:
            sink.write(f"{_now()} starting: {' '.join(options)}\n".encode())
        proc = subprocess.Popen([sys.executable, "-m", "ascendctl", "supervise", record.id, *options],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    except OSError as exc:
        raise AscendctlError(f"cannot start the job's supervisor: {exc.strerror or exc}",
                             hint=f"the job runs unsupervised; follow it with `ascendctl logs {record.id} -f`") from None
    assert proc.stdin is not None and proc.stdout is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], PID_WAIT)
        said = proc.stdout.readline().decode("ascii", "replace").strip() if ready else ""
        proc.wait(timeout=PID_WAIT)  # the intermediate process exits once it has forked the supervisor
        if not said.isdigit():
            raise AscendctlError(f"the job's supervisor did not start (see {path})",
                                 hint=f"the job runs unsupervised; follow it with `ascendctl logs {record.id} -f`")
        record = replace(record, supervisor=Supervisor(int(said), socket.gethostname(), time.time(), str(path), list(options),
                                                       loop=loop is not None))
        save_job(record)
        if loop is not None:
            try:
                proc.stdin.write(loop)
            except OSError:  # gone already: `status` finds it so
                pass
        return record
    finally:
        proc.stdout.close()
        proc.stdin.close()  # go (or, on failure, EOF all the same: it then finds the record as it was)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def supervisor_alive(record: JobRecord) -> bool | None:
    """Whether the job's supervisor still runs: None when it runs on another host (its pid cannot be asked here)."""
    sup = record.supervisor
    if sup is None:
        return False
    if sup.host != socket.gethostname():
        return None
    try:
        with open(f"/proc/{sup.pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[0]
        with open(f"/proc/{sup.pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except (OSError, IndexError):
        return False
    # the pid may have been reused since: it is this job's supervisor only if its command line says so (a restart
    # loop's supervisor is named for the first attempt, and named in every attempt's record)
    return state not in (b"Z", b"X") and b"supervise" in argv and (record.restart_of or record.id).encode() in argv


def ensure_supervisor(record: JobRecord) -> tuple[JobRecord, bool]:
    """A running SSH job whose supervisor is gone gets a new one (with the options of the last); (record, started)."""
    if record.status != JobState.RUNNING or record.runner != "ssh" or record.stop_requested or supervisor_alive(record) is not False:
        return record, False
    # a plain supervisor: the restart loop's spec went with the one that is gone (status says the loop is gone)
    options = [o for o in record.supervisor.options if o != LOOP_OPTION] if record.supervisor else []
    return start_supervisor(record, options), True


def await_recorded_end(job_id: str, timeout: float) -> JobRecord:
    """The job's record once its supervisor recorded the end (or stepped aside, or `timeout` seconds passed)."""
    deadline = time.monotonic() + timeout
    while True:
        record = load_job(job_id)
        if record.status != JobState.RUNNING or supervisor_alive(record) is False or time.monotonic() > deadline:
            return record
        time.sleep(0.2)


def daemonize(job_id: str) -> bytes:
    """Become the supervisor of `job_id`: fork, say the child's pid on stdout, let the parent exit; in the child wait
    for the go (EOF on stdin), then move stdio to the supervisor's log. What came on stdin before the go is returned
    (a restart loop's spec; at most MAX_SPEC bytes)."""
    child = os.fork()
    if child:
        os.write(1, f"{child}\n".encode())
        os._exit(0)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    said = bytearray()
    ready, _, _ = select.select([0], [], [], GO_WAIT)
    while ready and (chunk := os.read(0, 65536)):
        said += chunk[:max(0, MAX_SPEC - len(said))]
        ready, _, _ = select.select([0], [], [], GO_WAIT)
    path = supervisor_log(job_id)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)
    return bytes(said)


class Relieved(Exception):
    """SIGTERM or SIGINT told the supervisor to step aside: the job runs on, unsupervised."""


def relieving() -> threading.Event:
    """Make SIGTERM and SIGINT set the returned event (how a supervisor is told to step aside) instead of killing it."""
    relieved = threading.Event()

    def relieve(signum: int, _frame: object) -> None:
        relieved.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, relieve)
    return relieved


def say(message: str) -> None:
    """A line of the supervisor's log (its stdout is the log: daemonize)."""
    print(f"{_now()} {message}", flush=True)


def run_supervisor(job_id: str, *, grace: float, silence: float | None, flags: dict[str, object],
                   hang: HangPolicy | None = None, stacks: StacksTaker | None = None) -> int:
    """Look after a detached job until it ends (exit 0), or until SIGTERM/SIGINT relieve it; record what happened.
    `hang`: as launch's; `stacks(record, group, notice)` takes every rank's stack (jobs/hang.with_stacks) over the
    runner's own group before a hang's teardown."""
    relieved = relieving()
    record = load_job(job_id)
    if record.status != JobState.RUNNING or record.stop_requested:
        say(f"job {job_id} is {record.status if not record.stop_requested else 'being stopped'}: nothing to look after")
        return 0
    watch_detached(record, grace=grace, silence=silence, flags=flags, hang=hang, stacks=stacks, relieved=relieved)
    return 0


def watch_detached(record: JobRecord, *, grace: float, silence: float | None, flags: Mapping[str, object],
                   hang: HangPolicy | None, stacks: StacksTaker | None, relieved: threading.Event) -> Supervised:
    """Follow a running detached job to its end, tearing it down at its first failure, and save that end with its
    verdict; `.relieved` when told to step aside (nothing saved); when `stop` was asked meanwhile, the record is
    stop's to finish: the stored one is returned (perhaps still `running` while stop tears it down)."""
    from ascendctl.jobs.reach import job_inventory, runner_for_record
    from ascendctl.jobs.supervise import supervise

    job_id = record.id
    inv = job_inventory(record, flags=flags)
    runner = runner_for_record(record, inv)
    say(f"following {len(record.nodes)} nodes of job {job_id} (pid {os.getpid()})")
    try:
        result = supervise(runner, record, notice=say, grace=grace, silence=silence, relieved=relieved, hang=hang,
                           before_stop=(lambda r, stopping: stacks(r, runner.group, say, stopping)) if hang is not None and stacks
                           else None)
    finally:
        runner.close()
    if result.relieved:
        say("relieved (SIGTERM/SIGINT): the job runs on without a supervisor")
        return result
    now = load_job(job_id)
    if now.stop_requested or now.status != JobState.RUNNING:
        say(f"the job ended as `{now.status}` (stop asked): its record is stop's to finish")
        return replace(result, record=now)
    final = replace(result.record, supervisor=now.supervisor or record.supervisor)
    save_job(final)
    say(f"job {job_id} {final.status}" + (f": {final.first_failure.headline}" if final.first_failure else ""))
    return replace(result, record=final)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")
