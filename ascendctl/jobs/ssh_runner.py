"""The SSH runner: each node's launcher runs detached under `setsid` on the node, reached over its transport.

Start: one command per node whose stdin is a small tar (the env file, mode 0600, the launcher command
line, and the wrapper and stamper scripts from ascendctl/sh/), so no value of the job's environment is ever
in a command line that `ps` shows. Every process of the job carries `ASCENDCTL_JOB=<job>/<node>` in its
environment: msrun and torchrun start workers in new sessions, so stop finds them by that marker. The
local transport speaks the same protocol, so the same runner serves `transport: local` nodes.
Must not import typer or rich.
"""

from __future__ import annotations

import io
import logging
import re
import secrets
import selectors
import shlex
import tarfile
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Sequence

from ascendctl.errors import AscendctlError, NodeSilentError
from ascendctl.remote.scripts import remote, script
from ascendctl.stacks.hook import hook_files
from ascendctl.models import MAX_LINE, NOT_STARTED, NodeEnd
from ascendctl.triage.times import parse_utc_offset
from ascendctl.jobs.record import FirstFailure, JobState
from ascendctl.jobs.runner import NodeEnded

if TYPE_CHECKING:
    from ascendctl.remote.group import NodeGroup
    from ascendctl.inventory.load import Node
    from ascendctl.models import NodeResults
    from ascendctl.remote.transport.base import Spawned, Transport
    from ascendctl.jobs.plan import LaunchPlan, NodePlan
    from ascendctl.jobs.record import JobRecord, NodeJob
    from ascendctl.jobs.runner import NoticeSink

log = logging.getLogger(__name__)

JOB_MARKER = "ASCENDCTL_JOB"
STOP_EXTRA_SECONDS = 15.0  # a teardown command may take grace + this long


def marker(job_id: str, node: str) -> str:
    return f"{JOB_MARKER}={job_id}/{node}"


def start_payload(*nodes: NodePlan, per_node_dirs: bool = False) -> bytes:
    """The tar a node's start command unpacks into its job directory: env file, command line, wrapper, stamper, and
    the stacks hook (`pyhook/sitecustomize.py`, first on the job's PYTHONPATH: docs/stacks.md).

    `per_node_dirs`: one directory per node named after it (one stream for every node of a Slurm step;
    each task extracts only its own node's directory).
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for node in nodes:
            _add_node(tar, node, f"{node.name}/" if per_node_dirs else "")
    return buffer.getvalue()


def _add_node(tar: tarfile.TarFile, node: NodePlan, prefix: str) -> None:
    for name, text, mode in ((".job.env", node.environment.exports(), 0o600), (".job.cmd", node.command + "\n", 0o600),
                             (".job.rank", f"{node.rank}\n", 0o600),
                             ("job_wrapper.sh", script("job_wrapper.sh"), 0o700),
                             ("stamp_lines.sh", script("stamp_lines.sh"), 0o700),
                             *hook_files()):  # the stacks hook (pyhook/sitecustomize.py): `ascendctl stacks`
        data = text.encode()
        info = tarfile.TarInfo(prefix + name)
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        tar.addfile(info, io.BytesIO(data))


def env_file(node: NodePlan) -> str:
    """The node's file of the job's environment (secrets included) between the start and the wrapper reading it."""
    return node.dir + "/.job.env"


def start_command(job_id: str, node: NodePlan) -> str:
    """Unpack the start payload (stdin) into the node's job directory and start the wrapper detached.

    Prints the wrapper's pid and the node's UTC offset. The launcher keeps the login directory as its
    working directory, so relative script paths mean what they mean in `ssh node`.

    The env file holds the job's secrets: it is created 0600 (umask 077 before tar creates it, never an old
    file reused: removed first), and until the wrapper owns it (it reads it, then deletes it, first thing)
    the EXIT trap removes it on every way out of this command (a full disk part way through the unpack,
    no `setsid`, a TERM/HUP/INT from the command timeout or a lost connection); a failed start also asks
    again from ascendctl's side (`SSHRunner.start`), for a shell that was KILLed.
    """
    q = shlex.quote
    return (
        f"job_env={q(env_file(node))}; "
        """trap 'rm -f "$job_env"' EXIT && trap 'exit 129' HUP && trap 'exit 130' INT && trap 'exit 143' TERM && """
        f"mkdir -p {q(node.worker_log_dir)} && rm -f {q(node.dir + '/exit_code')} \"$job_env\" && : > {q(node.log)} && "
        "command -v setsid >/dev/null && "
        f"(umask 077 && tar -xf - -C {q(node.dir)}) && "
        f"{{ env {q(marker(job_id, node.name))} setsid /bin/sh {q(node.dir + '/job_wrapper.sh')} {q(node.dir)} "
        "< /dev/null > /dev/null 2>&1 & trap - EXIT HUP INT TERM; echo $! $(date +%z); }"
    )


def forget_env_command(node: NodePlan) -> str:
    """Remove the env file of a start that failed (its shell may have been KILLed before its EXIT trap)."""
    return f"rm -f {shlex.quote(env_file(node))}"


FORGET_ENV_TIMEOUT = 10.0  # seconds for that cleanup: a node that does not answer by then is unreachable anyway


def _forget_env(transport: Transport, node: NodePlan) -> None:
    """Best effort after a failed start: no secret left on the node, also when the start's own shell could not clean up."""
    try:
        transport.run(forget_env_command(node), timeout=FORGET_ENV_TIMEOUT)
    except AscendctlError as exc:  # unreachable now: its start shell's traps are all that could act
        log.debug("%s: could not remove %s after the failed start: %s", node.name, env_file(node), exc)


def heartbeat_every(silence: float) -> int:
    """Whole seconds between the follower's heartbeats: several of them fit in the silence limit, at most 5 s apart."""
    return max(1, min(5, int(silence // 4)))


class BoundedLines:
    """A node's output split into lines (UTF-8, undecodable bytes replaced) with memory bounded whatever it holds.

    A line longer than `limit` bytes (MAX_LINE, 64 KiB: triage's bound) keeps its first `limit` bytes and is followed by a
    note of how many more were cut; of a line still arriving only those bytes are held. The nodes' stamper writes no
    line that long (it cuts long lines into stamped pieces): this bounds what an older node, or a log written around
    the stamper, sends. Linear in the bytes: lines are decoded and split per chunk, never per byte.
    """

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self._part = bytearray()  # the start of the unfinished line, at most `limit` bytes
        self._cut = 0  # bytes of the unfinished line past `limit`, dropped

    def feed(self, data: bytes) -> list[str]:
        """The lines that `data` completes."""
        first = data.find(b"\n")
        if first < 0:
            self._hold(data)
            return []
        self._hold(data[:first])
        lines = self._take()
        last = data.rfind(b"\n")
        if last > first:
            body = data[first + 1:last]
            step = max(1, self.limit // 2)
            # a line longer than `limit` holds a whole `step`-aligned window without a newline: one find per window
            if any(body.find(b"\n", k, k + step) < 0 for k in range(0, len(body) - step + 1, step)):
                for raw in body.split(b"\n"):
                    lines.append(raw[:self.limit].decode("utf-8", "replace"))
                    if len(raw) > self.limit:
                        lines.append(self._note(len(raw) - self.limit))
            else:
                lines.extend(body.decode("utf-8", "replace").split("\n"))
        self._hold(data[last + 1:])
        return lines

    def finish(self) -> list[str]:
        """The unfinished last line, if any (the output ended without its newline)."""
        return self._take() if self._part or self._cut else []

    def _hold(self, data: bytes) -> None:
        room = self.limit - len(self._part)
        if len(data) > room:
            self._part += data[:max(0, room)]
            self._cut += len(data) - max(0, room)
        else:
            self._part += data

    def _take(self) -> list[str]:
        lines = [self._part.decode("utf-8", "replace")]
        if self._cut:
            lines.append(self._note(self._cut))
        self._part.clear()
        self._cut = 0
        return lines

    def _note(self, cut: int) -> str:
        return f"ascendctl: the line above was cut at {self.limit} bytes: {cut} more bytes not shown"


def _prefix_at_end(data: bytes, frame: bytes) -> int:
    """How many bytes at the end of `data` may be the start of `frame`, the rest of which is still on its way."""
    for size in range(min(len(frame) - 1, len(data)), 0, -1):
        if data.endswith(frame[:size]):
            return size
    return 0


def spawned_lines(spawned: Spawned, *, idle: float) -> Iterator[str]:
    """The lines of a spawned command's stdout as they arrive (cut at MAX_LINE, BoundedLines), until it ends.

    Memory stays bounded whatever the size of the output: a read is at most the transport's window. A command from
    which nothing arrives for `idle` seconds is lost: NodeSilentError.
    """
    lines = BoundedLines()
    heard = time.monotonic()
    with selectors.DefaultSelector() as selector:
        selector.register(spawned.fileno(), selectors.EVENT_READ)
        while True:
            data = spawned.read()
            if data:
                heard = time.monotonic()
                yield from lines.feed(data)
                continue
            if spawned.finished():
                break
            quiet = time.monotonic() - heard
            if quiet >= idle:
                raise NodeSilentError(f"stopped answering: nothing received for {idle:g}s (command_timeout)")
            selector.select(min(0.5, idle - quiet))
    yield from lines.finish()


class SSHNodeStream:
    """A node's launcher log followed over one channel; ends with the follow script's nonce-framed exit line.

    With `silence` the follower also sends a heartbeat frame (dropped here, never shown nor stored) while the log is
    quiet; a node from which nothing at all arrives for `silence` seconds is lost (its link or host is down).
    Lines are cut at MAX_LINE bytes with a note (BoundedLines): memory stays bounded whatever the log holds.
    """

    def __init__(self, node: str, spawned: Spawned, nonce: str, *, silence: float | None = None) -> None:
        self.node = node
        self._spawned = spawned
        self._lines = BoundedLines()
        self._held = b""  # the end of the last read, when it may be the start of a heartbeat
        self._end = re.compile(rf"^@@{re.escape(nonce)} exit (\S+) (\S+)@@$")
        self._beat = f"@@{nonce} alive@@\n".encode()
        self._silence = silence
        self._heard = time.monotonic()
        self._done = False

    def fileno(self) -> int:
        return self._spawned.fileno()

    def pump(self) -> tuple[list[str], NodeEnded | None]:
        if self._done:
            return [], None
        data = self._spawned.read()
        now = time.monotonic()
        lines: list[str] = []
        if data:
            self._heard = now
            data = self._held + data
            if self._beat in data:  # written between reads of the log, so whole, wherever it lands
                data = data.replace(self._beat, b"")
            keep = _prefix_at_end(data, self._beat)
            self._held = data[len(data) - keep:] if keep else b""
            lines = self._lines.feed(data[:len(data) - keep] if keep else data)
        ended: NodeEnded | None = None
        # the follow script's exit line is the last thing it prints, after a newline of its own
        m = self._end.match(lines[-1]) if lines and lines[-1].startswith("@@") else None
        if m is not None:
            lines.pop()
            if lines and lines[-1] == "":
                lines.pop()  # the newline the follow script prints before its exit line
            code, when = m.group(1), m.group(2)
            ended = NodeEnded(self.node, int(code) if code.lstrip("-").isdigit() else None,
                              float(when) if re.fullmatch(r"[0-9.]+", when) else time.time())
        if ended is None and self._spawned.finished():
            lines += self._lines.feed(self._held + self._spawned.read()) + self._lines.finish()
            self._held = b""
            ended = NodeEnded(self.node, None, time.time(), "connection closed before the launcher ended")
        if ended is None and self._silence is not None and now - self._heard >= self._silence:
            ended = NodeEnded(self.node, None, time.time(),
                              f"lost: nothing received for {self._silence:g} s, not even the follower's heartbeat "
                              "(--silence-limit)")
        if ended is not None:
            self._done = True
            self.close()
        return lines, ended

    def close(self) -> None:
        self._spawned.close()


class SSHRunner:
    """Launchers detached under setsid, over the group's connections (SSH or local transport)."""

    name = "ssh"

    # a follow sends heartbeats and is watched for silence; the Slurm runner's srun steps may hold output back
    watches_silence = True

    def __init__(self, group: NodeGroup) -> None:
        self.group = group

    # -- start -------------------------------------------------------------------------------
    def start(self, plan: LaunchPlan, record: JobRecord, *, notice: NoticeSink) -> JobRecord:
        plans = {node.name: node for node in plan.nodes}

        def start(node: Node, transport: Transport) -> tuple[int, int | None]:
            node_plan = plans[node.name]
            try:
                result = transport.run(start_command(plan.job_id, node_plan), timeout=node.command_timeout,
                                       stdin=start_payload(node_plan))
            except AscendctlError:
                _forget_env(transport, node_plan)
                raise
            words = result.stdout.split()
            if not result.ok or not words or not words[0].isdigit():
                _forget_env(transport, node_plan)
                raise AscendctlError(f"start failed (exit {result.exit_code}): {(result.stderr or result.stdout).strip()[-300:]}")
            return int(words[0]), parse_utc_offset(words[1]) if len(words) > 1 else None

        results = self.group.run(start, nodes=self.group.nodes(plans))
        started = time.time()
        for result in results:
            entry = next(n for n in record.nodes if n.name == result.node)
            if result.value is not None:
                record = record.with_node(replace(entry, pid=result.value[0], utc_offset=result.value[1], started=started))
            else:
                assert result.error is not None
                record = record.with_node(replace(entry, error=f"{NOT_STARTED}: {result.error.message}", ended=started))
        return self._stop_if_not_all_started(record, plan, notice)

    def _stop_if_not_all_started(self, record: JobRecord, plan: LaunchPlan, notice: NoticeSink) -> JobRecord:
        """A node whose launcher did not start fails the job: the others are stopped, the first such node is blamed."""
        bad = [n for n in record.nodes if n.pid is None]
        if not bad:
            return record
        notice(f"{', '.join(n.name for n in bad)}: could not start; stopping the others")
        record = replace(record, first_failure=FirstFailure(str(bad[0].error), node=bad[0].name, category="LAUNCH",
                                                            headline=f"LAUNCH on node {bad[0].name}", rule="not_started"),
                         teardown_started=time.time())
        stopped = self.stop(record, [n.name for n in record.nodes if n.pid is not None], grace=plan.grace)
        return replace(with_stop_results(record, stopped), status=JobState.FAILED, ended=time.time())

    # -- follow ------------------------------------------------------------------------------
    def follow(self, record: JobRecord, node: str, *, silence: float | None = None) -> SSHNodeStream:
        entry = record.node(node)
        nonce = secrets.token_hex(6)
        silence = silence if self.watches_silence else None
        command, stdin = remote("follow_log.sh", entry.dir, entry.pid or 0, nonce, 0,
                                heartbeat_every(silence) if silence is not None else 0)
        spawned = self.group.spawn(self.group.inventory.node(node), command, stdin=stdin)
        return SSHNodeStream(node, spawned, nonce, silence=silence)

    # -- stop, state, logs ---------------------------------------------------------------------
    def stop(self, record: JobRecord, nodes: Sequence[str], *, grace: float) -> NodeResults[str]:
        def stop(node: Node, transport: Transport) -> str:
            # the job directory too: a wrapper stopped before it read (and deleted) the env file leaves it there
            command, stdin = remote("teardown_job.sh", marker(record.id, node.name), int(grace * 1000),
                                    _job_dir(record, node.name))
            result = transport.run(command, stdin=stdin, timeout=grace + STOP_EXTRA_SECONDS)
            words = result.stdout.split()
            return words[-1] if words else "none"

        return self.group.run(stop, nodes=self.group.nodes(nodes), retry=True)

    def _job_state(self, record: JobRecord, nodes: Sequence[str]) -> NodeResults[tuple[str, tuple[int, ...]]]:
        """job_state.sh on each node: its state line, and the pids of the job's processes still there."""
        def state(node: Node, transport: Transport) -> tuple[str, tuple[int, ...]]:
            entry = record.node(node.name)
            command, stdin = remote("job_state.sh", entry.dir, entry.pid or "", marker(record.id, node.name))
            lines = transport.run(command, stdin=stdin).stdout.splitlines()
            if len(lines) != 2 or not lines[1].startswith("pids"):
                raise AscendctlError(f"unexpected answer from job_state.sh: {' | '.join(lines)[:200]!r}")
            # in numeric order: the node lists /proc in name order, so 994 came after 1006
            return lines[0].strip(), tuple(sorted(int(p) for p in lines[1].split()[1:] if p.isdigit()))

        return self.group.run(state, nodes=self.group.nodes(nodes), retry=True)

    def states(self, record: JobRecord, nodes: Sequence[str]) -> NodeResults[NodeEnd]:
        return self._job_state(record, nodes).map(lambda value: NodeEnd.from_state(value[0]))

    def leftovers(self, record: JobRecord, nodes: Sequence[str]) -> NodeResults[tuple[int, ...]]:
        return self._job_state(record, nodes).map(lambda value: value[1])

    def log_lines(self, record: JobRecord, node: str, path: str | None = None) -> Iterator[str]:
        """The node's launcher log (or `path`) so far, streamed line by line (spawned_lines: cut at MAX_LINE, bounded
        memory)."""
        target = self.group.inventory.node(node)
        spawned = self.group.spawn(target, f"cat {shlex.quote(path or record.node(node).log)} 2>/dev/null")
        try:
            yield from spawned_lines(spawned, idle=target.command_timeout)
        finally:
            spawned.close()
            self.group.unpin(target)

    def artifacts(self, record: JobRecord, node: str) -> tuple[str, ...]:
        entry = record.node(node)
        return tuple(p for p in (entry.log, entry.log_dir) if p)

    def close(self) -> None:
        self.group.close()


def _job_dir(record: JobRecord, node: str) -> str:
    try:
        return record.node(node).dir
    except KeyError:
        return ""


def with_stop_results(record: JobRecord, results: NodeResults[str]) -> JobRecord:
    """Record the signal each node's teardown needed, or why the teardown could not reach the node."""
    for result in results:
        entry = record.node(result.node)
        if result.value is not None:
            sig = {"term": "SIGTERM", "kill": "SIGKILL"}.get(result.value)
            record = record.with_node(replace(entry, signal=sig or entry.signal, teardown_error=None))
        elif result.error is not None:
            record = record.with_node(replace(entry, teardown_error=result.error.message))
    return record
