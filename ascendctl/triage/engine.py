"""The blame engine: a model of the job (facts per rank), then culprit inference by an ordered rule table.

Facts come from the findings (extract.py), the launcher's job record and the tails of the logs:
per rank its first own error, its communication errors and the peer each names, its exit from
every launcher report, whether its launcher stopped it, and its last training step. The rules in
RULES are tried in order; the first that names a culprit (or decides there is no single one)
gives the verdict. `launch` and `triage` both call `decide`: one engine, one answer.
Pure; must not import typer or rich.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ascendctl.triage.signatures import Category, hint_of, is_at_end, is_node_wide, meaning_of
from ascendctl.triage.extract import HALVINGS_TO_COLLAPSE, PROGRESS_RX, device_scope
from ascendctl.triage.model import STOP_SIGNALS, Finding, RankSummary, TriageReport, Victim, signal_of
from ascendctl.triage.times import NO_YEAR, from_epoch, seconds, with_year
from ascendctl.models import EndKind, NodeEnd
from ascendctl.bundle.layout import JOB as JOB_FILE

if TYPE_CHECKING:
    from ascendctl.ranktable import RankPlace
    from ascendctl.stacks.incident import CaptureJudgement
    from ascendctl.triage.extract import Extraction, InitEntry, Progress

# Which categories win when two own errors cannot be ordered: causes before their usual consequences.
PRIORITY = (Category.HARDWARE, Category.OOM, Category.LAUNCH, Category.NAN, Category.EXCEPTION, Category.UNKNOWN,
            Category.COMM_TIMEOUT)
SAME_MOMENT = 1.0
FINE_MOMENT = 0.001  # for times with sub-second digits (launch stamps, glog, plog)
# own errors that describe ranks disagreeing with each other: the rank that noticed is not the one that diverged
DISAGREEMENTS = ("collective.mismatch", "hccl.inconsistent_args", "launch.duplicate_device")
WATCHDOG_ABORTS = ("nccl.watchdog_timeout", "torch.dist_backend_error")  # seconds: errors this close cannot be ordered by their timestamps
NETWORK_HINTS = (
    "every rank failed in communication at about the same time and none failed before: suspect the data path, not a rank",
    "check the MTU on every hop (`ascendctl preflight --only mtu,path_mtu`), switch ports and links "
    "(`hccn_tool -i N -link -g`, `ibstat`), and that no firewall drops traffic between nodes",
    "rerun with a smaller set of nodes, or `ascendctl netcheck`, to find a slow or broken link",
)
HINTS = {
    Category.COMM_TIMEOUT: (
        "start from the rank named above: the timeouts on the other ranks are usually its victims",
        "check the MTU on every hop (`ascendctl preflight --only mtu,path_mtu`) and that no firewall drops traffic between nodes",
        "raise HCCL_CONNECT_TIMEOUT (link setup) or HCCL_EXEC_TIMEOUT (collectives) only if some ranks are just slow to arrive",
    ),
    Category.OOM: (
        "enable recompute (activation checkpointing) to trade compute for memory",
        "lower micro_batch_num / the micro batch size, or the global batch size",
        "shard more: ZeRO stage, tensor/pipeline parallel size; for host OOM lower dataloader workers",
    ),
    Category.NAN: (
        "check the mixed-precision config: prefer bf16, or keep fp16 with a dynamic loss scale and a sane minimum",
        "check the loss scale history and lower the learning rate or enable gradient clipping",
        "look for bad samples in the batch the first NaN step read",
    ),
    Category.HARDWARE: (
        "drain the node named above and check it: `npu-smi info -t health`, `hccn_tool -i N -link -g`, dmesg",
        "rerun without that node; report the device for replacement if the error repeats",
    ),
    Category.LAUNCH: (
        "fix the launch environment on the node named above (ports, Python modules, devices, rank table) and relaunch",
        "`ascendctl preflight` checks ports, devices, versions and the rank table before a launch",
    ),
    Category.EXCEPTION: (
        "the other ranks only lost their peer: fix the error on the rank named above, not the network",
        "reproduce on one node with the same data shard if the error depends on input",
    ),
    Category.UNKNOWN: ("no rank shows an error of its own: read the last lines of each rank's log",),
    Category.HANG: (
        "while a job hangs, take the stacks twice a minute apart (`ascendctl stacks JOB`): a rank that moved was slow, "
        "one in the same place is stuck",
        "`launch --hang-timeout` notices a hang in minutes and takes every rank's stack before the collective timeout ends it",
    ),
}


# ---------------------------------------------------------------------------------------------- facts


@dataclass(slots=True)
class Exit:
    """How one rank (or one node's launcher) ended, from a launcher report or the job record."""

    code: int | None
    signal: str | None
    time: str | None
    source: Finding | None  # the report line; None for the job record
    by_launcher: bool = False  # stopped by its launcher / ascendctl's teardown, not by its own failure
    lost: str | None = None  # ascendctl lost the node (unreachable) instead of seeing its launcher end

    @property
    def abnormal(self) -> bool:
        return (self.code is not None and self.code != 0) or self.signal is not None


@dataclass(slots=True)
class Actor:
    """One rank, or one node's launcher (`rank` None), or text that says nothing of where it came from (both None)."""

    node: str | None
    rank: int | None
    local: int | None = None  # a local rank whose global rank is unknown (no job record, no pairing line)
    own: list[Finding] = field(default_factory=list)
    consequences: list[Finding] = field(default_factory=list)  # own errors after its first communication error
    generic: list[Finding] = field(default_factory=list)
    comm: list[Finding] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    stops: list[Finding] = field(default_factory=list)
    progress: Progress | None = None

    @property
    def key(self) -> tuple[str | None, int | None, int | None]:
        return (self.node, self.rank, self.local)

    def label(self) -> str:
        parts = [f"node {self.node}" if self.node else "", f"rank {self.rank}" if self.rank is not None else "",
                 f"local rank {self.local}" if self.local is not None else ""]
        return ", ".join(p for p in parts if p) or "an unattributed log"

    def first_exit(self) -> Exit | None:
        bad = [e for e in self.exits if e.abnormal]
        return min(bad, key=lambda e: e.time or "9999") if bad else None


@dataclass(slots=True)
class Facts:
    """Every actor of the job, the ranks it should have had, and how to map addresses to nodes."""

    actors: dict[tuple[str | None, int | None, int | None], Actor]
    universe: set[int]  # ranks the job had (job record), else the ranks seen
    addresses: dict[str, str]
    findings: list[Finding]
    teardown_time: str | None = None
    order: dict[str, int] = field(default_factory=dict)  # file -> read order
    capture: CaptureJudgement | None = None  # the newest `stacks` capture: every rank's stack while the job hung
    homes: dict[int, set[str]] = field(default_factory=dict)  # rank -> nodes the job record, launchers or findings put it on
    init_entries: dict[tuple[str | None, int], InitEntry] = field(default_factory=dict)  # (node, rank) -> its HCCL init entry

    def actor(self, node: str | None, rank: int | None, local: int | None = None) -> Actor:
        key = (node, rank, local if rank is None else None)
        if key not in self.actors:
            self.actors[key] = Actor(*key)
        return self.actors[key]

    def of(self, f: Finding) -> Actor:
        """The actor a finding belongs to."""
        return self.actor(f.node, f.rank, f.local_rank)

    def ranked(self) -> list[Actor]:
        return [a for a in self.actors.values() if a.rank is not None]

    def node_of_rank(self, rank: int) -> str | None:
        """The one node this rank ran on: where its findings were, else where the job record or a launcher put it."""
        nodes = {a.node for a in self.actors.values() if a.rank == rank and a.node} or self.homes.get(rank, set())
        return next(iter(nodes)) if len(nodes) == 1 else None

    def sort_key(self, f: Finding) -> tuple[int, str, int, int]:
        """Time first; untimed findings after timed ones, then read order and line (a paste's lines are in time order;
        an untimed summary printed as the step ends stands for no line: it goes first of its file)."""
        return (0 if f.time else 1, f.time or "", self.order.get(f.file, 0), _place(f))

    def before(self, a: Finding, b: Finding) -> bool:
        """Is `a` known to have happened before `b`? Whole-second times closer than SAME_MOMENT cannot tell."""
        if a.time and b.time:
            ta, tb = seconds(a.time), seconds(b.time)
            fine = not a.time.endswith(".000000") and not b.time.endswith(".000000")
            if ta is not None and tb is not None and abs(ta - tb) >= (FINE_MOMENT if fine else SAME_MOMENT):
                return ta < tb
            if a.file != b.file:
                return False
        if a.file == b.file:
            return _place(a) < _place(b)
        return False

    def earliest(self, items: Iterable[Finding]) -> Finding | None:
        return min(items, key=lambda f: (self.sort_key(f), PRIORITY.index(f.category)), default=None)


def _place(f: Finding) -> int:
    """Where a finding stands in its file as evidence of order: its line, but none (0) for an untimed summary its
    emitter prints when the step ends (`Signature.at_end`), which says nothing of when the thing it counts happened."""
    return 0 if not f.time and is_at_end(f.signature) else f.line


def _fill_years(findings: list[Finding]) -> list[Finding]:
    """Give year-less times (syslog, glog) the latest year seen elsewhere, so they sort with the rest."""
    years = [f.time[:4] for f in findings if f.time and not f.time.startswith(NO_YEAR)]
    if not years:
        return findings
    year = max(years)
    return [replace(f, time=with_year(f.time, year)) if f.time and f.time.startswith(NO_YEAR) else f for f in findings]


def _inherit_times(findings: list[Finding]) -> list[Finding]:
    """An untimed line (a traceback) takes the time of the timed line before it in the same file, else the one after."""
    by_file: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_file.setdefault(f.file, []).append(i)
    out = list(findings)
    for indexes in by_file.values():
        indexes.sort(key=lambda i: findings[i].line)
        last: str | None = None
        pending: list[int] = []
        for i in indexes:
            f = findings[i]
            if f.time:
                last = f.time
                for j in pending:  # lines before the file's first time: they happened no later than it
                    out[j] = replace(findings[j], time=last, time_source="inherited")
                pending = []
            elif last is not None:
                out[i] = replace(f, time=last, time_source="inherited")
            else:
                pending.append(i)
    return out


def _job_facts(job: Mapping[str, Any] | None) -> tuple[dict[tuple[str, int], int], set[int], dict[str, str], list[tuple[str, Exit]], str | None]:
    """From a job record: local->global rank map, the rank universe, addresses of nodes, and each launcher's exit."""
    local_map: dict[tuple[str, int], int] = {}
    universe: set[int] = set()
    addresses: dict[str, str] = {}
    exits: list[tuple[str, Exit]] = []
    if not job:
        return local_map, universe, addresses, exits, None
    teardown = job.get("teardown_started")
    nodes = job.get("nodes") or []
    for entry in nodes:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"]
        offset = entry.get("utc_offset") if isinstance(entry.get("utc_offset"), int) else None
        for key in ("host",):
            if isinstance(entry.get(key), str):
                addresses[entry[key]] = name
        env: dict[str, Any] = entry["env"] if isinstance(entry.get("env"), dict) else {}
        for key in ("HCCL_IF_IP", "NCCL_IF_IP"):
            if isinstance(env.get(key), str):
                addresses[env[key]] = name
        if isinstance(entry.get("address"), str):
            addresses[entry["address"]] = name
        workers, first = entry.get("workers"), entry.get("first_rank")
        if isinstance(workers, int) and isinstance(first, int):
            for local in range(workers):
                local_map[(name, local)] = first + local
                universe.add(first + local)
        code, ended = entry.get("exit_code"), entry.get("ended")
        signal = entry.get("signal") if isinstance(entry.get("signal"), str) else None
        when = from_epoch(float(ended), offset) if isinstance(ended, (int, float)) else None
        error = entry.get("error") if isinstance(entry.get("error"), str) else None
        lost = error if NodeEnd.of_recorded(code, error).kind == EndKind.LOST else None
        if isinstance(code, int) or signal or lost:
            exits.append((name, Exit(code if isinstance(code, int) else None, signal_of(code) if isinstance(code, int) else None,
                                     when, None, by_launcher=signal is not None and not lost, lost=lost)))
    teardown_time = from_epoch(float(teardown)) if isinstance(teardown, (int, float)) else None
    return local_map, universe, addresses, exits, teardown_time


def build_facts(ex: Extraction) -> Facts:
    """Join pids and local ranks, complete times, and group every finding under the rank (or node) it belongs to."""
    local_map, universe, job_addresses, job_exits, teardown_time = _job_facts(ex.job)
    for (seen_on, local), global_rank in ex.local_ranks.items():
        if seen_on is not None:
            local_map.setdefault((seen_on, local), global_rank)
    findings = _inherit_times(_fill_years(list(ex.findings)))
    joined = []
    for f in findings:
        rank: int | None = f.rank
        if rank is None and f.local_rank is not None and f.node is not None:
            rank = local_map.get((f.node, f.local_rank))
        if rank is None and f.pid is not None:
            known = ex.pid_ranks.get((f.node, f.pid))
            if known is None and f.node is None:  # a loose log: a pid seen anywhere
                known = next((v for (_, pid), v in ex.pid_ranks.items() if pid == f.pid), None)
            if known is not None and known[0] is not None:
                rank = known[0]
                if f.device is None and known[1] is not None:
                    f = replace(f, device=known[1])
        joined.append(replace(f, rank=rank) if rank != f.rank else f)
    addresses = {**ex.addresses, **job_addresses}
    table_pairs, table_homes = _rank_table_places(ex.rank_places, addresses,
                                                  {f.node for f in joined if f.node is not None} | {n for n, _ in local_map})
    device_ranks = dict(ex.device_ranks)
    for key, ranks in table_pairs.items():
        device_ranks[key] = device_ranks.get(key, set()) | ranks
    joined = _ranks_from_devices(joined, device_ranks)
    if not universe and ex.rank_places:  # no job record: the rank table says how many ranks the job had
        universe = {p.rank for p in ex.rank_places}
    # a rank named without a node: the node where that rank was seen, when only one was
    nodes_of: dict[int, set[str]] = {rank: set(homes) for rank, homes in table_homes.items()}
    for f in joined:
        if f.rank is not None and f.node is not None:
            nodes_of.setdefault(f.rank, set()).add(f.node)
    for (node, _), rank in local_map.items():
        nodes_of.setdefault(rank, set()).add(node)
    for rank, homes in ex.rank_homes.items():
        nodes_of.setdefault(rank, set()).update(homes)
    joined = [replace(f, node=next(iter(nodes_of[f.rank]))) if f.node is None and f.rank is not None
              and len(nodes_of.get(f.rank, ())) == 1 else f for f in joined]
    facts = Facts({}, set(universe), addresses, joined, teardown_time, homes=nodes_of, init_entries=dict(ex.init_entries))
    facts.order = {}
    for f in joined:
        facts.order.setdefault(f.file, len(facts.order))
    for f in sorted(joined, key=facts.sort_key):
        actor = facts.of(f)
        if f.role == "report":
            if f.exit_code is not None or f.signal is not None:
                actor.exits.append(Exit(f.exit_code, f.signal, f.time, f, by_launcher=f.signal in STOP_SIGNALS))
        elif f.role == "stop":
            actor.stops.append(f)
        elif f.role == "generic":
            actor.generic.append(f)
        elif f.category == Category.COMM_TIMEOUT:
            actor.comm.append(f)
        else:
            actor.own.append(f)
    for node, exit_ in job_exits:
        facts.actor(node, None).exits.append(exit_)
    for (where, known_rank, local_of), progress in ex.progress.items():
        at_rank = known_rank
        if at_rank is None and local_of is not None and where is not None:
            at_rank = local_map.get((where, local_of))
        if at_rank is None and where is None:
            continue
        actor = facts.actor(where, at_rank)
        if actor.progress is None or progress.step > actor.progress.step:
            actor.progress = progress
    # an exception (a crash, an abort) a rank logged after its own communication error is how that error surfaced,
    # not a new cause; OOM, NaN, hardware and launch errors stand on their own. Not for node-level text, which mixes ranks.
    for actor in facts.ranked():
        if actor.comm and actor.own:
            first_comm = actor.comm[0]
            actor.consequences = [f for f in actor.own if f.category == Category.EXCEPTION and facts.before(first_comm, f)]
            actor.own = [f for f in actor.own if f not in actor.consequences]
    if not facts.universe:
        # no job record: the ranks seen, and every rank below the highest (ranks are numbered from 0: a rank that never
        # said anything still existed; a silent rank 0, busy tokenizing or saving while the others time out, is the
        # classic absentee)
        seen = {a.rank for a in facts.ranked() if a.rank is not None} | {rank for _, rank in facts.init_entries}
        facts.universe = seen | set(range(max(seen) + 1)) if seen else set()
    _loss_scale_collapse(ex, facts)
    _join_unattributed(facts)
    return facts


def _rank_table_places(places: list[RankPlace], addresses: Mapping[str, str],
                       nodes: set[str]) -> tuple[dict[tuple[tuple[str, str], int], set[int]], dict[int, set[str]]]:
    """A rank table's servers as the nodes of the logs (a server id or host address that is a node's address or its
    name): each (node, device) pair with the rank the table gives it, and each rank's node. A server that matches no
    node places nothing: a plog's device on an unknown server is not guessed."""
    pairs: dict[tuple[tuple[str, str], int], set[int]] = {}
    homes: dict[int, set[str]] = {}
    def node_of(key: str | None) -> str | None:
        return None if key is None else addresses.get(key) or (key if key in nodes else None)

    for place in places:
        node = node_of(place.server) or node_of(place.host_ip)
        if node is None:
            continue
        homes.setdefault(place.rank, set()).add(node)
        if place.device is not None:
            pairs.setdefault((device_scope(node, ""), place.device), set()).add(place.rank)
    return pairs, homes


def _ranks_from_devices(findings: list[Finding], paired: dict[tuple[tuple[str, str], int], set[int]]) -> list[Finding]:
    """A line that names only its device ("Device: 6 ...") belongs to the rank that other lines of the same node pair
    with that device (HCCL's `rank[3] ... device[6]`, a `(PID, Device, RankID)` header), when exactly one rank was: one
    node holds each device once (`device_scope`)."""
    pairs = {key: set(ranks) for key, ranks in paired.items()}
    for f in findings:
        if f.device is not None and f.rank is not None:
            pairs.setdefault((device_scope(f.node, f.file), f.device), set()).add(f.rank)
    if not pairs:
        return findings
    out = []
    for f in findings:
        ranks = pairs.get((device_scope(f.node, f.file), f.device)) if f.rank is None and f.device is not None else None
        out.append(replace(f, rank=next(iter(ranks))) if ranks and len(ranks) == 1 else f)
    return out


def _join_unattributed(facts: Facts) -> None:
    """An error that names no rank (a paste of a launcher's console) belongs to the one rank the launcher reports as
    having ended on its own (not stopped by it), when exactly one did: the report says who, the error says why. A rank
    whose only line is a wrapper's report of an error (torch_npu's `error code is 207001`) is such a rank too. Lines
    that name their processes, and name others than the rank's, are another process's, not that rank's."""
    for actor in list(facts.actors.values()):
        if actor.rank is not None or actor.local is not None or not actor.own:
            continue
        pids = {f.pid for f in actor.own if f.pid is not None}
        candidates = []
        for other in facts.actors.values():
            if other.rank is None and other.local is None or other.own or other.comm:
                continue
            if actor.node is not None and other.node != actor.node:
                continue
            theirs = {f.pid for f in other.generic if f.pid is not None}
            if pids and theirs and not pids & theirs:
                continue
            exit_ = other.first_exit()
            if exit_ is not None and exit_.signal not in STOP_SIGNALS and not _stopped_by_launcher(facts, other, exit_):
                candidates.append(other)
            elif exit_ is None and other.generic:
                candidates.append(other)
        if len(candidates) == 1:
            target = candidates[0]
            target.own.extend(replace(f, node=target.node or f.node, rank=target.rank, local_rank=target.local)
                              for f in actor.own)
            actor.own = []


def _loss_scale_collapse(ex: Extraction, facts: Facts) -> None:
    """A loss scale halved at every report, HALVINGS_TO_COLLAPSE times in a row, is a NaN/overflow failure."""
    for steps in ex.scales.values():
        best = (0, 0)  # (length, index of the run's last reduction)
        run = 1
        for i in range(1, len(steps)):
            prev, cur = steps[i - 1][0], steps[i][0]
            run = run + 1 if prev > 0 and abs(cur - prev / 2) < 1e-9 else 1
            if run > best[0]:
                best = (run, i)
        length, end = best
        if length >= HALVINGS_TO_COLLAPSE:
            first, last = steps[end - length + 1][1], steps[end][1]
            text = f"loss scale halved {length} times in a row (to {steps[end][0]:g}): {last.text}"
            finding = replace(last, category=Category.NAN, signature="fp16.loss_scale_collapse", text=text[:400], role="error")
            facts.findings.append(finding)
            facts.of(finding).own.append(replace(finding, time=first.time or finding.time))


# ---------------------------------------------------------------------------------------------- verdict


@dataclass(frozen=True, slots=True)
class RuleVerdict:
    """What a rule decided."""

    rule: str
    category: Category
    culprit: Finding | None  # None: no single culprit
    reason: str
    confidence: str
    actor: Actor | None = None
    hints: tuple[str, ...] = ()


Rule = Callable[[Facts], "RuleVerdict | None"]


def _step_of(f: Finding) -> int | None:
    m = PROGRESS_RX.search(f.text)
    return int(m.group(1)) if m else None


def rule_own_error(facts: Facts) -> RuleVerdict | None:
    """A rank's own error (OOM, NaN, hardware, launch, exception), not preceded by a communication error of its own."""
    candidates = [a.own[0] for a in facts.actors.values() if a.own]
    if not candidates:
        return None
    first = facts.earliest(candidates)
    assert first is not None
    actor = facts.of(first)
    others = [f for f in candidates if f is not first]
    # Ranks that cannot be told apart: the same error at the same step or moment. NaN everywhere is a diverged
    # model; any other error everywhere is a shared cause (configuration, environment, data), unless every such
    # rank is on one node, which is then the place it started. A setup error (node-wide signature) is one cause
    # however far apart its reports are: ranks read the same arguments or settings at whatever moment they start.
    same = [f for f in others if f.signature == first.signature and is_node_wide(f.signature)
            or _same_moment(facts, first, f) and (f.signature == first.signature or
                                                  f.category == first.category == Category.NAN)]
    if first.node is None and first.rank is None and first.local_rank is None:
        # the same event told twice, once with its place (Ray: "killed ..." then "Memory on the node (IP: ...)"; Slurm:
        # slurmstepd's "Detected 1 oom_kill event" then srun's "nid001277: tasks 1-3: Out Of Memory"), by one emitter
        # or two, at one moment
        placed = [f for f in others if f.category == first.category and f.kind == first.kind and _same_moment(facts, first, f)
                  and (f.node or f.rank is not None)]
        if placed:
            first = placed[0]
            actor = facts.of(first)
            same = [f for f in same if f is not first]
    tied = {facts.of(f).key: f for f in [first, *same] if f.rank is not None or f.local_rank is not None}
    if len(tied) >= 2:
        nodes = {key[0] for key in tied}
        ranks = sorted(key[1] for key in tied if key[1] is not None)
        listed = f"ranks {', '.join(map(str, ranks))}" if ranks else f"{len(tied)} ranks"
        if first.category == Category.NAN:
            return RuleVerdict("nan_everywhere", Category.NAN, None,
                           f"{listed} reported NaN/overflow at the same step; no rank went first", "medium")
        other_nodes = {a.node for a in facts.actors.values() if a.node is not None} - nodes
        # one node's ranks failing together point at that node when there are others, or when its hardware failed
        if len(nodes) == 1 and None not in nodes and (other_nodes or first.category == Category.HARDWARE):
            node = next(iter(nodes))
            culprit = replace(first, rank=None, local_rank=None, device=None)
            return RuleVerdict("own_error", first.category, culprit,
                           f"{listed} on node {node} failed together with the same error; the node is where it started",
                           "medium", facts.actor(node, None))
        return RuleVerdict("same_error_everywhere", first.category, None,
                       f"{listed} failed with the same error at the same moment: a shared cause (configuration, environment "
                       "or data), not one rank", "medium")
    if first.signature in DISAGREEMENTS:
        what = meaning_of(first.signature, first.text)
        return RuleVerdict("ranks_disagree", first.category, None,
                       f"{actor.label()} reported a conflict between ranks ({what}): every rank involved took part, "
                       f"the error names both sides: {first.text[:160]}", "medium")
    if is_node_wide(first.signature):
        # a package, a device setting or a variable the whole node's (or job's) setup lacks: whichever rank said it
        # first only printed first; the node is where it started when the log knows it, never one of its ranks
        what = meaning_of(first.signature, first.text)
        where = f"node {first.node}" if first.node else "the job"
        return RuleVerdict("own_error", first.category, replace(first, rank=None, local_rank=None, device=None),
                           f"{actor.label()} could not start ({what}): a setup every rank of {where} shares, so no single "
                           "rank went first", "medium", facts.actor(first.node, None))
    comm_firsts = [a.comm[0] for a in facts.actors.values() if a.comm]
    earlier_comm = [c for c in comm_firsts if facts.before(c, first) and facts.of(c) is not actor]
    ambiguous = [f for f in others if not facts.before(first, f) and f.category != first.category]
    confidence = "high"
    if earlier_comm or ambiguous or first.time is None and len(facts.order) > 1:
        confidence = "medium"
    what = meaning_of(first.signature, first.text)
    reason = f"{actor.label()} failed on its own first ({what})"
    if comm_firsts:
        reason += "; the communication errors of other ranks are its victims"
    if earlier_comm:
        reason += f" (though {len(earlier_comm)} communication error(s) carry earlier timestamps)"
    return RuleVerdict("own_error", first.category, first, reason, confidence, actor)


def _same_moment(facts: Facts, a: Finding, b: Finding) -> bool:
    sa, sb = _step_of(a), _step_of(b)
    if sa is not None and sb is not None:
        return sa == sb
    if a.time and b.time:
        ta, tb = seconds(a.time), seconds(b.time)
        return ta is not None and tb is not None and abs(ta - tb) < SAME_MOMENT
    return a.time is None and b.time is None and a.file == b.file  # one paste without times: no order to go by


def _exit_category(exit_: Exit) -> tuple[Category, str, str]:
    """(category, what happened, confidence) of an abnormal exit with no error line of its own."""
    if exit_.code in (126, 127):
        return Category.LAUNCH, f"exited {exit_.code} (command not found or not executable)", "high"
    if exit_.signal == "SIGKILL":
        return Category.OOM, "was killed with SIGKILL and logged no error (usually the kernel OOM killer: host memory)", "low"
    if exit_.signal in ("SIGSEGV", "SIGABRT", "SIGBUS"):
        return Category.EXCEPTION, f"crashed ({exit_.signal})", "medium"
    if exit_.signal is not None:
        return Category.EXCEPTION, f"was ended by {exit_.signal}", "low"
    return Category.EXCEPTION, f"exited with code {exit_.code} without logging an error", "medium"


def _stopped_by_launcher(facts: Facts, actor: Actor, exit_: Exit) -> bool:
    if exit_.by_launcher:
        return True
    if exit_.time and facts.teardown_time and exit_.time >= facts.teardown_time:
        return True
    return any(s.time and exit_.time and s.time <= exit_.time for s in actor.stops)


def rule_bad_exit(facts: Facts) -> RuleVerdict | None:
    """A rank (or a node's launcher) that exited abnormally with no communication error of its own: it ended itself."""
    candidates: list[tuple[Actor, Exit]] = []
    # a rank that ended exactly as the ranks that lost their peers did (the same code or signal: SIGABRT from the
    # NCCL watchdog, exit 1 after a raised timeout) cannot be told from them
    victim_ends = {(e.code, e.signal) for a in facts.actors.values() if a.comm for e in a.exits if e.abnormal}
    if any(f.signature in WATCHDOG_ABORTS for a in facts.actors.values() for f in a.comm):
        victim_ends |= {(-6, "SIGABRT"), (134, "SIGABRT")}  # the NCCL watchdog takes a timed-out process down with abort()
    for actor in facts.actors.values():
        exit_ = actor.first_exit()
        if exit_ is None or actor.comm or exit_.signal in STOP_SIGNALS or _stopped_by_launcher(facts, actor, exit_):
            continue
        if (exit_.code, exit_.signal) in victim_ends:
            continue
        if actor.rank is None and actor.node is not None and any(a.node == actor.node and a.comm for a in facts.ranked()):
            continue  # a launcher that exited because its ranks lost a peer
        candidates.append((actor, exit_))
    if not candidates:
        return None
    # ranks before node launchers (a launcher exits because a rank did); then by time
    actor, exit_ = min(candidates, key=lambda c: (c[0].rank is None and c[0].local is None, 0 if c[1].time else 1,
                                                  c[1].time or "", c[1].code is None or c[1].code < 0))
    category, what, confidence = _exit_category(exit_)
    identified = [a for a in facts.actors.values() if a.rank is not None or a.local is not None]
    from_job = exit_.source is None  # the job record's launcher exit: ascendctl saw it end
    if category == Category.EXCEPTION and not from_job:
        # An exit code says who ended, not why. With nothing else to tell processes apart, say that.
        tied = [c for c in candidates if c[0] is not actor and (c[0].rank is not None or c[0].local is not None)
                and _exit_same_moment(c[1], exit_)]
        if tied:
            who = sorted(a.label() for a, _ in [(actor, exit_), *tied])
            return RuleVerdict("exits_only", Category.UNKNOWN, None,
                           f"{len(who)} processes ({'; '.join(who)}) exited with errors at the same moment and none logged "
                           "why: no single culprit", "low", None,
                           ("the launcher's report only says who exited: collect each rank's own log (stderr) to see why",))
        # other processes in the log: other ranks, ranks their launcher stopped, ranks that lost a peer
        others_seen = (len(identified) > 1 or any((a.stops or a.comm) for a in facts.actors.values() if a is not actor)
                       or bool(actor.rank) or bool(actor.local))  # a rank 1 means there was a rank 0
        if actor.rank is None and actor.local is None or not others_seen:
            return RuleVerdict("exits_only", Category.UNKNOWN, None,
                           f"{'the only process' if identified else 'a process'} {what}; the log does not say why", "low", None,
                           ("the launcher's report only says who exited: collect the process's own log (stderr) to see why",))
    if len(candidates) > 1 and confidence == "high":
        confidence = "medium"
    source = exit_.source
    text = source.text if source else f"{actor.node}: launcher exited {exit_.code}" + (f" ({exit_.signal})" if exit_.signal else "")
    culprit = Finding(category, source.signature if source else "job.exit", actor.node, actor.rank,
                      None, exit_.time, source.file if source else JOB_FILE, source.line if source else 0, text,
                      pid=source.pid if source else None, role="report", local_rank=actor.local, exit_code=exit_.code,
                      signal=exit_.signal, time_source=source.time_source if source else "job")
    reason = f"{actor.label()} {what}, and had no communication error of its own"
    hints: tuple[str, ...] = ()
    if category == Category.OOM:
        hints = ("check the node's kernel log for the OOM killer (`ascendctl collect` gathers dmesg), and host memory "
                 "per rank (dataloader workers, pinned memory)",)
    pointed = _killed_one_pointed_at(facts, actor, exit_)
    if pointed is not None:
        # a report that cannot say whose process was killed (DeepSpeed's launcher prints the last command it spawned),
        # while the ranks that lost a peer all name one rank that logged nothing: that rank is the process killed
        (node, rank), count = pointed
        culprit = replace(culprit, node=node or culprit.node, rank=rank, local_rank=None)
        reason += (f"; {count} rank(s)' communication errors point at rank {rank}, which logged nothing of its own: "
                   "most likely the process killed")
        return RuleVerdict("bad_exit", category, culprit, reason, "low", facts.actor(node, rank), hints)
    voters = _voters_for(facts, actor)
    if voters:
        reason += f"; {voters} other rank(s)' communication errors point at it"
        confidence = "high" if confidence == "medium" else confidence
    return RuleVerdict("bad_exit", category, culprit, reason, confidence, actor, hints)


def _killed_one_pointed_at(facts: Facts, actor: Actor, exit_: Exit) -> tuple[tuple[str | None, int], int] | None:
    """The rank a killed process of unknown rank most likely was: the one the others' communication errors name by a
    clear majority, when that rank logged no error, exit or stop of its own."""
    if actor.rank is not None or actor.local is not None or exit_.signal != "SIGKILL":
        return None
    ranks, _ = _votes(facts)
    win = _clear_winner(ranks, sum(1 for a in facts.actors.values() if a.comm))
    if win is None:
        return None
    (node, rank), count = win
    target = facts.actors.get((node, rank, None))
    if rank is None or target is not None and (target.own or target.generic or target.comm or target.exits or target.stops):
        return None
    return (node, rank), count


def _exit_same_moment(a: Exit, b: Exit) -> bool:
    if a.time and b.time:
        ta, tb = seconds(a.time), seconds(b.time)
        return ta is not None and tb is not None and abs(ta - tb) < SAME_MOMENT
    return a.time is None and b.time is None


def _peer_targets(facts: Facts, f: Finding) -> tuple[str | None, int | None]:
    """(node, rank) a communication error points at."""
    if f.signature == "msrun.node_timeout":
        return None, None  # msrun's scheduler names the first node to stop answering: often one its launcher killed
    rank = f.peer_rank
    node = None
    if f.peer_addr:
        node = facts.addresses.get(f.peer_addr) or (f.peer_addr if any(a.node == f.peer_addr for a in facts.actors.values())
                                                    else None)
        if node is None and f.peer_addr in ("127.0.0.1", "localhost"):
            node = f.node
    if rank is not None and node is None:
        node = facts.node_of_rank(rank)
    return node, rank


def _votes(facts: Facts) -> tuple[Counter[tuple[str | None, int | None]], Counter[str]]:
    """Distinct reporters per (node, rank) and per node named by communication errors."""
    by_rank: dict[tuple[str | None, int | None], set[tuple[str | None, int | None, int | None]]] = {}
    by_node: dict[str, set[tuple[str | None, int | None, int | None]]] = {}
    for actor in facts.actors.values():
        for f in actor.comm:
            node, rank = _peer_targets(facts, f)
            if rank is not None and rank != actor.rank:
                by_rank.setdefault((node, rank), set()).add(actor.key)
            if node is not None and not (rank is None and node == actor.node and actor.rank is None):
                by_node.setdefault(node, set()).add(actor.key)
    return (Counter({k: len(v) for k, v in by_rank.items()}), Counter({k: len(v) for k, v in by_node.items()}))


def _voters_for(facts: Facts, actor: Actor) -> int:
    ranks, nodes = _votes(facts)
    if actor.rank is not None and (actor.node, actor.rank) in ranks:
        return ranks[(actor.node, actor.rank)]
    return nodes.get(actor.node or "", 0) if actor.node else 0


def _clear_winner(votes: Counter[Any], reporters: int) -> tuple[Any, int] | None:
    """The target most ranks point at, when it is a clear majority; one pointer decides only when almost nobody else
    lost a peer (a paste of one or two ranks), never when many ranks failed and only one of them names someone."""
    ranked = votes.most_common(2)
    if not ranked:
        return None
    top, count = ranked[0]
    runner = ranked[1][1] if len(ranked) > 1 else 0
    if count >= 2 and count >= 2 * runner:
        return top, count
    if count == 1 and runner == 0 and reporters <= 2:
        return top, count
    return None


def rule_node_lost(facts: Facts) -> RuleVerdict | None:
    """A node whose launcher ascendctl lost (unreachable) while the job ran: the failure started there."""
    lost = [(a, e) for a in facts.actors.values() for e in a.exits if e.lost]
    if not lost:
        return None
    actor, exit_ = min(lost, key=lambda c: c[1].time or "9999")
    culprit = Finding(Category.UNKNOWN, "job.node_lost", actor.node, None, None, exit_.time, JOB_FILE, 0,
                      f"{actor.node}: {exit_.lost}", role="report", time_source="job")
    return RuleVerdict("node_lost", Category.UNKNOWN, culprit,
                   f"ascendctl lost node {actor.node} while the job ran ({exit_.lost}); the other nodes were stopped after it",
                   "medium", actor, ("check the node: is it up, is sshd running, did it run out of memory or reboot "
                                     "(`ascendctl exec -w NODE -- uptime`, its kernel log)",))


def _failed_before_votes(facts: Facts, members: list[Actor], pointers: list[Finding]) -> bool:
    """Did every one of these actors have a communication error of its own before anyone pointed at them? Then they
    are not where it started: they lost their own peers first and others saw them go (a race after a fabric fault)."""
    first_vote = facts.earliest(pointers)
    return bool(members) and first_vote is not None and all(m.comm and facts.before(m.comm[0], first_vote) for m in members)


def rule_peer_votes(facts: Facts) -> RuleVerdict | None:
    """The rank (or node) the other ranks' communication errors point at, by a clear majority."""
    ranks, nodes = _votes(facts)
    comm = [f for a in facts.actors.values() for f in a.comm]
    for node_rank in list(ranks):
        node, rank = node_rank
        pointers = [f for f in comm if _peer_targets(facts, f)[1] == rank]
        if _failed_before_votes(facts, [facts.actor(node, rank)], pointers):
            del ranks[node_rank]
    for name in list(nodes):
        pointers = [f for f in comm if _peer_targets(facts, f)[0] == name]
        if _failed_before_votes(facts, [a for a in facts.ranked() if a.node == name], pointers):
            del nodes[name]
    reporters = sum(1 for a in facts.actors.values() if a.comm)
    win = _clear_winner(ranks, reporters)
    if win is not None:
        (node, rank), count = win
        actor = facts.actor(node, rank)
        pointer = facts.earliest(f for a in facts.actors.values() for f in a.comm if _peer_targets(facts, f)[1] == rank)
        assert pointer is not None
        culprit = _actor_evidence(facts, actor) or replace(pointer, node=node, rank=rank, local_rank=None, device=None)
        return RuleVerdict("peer_votes", Category.COMM_TIMEOUT, culprit,
                       f"{count} rank(s)' communication errors point at rank {rank}" + (f" on node {node}" if node else ""),
                       "medium", actor)
    win = _clear_winner(nodes, reporters)
    if win is None:
        return None
    node_name, count = win
    members = [a for a in facts.ranked() if a.node == node_name]
    quiet = [a for a in members if not a.comm]
    pick = None
    if quiet:
        pick = min(quiet, key=lambda a: ((a.first_exit() or Exit(None, None, None, None)).time or "9999", a.rank or 0))
    actor = pick or facts.actor(node_name, None)
    pointer = facts.earliest(f for a in facts.actors.values() for f in a.comm if _peer_targets(facts, f)[0] == node_name)
    assert pointer is not None
    culprit = _actor_evidence(facts, actor) or replace(pointer, node=node_name, rank=actor.rank, local_rank=actor.local,
                                                       device=None)
    which = f"rank {actor.rank} on node {node_name}" if actor.rank is not None else f"node {node_name}"
    return RuleVerdict("peer_votes", Category.COMM_TIMEOUT, culprit,
                   f"{count} rank(s)' communication errors point at node {node_name}; {which} shows no communication error "
                   "of its own" if pick else f"{count} rank(s)' communication errors point at node {node_name}", "medium", actor)


def rule_absent_named(facts: Facts) -> RuleVerdict | None:
    """The rank a monitor names as never having arrived (rank 0 of a monitored barrier lists who failed to pass): direct
    evidence of who is missing, stronger than the others' timeouts, which only say that someone was."""
    reports = [f for a in facts.actors.values() for f in a.comm if f.absent]
    first = facts.earliest(reports)
    if first is None:
        return None
    absent = sorted(set(first.absent) - ({first.rank} if first.rank is not None else set()))
    universe = set(facts.universe) | set(absent) | ({first.rank} if first.rank is not None else set())
    if not absent or len(absent) > max(1, len(universe) // 4):
        return None  # many ranks missing at once: a node or the network, not one rank (the later rules decide)
    rank = absent[0]
    node = facts.node_of_rank(rank)
    actor = facts.actor(node, rank)
    culprit = replace(first, node=node, rank=rank, local_rank=None, device=None, pid=None)
    monitor = f"rank {first.rank}" if first.rank is not None else "the monitor"
    more = f" (also absent: ranks {', '.join(map(str, absent[1:]))})" if len(absent) > 1 else ""
    if first.signature == "msrun.node_timeout":  # the scheduler, not a rank, is the monitor
        monitor, said = "msrun's scheduler", " names it as the node whose heartbeats stopped (timed out)"
    elif first.signature == "torch.desync_report":
        said = "'s desync report names it as the rank that lagged behind the collective that timed out"
    else:
        said = "'s monitored barrier names it as the rank that failed to pass"
    return RuleVerdict("absent_named", Category.COMM_TIMEOUT, culprit, f"{actor.label()} never arrived: {monitor}{said}{more}",
                       "high", actor,
                       ("look at what that rank was doing when the others waited (its last log lines, `ascendctl stacks` "
                        "while it runs): data loading, a checkpoint save, a rank-dependent branch that skips the "
                        "collective, or a stuck device",))


LATE_INIT_GAP = 60.0  # seconds after every other rank that make a rank late to init when no one's timeout is timed


def rule_late_to_init(facts: Facts) -> RuleVerdict | None:
    """HCCL's fault guide for a communicator init that timed out: compare when each rank entered the init
    (`Entry-HcclCommInitRootInfo`); the rank that entered after the others had already timed out waiting (or minutes
    after them) is the one they waited for, busy elsewhere before it (loading, compiling, an earlier failure)."""
    entered = {rank: (t, node, e) for (node, rank), e in facts.init_entries.items()
               if e.time and (t := seconds(e.time)) is not None}
    if len(entered) < 3 or not any(a.comm for a in facts.ranked()):
        return None
    gave_up = [t for a in facts.ranked() if a.comm and a.comm[0].time and (t := seconds(a.comm[0].time)) is not None]
    times = sorted(t for t, _, _ in entered.values())
    if gave_up:
        late = sorted((r for r, (t, _, _) in entered.items() if t > min(gave_up)), key=lambda r: entered[r][0])
    else:
        median = times[len(times) // 2]
        late = sorted((r for r, (t, _, _) in entered.items() if t - median >= LATE_INIT_GAP), key=lambda r: entered[r][0])
    if not late or len(late) == len(entered):
        return None
    nodes = {entered[r][1] for r in late}
    universe = facts.universe | set(entered)
    if len(late) > max(1, len(universe) // 4) and (len(nodes) != 1 or None in nodes):
        return None  # many ranks of many nodes late: a slow start everywhere, not one rank
    t_late, node, entry = entered[late[0]]
    on_time = max(t for r, (t, _, _) in entered.items() if r not in late)
    one_node = len(late) > 1
    culprit = Finding(Category.COMM_TIMEOUT, "hccl.late_init", node, None if one_node else late[0], None, entry.time,
                      entry.file, entry.line, entry.text, role="report", time_source="line")
    actor = facts.actor(node, None if one_node else late[0])
    who = f"node {node} (ranks {', '.join(map(str, late))})" if one_node else actor.label()
    after = "after the others had already timed out waiting" if gave_up else f"{t_late - on_time:.0f}s after the others"
    return RuleVerdict("late_to_init", Category.COMM_TIMEOUT, culprit,
                       f"{who} entered HCCL's communicator init at {entry.time}, {t_late - on_time:.0f}s after the last "
                       f"of the others and {after}: the others' init timeouts are its victims", "medium", actor,
                       ("look at what that rank (or node) did before the communicator init: loading data or a checkpoint, "
                        "compiling, an earlier step of the script; if it is only slow to start, raise HCCL_CONNECT_TIMEOUT",))


MAIN_FIRST_WAITS = ("main_first.wait", "main_first.local_wait")


def rule_main_first(facts: Facts) -> RuleVerdict | None:
    """Ranks that waited in main_process_first's barrier on entering it (issue #26): the main process they wait for is
    where it started. accelerate's main_process_first waits for global rank 0; transformers' main_process_first
    (local=True by default) and local_main_process_first wait for the main process of every node (local rank 0): rank 0
    when the job is on one node (or no node is named), nobody single when several nodes are known."""
    waits = [f for a in facts.ranked() for f in a.comm if f.signature in MAIN_FIRST_WAITS]
    first = facts.earliest(waits)
    if first is None or any(f.rank == 0 for f in waits):
        return None  # rank 0 itself waiting there is not the main process: the traceback says something else
    nodes = {a.node for a in facts.actors.values() if a.node}
    local = all(f.signature == "main_first.local_wait" for f in waits)
    if local and len(nodes) > 1:
        return None  # the late one may be the local rank 0 of any node: the other rules decide
    node = facts.node_of_rank(0)
    actor = facts.actor(node, 0)
    culprit = _actor_evidence(facts, actor) or replace(
        first, node=node, rank=0, local_rank=None, device=None, pid=None,
        text=f"rank 0 did not reach the main_process_first barrier rank {first.rank} was {first.text}"[:400])
    waiting = sorted({f.rank for f in waits if f.rank is not None})
    who = "the main process of the node (local rank 0)" if local else "the main process (rank 0)"
    reason = (f"rank(s) {', '.join(map(str, waiting))} waited in main_process_first's barrier for {who}, which did not "
              "arrive in time: rank 0 was still doing the work the others waited for")
    if local and not nodes:
        reason += " (one node assumed: with several nodes, the local rank 0 of each node is a suspect)"
    return RuleVerdict("main_first", Category.COMM_TIMEOUT, culprit, reason, "medium" if not local or nodes else "low",
                       actor)


def _actor_evidence(facts: Facts, actor: Actor) -> Finding | None:
    """The best line about an actor that has no error of its own: its exit report, a stop, or its last progress."""
    exit_ = actor.first_exit()
    if exit_ is not None and exit_.source is not None:
        return replace(exit_.source, category=Category.COMM_TIMEOUT)
    if actor.stops:
        return replace(actor.stops[0], category=Category.COMM_TIMEOUT)
    if actor.progress is not None:
        p = actor.progress
        return Finding(Category.COMM_TIMEOUT, "progress.last", actor.node, actor.rank, None, p.time, p.file, 0,
                       f"last progress: {p.line_text}", role="report", time_source="line" if p.time else "none")
    return None


def _hang(facts: Facts, *, by_progress: bool) -> RuleVerdict | None:
    universe = facts.universe
    reporters = {a.rank for a in facts.ranked() if a.comm}
    if len(reporters) < 2 or len(universe) < 3:
        return None
    errored = {a.rank for a in facts.ranked() if a.own}
    progress = {a.rank: a.progress.step for a in facts.ranked() if a.progress is not None and a.rank is not None}
    top = max(progress.values()) if progress else None
    if by_progress:
        if top is None:
            return None
        behind = [r for r, step in progress.items() if step < top]
        if not behind or len(behind) > max(1, len(universe) // 4):
            return None
        least = min(progress[r] for r in behind)
        chosen = [r for r in behind if progress[r] == least]
        why = f"its progress stopped first (step {least}; the others reached step {top}) and the others timed out waiting"
    else:
        monitors = {f.monitor for a in facts.actors.values() for f in a.comm if f.monitor is not None}
        missing = sorted(universe - reporters - errored - monitors)  # a monitor was alive: it is where the errors came from
        if not missing or len(missing) > max(1, len(universe) // 4):
            return None
        chosen = missing
        why = "it logged no communication error while every other rank timed out waiting for it"
    rank = chosen[0]
    node = facts.node_of_rank(rank)
    actor = facts.actor(node, rank)
    culprit = _actor_evidence(facts, actor) or Finding(Category.COMM_TIMEOUT, "hang.missing_rank", node, rank, None, None,
                                                       "", 0, f"rank {rank} never reported the collective the others timed out in",
                                                       role="report", time_source="none")
    more = f" (also behind: ranks {', '.join(map(str, chosen[1:]))})" if len(chosen) > 1 else ""
    return RuleVerdict("hang", Category.COMM_TIMEOUT, culprit, f"hang: {actor.label()}: {why}{more}",
                   "medium" if by_progress else "low", actor,
                   ("a hang: look at what that rank was doing (py-spy dump, its last log lines): a dataloader stall, "
                    "a rank-dependent branch that skips a collective, or a stuck device",))


def rule_hang_progress(facts: Facts) -> RuleVerdict | None:
    """A hang: this rank's progress stopped before the others', and the others timed out waiting."""
    return _hang(facts, by_progress=True)


def rule_hang_silent(facts: Facts) -> RuleVerdict | None:
    """A hang: every other rank timed out waiting, this rank logged nothing (no progress to compare)."""
    return _hang(facts, by_progress=False)


def rule_stacks(facts: Facts) -> RuleVerdict | None:
    """A hang seen in every rank's stack (taken by `stacks`, before a stop, or by `launch --hang-timeout`): the rank
    that is not in the collective, barrier or store wait the others are in."""
    capture = facts.capture
    if capture is None or capture.verdict.kind != "suspect" or not capture.suspects:
        return None
    first = capture.suspects[0]
    frame = first.innermost
    stack = next((r for r in capture.ranks if r.rank == first.ranks[0]), None)
    node = first.nodes[0] if len(first.nodes) == 1 else None
    rank = first.ranks[0] if len(first.ranks) == 1 else None
    where = frame.where if frame else "(no Python frame)"
    waits = ", ".join(dict.fromkeys(c.waiting.function for c in capture.classes if c.waiting is not None))
    # the evidence is where the rank is stuck (its source file and line); the dump it was read from is named in the hints
    dump = stack.files[0] if stack is not None and stack.files else capture.folder
    culprit = Finding(Category.HANG, "stacks.suspect", node, rank, None, None,
                      frame.file if frame is not None else dump, frame.line or 0 if frame is not None else 0,
                      f"{first.label} at {where}, not in a collective (the others wait in {waits})",
                      pid=stack.pid if stack is not None and rank is not None else None,
                      local_rank=stack.local_rank if stack is not None and rank is not None else None, time_source="none")
    actor = facts.actor(node, rank) if rank is not None or node is not None else None
    for stacked in capture.ranks:  # the ranks that wait are its victims: they are listed with where they wait
        if stacked.rank not in first.ranks and stacked.main is not None:
            facts.actor(stacked.node if stacked.node != "-" else None, stacked.rank)
    return RuleVerdict("stacks", Category.HANG, culprit, f"hang: {capture.verdict.message}", "medium", actor,
                       (f"look at what {first.label} was doing at {where} while the others waited: a dataloader stall, a "
                        "rank-dependent branch that skips a collective, a checkpoint save, or a stuck device",
                        f"every rank's stack of that moment: the capture {capture.folder} (`stacks/{capture.folder}/` in "
                        f"each node's job directory; this rank's: {dump})"))


def rule_everyone_timed_out(facts: Facts) -> RuleVerdict | None:
    """Communication errors everywhere and nothing before them: the data path, not a rank."""
    reporters = [a for a in facts.actors.values() if a.comm]
    if not reporters:
        return None
    firsts = [a.comm[0] for a in reporters]
    times = [t for t in (seconds(f.time) for f in firsts if f.time) if t is not None]
    spread = f" within {max(times) - min(times):.0f}s of each other" if len(times) >= 2 else ""
    ranked = [a for a in reporters if a.rank is not None]
    if len(ranked) >= 2 and len(ranked) >= 0.75 * max(1, len(facts.universe)):
        return RuleVerdict("everyone_timed_out", Category.COMM_TIMEOUT, None,
                       f"{len(ranked)} of {len(facts.universe)} ranks failed in communication{spread}, none failed before "
                       "and none is named by the others: no single culprit", "medium", None, NETWORK_HINTS)
    return RuleVerdict("only_comm_errors", Category.COMM_TIMEOUT, None,
                   "only communication errors were found and none points at a rank; the log of the rank that failed "
                   "first may be missing", "low", None,
                   ("collect the logs of every rank (`ascendctl collect`): the rank that failed first is usually the one "
                    "whose log is missing here",))


def rule_stopped_first(facts: Facts) -> RuleVerdict | None:
    """A launcher or job stopped from outside before anything failed: the stop started it."""
    external = [f for a in facts.actors.values() for f in a.stops if f.signature == "job.stopped"
                and not (facts.teardown_time and f.time and f.time >= facts.teardown_time)]
    first = facts.earliest(external)
    if first is None:
        return None
    events = [f for a in facts.actors.values() for f in (*a.own, *a.comm)]
    if any(facts.before(e, first) for e in events):
        return None
    actor = facts.of(first)
    named = first if (first.node or first.rank is not None) else None
    return RuleVerdict("stopped_first", Category.UNKNOWN, named,
                   f"{actor.label()} was stopped from outside ({first.text[:100]}) before any rank failed; the errors "
                   "after it are its consequences", "medium", actor if named else None,
                   ("find who or what stopped it: the scheduler's record (time limit, preemption), a user, or a "
                    "health checker",))


def rule_stopped(facts: Facts) -> RuleVerdict | None:
    """Only stops from outside (SIGTERM, a cancelled Slurm job): nobody failed on their own."""
    stops = [f for a in facts.actors.values() for f in a.stops]
    stop_exits = [e for a in facts.actors.values() for e in a.exits if e.signal in STOP_SIGNALS and e.source is not None]
    if not stops and not stop_exits:
        return None
    first = facts.earliest([*stops, *(e.source for e in stop_exits if e.source is not None)])
    assert first is not None
    return RuleVerdict("stopped", Category.UNKNOWN, None,
                   "the job was stopped from outside (a signal, a cancellation or a time limit) and no rank shows an error "
                   f"of its own: {first.text[:120]}", "low", None,
                   ("find who or what stopped the job: the scheduler's record (time limit, preemption), a user, or a "
                    "health checker",))


def rule_generic(facts: Facts) -> RuleVerdict | None:
    """Only generic errors (CANN inner errors, torch_npu error codes)."""
    generic = [f for a in facts.actors.values() for f in a.generic]
    first = facts.earliest(generic)
    if first is None:
        return None
    actor = facts.of(first)
    return RuleVerdict("generic_error", first.category, first, f"{actor.label()} logged the first error, a generic one",
                   "low", actor)


RULES: tuple[tuple[str, Rule, str], ...] = (
    ("own_error", rule_own_error, "a rank's own error (OOM, NaN, hardware, launch, exception) not preceded by a "
                                  "communication error of that rank; the earliest wins; NaN on every rank at one step: none"),
    ("same_error_everywhere", rule_own_error, "several ranks on different nodes with the same own error at the same "
                                              "moment: no single culprit (nan_everywhere for NaN)"),
    ("bad_exit", rule_bad_exit, "a rank or launcher that exited non-zero or by a signal other than TERM/INT/HUP, with no "
                                "communication error of its own and not stopped by its launcher"),
    ("exits_only", rule_bad_exit, "only exit codes, from processes that cannot be told apart (the only process, or "
                                  "several at one moment): who ended is known, why is not; no culprit"),
    ("node_lost", rule_node_lost, "a node ascendctl lost (unreachable) while the job ran"),
    ("stacks", rule_stacks, "a hang seen in every rank's stack (a `stacks` capture, taken before a stop or by "
                            "`launch --hang-timeout`): the rank not in the collective the others wait in"),
    ("stopped_first", rule_stopped_first, "a launcher or job stopped from outside before anything failed"),
    ("absent_named", rule_absent_named, "the rank a monitor (rank 0 of a monitored barrier) names as never having "
                                        "arrived; a few named at once: the first, the others said"),
    ("main_first", rule_main_first, "ranks waiting in main_process_first's barrier on entering it: the main process "
                                    "(rank 0; local rank 0 of each node by default, so only where one node is known or "
                                    "none is named) did not arrive"),
    ("late_to_init", rule_late_to_init, "a communicator init that timed out: the rank (or one node's ranks) that entered "
                                        "HCCL's init after the others had timed out waiting (HCCL's fault guide)"),
    ("hang", rule_hang_progress, "a hang: the rank whose progress (training step) stopped before the others', while they "
                                 "timed out"),
    ("peer_votes", rule_peer_votes, "the rank or node that other ranks' communication errors name, by a clear majority"),
    ("hang", rule_hang_silent, "a hang: the one rank (or few) that did not time out while every other rank did"),
    ("everyone_timed_out", rule_everyone_timed_out, "communication errors on (nearly) every rank, none earlier and none "
                                                    "named by the others: no single culprit"),
    ("stopped", rule_stopped, "only stops from outside: no culprit"),
    ("generic_error", rule_generic, "only generic errors: the earliest, with low confidence"),
)


def decide(facts: Facts) -> RuleVerdict | None:
    """Try each rule of RULES in order; None when nothing at all was found."""
    own = rule_own_error(facts)
    exit_ = rule_bad_exit(facts)
    if own is not None and exit_ is not None and exit_.culprit is not None and own.culprit is not None:
        # two independent failures: the one that happened first (when the times say so)
        if facts.before(exit_.culprit, own.culprit) and exit_.culprit.time and own.culprit.time:
            return exit_
    if own is not None:
        return own
    tried: set[Rule] = {rule_own_error}
    for _, rule, _ in RULES:
        if rule in tried:
            continue
        tried.add(rule)
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    return None


# ---------------------------------------------------------------------------------------------- report


def _victims(facts: Facts, verdict: RuleVerdict | None) -> tuple[list[Victim], list[RankSummary]]:
    culprit_key = verdict.actor.key if verdict and verdict.actor else None
    waiting = ({r: c.waiting.where for c in facts.capture.classes if c.waiting is not None for r in c.ranks}
               if verdict is not None and verdict.rule == "stacks" and facts.capture is not None else {})
    victims: list[Victim] = []
    summaries: list[RankSummary] = []
    for actor in sorted(facts.actors.values(), key=lambda a: (a.rank is None, a.rank if a.rank is not None else 0,
                                                               a.node or "")):
        if actor.node is None and actor.rank is None and not (actor.own or actor.comm or actor.exits):
            continue
        first_comm = actor.comm[0] if actor.comm else None
        peer = None
        if first_comm is not None:
            node, rank = _peer_targets(facts, first_comm)
            peer = f"rank {rank}" if rank is not None else f"node {node}" if node else first_comm.peer_addr
        exit_ = actor.first_exit()
        how = None
        if actor.key == culprit_key:
            role = "culprit"
        elif actor.own and verdict is not None and verdict.culprit is not None:
            role = "co-failed"
        elif actor.comm:
            role, how = "victim", f"communication error ({actor.comm[0].signature})" + (f" naming {peer}" if peer else "")
        elif actor.rank in waiting:
            role, how = "victim", f"waiting at {waiting[actor.rank]}"
        elif exit_ is not None and (exit_.signal in STOP_SIGNALS or _stopped_by_launcher(facts, actor, exit_)):
            role, how = "stopped", f"stopped by its launcher or ascendctl ({exit_.signal or exit_.code})"
        elif actor.stops:
            role, how = "stopped", actor.stops[0].text[:100]
        elif actor.own:
            role = "co-failed"
        elif exit_ is not None:
            role, how = "victim", f"exited {exit_.code if exit_.code is not None else exit_.signal} after the culprit"
        else:
            role = "ok" if actor.rank is not None else "unknown"
        launcher_of_listed_ranks = actor.rank is None and actor.local is None and any(
            a.node == actor.node and (a.rank is not None or a.local is not None) for a in facts.actors.values())
        if how and (actor.rank is not None or actor.node is not None) and actor.key != culprit_key and not launcher_of_listed_ranks:
            victims.append(Victim(actor.node, actor.rank, how))
        first_own = actor.own[0] if actor.own else (actor.consequences[0] if actor.consequences else None)
        summaries.append(RankSummary(actor.node, actor.rank, role, first_own, first_comm, peer,
                                     exit_.code if exit_ else None, exit_.signal if exit_ else None, exit_.time if exit_ else None,
                                     actor.progress.step if actor.progress else None,
                                     actor.progress.time if actor.progress else None))
    return victims, summaries


def _launcher_blamed(facts: Facts, verdict: RuleVerdict | None) -> str | None:
    """What torchrun's Root Cause block (or msrun's scheduler) named, when that is not the verdict's rank."""
    culprit = verdict.culprit if verdict else None
    roots = sorted((f for f in facts.findings if f.signature == "torchrun.root_cause"),
                   key=lambda f: (culprit is None or f.node != culprit.node, f.time or "~", f.node or "", f.rank or 0))
    for f in roots:
        if culprit is None or f.rank != culprit.rank:
            return (f"torchrun's Root Cause names rank {f.rank}" + (f" on {f.node}" if f.node else "")
                    + f" (exitcode {f.exit_code}), which is not where the failure started")
    timeouts = [f for f in facts.findings if f.signature == "msrun.node_timeout" and f.peer_rank is not None]
    for f in timeouts:
        if culprit is None or f.peer_rank != culprit.rank:
            return f"msrun's scheduler names rank {f.peer_rank} as timed out first, which is not where the failure started"
    return None


def _fabric_evidence(facts: Facts, first: Finding | None, category: Category) -> Finding | None:
    """The NIC/link/RDMA line the verdict stands on: the first failure's own, or, when no single culprit was found among
    ranks that all failed in communication, the earliest such line of theirs (a fabric fault, not a plain timeout)."""
    if first is not None:
        return first if first.kind == "fabric" else None
    if category not in (Category.COMM_TIMEOUT, Category.HARDWARE):
        return None
    return facts.earliest(f for f in facts.findings if f.kind == "fabric" and f.role == "error")


def _fabric_link(facts: Facts, first: Finding | None) -> str | None:
    """For a NIC/link fault, the link it names: this node and the peer its line names, when the log says so."""
    if first is None:
        return None
    here = first.node or (f"rank {first.rank}" if first.rank is not None else None)
    peer_node, peer_rank = _peer_targets(facts, first)
    peer = peer_node or first.peer_addr or (f"rank {peer_rank}" if peer_rank is not None else None)
    if here and peer and peer != here:
        return f"the link between {here} and {peer} (or either end's NIC) is the first suspect: check both ports"
    if here:
        return f"{here}'s NIC and link are the first suspect: check its port before the program"
    return None


def _oom_kind(f: Finding | None) -> str | None:
    if f is None or f.category != Category.OOM:
        return None
    if f.kind:
        return f.kind
    return "host" if f.signature.startswith(("kernel.", "host.")) or f.signal == "SIGKILL" else "device"


def report(ex: Extraction, *, capture: CaptureJudgement | None = None) -> TriageReport:
    """Facts, the verdict and everything said about it. `capture`: a stacks capture judged already (a live one, taken
    by `stop` or the hang policy); else the newest capture among the inputs, if any."""
    from ascendctl.stacks.incident import newest_capture

    facts = build_facts(ex)
    facts.capture = capture if capture is not None else newest_capture(ex.stack_files)
    verdict = decide(facts)
    victims, summaries = _victims(facts, verdict)
    if verdict is None:
        category, first, reason, rule, confidence = Category.UNKNOWN, None, "no known failure signature was found", "none", "low"
        hints = ["no known failure signature found: read the last lines of each rank's log"]
    else:
        category, first, reason, rule, confidence = (verdict.category, verdict.culprit, verdict.reason, verdict.rule,
                                                     verdict.confidence)
        hints = list(verdict.hints)
        if first is not None:
            sig_hint = hint_of(first.signature)
            if sig_hint and sig_hint not in hints:
                hints.insert(0, sig_hint)
        for hint in HINTS[category]:
            if hint not in hints and not (first is None and category == Category.COMM_TIMEOUT):
                hints.append(hint)
        evidence = _fabric_evidence(facts, first, category)
        if evidence is not None and evidence is not first:  # no culprit: say what the fabric lines mean all the same
            fabric_hint = hint_of(evidence.signature)
            if fabric_hint and fabric_hint not in hints:
                hints.insert(0, fabric_hint)
        link = _fabric_link(facts, evidence)
        if link:
            hints.insert(0, link)
        if first is not None and category == Category.COMM_TIMEOUT:
            hints.insert(0, f"look first at {verdict.actor.label() if verdict.actor else 'the rank named'}: its log before "
                            f"{first.time or 'the timeouts'}")
    findings = sorted(facts.findings, key=lambda f: (facts.sort_key(f), f.file, f.line))
    unreadable, skipped = ex.listed()
    if unreadable:
        hints.insert(0, f"{len(ex.unreadable) + ex.unreadable_more} input(s) could not be read (listed as unreadable): "
                        "they may hold the answer, so this verdict is incomplete")
    return TriageReport(category, first, tuple(findings), tuple(hints), reason, ex.files, ex.bytes_read, ex.suppressed,
                        tuple(ex.notes), unreadable, rule, confidence, tuple(victims), tuple(summaries),
                        _oom_kind(first), first is not None or verdict is None, _launcher_blamed(facts, verdict),
                        skipped=skipped, stacks=facts.capture.to_dict() if facts.capture is not None else None,
                        fabric=_fabric_evidence(facts, first, category) is not None)


__all__ = ["RULES", "Actor", "Exit", "Facts", "RuleVerdict", "build_facts", "decide", "report"]
