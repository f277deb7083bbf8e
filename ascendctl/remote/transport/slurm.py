"""Reaching the nodes of a Slurm allocation: every fan-out round is ONE srun step, its output split per node.

`SlurmSteps` gathers what the nodes of one `NodeGroup.run` ask for: each node's work calls `run` on its
`SlurmNodeTransport` as it would over SSH; once every node still working has asked (or finished), the round
starts as one `srun --jobid=J --overlap --nodes=N --ntasks-per-node=1 --label` step. The step's program is the
same for every task and reaches them on stdin (`--input=all`): a `case "$SLURMD_NODENAME"` picks the node's
command and stdin (base64), runs it under the node's `timeout`, and prints its stdout, stderr and exit
status as nonce-framed base64 lines, which are split back per node. No command or stdin is in srun's argv.
A node Slurm reports down or drained is not asked: it is unreachable with Slurm's reason. A call from
outside a round (one node, e.g. a follow) is a step of its own. Must not import typer or rich.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ascendctl.errors import AscendctlError, CommandTimeoutError, ConnectError, TransportError
from ascendctl.models import CommandResult
from ascendctl.slurm import clean_environ, show_nodes, step_argv, tool
from ascendctl.remote.transport.base import ANSWER_SLACK, KILL_GRACE, node_bounded, stopped_at_limit

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.remote.transport.local import LocalSpawned

# The task's own program (in srun's argv; no values in it): keep stdin (the round's script) in a file and run it.
BOOTSTRAP = 'f=$(mktemp) || exit 1; cat > "$f"; sh "$f"; rc=$?; rm -f "$f"; exit $rc'
STEP_START_SLACK = 30.0  # seconds past the longest command limit before a silent step is given up


@dataclass
class _Ask:
    node: "Node"
    command: str
    stdin: bytes | None
    limit: float
    done: threading.Event = field(default_factory=threading.Event)
    result: CommandResult | None = None
    error: TransportError | None = None


def round_script(asks: Sequence[_Ask], nonce: str) -> bytes:
    """The program every task of a round's step reads on stdin: run this node's command, frame its answer."""
    q = shlex.quote
    lines = ['case "$SLURMD_NODENAME" in']
    for ask in asks:
        data = base64.b64encode(ask.stdin or b"").decode()
        lines.append(f"{q(ask.node.name)}) c={q(node_bounded(ask.command, ask.limit))}; s={q(data)} ;;")
    lines += ["*) exit 0 ;;", "esac",
              'd=$(mktemp -d) || exit 1',
              'printf %s "$s" | base64 -d > "$d/in"',
              't0=$(date +%s.%N)',
              'sh -c "$c" < "$d/in" > "$d/out" 2> "$d/err"',
              'rc=$?',
              't1=$(date +%s.%N)',
              # srun splits long lines, so base64 goes in short lines, each framed with the node's name
              f'base64 < "$d/out" | sed "s/^/@@{nonce} $SLURMD_NODENAME out /; s/\\$/@@/"',
              f'base64 < "$d/err" | sed "s/^/@@{nonce} $SLURMD_NODENAME err /; s/\\$/@@/"',
              f'printf "@@{nonce} %s rc %s %s %s@@\\n" "$SLURMD_NODENAME" "$rc" "$t0" "$t1"',
              'rm -rf "$d"']
    return ("\n".join(lines) + "\n").encode()


def parse_round(stdout: str, nonce: str) -> dict[str, dict[str, str]]:
    """Per node name: out, err (decoded) and rc, t0, t1 from a round's labelled step output."""
    found: dict[str, dict[str, str]] = {}
    chunks: dict[tuple[str, str], list[str]] = {}
    pattern = re.compile(rf"@@{re.escape(nonce)} (\S+) (out|err|rc) ?(.*)@@$")
    for line in stdout.splitlines():
        m = pattern.search(line)
        if m is None:
            continue
        node, kind, rest = m.groups()
        entry = found.setdefault(node, {})
        if kind == "rc":
            words = rest.split()
            entry["rc"], entry["t0"], entry["t1"] = (words + ["", "", ""])[:3]
        else:
            chunks.setdefault((node, kind), []).append(rest.strip())
    for (node, kind), parts in chunks.items():
        found.setdefault(node, {})[kind] = base64.b64decode("".join(parts)).decode("utf-8", "replace")
    return found


class SlurmSteps:
    """Runs the commands of a group's nodes as srun steps of one allocation, a round at a time."""

    def __init__(self, inventory: "Inventory") -> None:
        assert inventory.allocation is not None
        self.inventory = inventory
        self.job_id = inventory.allocation.job_id
        self._cond = threading.Condition()
        self._members: set[str] = set()
        self._asks: dict[str, _Ask] = {}
        self._tls = threading.local()
        self._unavailable: dict[str, str] | None = None
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    # -- which nodes Slurm will run on --------------------------------------------------------
    def unavailable(self) -> dict[str, str]:
        """Nodes Slurm reports down, drained or not responding, with Slurm's reason (asked once per group)."""
        if self._unavailable is None:
            names = [n.name for n in self.inventory.nodes]
            states = show_nodes(names)
            self._unavailable = {name: why for name, node in states.items() if (why := node.unavailable)}
        return self._unavailable

    # -- rounds -------------------------------------------------------------------------------
    def begin(self, names: Sequence[str]) -> None:
        """These nodes' work is about to run: their asks are gathered into shared steps."""
        with self._cond:
            self._members = set(names)

    def member(self, name: str) -> None:
        """The calling thread works for node `name` (its asks join the round)."""
        self._tls.node = name

    def leave(self, name: str) -> None:
        """Node `name`'s work is done: the round no longer waits for it."""
        self._tls.node = None
        fire = None
        with self._cond:
            self._members.discard(name)
            fire = self._take_round()
        if fire:
            self._run_round(fire)

    def ask(self, node: "Node", command: str, stdin: bytes | None, limit: float) -> CommandResult:
        entry = _Ask(node, command, stdin, limit)
        fire: list[_Ask] | None
        with self._cond:
            if self._closed:
                raise ConnectError(f"{node.name}: the group was closed")
            if getattr(self._tls, "node", None) == node.name and node.name in self._members:
                self._asks[node.name] = entry
                fire = self._take_round()
            else:
                fire = [entry]  # a call outside a round is a step of its own
        if fire:
            self._run_round(fire)
        entry.done.wait()
        if entry.error is not None:
            raise entry.error
        assert entry.result is not None
        return entry.result

    def _take_round(self) -> list[_Ask] | None:
        """Under the lock: the round's asks once every member has asked."""
        if self._asks and set(self._asks) >= self._members:
            asks = list(self._asks.values())
            self._asks.clear()
            return asks
        return None

    def _run_round(self, asks: list[_Ask]) -> None:
        try:
            answers, stderr = self._step(asks)
        except TransportError as exc:
            for a in asks:
                a.error = exc
                a.done.set()
            return
        except AscendctlError as exc:
            for a in asks:
                a.error = TransportError(exc.message, hint=exc.hint)
                a.done.set()
            return
        for a in asks:
            got = answers.get(a.node.name)
            if got is None or "rc" not in got:
                why = stderr.strip().splitlines()[-1] if stderr.strip() else "no answer from the node's task"
                a.error = ConnectError(f"srun step on {a.node.name} gave no answer: {why}",
                                       hint=f"see `scontrol show node {a.node.name}` and `squeue -s -j {self.job_id}`")
            else:
                rc = int(got["rc"]) if got["rc"].lstrip("-").isdigit() else 255
                try:
                    elapsed = float(got["t1"]) - float(got["t0"])
                except ValueError:
                    elapsed = 0.0
                if stopped_at_limit(rc, elapsed, a.limit):
                    a.error = CommandTimeoutError.after(a.limit, got.get("out", ""), got.get("err", ""))
                else:
                    a.result = CommandResult(a.command, rc, got.get("out", ""), got.get("err", ""), elapsed)
            a.done.set()

    def _step(self, asks: list[_Ask]) -> tuple[dict[str, dict[str, str]], str]:
        """One srun step over the asking nodes; the parsed answers per node and srun's stderr."""
        nonce = secrets.token_hex(8)
        names = [a.node.name for a in asks]
        argv = step_argv(self.job_id, names) + ["/bin/sh", "-c", BOOTSTRAP]
        argv[0] = tool("srun")
        limit = max((a.limit for a in asks), default=60.0)
        budget = limit + KILL_GRACE + ANSWER_SLACK + STEP_START_SLACK if limit != float("inf") else None
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=clean_environ(), start_new_session=True)
        with self._cond:
            self._procs.add(proc)
        try:
            out, err = proc.communicate(round_script(asks, nonce), timeout=budget)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        finally:
            with self._cond:
                self._procs.discard(proc)
        return parse_round(out.decode("utf-8", "replace"), nonce), err.decode("utf-8", "replace")

    # -- one node, spawned --------------------------------------------------------------------
    def spawn(self, node: "Node", command: str, stdin: bytes | None) -> "LocalSpawned":
        """`command` as a one-node step whose stdout is read without blocking (a launcher log follow)."""
        from ascendctl.remote.transport.local import LocalSpawned

        argv = step_argv(self.job_id, [node.name], label=False) + ["/bin/sh", "-c", BOOTSTRAP]
        argv[0] = tool("srun")
        program = f"exec sh -c {shlex.quote(command)}\n".encode()
        if stdin is not None:
            # the task's program is its stdin, so the command's own stdin travels inside it, decoded on the node
            data = base64.b64encode(stdin).decode()
            program = f"printf %s {shlex.quote(data)} | base64 -d | sh -c {shlex.quote(command)}\n".encode()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=clean_environ(), start_new_session=True)
        assert proc.stdin is not None
        try:
            proc.stdin.write(program)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        with self._cond:
            self._procs.add(proc)
        return LocalSpawned(proc, self._procs)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            procs = list(self._procs)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


class SlurmNodeTransport:
    """One node of the allocation, reached through its group's srun steps."""

    def __init__(self, node: "Node", steps: SlurmSteps) -> None:
        self.node = node
        self.steps = steps

    def run(self, command: str, *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        why = self.steps.unavailable().get(self.node.name)
        if why is not None:
            raise ConnectError(why, hint=f"see `scontrol show node {self.node.name}`")
        return self.steps.ask(self.node, command, stdin, self.node.command_timeout if timeout is None else timeout)

    def stream(self, command: str, *, on_stdout: Callable[[bytes], None] | None = None,
               on_stderr: Callable[[bytes], None] | None = None, timeout: float | None = None,
               idle: float | None = None, stdin: bytes | None = None) -> CommandResult:
        # `idle` cannot be watched: a step's output arrives at its end (a node Slurm loses ends its step)
        result = self.run(command, timeout=timeout, stdin=stdin)
        if on_stdout is not None and result.stdout:
            on_stdout(result.stdout.encode())
        if on_stderr is not None and result.stderr:
            on_stderr(result.stderr.encode())
        return result

    def spawn(self, command: str, *, stdin: bytes | None = None) -> "LocalSpawned":
        return self.steps.spawn(self.node, command, stdin)

    def put(self, local: Path, remote: str) -> None:
        result = self.run(f"cat > {shlex.quote(remote)}", stdin=local.read_bytes())
        if not result.ok:
            raise TransportError(f"{self.node.name}: cannot write {remote}: {result.stderr.strip()}")

    def get(self, remote: str, local: Path) -> None:
        result = self.run(f"base64 -w0 < {shlex.quote(remote)}")
        if not result.ok:
            raise TransportError(f"{self.node.name}: cannot read {remote}: {result.stderr.strip()}")
        local.write_bytes(base64.b64decode(result.stdout))

    def close(self) -> None:
        return None
