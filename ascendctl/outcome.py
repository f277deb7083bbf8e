"""The one policy from outcomes to exit codes: every command reports outcomes, this module turns them into a code.

Commands never pick exit codes by hand: a node's transport status, a check's status, a job's end, a
rank-table problem and an interrupt each map to an Outcome here, and `exit_code_for` applies the
priority of errors.EXIT_CODE_PRIORITY. Imports only errors and models; must not import typer or rich.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable

from ascendctl.errors import ExitCode, stop_exit_code, worst_exit_code
from ascendctl.models import NodeStatus


class Outcome(str, Enum):
    """What happened to one unit of work (a node, a check, a job)."""

    OK = "ok"
    FAILED = "failed"  # it ran and was not OK: a check failed, a command exited non-zero, a rank table is invalid
    UNEVALUATED = "unevaluated"  # it could not be judged: garbage from a tool, an unexpected error on that node
    UNREACHABLE = "unreachable"  # connect, auth, host key, or the node stopped answering
    JOB_FAILED = "job_failed"  # the training job ran and failed
    INTERRUPTED = "interrupted"  # Ctrl-C (SIGINT)
    TERMINATED = "terminated"  # SIGTERM
    HUNG_UP = "hung_up"  # SIGHUP
    ERROR = "error"  # ascendctl could not do its own part (a job record it could not write, or read)


EXIT_CODES: dict[Outcome, ExitCode] = {
    Outcome.OK: ExitCode.OK,
    Outcome.FAILED: ExitCode.CHECKS_FAILED,
    Outcome.UNEVALUATED: ExitCode.CHECKS_FAILED,  # not shown to be good is not good: a CI gate must stop
    Outcome.UNREACHABLE: ExitCode.NODES_UNREACHABLE,
    Outcome.JOB_FAILED: ExitCode.JOB_FAILED,
    Outcome.INTERRUPTED: ExitCode.INTERRUPTED,
    Outcome.TERMINATED: ExitCode.TERMINATED,
    Outcome.HUNG_UP: ExitCode.HANGUP,
    Outcome.ERROR: ExitCode.ERROR,
}


def stop_outcome(signame: str) -> Outcome:
    """The outcome of a run stopped by SIGINT, SIGTERM or SIGHUP (its exit code is 128 + the signal's number)."""
    code = stop_exit_code(signame)
    return next(outcome for outcome, mapped in EXIT_CODES.items() if mapped == code)


def node_outcome(status: NodeStatus) -> Outcome:
    """A node's transport/command status as an outcome."""
    if status == NodeStatus.OK:
        return Outcome.OK
    if status in (NodeStatus.FAILED, NodeStatus.TIMEOUT):
        return Outcome.FAILED  # a command stopped at its limit ran on a node that answered: it failed there
    if status == NodeStatus.ERROR:
        return Outcome.UNEVALUATED
    return Outcome.UNREACHABLE


def exit_code_for(outcomes: Iterable[Outcome]) -> ExitCode:
    """The exit code of a run: the highest-priority code among its outcomes (OK when there are none)."""
    return worst_exit_code([EXIT_CODES[o] for o in outcomes])
