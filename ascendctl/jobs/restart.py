"""Restarts by policy (`launch --restarts N`): after each failed attempt the blame engine's verdict decides what next.

The decision table (docs/launch.md, "Restarts"), from the attempt's record and its verdict (`FirstFailure`):

| the attempt ended                                                   | decision                                   |
|---------------------------------------------------------------------|--------------------------------------------|
| succeeded, or stopped by hand (stop, Ctrl-C, SIGTERM)               | done: no restart                           |
| a node lost while the job ran                                       | replace that node (quarantine it, a spare) |
| HARDWARE on a named node; host OOM on a named node, with evidence   | replace that node                          |
| HANG whose suspect (stacks) is stuck in a device call, on one node  | replace that node (DEVICE_CALLS)           |
| LAUNCH, EXCEPTION, NAN, device OOM: the job's own error             | no restart: exit 6, "do not requeue"       |
| COMM_TIMEOUT, any other HANG, UNKNOWN, host OOM from a bare SIGKILL | restart in place (transient or unattributed) |
| no verdict at all                                                   | restart in place                           |

Replacing a node quarantines it (`inventory/nodestate.py`, reason `<category> in job <id>`) and takes the first spare
(`--spares NODESET`, else the inventory's `@spares` group) that is not quarantined, so the world size stays; without
a spare the job relaunches smaller only with `--allow-shrink`, else it stops. The budget (`N`) is the job's, not a
node's. A job whose highest step (the verdict's progress) did not rise for `no_progress` attempts in a row stops: it
would fail the same way again. Every attempt is a job record of its own (`attempt`, `restart_of`, `decision`), and
every worker gets ASCENDCTL_ATTEMPT, and with `--checkpoint-dir DIR` ASCENDCTL_RESUME_FROM, the newest complete
checkpoint there (jobs/checkpoints.py; one being written or cut short is skipped and named). Must not import typer
or rich.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable

from ascendctl.errors import ExitCode, UsageError, signal_name
from ascendctl.jobs.checkpoints import RESUME_ENV
from ascendctl.jobs.record import JobState
from ascendctl.models import EndKind, NodeEnd

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, RestartSettings
    from ascendctl.jobs.checkpoints import ResumePoint
    from ascendctl.jobs.plan import LaunchOptions
    from ascendctl.jobs.record import FirstFailure, JobRecord
    from ascendctl.jobs.service import LaunchOutcome

DEFAULT_BACKOFF = 10.0  # seconds before the first relaunch; doubled each time, at most MAX_BACKOFF
MAX_BACKOFF = 300.0
DEFAULT_NO_PROGRESS = 3  # attempts in a row without a higher step: hopeless
ATTEMPT_ENV = "ASCENDCTL_ATTEMPT"
USER_ERRORS = ("LAUNCH", "EXCEPTION", "NAN")
STOPPED_BY_USER = "stopped by the user (`ascendctl stop`)"
# Device calls (docs/launch.md, "Restarts"): regular expressions over `file:function` of the frame a HANG's suspect rank is
# stuck in (the stacks verdict's innermost frame of the suspect, as the blame engine's rule `stacks` records it). A rank
# that stays in one while the others wait in a collective has a device (NPU or GPU) or its driver that stopped
# answering: a fault of its node. Python frames (faulthandler) and native ones (py-spy --native) alike.
DEVICE_CALLS: tuple[str, ...] = (
    # Ascend NPU: torch_npu's and MindSpore's synchronize/wait, AscendCL (acl*) and the runtime (rt*) underneath
    r"torch_npu/npu/[\w/]*\.py:(synchronize|wait\w*|query)$",
    r"mindspore/(runtime|hal)/(stream|event|device)\.py:(synchronize|wait\w*|query)$",
    r":(acl(rt|op|nn)?[A-Z]\w*|rt(Stream|Event|Device|Model|Memcpy|Malloc)\w*)$",
    r"(libascendcl|libruntime|libacl_op_compiler|libge_runner|libascend_hal)\.so[.\d]*:",
    # NVIDIA CUDA: torch.cuda's synchronize/wait, the runtime (cuda*) and driver (cu*) APIs
    r"torch/cuda/[\w/]*\.py:(synchronize|wait\w*|query)$",
    r":(cuda[A-Z]\w*|cu[A-Z][a-z]\w*)$",
    r"(libcuda|libcudart)\.so[.\d]*:",
    # HCCL and NCCL inside the device library itself (their API calls are collective waits: stacks/merge.WAIT_PATTERNS)
    r"(libhccl\w*|libnccl)\.so[.\d]*:",
)


class Decision(str, Enum):
    DONE = "done"  # succeeded, or stopped by hand
    RESTART = "restart"  # in place, on the same nodes
    REPLACE = "replace"  # quarantine a node, relaunch with a spare (or smaller with --allow-shrink)
    NO_RESTART = "no_restart"  # the job's own error: a restart fails the same way (exit 6: do not requeue)
    GIVE_UP = "give_up"  # the budget is spent, no spare, or no progress across attempts


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """`launch --restarts N [--restart-backoff S] [--spares NODESET] [--allow-shrink] [--no-progress-attempts K]`."""

    restarts: int
    backoff: float = DEFAULT_BACKOFF
    spares: str | None = None  # a node set; None: the inventory's @spares group
    allow_shrink: bool = False
    no_progress: int = DEFAULT_NO_PROGRESS
    checkpoint_dir: str | None = None  # --checkpoint-dir: where the job keeps its checkpoints (on the nodes)


def policy_for(section: RestartSettings | None, *, restarts: int | None = None, backoff: float | None = None,
               spares: str | None = None, allow_shrink: bool | None = None, no_progress: int | None = None,
               checkpoint_dir: str | None = None) -> RestartPolicy | None:
    """The restart policy: each flag given (not None) wins over the inventory's `restart:` key, then the built-in default.

    None when no restart is asked (0 restarts). UsageError for a restart option without restarts: given as a flag it
    would be ignored silently (in the inventory it is the policy of later launches with `--restarts N`)."""
    def key(name: str) -> Any:
        return getattr(section, name) if section is not None else None

    count = restarts if restarts is not None else (key("restarts") or 0)
    if not count:
        given = [flag for flag, value in (("--spares", spares), ("--allow-shrink", allow_shrink),
                                          ("--checkpoint-dir", checkpoint_dir)) if value]
        if given:
            off = " (--restarts 0 turns off the inventory's restart.restarts)" if key("restarts") else ""
            raise UsageError(f"{', '.join(given)} need{'s' if len(given) == 1 else ''} --restarts N{off}",
                             hint="or set `restart: {restarts: N}` in the inventory")
        return None

    def chosen(flag: Any, name: str, default: Any) -> Any:
        return flag if flag is not None else key(name) if key(name) is not None else default

    return RestartPolicy(count, chosen(backoff, "backoff", DEFAULT_BACKOFF), spares,
                         chosen(allow_shrink, "allow_shrink", False),
                         chosen(no_progress, "no_progress_attempts", DEFAULT_NO_PROGRESS),
                         chosen(checkpoint_dir, "checkpoint_dir", None))


def restarts_asked_by(section: RestartSettings | None, restarts: int | None) -> str:
    """Who asked for restarts, for a message that refuses them: the flag, or the inventory's key (its file and line),
    which a user who gave no flag would not otherwise think of."""
    if restarts is not None or section is None or section.restarts is None:
        return f"--restarts {restarts}"
    return f"{section.where}.restarts = {section.restarts}"


@dataclass(frozen=True, slots=True)
class Choice:
    """What to do after an attempt, and why (shown and recorded)."""

    decision: Decision
    why: str
    node: str | None = None  # the node to replace


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt: its job, its nodes, how it ended, its highest step, and what was decided after it."""

    number: int
    job_id: str
    nodes: tuple[str, ...]
    status: str
    headline: str | None
    step: int | None
    choice: Choice

    def to_dict(self) -> dict[str, object]:
        return {"attempt": self.number, "job": self.job_id, "nodes": list(self.nodes), "status": self.status,
                "verdict": self.headline, "step": self.step, "decision": self.choice.decision.value,
                "why": self.choice.why, "node": self.choice.node}


@dataclass(frozen=True, slots=True)
class RestartOutcome:
    """Every attempt, and the last one's outcome."""

    attempts: tuple[Attempt, ...]
    last: LaunchOutcome
    notes: tuple[str, ...] = field(default=())

    @property
    def exit_code(self) -> ExitCode:
        """The last attempt's; 6 (do not requeue) when it ended on the job's own error."""
        return ended_exit_code(self.attempts[-1].choice.decision if self.attempts else None, self.last.exit_code)


def ended_exit_code(last_decision: Decision | None, last_code: ExitCode) -> ExitCode:
    """The exit code of a restart loop that has ended: its last attempt's, or 6 (do not requeue) when its last decision
    was not to restart (the job's own error: a restart, or a requeue, fails the same way). `launch` and `status` both."""
    return ExitCode.DO_NOT_REQUEUE if last_decision == Decision.NO_RESTART else last_code


@dataclass(frozen=True, slots=True)
class LoopSpec:
    """What the supervisor of `launch --detach --restarts N` needs to run the restart loop: the nodes allowed (spares
    included), the command line's connection settings, the launch options as given (no attempt's variables yet), the
    policy, and whether to preflight a relaunch and take the stacks before a stop. Handed to it on its stdin, never in
    its command line or a file: `--env NAME=VALUE` may hold a secret."""

    inventory: str  # the inventory's source, loaded again by the supervisor (jobs/reach.recorded_inventory)
    nodes: tuple[str, ...]
    flags: dict[str, Any]
    options: LaunchOptions
    policy: RestartPolicy
    preflight: bool = True
    stacks: bool = True

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "LoopSpec":
        """The spec as `to_json` wrote it (a ValueError when it is not one)."""
        from ascendctl.jobs.pace import HangTimeout
        from ascendctl.jobs.plan import LaunchOptions
        from ascendctl.jobs.supervise import HangPolicy

        try:
            raw = json.loads(data)
            opts = dict(raw["options"])
            hang = opts.pop("hang")
            if hang is not None:
                hang = HangPolicy(**{**hang, "timeout": HangTimeout(**hang["timeout"])})
            options = LaunchOptions(**{**opts, "script": tuple(opts["script"]), "env": tuple(opts["env"]), "hang": hang})
            return cls(raw["inventory"], tuple(raw["nodes"]), dict(raw["flags"]), options, RestartPolicy(**raw["policy"]),
                       bool(raw["preflight"]), bool(raw["stacks"]))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a restart loop's spec: {exc}") from None


def decide(record: JobRecord) -> Choice:
    """The decision table above, for one attempt's record (its status, nodes and verdict)."""
    if record.status == JobState.SUCCEEDED:
        return Choice(Decision.DONE, "the job succeeded")
    if record.status == JobState.STOPPED:
        return Choice(Decision.DONE, f"{STOPPED_BY_USER}: not restarted")
    if record.status == JobState.INTERRUPTED or record.stopped_by:
        return Choice(Decision.DONE, "stopped by hand: not restarted")
    lost = [n.name for n in record.nodes if NodeEnd.of_recorded(n.exit_code, n.error).kind == EndKind.LOST]
    if lost:
        return Choice(Decision.REPLACE, f"node {lost[0]} was lost while the job ran", lost[0])
    failure = record.first_failure
    if failure is None or failure.category is None:
        return Choice(Decision.RESTART, "it failed without a verdict: restarted in place")
    category, node = failure.category, failure.node
    headline = failure.headline or category
    if category == "OOM":
        if failure.oom_kind != "host":
            return Choice(Decision.NO_RESTART, f"{headline}: the job's own memory use; a restart would fail the same way")
        if node and failure.confidence != "low":
            return Choice(Decision.REPLACE, f"{headline}: the node ran out of memory", node)
        return Choice(Decision.RESTART, f"{headline} (a SIGKILL without a kernel record: maybe transient): restarted in place")
    if category in USER_ERRORS:
        return Choice(Decision.NO_RESTART, f"{headline}: the job's own error; a restart would fail the same way")
    if category == "HARDWARE" and node:
        return Choice(Decision.REPLACE, f"{headline}: a fault of the node", node)
    stuck = suspect_frame(failure) if category == "HANG" else None
    if stuck is not None and node and device_call(stuck):
        return Choice(Decision.REPLACE, f"{headline}: its rank is stuck in a device call ({stuck}) while the others wait: "
                                        "a fault of the node", node)
    return Choice(Decision.RESTART, f"{headline}: transient or unattributed: restarted in place")


def device_call(frame: str) -> bool:
    """Whether `file:function` of a frame is a device call (DEVICE_CALLS)."""
    return any(re.search(pattern, frame) for pattern in DEVICE_CALLS)


def suspect_frame(failure: FirstFailure) -> str | None:
    """`file:function` of the frame a HANG's suspect rank is stuck in, from the verdict of the blame engine's rule
    `stacks` (triage/engine.rule_stacks: the frame's file and line as the evidence, and the text `<ranks> at
    <file>:<line> in <function>, not in a collective ...`); None for any other verdict."""
    if failure.rule != "stacks" or not failure.file or not failure.text:
        return None
    where = f" at {failure.file}:{failure.line} in " if failure.line else f" at {failure.file} in "
    start, end = failure.text.find(where), failure.text.rfind(", not in a collective")
    if start < 0 or end < start + len(where):
        return None
    return f"{failure.file}:{failure.text[start + len(where):end]}"


EVIDENCE_CUT = 400  # characters of the log line kept as a quarantine's evidence


def evidence_of(choice: Choice, record: JobRecord) -> str:
    """A replaced node's evidence, as `ascendctl nodes` shows it: the decision's why and the verdict's own line (its
    file:line and text), on one line of plain text (a log line's control characters dropped)."""
    from ascendctl.paths import hidden_char

    failure = record.first_failure
    if failure is None or not failure.text or failure.node != choice.node:
        return choice.why
    line = "".join(c if hidden_char(c) is None else " " for c in failure.text).strip()
    where = f"{failure.file}:{failure.line}: " if failure.file and failure.line else ""
    cut = line if len(line) <= EVIDENCE_CUT else line[:EVIDENCE_CUT] + " [...]"
    return f"{choice.why}; {where}{cut}"


def spare_names(inventory: Inventory, policy: RestartPolicy) -> tuple[str, ...]:
    """The spares: --spares, else the inventory's @spares group (in inventory order); UsageError for unknown nodes."""
    from ascendctl.inventory.nodestate import SPARES_GROUP
    from ascendctl.inventory.selection import select_nodes

    if policy.spares:
        return tuple(select_nodes(inventory, policy.spares).names)
    return tuple(n for n in inventory.names if n in set(inventory.groups.get(SPARES_GROUP, ())))


def run_with_restarts(inventory: Inventory, options: LaunchOptions, policy: RestartPolicy, *,
                      launch: Callable[[Inventory, LaunchOptions], LaunchOutcome],
                      quarantine: Callable[[str, str, str], None],
                      save: Callable[[JobRecord], object],
                      notice: Callable[[str], None],
                      sleep: Callable[[float], None] = time.sleep,
                      find_resume: Callable[[Inventory], ResumePoint] | None = None,
                      follow: Callable[[], LaunchOutcome] | None = None,
                      stopped: Callable[[str], str | None] | None = None) -> RestartOutcome:
    """Launch, and after each failed attempt do what `decide` says, within the policy's budget.

    `inventory`: the nodes allowed (quarantined ones already left out); the spares among them wait. `launch(nodes,
    options)` runs one attempt to its end; `quarantine(node, reason, evidence)` records a replaced node; `save` writes
    an attempt's record with its attempt fields; `find_resume(nodes)`: with --checkpoint-dir, the newest complete
    checkpoint (jobs/checkpoints.py), given to every worker as ASCENDCTL_RESUME_FROM.

    `launch --detach`: the launch's `launch` returns attempt 1 started and detached: the loop ends there, handed over to
    the job's supervisor, which runs it again with `follow()`: attempt 1 (already running) followed to its end.
    `stopped(first_id)`: why the loop was stopped from outside (`ascendctl stop`), or None; asked after each backoff
    (`sleep` may return early for it), so that no attempt starts after a stop."""
    from ascendctl.inventory.selection import select_nodes

    spares = list(spare_names(inventory, policy))
    active = [n for n in inventory.names if n not in spares]
    if not active:
        raise UsageError("every node is a spare: nothing to run the job on", hint="--spares names the nodes held back")
    attempts: list[Attempt] = []
    best: int | None = None
    stalled = 0
    backoff = policy.backoff
    first_id: str | None = None
    scan = find_resume if policy.checkpoint_dir else None  # with --checkpoint-dir: the directory's newest checkpoint
    resumed: ResumePoint | None = None  # the checkpoint the attempt about to run resumes from (--checkpoint-dir)
    while True:
        number = len(attempts) + 1
        nodes = select_nodes(inventory, names=active)
        if number == 1 and scan is not None and follow is None:  # (followed: attempt 1 is running)
            resumed = scan(nodes)
        if number == 1 and follow is not None:  # started detached: the supervisor follows it to its end
            outcome = follow()
        else:
            outcome = launch(nodes, _attempt_options(number, options, resumed, policy.checkpoint_dir, notice))
            if outcome.detached:  # launch --detach: attempt 1 runs; its supervisor runs this loop from here
                return RestartOutcome(tuple(attempts), outcome)
        record = outcome.record
        first_id = first_id or record.id
        step = _highest_step(outcome)
        choice = decide(record)
        if outcome.interrupted:
            choice = Choice(Decision.DONE, "stopped by hand: not restarted")
        elif choice.decision in (Decision.RESTART, Decision.REPLACE) and stopped is not None and stopped(first_id):
            choice = Choice(Decision.DONE, f"{STOPPED_BY_USER}: not restarted")
        newest: ResumePoint | None = None  # with --checkpoint-dir: the newest complete checkpoint after this attempt
        if choice.decision in (Decision.RESTART, Decision.REPLACE):
            left = [n for n in nodes.names if n != choice.node]  # the scan runs on a node that is not being replaced
            if scan is not None and left:
                newest = scan(select_nodes(inventory, names=left))
            # progress: a higher step logged, or a newer complete checkpoint than the one the attempt resumed from (an
            # attempt that resumes and dies before its first step logs none); neither known: the budget bounds it
            saved_more = (newest is not None and newest.problem is None and newest.path is not None
                          and newest.path != (resumed.path if resumed is not None else None))
            stepped = step is not None and (best is None or step > best)
            if stepped:
                best = step
            if stepped or saved_more:
                stalled = 0
            elif step is not None or (newest is not None and newest.problem is None):
                stalled += 1
            if len(attempts) >= policy.restarts:
                choice = Choice(Decision.GIVE_UP, f"{choice.why}; but the {policy.restarts} restart(s) allowed are spent")
            elif stalled >= policy.no_progress:
                at = f"step {best}" if best is not None else "its first step"
                if newest is not None and newest.path is not None:
                    at += f" or checkpoint {newest.path}"
                choice = Choice(Decision.GIVE_UP, f"{choice.why}; but no progress beyond {at} in {stalled} attempts in a "
                                                  "row: it would fail the same way again")
        if choice.decision == Decision.REPLACE and choice.node is not None:
            quarantine(choice.node, f"{(record.first_failure.category if record.first_failure else None) or 'LOST'} "
                                    f"in job {record.id}", evidence_of(choice, record))
            active = [n for n in active if n != choice.node]
            free = [s for s in spares if s not in active and s != choice.node]
            if free:
                active = [n for n in inventory.names if n in set(active) | {free[0]}]
                spares.remove(free[0])
                choice = replace(choice, why=f"{choice.why}: quarantined, replaced by spare {free[0]}")
            elif policy.allow_shrink and active:
                choice = replace(choice, why=f"{choice.why}: quarantined; no spare left, relaunched on {len(active)} nodes "
                                             "(--allow-shrink)")
            else:
                choice = Choice(Decision.GIVE_UP, f"{choice.why}: quarantined; no spare left (--spares, @spares) and "
                                                  "--allow-shrink not given", choice.node)
        again = choice.decision in (Decision.RESTART, Decision.REPLACE)
        saved = replace(record, attempt=number, restart_of=first_id if number > 1 else None,
                        decision=f"{choice.decision.value}: {choice.why}", restart_at=time.time() + backoff if again else None)
        save(saved)
        attempts.append(Attempt(number, record.id, tuple(nodes.names), record.status,
                                record.first_failure.headline if record.first_failure else None, step, choice))
        outcome = replace(outcome, record=saved)
        if not again:
            return RestartOutcome(tuple(attempts), outcome)
        notice(f"attempt {number} of job {first_id} {record.status}: {choice.why}; attempt {number + 1} in {backoff:g} s")
        by_signal: str | None = None
        try:
            sleep(backoff)
            why = stopped(first_id) if stopped is not None else None
        except KeyboardInterrupt as stop:  # Ctrl-C (or SIGTERM/SIGHUP) between attempts: nothing runs; stop here
            by_signal = signal_name(stop)
            why = f"stopped by {by_signal}"
        if why is not None:  # the record says so: no attempt is due any more
            choice = Choice(Decision.DONE, f"{why} while it waited to start attempt {number + 1}: not restarted "
                                           f"(it had decided: {choice.decision.value}: {choice.why})")
            saved = replace(saved, decision=f"{choice.decision.value}: {choice.why}", restart_at=None)
            save(saved)
            attempts[-1] = replace(attempts[-1], choice=choice)
            notice(f"job {first_id}: {choice.why}")
            return RestartOutcome(tuple(attempts), replace(outcome, record=saved, interrupted=by_signal is not None,
                                                           stopped_by=by_signal))
        backoff = min(backoff * 2, MAX_BACKOFF)
        if scan is not None:  # the next attempt resumes from what the scan after this one found
            resumed = newest if newest is not None else scan(select_nodes(inventory, names=active))


def _attempt_options(number: int, options: LaunchOptions, point: ResumePoint | None, directory: str | None,
                     notice: Callable[[str], None]) -> LaunchOptions:
    """Attempt `number`'s options: ASCENDCTL_ATTEMPT, and with --checkpoint-dir (`point`: the scan's answer)
    ASCENDCTL_RESUME_FROM (said)."""
    env: tuple[str, ...] = (*options.env, f"{ATTEMPT_ENV}={number}")
    if point is not None:
        skipped = "; ".join(f"{name}: {why}" for name, why in point.skipped)
        if point.path:
            env = (*env, f"{RESUME_ENV}={point.path}")
            notice(f"attempt {number} resumes from {point.path}" + (f" (skipped: {skipped})" if skipped else ""))
        else:
            notice(f"attempt {number}: no complete checkpoint in {directory}"
                   + (f" ({point.problem})" if point.problem else "") + (f" (skipped: {skipped})" if skipped else ""))
    return replace(options, env=env)


def _highest_step(outcome: LaunchOutcome) -> int | None:
    """The highest training step any rank logged in this attempt (the verdict's per-rank progress), if known."""
    if outcome.verdict is None:
        return None
    steps = [r.last_step for r in outcome.verdict.ranks if r.last_step is not None]
    return max(steps) if steps else None


__all__ = ["ATTEMPT_ENV", "DEVICE_CALLS", "STOPPED_BY_USER", "Attempt", "Choice", "Decision", "LoopSpec", "RestartOutcome",
           "RestartPolicy", "decide", "ended_exit_code",
           "device_call", "run_with_restarts", "spare_names", "suspect_frame"]
