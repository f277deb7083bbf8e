"""`ascendctl netcheck` as a library call: probe the nodes, pick a backend, measure pairs round by round, judge.

Each node is asked once (the one probe: its cluster endpoint from network.py plus which backends it has).
Unreachable nodes are left out of the schedule and reported. A round starts every pair's server first
(each binds its node's cluster address and announces a port), then every client at once, so the pairs of a
round measure at the same time. Connections belong to one NodeGroup. Must not import typer or rich.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ascendctl.facts.devices import devices_from_sections, device_sections, merge_inventory, node_device_ids
from ascendctl.errors import AscendctlError, ExitCode
from ascendctl.remote.group import NodeGroup
from ascendctl.models import NodeStatus
from ascendctl.facts.endpoint import cluster_endpoint, net_sections
from ascendctl.outcome import Outcome, exit_code_for, node_outcome
from ascendctl.remote.probe import ask
from ascendctl.remote.transport.base import KILL_GRACE, ANSWER_SLACK, node_bounded
from ascendctl.netcheck import backends
from ascendctl.netcheck.device_ping import HCCN_TOOL_CHECK, HCCN_TOOL_SECTION, DeviceVerdict, run_device_pings
from ascendctl.outliers import SLOW
from ascendctl.netcheck.schedule import GroupResult, QuickSearch, pair_rounds, ring_links, with_second_looks
from ascendctl.netcheck.verdict import Measurement, judge, netcheck_rule

if TYPE_CHECKING:
    from ascendctl.facts.devices import NodeDevices
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import EventSink
    from ascendctl.facts.endpoint import Endpoint
    from ascendctl.remote.transport.base import Spawned, Transport
    from ascendctl.outliers import Rule, Spread
    from ascendctl.netcheck.schedule import Pair
    from ascendctl.netcheck.verdict import NetcheckVerdict

MODES = ("pairs", "all-pairs", "quick")
TORCH = "netcheck.torch"
# seconds a server may take to announce its port (a cold `import torch` on a busy node is slow)
SERVER_START = 60.0


@dataclass(frozen=True, slots=True)
class NetcheckOptions:
    mode: str = "pairs"  # pairs | all-pairs | quick
    size: int = 64 * 1024 * 1024  # bytes each way per pair
    backend: str = "auto"
    threshold: float = 0.8
    timeout: float | None = None  # seconds one measurement may take; default: the node's command_timeout
    device_ping: bool | None = None  # hccn_tool pings between device IPs; None: when every node has hccn_tool


@dataclass(frozen=True, slots=True)
class NodeProblem:
    node: str
    status: str  # a NodeStatus value
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"node": self.node, "status": self.status, "message": self.message}


@dataclass(frozen=True, slots=True)
class NetcheckReport:
    mode: str
    backend: str
    backend_reason: str
    size: int
    endpoints: dict[str, Endpoint]
    rounds: tuple[tuple[tuple[str, str], ...], ...]
    measurements: tuple[Measurement, ...]
    verdict: NetcheckVerdict
    problems: tuple[NodeProblem, ...] = field(default=())
    seconds: float = 0.0
    devices: DeviceVerdict = field(default=DeviceVerdict(skipped="not asked"))
    groups: tuple["GroupMeasurement", ...] = field(default=())
    second_look_rounds: int = 0  # the last rounds of `rounds`: the second look at what the first one flagged

    @property
    def outcomes(self) -> list[Outcome]:
        found = [node_outcome(NodeStatus(p.status)) for p in self.problems]
        if not self.verdict.clean or not self.devices.clean:
            found.append(Outcome.FAILED)
        return found

    @property
    def measured(self) -> bool:
        """Whether anything was measured: one reachable node has no link to another (then `clean` means nothing)."""
        return len(self.endpoints) >= 2

    @property
    def exit_code(self) -> ExitCode:
        """0 clean, 3 something slow or broken (or a node not evaluated), 4 nodes unreachable."""
        return exit_code_for(self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: the matrix of measured pairs (Gbit/s both ways) for a heat map, and the verdict."""
        return {
            "mode": self.mode, "backend": self.backend, "backend_reason": self.backend_reason,
            "size_bytes": self.size, "seconds": round(self.seconds, 3), "measured": self.measured,
            "endpoints": {name: {"interface": e.ifname, "ip": e.ip} for name, e in self.endpoints.items()},
            "rounds": [[list(pair) for pair in r] for r in self.rounds], "second_look_rounds": self.second_look_rounds,
            "matrix": [m.to_dict() for m in self.measurements],
            "groups": [g.to_dict() for g in self.groups],
            "verdict": self.verdict.to_dict(),
            "problems": [p.to_dict() for p in self.problems],
            "devices": self.devices.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class NodeNetFacts:
    endpoint: Endpoint
    has: frozenset[str]  # backends this node can run (and "hccn_tool" when it has that)
    devices: NodeDevices | None = None  # device IPs (devices.py), asked when device pings may run


def facts_sections(node: Node, inventory: Inventory, backend: str, *, device_ping: bool | None = None,
                   mode: str = "pairs") -> dict[str, str]:
    """Probe sections: the node's cluster endpoint, per backend that may be chosen whether it can run it (for `mode`:
    `--quick` rings need more of nccl-tests than pairs do), and (unless device pings are off) whether it has hccn_tool
    and its device IPs, asked as devices.py asks them."""
    py = _quote(node.python)
    sections = dict(net_sections(node, inventory))
    if device_ping is not False:
        sections[HCCN_TOOL_SECTION] = HCCN_TOOL_CHECK
        if node.device_ips is None:
            sections.update(device_sections(node_device_ids(node, None)))
    if backend in ("auto", "torch"):
        sections[TORCH] = f"{py} -c 'import torch.distributed as d; print(d.is_available() and d.is_gloo_available())'"
    sections["netcheck.python"] = f"{py} -c 'import sys; print(sys.version_info >= (3, 7))'"
    for name, check in backends.has_sections(rings=mode == "quick").items():
        if backend in ("auto", name):
            sections[f"netcheck.{name}"] = check
    return sections


def _quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def _has(sections: dict[str, Any]) -> frozenset[str]:
    found = set()
    if TORCH in sections and sections[TORCH].ok and sections[TORCH].output.strip().endswith("True"):
        found.add("torch")
    if "netcheck.python" in sections and sections["netcheck.python"].output.strip().endswith("True"):
        found.add("tcp")
    for name in backends.HAS_SECTIONS:
        if f"netcheck.{name}" in sections and sections[f"netcheck.{name}"].ok:
            found.add(name)
    if HCCN_TOOL_SECTION in sections and sections[HCCN_TOOL_SECTION].ok:
        found.add("hccn_tool")
    return frozenset(found)


def choose_backend(requested: str, has: Sequence[frozenset[str]]) -> tuple[str, str]:
    """(backend, why): `auto` takes the first of hccl_test, nccl-tests, torch, tcp that every node can run."""
    if requested != "auto":
        return requested, "asked for"
    for name in backends.BACKENDS:
        if has and all(name in h for h in has):
            return name, f"auto: every node has {name}"
    return "tcp", "auto: fallback (not every node has python3 >= 3.7)"


def run_netcheck(inventory: Inventory, options: NetcheckOptions = NetcheckOptions(), *,
                 on_event: EventSink | None = None, factory: Any = None) -> NetcheckReport:
    """Measure the cluster network pair by pair and name the slow nodes and links."""
    if options.mode not in MODES:
        raise AscendctlError(f"unknown mode {options.mode!r} (one of {', '.join(MODES)})", exit_code=ExitCode.USAGE)
    if options.backend not in ("auto", *backends.BACKENDS):
        raise AscendctlError(f"unknown backend {options.backend!r} (one of auto, {', '.join(backends.BACKENDS)})",
                             exit_code=ExitCode.USAGE)
    started = time.monotonic()
    with NodeGroup(inventory, factory=factory) as group:
        single = len(inventory.nodes) == 1

        def facts(node: Node, transport: Transport) -> NodeNetFacts:
            answer = ask(transport, facts_sections(node, inventory, options.backend, device_ping=options.device_ping,
                                                        mode=options.mode),
                         section_timeout=inventory.preflight.section_timeout, timeout=node.command_timeout)
            has = _has(answer.sections)
            devices = None
            if options.device_ping is not False:
                wanted = node_device_ids(node, None)
                devices = merge_inventory(node, devices_from_sections(node.name, wanted, answer.sections))
            return NodeNetFacts(cluster_endpoint(node, answer.sections, single_node=single), has, devices)

        results = group.run(facts, on_event=on_event)
        problems = [NodeProblem(r.node, r.error.status.value, r.error.message) for r in results if r.error is not None]
        known = {r.node: r.value for r in results if r.value is not None}
        nodes = [node for node in inventory.nodes if node.name in known]
        backend, why = choose_backend(options.backend, [known[n.name].has for n in nodes])
        lacking = [n for n in nodes if backend not in known[n.name].has]
        for n in lacking:
            problems.append(NodeProblem(n.name, NodeStatus.ERROR.value, f"cannot run the {backend} backend"))
        nodes = [n for n in nodes if n not in lacking]
        endpoints = {n.name: known[n.name].endpoint for n in nodes}
        runner: PairRunner | MpiRunner = (MpiRunner(group, endpoints, backend, options)
                                          if backend in backends.MPI_BACKENDS else PairRunner(group, endpoints, backend, options))
        done = _measure(nodes, options, runner)
        names = [n.name for n in nodes]
        by_name = {n.name: n for n in nodes}

        def judge_now(measured: list[Measurement]) -> NetcheckVerdict:
            return judge(names, measured, threshold=options.threshold, spread=done.spread, vouched=done.vouched)

        def measure(pairs: list[tuple[str, str]], index: int) -> list[Measurement]:
            return runner.round([(by_name[a], by_name[b]) for a, b in pairs], index, both_ways=True)

        # the second look: what the first flagged is measured again (and against known-good partners) before it is named
        measured = list(done.measurements)
        verdict, second = with_second_looks(measured, judge_now, measure, first_round=len(done.rounds))
        devices = _device_pings(group, inventory, options, nodes, done.rounds, {n.name: known[n.name] for n in nodes})
    groups = tuple(g.judged(done.spread, netcheck_rule(options.threshold)) for g in done.groups)
    rounds = done.rounds + tuple(tuple(pairs) for pairs in second)
    return NetcheckReport(options.mode, backend, why, options.size, endpoints, rounds, tuple(measured), verdict,
                          tuple(problems), time.monotonic() - started, devices, groups, len(second))


def _device_pings(group: NodeGroup, inventory: Inventory, options: NetcheckOptions, nodes: list[Node],
                  rounds: Sequence[Sequence[tuple[str, str]]], facts: dict[str, NodeNetFacts]) -> DeviceVerdict:
    """Device-to-device pings over the measured pairs: asked for, or (auto) when every node has hccn_tool."""
    if options.device_ping is False:
        return DeviceVerdict(skipped="--no-device-ping")
    without = [n.name for n in nodes if "hccn_tool" not in facts[n.name].has]
    if options.device_ping is None and (without or not nodes):
        return DeviceVerdict(skipped="not every node has hccn_tool")
    devices = {name: f.devices for name, f in facts.items() if f.devices is not None}
    pairs: dict[frozenset[str], tuple[str, str]] = {}
    for r in rounds:  # a pair measured twice (--quick re-measures suspects) is pinged once
        for pair in r:
            pairs.setdefault(frozenset(pair), pair)
    return run_device_pings(group, inventory, list(pairs.values()), devices)


@dataclass(frozen=True, slots=True)
class GroupMeasurement:
    """A group measured as a ring in one round (`--quick`): its figure in Gbit/s (a pairwise backend: its slowest
    link; an MPI backend: the all-reduce's algorithm bandwidth x 2(k-1)/k), or why it failed; `slow` once judged."""

    round: int
    nodes: tuple[str, ...]
    gbps: float | None
    error: str | None = None
    slow: bool | None = None

    def judged(self, spread: Spread | None, rule: Rule) -> "GroupMeasurement":
        """`slow`: failed, or slow beyond the noise of the healthy figures (outliers.py); None with nothing to compare."""
        slow = True if self.gbps is None else None if spread is None else rule.look(self.gbps, spread) == SLOW
        return GroupMeasurement(self.round, self.nodes, self.gbps, self.error, slow)

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "nodes": list(self.nodes), "gbps": self.gbps, "error": self.error, "slow": self.slow}


@dataclass(frozen=True, slots=True)
class Measured:
    """What the rounds measured: pairs (the matrix), groups (`--quick`), the rounds' pairs, and what to judge them by."""

    measurements: list[Measurement]
    rounds: tuple[tuple[tuple[str, str], ...], ...]
    groups: list[GroupMeasurement]
    spread: Spread | None = None  # --quick: the healthy figures its rounds found
    vouched: frozenset[str] = frozenset()


def _measure(nodes: list[Node], options: NetcheckOptions, runner: "PairRunner | MpiRunner") -> Measured:
    n = len(nodes)
    measured: list[Measurement] = []
    groups: list[GroupMeasurement] = []
    done: list[tuple[tuple[str, str], ...]] = []
    if options.mode != "quick":
        for pairs in pair_rounds(n, all_pairs=options.mode == "all-pairs"):
            named = [(nodes[a], nodes[b]) for a, b in pairs]
            measured.extend(runner.round(named, len(done), both_ways=True))
            done.append(tuple((a.name, b.name) for a, b in named))
        return Measured(measured, tuple(done), groups)
    search = QuickSearch(n, threshold=options.threshold, per_link=runner.per_link)
    index = {node.name: i for i, node in enumerate(nodes)}
    while (round_groups := search.next_round()) is not None:
        named_groups = [[nodes[i] for i in g] for g in round_groups]
        got, figures = runner.groups(named_groups, len(done))
        measured.extend(got)
        groups.extend(figures)
        done.append(tuple((nodes[a].name, nodes[b].name) for g in round_groups for a, b in ring_links(g)))
        search.record([GroupResult(g, f.gbps, tuple(((index[m.a], index[m.b]), m.gbps) for m in link))
                       for g, f, link in zip(round_groups, figures, _links_of(got, named_groups, runner.per_link))])
    vouched = frozenset(nodes[i].name for i in search.cleared)
    return Measured(measured, tuple(done), groups, search.spread, vouched)


def _links_of(pairs: list[Measurement], groups: list[list[Node]], per_link: bool) -> list[list[Measurement]]:
    """Each group's ring-link measurements (pairwise backends; MPI backends give a group one figure)."""
    if not per_link:
        return [[] for _ in groups]
    where = {node.name: k for k, g in enumerate(groups) for node in g}
    out: list[list[Measurement]] = [[] for _ in groups]
    for m in pairs:
        out[where[m.a]].append(m)
    return out


class PairRunner:
    """Runs one round of pairs with a server/client backend over the group's connections."""

    per_link = True  # a ring of pairs: every link has its own rate

    def __init__(self, group: NodeGroup, endpoints: dict[str, Endpoint], backend: str, options: NetcheckOptions) -> None:
        self.group = group
        self.endpoints = endpoints
        self.backend = backend
        self.options = options

    def _limit(self, node: Node) -> float:
        return self.options.timeout if self.options.timeout is not None else node.command_timeout

    def groups(self, groups: list[list[Node]], index: int) -> tuple[list[Measurement], list[GroupMeasurement]]:
        """Disjoint groups at once, each as a ring of pairs (i sends to i+1; a group of two: both ways); a group's
        figure is its slowest link, as a ring all-reduce runs at its slowest link."""
        pairs = [(g[a], g[b]) for g in groups for a, b in ring_links(range(len(g)))]
        ways = [len(g) == 2 for g in groups for _ in ring_links(range(len(g)))]
        measured = self.round(pairs, index, both_ways=ways)
        figures: list[GroupMeasurement] = []
        for g in groups:
            names = {node.name for node in g}
            mine = [m for m in measured if m.a in names]
            errors = [m.error for m in mine if m.error is not None]
            values = [m.gbps for m in mine]
            figure = None if errors or any(v is None for v in values) else min(v for v in values if v is not None)
            figures.append(GroupMeasurement(index, tuple(node.name for node in g), figure, errors[0] if errors else None))
        return measured, figures

    def round(self, pairs: list[tuple[Node, Node]], index: int, *, both_ways: bool | Sequence[bool]) -> list[Measurement]:
        """Every pair of the round at once: servers first (each announces its port), then the clients.

        `both_ways`: for every pair, or one per pair; one way, the client sends and the server receives."""
        ways = {b.name: (both_ways if isinstance(both_ways, bool) else both_ways[k]) for k, (_, b) in enumerate(pairs)}
        by_client = {b.name: a for a, b in pairs}
        by_server = {a.name: b.name for a, b in pairs}
        program = backends.program(self.backend)
        started: dict[str, tuple[Spawned, str, int]] = {}

        def start_server(node: Node, transport: Transport) -> tuple[Spawned, str, int]:
            ep = self.endpoints[node.name]
            limit = self._limit(node)
            command = backends.server_command(self.backend, python=node.python, bind_ip=ep.ip, ifname=ep.ifname,
                                              size=self.options.size, timeout=limit, both_ways=ways[by_server[node.name]])
            # through the group: the connection carrying a live server is never closed as idle (fd budget)
            handle = self.group.spawn(node, node_bounded(command, limit + SERVER_START), stdin=program)
            text, port = _read_until(handle, backends.parse_port, time.monotonic() + SERVER_START)
            if port is None:
                handle.close()
                self.group.unpin(node)
                raise AscendctlError(f"{node.name}: the {self.backend} server did not start"
                                     f" ({(text.strip().splitlines() or ['no output'])[-1][:160]})")
            return handle, text, port

        servers = self.group.run(start_server, nodes=[a for a, _ in pairs])
        for result in servers:
            if result.value is not None:
                started[result.node] = result.value
        server_errors = {r.node: r.error.message for r in servers if r.error is not None}

        def run_client(node: Node, transport: Transport) -> str:
            server = by_client[node.name]
            if server.name not in started:
                raise AscendctlError(server_errors.get(server.name, f"{server.name}: server did not start"))
            ep, sep = self.endpoints[node.name], self.endpoints[server.name]
            limit = self._limit(node)
            command = backends.client_command(self.backend, python=node.python, server_ip=sep.ip, port=started[server.name][2],
                                              source_ip=ep.ip, ifname=ep.ifname, size=self.options.size, timeout=limit,
                                              both_ways=ways[node.name])
            result = transport.run(node_bounded(command, limit), timeout=limit + KILL_GRACE + ANSWER_SLACK, stdin=program)
            if result.exit_code != 0:
                raise AscendctlError(f"{node.name}: {self.backend} client exited {result.exit_code}: "
                                     f"{(result.stderr.strip().splitlines() or ['no output'])[-1][:200]}")
            return result.stdout

        clients = self.group.run(run_client, nodes=[b for _, b in pairs]).by_node()
        out: list[Measurement] = []
        for a, b in pairs:
            client = clients[b.name]
            server_text = ""
            if a.name in started:
                handle, first, _ = started[a.name]
                rest, _ = _read_until(handle, lambda _t: None, time.monotonic() + (ANSWER_SLACK if client.error is None else 0.5))
                handle.close()
                self.group.unpin(a)
                server_text = first + rest
            if client.error is not None:
                out.append(Measurement(a.name, b.name, None, None, index, client.error.message))
                continue
            try:
                a_to_b = backends.parse_received(client.value or "").gbps if ways[b.name] else None
                b_to_a = backends.parse_received(server_text).gbps
            except backends.BackendOutputError as exc:
                out.append(Measurement(a.name, b.name, None, None, index, f"{a.name}-{b.name}: {exc}"))
                continue
            out.append(Measurement(a.name, b.name, a_to_b, b_to_a, index))
        return out


class MpiRunner:
    """Runs a round with an MPI backend (backends.MPI: hccl_test, nccl-tests): one mpirun per pair or group, from its
    first node, all at once."""

    per_link = False  # one figure per group

    def __init__(self, group: NodeGroup, endpoints: dict[str, Endpoint], backend: str, options: NetcheckOptions) -> None:
        self.group = group
        self.endpoints = endpoints
        self.backend = backend
        self.spec = backends.MPI[backend]
        self.options = options

    def round(self, pairs: list[tuple[Node, Node]], index: int, *, both_ways: bool | Sequence[bool]) -> list[Measurement]:
        """Each pair as a group of two: its figure is each direction's rate (sendrecv both ways; an all-reduce of two)."""
        measured, _ = self.groups([[a, b] for a, b in pairs], index)
        return measured

    def groups(self, groups: list[list[Node]], index: int) -> tuple[list[Measurement], list[GroupMeasurement]]:
        """One mpirun per group over its nodes' hosts; a group's figure is the run's algorithm bandwidth x 2(k-1)/k
        (backends.ring_bus_factor: 1 for a pair, which is also a pair measurement)."""
        members = {g[0].name: g for g in groups}

        def run_group(node: Node, transport: Transport) -> float:
            nodes = members[node.name]
            limit = self.options.timeout if self.options.timeout is not None else node.command_timeout
            npus = min(n.slots for n in nodes)
            command = self.spec.command([n.host for n in nodes], self.options.size, self.endpoints[node.name].ifname, npus)
            result = transport.run(node_bounded(command, limit), timeout=limit + KILL_GRACE + ANSWER_SLACK)
            if result.exit_code != 0:
                last = (result.stderr.strip() or result.stdout.strip()).splitlines() or ["no output"]
                raise AscendctlError(f"{node.name}: {self.backend} exited {result.exit_code}: {last[-1][:200]}")
            try:
                return self.spec.gbps(result.stdout, self.options.size) * backends.ring_bus_factor(len(nodes))
            except backends.BackendOutputError as exc:
                raise AscendctlError(f"{node.name}: {exc}") from None

        results = self.group.run(run_group, nodes=[g[0] for g in groups]).by_node()
        pairs: list[Measurement] = []
        figures: list[GroupMeasurement] = []
        for g in groups:
            r = results[g[0].name]
            error = r.error.message if r.error is not None else None if r.value is not None else "no result"
            value = r.value if error is None else None
            figures.append(GroupMeasurement(index, tuple(n.name for n in g), value, error))
            if len(g) == 2:
                pairs.append(Measurement(g[0].name, g[1].name, value, value, index, error))
        return pairs, figures


def _read_until(handle: Spawned, found: Callable[[str], int | None], deadline: float) -> tuple[str, int | None]:
    """Read a spawned command's output until `found(text)` is not None, it ends, or the deadline passes."""
    text = ""
    while True:
        text += handle.read().decode("utf-8", "replace")
        value = found(text)
        if value is not None or handle.finished():
            return text, value
        left = deadline - time.monotonic()
        if left <= 0:
            return text, None
        select.select([handle.fileno()], [], [], min(left, 0.5))
