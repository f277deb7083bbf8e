"""View models of the HTML report: what each view shows, with the inline SVG geometry computed here.

Pure: takes the triage engine's verdict, a preflight report, collect's bundle metadata and msprof summary,
returns frozen records the template only prints. Large jobs are folded and sampled here, and every fold
says so in the view's notes. Must not import typer, rich or jinja2.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ascendctl.preflight.checks.model import Status
from ascendctl.errors import parse_json
from ascendctl.nodeset import fold
from ascendctl.perf.model import gbps
from ascendctl.facts.parsers import ParseError
from ascendctl.bundle.layout import (CMD_HCCN_LINK, CMD_HCCN_NET_HEALTH, CMD_NPU_INFO, FACTS, MANIFEST, command_name,
                                     command_path, device_of, split_node)
from ascendctl.bundle.summaries import TopoSummary

if TYPE_CHECKING:
    from ascendctl.preflight.checks.model import CheckResult
    from ascendctl.preflight.result import PreflightReport
    from ascendctl.bundle.summaries import MsprofSummary
    from ascendctl.perf.model import LinkSummary, PerfReport, RankInput
    from ascendctl.report.attempts import AttemptsView
    from ascendctl.triage import Finding, RankSummary, TriageReport

# lane geometry (px): the SVG of every lane has the same width, so marks line up across lanes and the axis
LANE_WIDTH = 880
LANE_HEIGHT = 18
LANE_PAD = 10
FOLD_ABOVE_NODES = 8  # jobs with more nodes fold the nodes that behaved alike into one lane
SAMPLE_NODES = 2  # nodes drawn inside an expanded fold
MAX_LANES = 1500  # rank lanes drawn in all; past this, groups show their folded lane only
MAX_RANK_ROWS = 300  # rows of the per-rank table
MAX_EVIDENCE = 12
MAX_PERF_RANKS = 64
MAX_DEVICE_ROWS = 200
MAX_PREFLIGHT_ROWS = 300
TEXT_CUT = 600  # characters of a log line shown (the file:line says where the rest is)

MARK_NAMES = {"progress": "last progress", "error": "first own error", "comm": "communication error",
              "stop": "stopped by its launcher", "exit": "exit", "teardown": "launcher teardown"}


# --- records ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evidence:
    """One log line the verdict rests on: where (file:line), when, which signature, the text."""

    where: str
    time: str
    clock: str
    node: str
    rank: str
    signature: str
    text: str
    first: bool = False


@dataclass(frozen=True, slots=True)
class RankRow:
    """One row of the per-rank summary; each `(text, title)` pair is a short cell and its hover text."""

    node: str
    rank: str
    role: str
    first_error: tuple[str, str]
    comm_error: tuple[str, str]
    exit: tuple[str, str]
    last_step: tuple[str, str]


@dataclass(frozen=True, slots=True)
class VerdictView:
    headline: str
    category: str
    culprit_node: str | None
    culprit_rank: int | None
    rule: str
    reason: str
    confidence: str
    single_culprit: bool
    launcher_blamed: str | None
    evidence: tuple[Evidence, ...]
    victims: tuple[tuple[str, str], ...]
    ranks: tuple[RankRow, ...]
    ranks_hidden: int
    hints: tuple[str, ...]
    notes: tuple[str, ...]
    read: str


@dataclass(frozen=True, slots=True)
class Mark:
    """A mark on a lane at x (px); `x2` > x draws a band (the spread of a folded lane); `label` is the hover text."""

    kind: str
    x: float
    label: str
    x2: float | None = None


@dataclass(frozen=True, slots=True)
class Lane:
    label: str
    node: str
    rank: str
    role: str
    marks: tuple[Mark, ...]
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class LaneGroup:
    """One node (its ranks' lanes), or several nodes that behaved alike folded into one lane."""

    nodes: str
    count: int
    role: str
    folded: bool
    summary: Lane | None
    lanes: tuple[Lane, ...]
    note: str = ""


@dataclass(frozen=True, slots=True)
class TimelineView:
    width: int
    height: int
    ticks: tuple[tuple[float, str], ...]
    groups: tuple[LaneGroup, ...]
    notes: tuple[str, ...]
    start: str
    span: str


@dataclass(frozen=True, slots=True)
class Cell:
    status: str
    title: str


@dataclass(frozen=True, slots=True)
class MatrixRow:
    nodes: str
    count: int
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class PreflightProblem:
    status: str
    nodes: str
    check: str
    summary: str
    hint: str


@dataclass(frozen=True, slots=True)
class PreflightView:
    checks: tuple[str, ...]
    rows: tuple[MatrixRow, ...]
    cluster: tuple[CheckResult, ...]
    problems: tuple[PreflightProblem, ...]
    counts: tuple[tuple[str, int], ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeviceRow:
    nodes: str
    count: int
    npus: str
    health: str
    links: str
    net_health: str
    topology: str
    anomalies: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DevicesView:
    rows: tuple[DeviceRow, ...]
    majority: str
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    y: float
    compute: float  # px
    comm: float  # px
    share_x: float  # px of the comm share bar
    title: str
    straggler: bool
    flagged: bool


@dataclass(frozen=True, slots=True)
class PerformanceView:
    bars: tuple[Bar, ...]
    height: int
    step_width: int
    share_width: int
    limit_x: float
    limit: str
    median: str
    median_x: float
    straggler_rule: str  # what made a rank a straggler, in words
    stragglers: tuple[str, ...]
    flagged: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HeatCell:
    x: int
    y: int
    fill: str  # a CSS colour: the pair's bandwidth against the cluster median, or grey when not measured
    title: str
    status: str  # ok | slow | broken | unmeasured


@dataclass(frozen=True, slots=True)
class NetworkView:
    """netcheck's pair matrix as a heat map: one cell per measured pair, slow nodes and links named."""

    nodes: tuple[str, ...]
    cells: tuple[HeatCell, ...]
    size: int  # px of the square grid
    cell: int  # px per cell
    median: str
    threshold: str
    backend: str
    slow_nodes: tuple[str, ...]
    slow_links: tuple[str, ...]
    broken: tuple[str, ...]
    notes: tuple[str, ...]
    spread: str = ""  # how noisy the healthy pairs are, and what it took to be named slow ("" in older documents)
    inconclusive: tuple[str, ...] = ()  # low on the first look, not shown slow beyond the noise: not named


@dataclass(frozen=True, slots=True)
class StackRow:
    """One equivalence class of a stacks capture: its ranks, where they are, whether they wait."""

    ranks: str
    nodes: str
    where: str  # its innermost frame
    waits_in: str  # its collective, barrier or store wait ("" when it does not wait)
    suspect: bool


@dataclass(frozen=True, slots=True)
class StacksView:
    """Every rank's stack at the moment of a capture, as `ascendctl stacks` showed it: classes (the suspect marked)
    and the merged tree."""

    capture: str
    kind: str
    message: str
    classes: tuple[StackRow, ...]
    tree: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Report:
    """Everything the page shows; a view is None when its data was not given."""

    title: str
    sources: tuple[str, ...]
    verdict: VerdictView | None
    timeline: TimelineView | None
    preflight: PreflightView | None
    devices: DevicesView | None
    performance: PerformanceView | None
    network: NetworkView | None = None
    stacks: StacksView | None = None
    perf: PerfView | None = None  # every rank's profile, judged by `ascendctl perf`
    attempts: AttemptsView | None = None  # launch --restarts: a row per attempt (report/attempts.py)

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(name for name in ("verdict", "attempts", "timeline", "stacks", "preflight", "devices", "performance",
                                       "perf", "network")
                     if getattr(self, name) is not None)

    @property
    def sections(self) -> tuple[str, ...]:
        """The page's sections in order (the verdict's evidence and per-rank table follow the timeline, then the stacks)."""
        return tuple(name for name in ("verdict", "attempts", "timeline", "evidence", "stacks", "preflight", "devices",
                                       "performance", "perf", "network")
                     if getattr(self, "verdict" if name == "evidence" else name) is not None)

    @property
    def notes(self) -> tuple[str, ...]:
        """What was folded or left out, over every view."""
        return tuple(n for v in (self.attempts, self.timeline, self.stacks, self.preflight, self.devices, self.performance,
                               self.perf, self.network)
                     if v is not None for n in v.notes)


# --- verdict ------------------------------------------------------------------------------------------


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CUT else text[:TEXT_CUT] + " [...]"


def _where(f: Finding) -> str:
    return f"{f.file}:{f.line}" if f.line else f.file


def _evidence(f: Finding, *, first: bool = False) -> Evidence:
    return Evidence(_where(f), f.time or "", short_time(f.time), f.node or "?", "" if f.rank is None else str(f.rank), f.signature, _cut(f.text), first)


def short_time(text: str | None) -> str:
    """`2026-11-23T16:16:32.000123` -> `16:16:32.000`: the page says the date once, cells need the clock."""
    if not text:
        return ""
    clock = text.partition("T")[2] or text
    return clock[:12]


def _brief(f: Finding | None, extra: str = "") -> tuple[str, str]:
    if f is None:
        return ("", "")
    return (f"{f.signature} {short_time(f.time)}{extra}", f"{f.time or 'time unknown'} {_where(f)}: {f.text[:300]}")


def verdict_view(report: TriageReport) -> VerdictView:
    """The verdict, its evidence lines, victims folded by how they failed, and the per-rank summary."""
    first = report.first_failure
    evidence = [_evidence(first, first=True)] if first else []
    culprit = (first.node, first.rank) if first else None
    ordered = sorted(report.findings, key=lambda f: (0 if culprit and (f.node, f.rank) == culprit else 1,
                                                      0 if f.role == "error" else 1))
    for f in ordered:
        if len(evidence) >= MAX_EVIDENCE:
            break
        if first is None or (f.file, f.line) != (first.file, first.line):
            evidence.append(_evidence(f))
    order = {"culprit": 0, "co-failed": 1, "victim": 2, "stopped": 3, "unknown": 4, "ok": 5}
    ranks = sorted(report.ranks, key=lambda r: (order.get(r.role, 4), r.node or "", -1 if r.rank is None else r.rank))
    rows = []
    for r in ranks[:MAX_RANK_ROWS]:
        exit_text = " ".join(x for x in (f"code {r.exit_code}" if r.exit_code is not None else "", r.signal or "") if x)
        exit_cell = (exit_text + (f" {short_time(r.exit_time)}" if r.exit_time else ""), r.exit_time or "")
        step = ("" if r.last_step is None else str(r.last_step), r.last_progress_time or "")
        rows.append(RankRow(r.node or "?", "launcher" if r.rank is None else str(r.rank), r.role, _brief(r.first_error),
                            _brief(r.first_comm_error, f" naming {r.peer}" if r.peer else ""), exit_cell, step))
    return VerdictView(
        report.headline(), report.category.value if report.category else "UNKNOWN", report.culprit_node, report.culprit_rank,
        report.rule, report.reason, report.confidence, report.single_culprit, report.launcher_blamed, tuple(evidence),
        tuple(report.folded_victims()), tuple(rows), max(0, len(ranks) - MAX_RANK_ROWS), report.hints, report.notes,
        f"read {report.files_read} file(s), {report.bytes_read / 1e6:.1f} MB; {len(report.findings)} finding(s)"
        + (f", {report.suppressed} repeat(s) not listed" if report.suppressed else ""))


# --- timeline -----------------------------------------------------------------------------------------


def _when(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        # year 0000 (a log form without a year) is not a datetime; the timeline only needs differences
        return datetime.fromisoformat(text.replace("0000-", "2000-", 1) if text.startswith("0000-") else text)
    except ValueError:
        return None


def _node_local(epoch: float, offset: int | None) -> datetime:
    """An epoch time as the node's local wall clock (the form its log times have)."""
    return datetime(1970, 1, 1) + timedelta(seconds=epoch + (offset or 0))


def _teardowns(job: Mapping[str, Any] | None) -> dict[str, datetime]:
    """When ascendctl began tearing the job down, on each node's clock (from the job record)."""
    if not isinstance(job, Mapping) or not isinstance(job.get("teardown_started"), (int, float)):
        return {}
    found = {}
    for node in job.get("nodes") or ():
        if isinstance(node, Mapping) and isinstance(node.get("name"), str):
            offset = node.get("utc_offset")
            found[node["name"]] = _node_local(float(job["teardown_started"]), offset if isinstance(offset, int) else None)
    return found


def _rank_events(r: RankSummary, stops: Mapping[tuple[str | None, int | None], Finding],
                 teardown: datetime | None) -> list[tuple[str, datetime, str]]:
    events: list[tuple[str, datetime, str]] = []

    def add(kind: str, when: str | None, label: str) -> None:
        t = _when(when)
        if t is not None:
            events.append((kind, t, label))
    if r.last_step is not None or r.last_progress_time:
        add("progress", r.last_progress_time, f"last progress: step {r.last_step} at {r.last_progress_time}")
    if r.first_error:
        add("error", r.first_error.time, f"first own error at {r.first_error.time}: {r.first_error.signature}: "
                                          f"{r.first_error.text[:200]}")
    if r.first_comm_error:
        add("comm", r.first_comm_error.time, f"communication error at {r.first_comm_error.time}: "
                                             f"{r.first_comm_error.signature}" + (f" naming {r.peer}" if r.peer else ""))
    stop = stops.get((r.node, r.rank))
    if stop is not None:
        add("stop", stop.time, f"stopped at {stop.time}: {stop.text[:200]}")
    if r.exit_time:
        what = " ".join(x for x in (f"code {r.exit_code}" if r.exit_code is not None else "", r.signal or "") if x)
        add("exit", r.exit_time, f"exit {what or '(code unknown)'} at {r.exit_time}")
    if teardown is not None:
        events.append(("teardown", teardown, f"ascendctl began tearing the job down at {teardown.isoformat()}"))
    return events


def _signature(ranks: Sequence[RankSummary], teardown: bool) -> tuple[Any, ...]:
    """What a node's ranks did, without times or names: nodes with equal signatures fold into one lane."""
    return (teardown, tuple((r.role, r.first_error.signature if r.first_error else None,
                             r.first_comm_error.signature if r.first_comm_error else None, r.peer, r.exit_code, r.signal,
                             r.last_step is not None) for r in ranks))


def timeline_view(report: TriageReport, job: Mapping[str, Any] | None = None) -> TimelineView | None:
    """One lane per rank grouped by node, time on x; nodes that behaved alike fold into one lane on large jobs."""
    teardowns = _teardowns(job)
    stops: dict[tuple[str | None, int | None], Finding] = {}
    for f in report.findings:
        if f.role == "stop" and f.time and (f.node, f.rank) not in stops:
            stops[(f.node, f.rank)] = f
    by_node: dict[str, list[RankSummary]] = {}
    for r in report.ranks:
        by_node.setdefault(r.node or "?", []).append(r)
    for ranks in by_node.values():
        ranks.sort(key=lambda r: -1 if r.rank is None else r.rank)
    events = {(n, i): _rank_events(r, stops, teardowns.get(n)) for n, ranks in by_node.items() for i, r in enumerate(ranks)}
    times = [t for evs in events.values() for _, t, _ in evs]
    if not times:
        return None
    t0, t1 = min(times), max(times)
    seconds = max((t1 - t0).total_seconds(), 1e-3)
    usable = LANE_WIDTH - 2 * LANE_PAD

    def x(t: datetime) -> float:
        return round(LANE_PAD + (t - t0).total_seconds() / seconds * usable, 1)

    def lane(node: str, i: int, r: RankSummary) -> Lane:
        evs = events[(node, i)]
        marks = tuple(Mark(kind, x(t), label) for kind, t, label in evs)
        xs = [m.x for m in marks] or [LANE_PAD]
        label = f"{node} launcher" if r.rank is None else f"{node} rank {r.rank}"
        return Lane(label, node, "" if r.rank is None else str(r.rank), r.role, marks, min(xs), max(xs))

    def role_of(ranks: Sequence[RankSummary]) -> str:
        roles = {r.role for r in ranks}
        for role in ("culprit", "co-failed", "victim", "stopped", "unknown"):
            if role in roles:
                return role
        return "ok"

    fold_nodes = len(by_node) > FOLD_ABOVE_NODES
    groups: dict[tuple[Any, ...], list[str]] = {}
    for node, ranks in by_node.items():
        key = _signature(ranks, node in teardowns) if fold_nodes and role_of(ranks) != "culprit" else (node,)
        groups.setdefault(key, []).append(node)
    out: list[LaneGroup] = []
    notes: list[str] = []
    drawn = 0
    for members in groups.values():
        ranks = by_node[members[0]]
        role = role_of(ranks)
        if len(members) == 1:
            lanes = tuple(lane(members[0], i, r) for i, r in enumerate(ranks))
            if drawn + len(lanes) > MAX_LANES:
                lanes = lanes[:max(0, MAX_LANES - drawn)]
                notes.append(f"{members[0]}: only {len(lanes)} of {len(ranks)} lanes drawn (the page draws at most {MAX_LANES})")
            drawn += len(lanes)
            out.append(LaneGroup(members[0], 1, role, False, None, lanes))
            continue
        sample = members[:SAMPLE_NODES] if drawn < MAX_LANES else []
        lanes = tuple(lane(n, i, r) for n in sample for i, r in enumerate(by_node[n]))
        drawn += len(lanes)
        summary = _folded_lane(members, [events[(n, i)] for n in members for i in range(len(by_node[n]))], role, x)
        n_ranks = sum(len(by_node[n]) for n in members)
        note = (f"{len(members)} nodes ({n_ranks} lanes) behaved alike and are folded into one lane; "
                f"{len(sample)} of them drawn when expanded")
        notes.append(f"timeline: {fold(members)}: {note}")
        out.append(LaneGroup(fold(members), len(members), role, True, summary, lanes, note))
    ticks = tuple((round(LANE_PAD + usable * k / 4, 1), _clock(t0 + timedelta(seconds=seconds * k / 4), seconds))
                  for k in range(5))
    return TimelineView(LANE_WIDTH, LANE_HEIGHT, ticks, tuple(out), tuple(notes), t0.isoformat(sep=" "),
                        f"{seconds:.1f} s" if seconds >= 1 else f"{seconds * 1000:.0f} ms")


def _clock(t: datetime, seconds: float) -> str:
    return t.strftime("%H:%M:%S") + (f".{t.microsecond // 1000:03d}" if seconds < 10 else "")


def _folded_lane(members: Sequence[str], events: Iterable[list[tuple[str, datetime, str]]], role: str,
                 x: Any) -> Lane:
    spread: dict[str, list[datetime]] = {}
    for evs in events:
        for kind, t, _ in evs:
            spread.setdefault(kind, []).append(t)
    marks = []
    for kind in MARK_NAMES:
        ts = spread.get(kind)
        if not ts:
            continue
        lo, hi = min(ts), max(ts)
        label = (f"{MARK_NAMES[kind]}: {len(ts)} lane(s), "
                 + (f"at {lo.isoformat(sep=' ')}" if lo == hi else f"from {lo.isoformat(sep=' ')} to {hi.isoformat(sep=' ')}"))
        marks.append(Mark(kind, x(lo), label, x(hi) if hi > lo else None))
    xs = [m.x for m in marks] + [m.x2 for m in marks if m.x2 is not None] or [LANE_PAD]
    return Lane(f"{fold(members)} ({len(members)} nodes)", fold(members), "", role, tuple(marks), min(xs), max(xs))


# --- preflight ----------------------------------------------------------------------------------------

_PASSING = (Status.PASS, Status.SKIP)
_SEVERITY = (Status.FAIL, Status.ERROR, Status.WARN, Status.SKIP, Status.PASS)


def preflight_view(report: PreflightReport) -> PreflightView:
    """Nodes x checks; rows of nodes that passed alike fold into one; every problem with its hint below."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, node in enumerate(report.nodes):
        statuses = tuple(c.status for c in node.checks)
        healthy = all(s in _PASSING for s in statuses)
        key = ("ok", tuple(c.check for c in node.checks), statuses) if healthy else ("node", i)
        groups.setdefault(key, []).append(i)
    rows = []
    notes = []
    for members in groups.values():
        nodes = [report.nodes[i] for i in members]
        sample = nodes[0]
        by_id = {c.check: c for c in sample.checks}
        cells = []
        for check_id in report.check_ids:
            c = by_id.get(check_id)
            if c is None:
                cells.append(Cell("none", f"{check_id}: not run"))
                continue
            title = f"{check_id}: {c.status.value}: {c.summary}" + (f"\nhint: {c.hint}" if c.hint else "")
            if len(nodes) > 1:
                title += f"\n({c.status.value} on all {len(nodes)} nodes; the summary is {sample.name}'s)"
            cells.append(Cell(c.status.value, title))
        rows.append(MatrixRow(fold(n.name for n in nodes), len(nodes), tuple(cells)))
        if len(nodes) > 1:
            notes.append(f"preflight: {len(nodes)} nodes whose checks all passed alike are one row ({fold(n.name for n in nodes)})")
    if len(rows) > MAX_PREFLIGHT_ROWS:
        notes.append(f"preflight: {len(rows) - MAX_PREFLIGHT_ROWS} more rows not drawn; every problem is listed below")
        rows = rows[:MAX_PREFLIGHT_ROWS]
    problems = tuple(PreflightProblem(status.value, fold(names), check, summary, hint or "")
                     for (check, status, summary, hint), names in sorted(report.problems(), key=lambda p: _SEVERITY.index(p[0][1])))
    counts = Counter(c.status.value for n in report.nodes for c in n.checks)
    return PreflightView(report.check_ids, tuple(rows), report.cluster, problems,
                         tuple((s.value, counts[s.value]) for s in Status if counts[s.value]), tuple(notes))


# --- devices ------------------------------------------------------------------------------------------


def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return parse_json(data)
    except ValueError:
        return None


def devices_view(meta: Mapping[str, bytes], summary: Mapping[str, Any] | None) -> DevicesView | None:
    """Per node: NPU count and health, HCCN link and net health, topology against the majority; outliers flagged."""
    from ascendctl.facts.parsers.hccn import parse_link, parse_net_health
    from ascendctl.facts.parsers.npu_smi import parse_npu_info

    per_node: dict[str, dict[str, bytes]] = {}
    for rel, data in meta.items():
        node, rest = split_node(rel)
        if node is not None:
            per_node.setdefault(node, {})[rest] = data
    nodes = sorted(per_node)
    manifest = _json(meta.get(MANIFEST))
    if isinstance(manifest, Mapping) and isinstance(manifest.get("nodes"), list):
        order = [n.get("name") for n in manifest["nodes"] if isinstance(n, Mapping) and isinstance(n.get("name"), str)]
        present, listed = set(nodes), set(order)
        nodes = [n for n in order if n in present] + [n for n in nodes if n not in listed]
    topo_outliers: dict[str, str] = {}
    for item in (summary or {}).get("topology") or ():
        try:
            topo = TopoSummary.from_dict(item)
        except (KeyError, TypeError, ValueError):
            continue
        for o in topo.outliers:
            cells = ", ".join(f"{c.row}-{c.column} {c.expected or 'none'}->{c.actual or 'none'}" for c in o.cells[:4])
            topo_outliers[o.node] = f"{topo.tool} differs from the majority in {len(o.cells)} cell(s): {cells}"
    facts: dict[str, tuple[str, str, str, str, str]] = {}
    counts: dict[str, int | None] = {}
    parsed: dict[bytes, tuple[int | None, str]] = {}  # most nodes print the same table: parse each text once
    for node in nodes:
        files = per_node[node]
        info_text = files.get(command_path(CMD_NPU_INFO))
        count: int | None = None
        health = ""
        if info_text is not None:
            if info_text not in parsed:
                try:
                    info = parse_npu_info(info_text.decode("utf-8", "replace"))
                    bad = [f"NPU {n}: {info.health_of(n).value}" for n in info.npu_ids if info.health_of(n).value.lower() != "ok"]
                    parsed[info_text] = (info.npu_count, "; ".join(bad) or f"{info.npu_count} OK")
                except ParseError as exc:
                    parsed[info_text] = (None, f"npu-smi info unreadable: {exc}")
            count, health = parsed[info_text]
        if count is None:
            f = _json(files.get(FACTS))
            ids = f.get("npu_ids") if isinstance(f, Mapping) else None
            count = len(ids) if isinstance(ids, list) and ids else None
        links: list[tuple[str, str]] = []
        nets: list[tuple[str, str]] = []
        for rel in sorted(files):
            command = command_name(rel) or ""
            for base, found in ((CMD_HCCN_LINK, links), (CMD_HCCN_NET_HEALTH, nets)):
                dev = device_of(command, base)
                if dev is None:
                    continue
                text = files[rel].decode("utf-8", "replace")
                try:
                    found.append((dev, parse_link(text) if base == CMD_HCCN_LINK else parse_net_health(text).status))
                except ParseError:
                    found.append((dev, "unreadable"))
        down = [f"NPU {d} {s}" for d, s in links if s != "UP"]
        link_text = ("; ".join(down) if down else f"{len(links)}/{len(links)} UP") if links else ""
        bad_net = [f"NPU {d}: {s}" for d, s in nets if s.lower() != "success"]
        net_text = ("; ".join(bad_net) if bad_net else f"{len(nets)} Success") if nets else ""
        counts[node] = count
        facts[node] = ("" if count is None else str(count), health, link_text, net_text, topo_outliers.get(node, ""))
    if not any(any(v) for v in facts.values()):
        return None
    known = Counter(c for c in counts.values() if c is not None)
    majority = known.most_common(1)[0][0] if known else None
    grouped: dict[tuple[Any, ...], list[str]] = {}
    for node in nodes:
        npus, health, links_text, net, topo_text = facts[node]
        anomalies: list[str] = []
        if majority is not None and counts[node] != majority:
            anomalies.append(f"{npus or 'no'} NPUs where most nodes have {majority}")
        if health and not health.endswith(" OK"):
            anomalies.append(health)
        if "DOWN" in links_text or "unreadable" in links_text:
            anomalies.append(f"links: {links_text}")
        if net and not net.endswith(" Success"):
            anomalies.append(f"net health: {net}")
        if topo_text:
            anomalies.append(topo_text)
        grouped.setdefault((*facts[node], tuple(anomalies)), []).append(node)
    rows = [DeviceRow(fold(names), len(names), key[0], key[1], key[2], key[3], key[4] or "same as the majority", key[5])
            for key, names in grouped.items()]
    rows.sort(key=lambda r: (not r.anomalies,))
    notes = []
    if len(rows) > MAX_DEVICE_ROWS:
        notes.append(f"devices: {len(rows) - MAX_DEVICE_ROWS} more rows not drawn")
        rows = rows[:MAX_DEVICE_ROWS]
    folded = sum(1 for r in rows if r.count > 1)
    if folded:
        notes.append(f"devices: nodes with identical devices, links and topology share one row ({folded} such row(s))")
    return DevicesView(tuple(rows), "unknown" if majority is None else str(majority), tuple(notes))


# --- performance --------------------------------------------------------------------------------------


def performance_view(summary: MsprofSummary) -> PerformanceView | None:
    """Per rank: step time split into compute and communication, stragglers marked; comm share against the limit."""
    ranks = list(summary.ranks)
    if not ranks:
        return None
    notes = []
    if len(ranks) > MAX_PERF_RANKS:
        marked = [r for r in ranks if r.straggler or r.comm_flag][:MAX_PERF_RANKS // 2]
        marked_ids = {id(r) for r in marked}
        rest = [r for r in ranks if id(r) not in marked_ids]
        step = max(1, len(rest) // (MAX_PERF_RANKS - len(marked)))
        keep = {id(r) for r in marked + rest[::step][:MAX_PERF_RANKS - len(marked)]}
        notes.append(f"performance: {len(ranks)} ranks; drawn: every straggler and flagged rank (up to {MAX_PERF_RANKS // 2}) "
                     f"and every {step}th other rank, {len(keep)} in all")
        ranks = [r for r in ranks if id(r) in keep]
    step_width, share_width, row = 420, 220, 16
    longest = max(r.step_us for r in ranks) or 1.0
    top_share = max(max(r.comm_share for r in ranks), summary.comm_limit * 1.5, 1e-9)
    bars = []
    for i, r in enumerate(ranks):
        scale = step_width / longest
        title = (f"{r.rank}: step {r.step_us / 1000:.2f} ms (median of {r.steps}), compute {r.compute_us / 1000:.2f} ms, "
                 f"communication {r.comm_us / 1000:.2f} ms = {r.comm_share:.1%} of the step"
                 + ("; straggler" if r.straggler else "") + ("; communication above the limit" if r.comm_flag else ""))
        bars.append(Bar(r.rank, i * row, round(r.compute_us * scale, 1), round(min(r.comm_us, r.step_us) * scale, 1),
                        round(r.comm_share / top_share * share_width, 1), title, r.straggler, r.comm_flag))
    median = summary.median_step_us
    return PerformanceView(tuple(bars), len(bars) * row + 4, step_width, share_width,
                           round(summary.comm_limit / top_share * share_width, 1), f"{summary.comm_limit:.0%}",
                           f"{median / 1000:.2f} ms", round(median * step_width / longest, 1), _straggler_rule(summary),
                           tuple(r.rank for r in summary.ranks if r.straggler),
                           tuple(r.rank for r in summary.ranks if r.comm_flag), tuple(notes))



def _straggler_rule(summary: MsprofSummary) -> str:
    """What made a rank a straggler: outliers.py's rule (summaries.STRAGGLER_RULE), or one factor in an older summary."""
    if summary.straggler_limit_us is None:
        return f"above {summary.straggler_factor:g}x the median"
    spread = "" if summary.step_spread is None else f" (the healthy ranks vary by {summary.step_spread:.0%})"
    return (f"above {summary.straggler_limit_us / 1000:.2f} ms in both halves of its steps: {summary.straggler_factor:g}x and "
            f"{summary.straggler_rule.spreads:g} spreads over the healthy ranks' median, the larger{spread}")


# --- network (netcheck) --------------------------------------------------------------------------------

MAX_HEAT_NODES = 128  # beyond this the grid is unreadable: the slow and broken nodes plus a sample are drawn


def _heat_fill(ratio: float | None) -> str:
    """Red below the threshold side, green at or above the median: a colour a person reads without a legend."""
    if ratio is None:
        return "#bdbdbd"
    r = max(0.0, min(1.0, ratio))
    red, green = int(220 - 170 * r), int(60 + 140 * r)
    return f"rgb({red},{green},70)"


def network_view(doc: Mapping[str, Any]) -> NetworkView | None:
    """The pair matrix of a `netcheck --json` document; ValueError/KeyError/TypeError on garbage."""
    verdict = doc["verdict"]
    median = verdict.get("median_gbps")
    threshold = float(verdict["threshold"])
    pairs: dict[tuple[str, str], tuple[float | None, str | None]] = {}
    again: dict[tuple[str, str], list[str]] = {}  # the second look's figures, for the cell's title
    names: list[str] = []
    for m in doc["matrix"]:
        a, b = str(m["a"]), str(m["b"])
        for n in (a, b):
            if n not in names:
                names.append(n)
        values = [v for v in (m.get("a_to_b_gbps"), m.get("b_to_a_gbps")) if isinstance(v, (int, float))]
        if m.get("look", 1) != 1 and ((a, b) in pairs or (b, a) in pairs):
            seen = (a, b) if (a, b) in pairs else (b, a)
            again.setdefault(seen, []).append(f"{min(values):.2f}" if values else "failed")
            continue
        pairs[(a, b)] = (min(values) if values else None, m.get("error"))
    if not names:
        return None
    slow_nodes = tuple(str(n) for n in verdict.get("slow_nodes", ()))
    broken_nodes = tuple(str(n) for n in verdict.get("broken_nodes", ()))
    slow_links = {tuple(sorted((str(p[0]), str(p[1])))) for p in verdict.get("slow_links", ())}
    notes = []
    if len(names) > MAX_HEAT_NODES:
        marked = [n for n in names if n in slow_nodes or n in broken_nodes or any(n in link for link in slow_links)]
        rest = [n for n in names if n not in marked]
        step = max(1, len(rest) // max(1, MAX_HEAT_NODES - len(marked)))
        keep = set(marked[:MAX_HEAT_NODES] + rest[::step][:max(0, MAX_HEAT_NODES - len(marked))])
        notes.append(f"network: {len(names)} nodes; drawn: the slow and broken ones and every {step}th other, {len(keep)} in all")
        names = [n for n in names if n in keep]
    index = {n: i for i, n in enumerate(names)}
    cell = max(6, min(28, 560 // max(1, len(names))))
    cells = []
    for (a, b), (value, error) in pairs.items():
        if a not in index or b not in index:
            continue
        key = tuple(sorted((a, b)))
        if error:
            status, ratio, what = "broken", 0.0, f"failed: {error}"
        elif value is None:
            status, ratio, what = "unmeasured", None, "not measured"
        else:
            ratio = value / median if median else None
            # slow: what the verdict named (on two looks, beyond the noise); a low pair it did not name is not slow
            slow = key in slow_links or a in slow_nodes or b in slow_nodes
            low = not slow and ratio is not None and ratio < threshold
            status, what = ("slow" if slow else "ok"), f"{value:.2f} Gbit/s (slower direction)" + (
                f", {ratio:.0%} of the median" if ratio is not None else "") + (
                "; below the threshold, not shown slow beyond the noise" if low else "") + (
                f"; second look {', '.join(again[(a, b)])} Gbit/s" if (a, b) in again else "")
        for x, y in ((index[a], index[b]), (index[b], index[a])):
            cells.append(HeatCell(x * cell, y * cell, _heat_fill(ratio), f"{a} <-> {b}: {what}", status))
    return NetworkView(tuple(names), tuple(cells), len(names) * cell, cell,
                       f"{median:.2f} Gbit/s" if isinstance(median, (int, float)) else "-", f"{threshold:g}",
                       str(doc.get("backend", "?")), slow_nodes, tuple(f"{a} <-> {b}" for a, b in sorted(slow_links)),
                       tuple(broken_nodes) + tuple(f"{x['a']} <-> {x['b']}" for x in verdict.get("broken_links", ())),
                       tuple(notes), _spread_text(verdict),
                       tuple(" <-> ".join(str(n) for n in s["nodes"]) + f" ({s['reason']})" for s in verdict.get("suspects", ())
                             if s.get("outcome") in ("inconclusive", "pending")))


def _spread_text(verdict: Mapping[str, Any]) -> str:
    """The healthy pairs' spread and the rule, from a verdict that has them (netcheck after issue #32), else ""."""
    spread, rule = verdict.get("spread"), verdict.get("rule")
    if not isinstance(spread, Mapping) or not isinstance(rule, Mapping):
        return ""
    return (f"the healthy pairs vary by {float(spread['measured_relative']):.0%} ({int(spread['pairs'])} pairs; of the "
            f"logarithms, the larger of 1.4826 x MAD and the standard deviation); a pair or node is named slow only when "
            f"every look at it, at least {int(rule['looks'])}, is below {float(verdict['threshold']):g} x median and more "
            f"than {float(rule['spreads']):g} spreads below it")


# --- stacks -------------------------------------------------------------------------------------------

MAX_STACK_CLASSES = 50
MAX_TREE_LINES = 400


def stacks_view(data: Mapping[str, Any]) -> StacksView:
    """The triage verdict's stacks capture (`TriageReport.stacks`); KeyError/TypeError/ValueError on a bad document."""
    from ascendctl.stacks.text import frame_from_dict, short, tree_from_dict, tree_lines

    rows = []
    for item in data["classes"][:MAX_STACK_CLASSES]:
        frames = [frame_from_dict(f) for f in item["frames"]]
        wait = item.get("wait_frame")
        ranks = [int(r) for r in item["ranks"]]
        rows.append(StackRow(f"rank{'s' if len(ranks) != 1 else ''} {item.get('ranks_folded') or ranks}",
                             fold([str(n) for n in item["nodes"]]), short(frames[-1]) if frames else "(no Python frame)",
                             short(frame_from_dict(wait)) if wait else "", bool(item["suspect"])))
    tree = tree_lines(tree_from_dict(data["tree"]))
    notes = []
    if len(data["classes"]) > MAX_STACK_CLASSES:
        notes.append(f"stacks: {len(data['classes']) - MAX_STACK_CLASSES} more classes not shown (triage --json has them)")
    if len(tree) > MAX_TREE_LINES:
        notes.append(f"stacks: the tree cut at {MAX_TREE_LINES} of {len(tree)} lines (triage --json has all of it)")
    unanswered = data.get("unanswered") or []
    if unanswered:
        notes.append("stacks: no stack from " + ", ".join(f"rank {u['rank']} on {u['node']} ({u['status']})"
                                                          for u in unanswered[:20]) + (" ..." if len(unanswered) > 20 else ""))
    verdict = data["verdict"]
    return StacksView(str(data["capture"]), str(verdict["kind"]), str(verdict["message"]), tuple(rows),
                      tuple(tree[:MAX_TREE_LINES]), tuple(notes))


# --- perf (every rank's profile: `ascendctl perf`) -----------------------------------------------------

MAX_PERF_HEAT_RANKS = 64  # rows of the rank x step map and of the link matrix
MAX_PERF_HEAT_STEPS = 60  # columns of the rank x step map


@dataclass(frozen=True, slots=True)
class HeatGrid:
    """A labelled grid of coloured cells (templates/report.html.j2's `heat` macro draws it, as it draws netcheck's)."""

    rows: tuple[str, ...]
    cols: tuple[str, ...]
    cells: tuple[HeatCell, ...]
    cell: int  # px per cell
    marked: tuple[str, ...]  # row and column labels drawn as named slow


@dataclass(frozen=True, slots=True)
class PerfView:
    """`ascendctl perf`'s verdict over the profiles given, its evidence, the rank x step map of communication share and
    the source x destination bandwidth matrix; only what the verdict names is marked."""

    verdict: str
    evidence: tuple[str, ...]
    straggler: str  # "rank 5", or "" when the verdict names none
    slow_links: tuple[str, ...]
    limit: str
    steps: HeatGrid | None
    links: HeatGrid | None
    notes: tuple[str, ...]


def _sample(items: Sequence[int], marked: Iterable[int], limit: int) -> tuple[list[int], int]:
    """At most `limit` of `items` in their order: every marked one (up to half), then every k-th other; and k."""
    if len(items) <= limit:
        return list(items), 1
    wanted = set(marked)
    chosen = [i for i in items if i in wanted][:limit // 2]
    rest = [i for i in items if i not in wanted]
    step = max(1, -(-len(rest) // max(1, limit - len(chosen))))
    keep = set(chosen) | set(rest[::step][:limit - len(chosen)])
    return [i for i in items if i in keep], step


def _share_fill(share: float | None, limit: float) -> str:
    """Green for no communication, red at twice the limit or more: netcheck's colours, read the other way."""
    return _heat_fill(None if share is None else 1.0 - min(1.0, share / (2 * limit)))


def _perf_steps(report: PerfReport, profiles: Sequence[RankInput], named: set[int]) -> tuple[HeatGrid | None, list[str]]:
    """Rank x step: communication not overlapped / step time of each rank in each step."""
    ranks = [p.rank for p in profiles if p.steps]
    if not ranks:
        return None, []
    notes = []
    kept, every = _sample(ranks, named, MAX_PERF_HEAT_RANKS)
    if every > 1:
        notes.append(f"perf: {len(ranks)} ranks; the rank x step map draws the named ones and every {every}th other, "
                     f"{len(kept)} in all (`ascendctl perf --json` has every rank's means)")
    numbers = sorted({s.step for p in profiles for s in p.steps})
    steps, every = _sample(numbers, (), MAX_PERF_HEAT_STEPS)
    if every > 1:
        notes.append(f"perf: {len(numbers)} steps; the map draws every {every}th, {len(steps)} in all")
    rows, cols = {r: i for i, r in enumerate(kept)}, {n: i for i, n in enumerate(steps)}
    size = max(6, min(20, 720 // max(1, len(steps)), 900 // max(1, len(kept))))  # 64 ranks: 14 px, room for a label
    cells = []
    for p in profiles:
        if p.rank not in rows:
            continue
        for s in p.steps:
            if s.step not in cols:
                continue
            share = (s.comm_not_overlapped_ms / s.step_ms if s.comm_not_overlapped_ms is not None and s.step_ms
                     else None)
            what = ("not measured" if share is None else
                    f"communication {s.comm_not_overlapped_ms:.2f} ms of a {s.step_ms:.2f} ms step = {share:.1%}"
                    + (f", compute {s.compute_ms:.2f} ms" if s.compute_ms is not None else ""))
            status = "unmeasured" if share is None else "slow" if p.rank in named else "ok"
            cells.append(HeatCell(cols[s.step] * size, rows[p.rank] * size, _share_fill(share, report.comm_share_limit),
                                  f"rank {p.rank}, step {s.step}: {what}", status))
    return HeatGrid(tuple(f"rank {r}" for r in kept), tuple(str(n) for n in steps), tuple(cells), size,
                    tuple(f"rank {r}" for r in kept if r in named)), notes


def _perf_links(report: PerfReport) -> tuple[HeatGrid | None, list[str]]:
    """Source x destination: each link's bandwidth against the median of its transport; the slowest transport of a
    pair colours its cell."""
    if not report.links:
        return None, []
    ranks = sorted({link.src for link in report.links} | {link.dst for link in report.links})
    slow = {r for link in report.slow_links for r in (link.src, link.dst)}
    kept, every = _sample(ranks, slow, MAX_PERF_HEAT_RANKS)
    notes = [f"perf: {len(ranks)} ranks in the link matrix; drawn: the ends of slow links and every {every}th other, "
             f"{len(kept)} in all"] if every > 1 else []
    index = {r: i for i, r in enumerate(kept)}
    size = max(6, min(28, 900 // max(1, len(kept))))
    by_pair: dict[tuple[int, int], list[LinkSummary]] = {}
    for link in report.links:
        if link.src in index and link.dst in index:
            by_pair.setdefault((link.src, link.dst), []).append(link)
    cells = []
    for (src, dst), found in sorted(by_pair.items()):
        ratios = [(link.bandwidth_gbps / link.median_gbps if link.bandwidth_gbps is not None and link.median_gbps
                   else None, link) for link in found]
        measured = [r for r, _ in ratios if r is not None]
        title = "; ".join(f"{link.name}: " + ("not measured" if link.bandwidth_gbps is None else
                                               f"{gbps(link.bandwidth_gbps)} GB/s, median of {link.transport} "
                                               f"{gbps(link.median_gbps)}") + ("; slow" if link.slow else "")
                          for _, link in ratios)
        status = ("slow" if any(link.slow for link in found) else "unmeasured" if not measured else "ok")
        cells.append(HeatCell(index[dst] * size, index[src] * size, _heat_fill(min(measured) if measured else None),
                              title, status))
    return HeatGrid(tuple(f"rank {r}" for r in kept), tuple(f"rank {r}" for r in kept), tuple(cells), size,
                    tuple(f"rank {r}" for r in kept if r in slow)), notes


def perf_view(report: PerfReport, profiles: Sequence[RankInput]) -> PerfView | None:
    """The perf section: the verdict line, its evidence, the two maps (bounded: what is not drawn is in the notes)."""
    if not profiles:
        return None
    named = {report.straggler.rank} if report.straggler else set()
    evidence = [f"read: {len(report.ranks)} rank(s) ({', '.join(report.kinds)}); {report.compared} call(s) compared "
                f"by {report.vote_on}; {len(report.votes)} vote(s)"]
    evidence += [f"left out of the vote: rank {d.rank}: {d.reason}" for d in report.dropped[:10]]
    if report.straggler:
        s = report.straggler
        evidence.append(f"votes for rank {s.rank}: " + ", ".join(f"{op} {n}" for op, n in s.ops.items())
                        + f" ({s.votes} of {s.compared})")
    above = [r.rank for r in report.ranks if r.comm_share is not None and r.comm_share > report.comm_share_limit]
    if above:
        evidence.append(f"communication above {report.comm_share_limit:.0%} of the step: {len(above)} rank(s): "
                        + ", ".join(str(r) for r in above[:20]) + (" ..." if len(above) > 20 else ""))
    for spread in report.spreads:
        if spread.flagged:
            evidence.append(f"{spread.dimension} spread {spread.spread:.1%} of the mean step (rank {spread.min_rank} "
                            f"{spread.min_ms:.2f} ms to rank {spread.max_rank} {spread.max_ms:.2f} ms)")
    slow = tuple(f"{link.name} {gbps(link.bandwidth_gbps)} GB/s (median {gbps(link.median_gbps)})"
                 for link in report.slow_links)
    steps, step_notes = _perf_steps(report, profiles, named)
    links, link_notes = _perf_links(report)
    problems = [f"perf: {p.path}: {p.message}" for p in report.problems[:10]]
    if len(report.problems) > 10:
        problems.append(f"perf: {len(report.problems) - 10} more unreadable profile file(s) (`ascendctl perf` names them)")
    return PerfView(report.verdict, tuple(evidence), f"rank {report.straggler.rank}" if report.straggler else "", slow,
                    f"{report.comm_share_limit:.0%}", steps, links, tuple(step_notes + link_notes + problems))
