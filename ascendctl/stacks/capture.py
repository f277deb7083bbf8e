"""Take every rank's stack of a running job: one stacks_node.sh per node, all nodes at once, then merge.

The nodes are reached as `status` reaches them (the job record's inventory, `jobs.reach.job_inventory`, one NodeGroup):
first every connection is opened, then every node runs sh/stacks_node.sh over it, so the ranks of all nodes are
signalled within a round trip of each other. Ranks and pids come from the nodes' answers (each process's own
environment), the expected ranks from the job record. Must not import typer or rich.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Sequence

from ascendctl.errors import AscendctlError
from ascendctl.remote.group import NodeGroup
from ascendctl.models import NodeStatus
from ascendctl.remote.scripts import remote
from ascendctl.stacks.hook import SIGNAL_NAME, SIGNAL_NUMBER
from ascendctl.stacks.merge import WAIT_PATTERNS, build_classes, build_tree, judge
from ascendctl.stacks.model import NodeCapture, StacksReport
from ascendctl.stacks.parse import parse_node_answer, rank_stack

if TYPE_CHECKING:
    from ascendctl.jobs.record import JobRecord, NodeJob
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import EventSink
    from ascendctl.remote.transport.base import Transport
    from ascendctl.remote.transport.factory import TransportFactory
    from ascendctl.stacks.flight import FlightReport
    from ascendctl.stacks.parse import NodeAnswer

DEFAULT_WAIT = 2.0  # seconds a node waits for its ranks' dumps after signalling them
PY_SPY_SECONDS = 10.0  # at most this long for py-spy, where the node has it (all ranks at once)
MAX_FILE_BYTES = 256 * 1024  # of each file printed back (a faulthandler dump is at most 100 threads x 100 frames)
MAX_FLIGHT_BYTES = 8 * 1024 * 1024  # of a Flight Recorder dump (launch --flight-recorder): 2000 entries are ~1 MiB
ANSWER_SLACK = 15.0  # seconds on top of the waits for the node's command (connect is bounded on its own)


def take_stacks(record: "JobRecord", inventory: Inventory | None = None, *, wait: float = DEFAULT_WAIT,
                patterns: Sequence[str] = WAIT_PATTERNS, factory: TransportFactory | None = None,
                group: NodeGroup | None = None, on_event: EventSink | None = None) -> StacksReport:
    """Every rank's Python stack of the job, on every node at once, merged into a tree, classes and a verdict.

    `inventory`: how to reach the job's nodes (default: the one the job was launched with, `jobs.reach.job_inventory`);
    `group`: an open NodeGroup over them to reuse (launch's, stop's); `on_event`: each node's start and end of the capture
    (ui.progress). Each node keeps what it took under
    `<node dir>/stacks/<stamp>/`. The job is not stopped: each rank pauses once, for its dump.
    """
    from ascendctl.jobs.reach import job_inventory
    from ascendctl.jobs.ssh_runner import marker

    inv = group.inventory if group is not None else job_inventory(record, inventory)
    own = group is None
    nodes = group if group is not None else NodeGroup(inv, factory=factory)
    stamp = time.strftime("%Y%m%d-%H%M%SZ", time.gmtime())
    nonce = secrets.token_hex(6)
    started = time.monotonic()

    def take(node: Node, transport: Transport) -> NodeAnswer:
        entry = record.node(node.name)
        command, stdin = remote("stacks_node.sh", marker(record.id, node.name), entry.dir, stamp, SIGNAL_NAME, SIGNAL_NUMBER,
                                int(wait * 1000), MAX_FILE_BYTES, nonce, int(PY_SPY_SECONDS * 1000), MAX_FLIGHT_BYTES)
        result = transport.run(command, stdin=stdin, timeout=wait + PY_SPY_SECONDS + ANSWER_SLACK)
        if not result.ok:
            raise AscendctlError(f"stacks_node.sh exited {result.exit_code}: {(result.stderr or result.stdout).strip()[-300:]}")
        try:
            return parse_node_answer(result.stdout, nonce)
        except ValueError as exc:
            raise AscendctlError(str(exc)) from None

    try:
        targets = nodes.nodes([n.name for n in record.nodes])
        failed = {}
        if inv.allocation is None:  # connect first, so that the signals go out together (srun steps have no connection)
            opened = nodes.run(lambda node, transport: None, nodes=targets)
            failed = {r.node: r.error for r in opened if r.error is not None}
        answers = nodes.run(take, nodes=[n for n in targets if n.name not in failed], on_event=on_event).by_node()
    finally:
        if own:
            nodes.close()
    captures = []
    flight: list[tuple[str, bytes]] = []  # launch --flight-recorder: (file on its node, the dump) of each rank
    for entry in record.nodes:
        expected = _expected(entry)
        error = failed.get(entry.name) or (answers[entry.name].error if entry.name in answers else None)
        answer = answers[entry.name].value if entry.name in answers else None
        if entry.name not in inv.names:
            captures.append(NodeCapture(entry.name, error="not in the inventory", expected=expected))
        elif error is not None or answer is None:
            message = error.message if error is not None else "no answer"
            # not reached, or its command stopped at the timeout: the node could not be asked (4); else ascendctl's own (1)
            captures.append(NodeCapture(entry.name, error=message, expected=expected,
                                        unreachable=error is not None and (not error.status.reached
                                                                           or error.status == NodeStatus.TIMEOUT)))
        else:
            flight += _flight_files(entry.name, answer)
            captures.append(_capture(entry.name, answer, expected))
    ranks = [r for c in captures for r in c.ranks]
    classes, verdict = judge(build_classes(ranks, patterns), [(c.node, c.missing) for c in captures if c.missing])
    return StacksReport(record.id, stamp, tuple(captures), build_tree(ranks), classes, verdict,
                        took=time.monotonic() - started, flight=_flight(flight, captures))


def _flight_files(node: str, answer: NodeAnswer) -> list[tuple[str, bytes]]:
    """Takes the Flight Recorder dumps (kind flight-recorder, launch --flight-recorder) out of a node's answer, as
    (`node:path`, bytes): they are lined up across every node's ranks, not read as a rank's stack."""
    found = []
    for rank in answer.ranks:
        dumps = [item for item in rank.files if item.kind == "flight-recorder"]
        rank.files = [item for item in rank.files if item.kind != "flight-recorder"]
        for item in dumps:
            where = f"{node}:{answer.incident or '-'}/rank-{rank.rank}.{rank.pid}.fr.json"
            cut = f" (cut at {MAX_FLIGHT_BYTES} of {item.size} bytes)" if len(item.text.encode()) < item.size else ""
            found.append((where + cut, item.text.encode()))
    return found


def _flight(files: list[tuple[str, bytes]], captures: list[NodeCapture]) -> FlightReport | None:
    """The Flight Recorder dumps lined up (stacks/flight.py); None when no rank had one (no --flight-recorder)."""
    if not files:
        return None
    from ascendctl.stacks.flight import match_files

    expected = None
    if all(c.expected is not None and c.error is None for c in captures):
        expected = [r for c in captures for r in c.expected or ()]
    return match_files(files, expected)


def _expected(entry: "NodeJob") -> tuple[int, ...] | None:
    if entry.first_rank is None or not entry.workers:
        return None
    return tuple(range(entry.first_rank, entry.first_rank + entry.workers))


def _capture(node: str, answer: NodeAnswer, expected: tuple[int, ...] | None) -> NodeCapture:
    """One node's answer as RankStacks: the faulthandler dump where there is one, else py-spy's."""
    ranks = [rank_stack(node, rank, incident=answer.incident, shown_bytes=MAX_FILE_BYTES) for rank in answer.ranks]
    return NodeCapture(node, answer.incident, answer.signalled, answer.py_spy, tuple(sorted(ranks, key=lambda r: r.rank)),
                       expected=expected)


def job_stacks(job_id: str | None, inventory: Inventory | None = None, *, wait: float = DEFAULT_WAIT,
               patterns: Sequence[str] = WAIT_PATTERNS) -> StacksReport:
    """`ascendctl stacks [JOB]`: take_stacks of a recorded job that is running (else an error, exit 1)."""
    import re

    from ascendctl.errors import UsageError
    from ascendctl.jobs.record import JobState, load_job

    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--wait-pattern {pattern!r}: not a regular expression: {exc}") from None
    record = load_job(job_id)
    if record.status != JobState.RUNNING:
        raise AscendctlError(f"job {record.id} is not running ({record.status}): there are no stacks to take",
                             hint=f"`ascendctl status {record.id}` shows how it ended")
    return take_stacks(record, inventory, wait=wait, patterns=patterns)
