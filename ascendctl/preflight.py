"""`ascendctl preflight`: is this cluster ready to train?

Connects to every node once and reuses the connection for each round: one probe that reads
the clock and gathers every fact the selected checks need (on the master it also starts the
port test's listener), then (for path MTU, the master port and name resolution) one cross-node round.
Evaluation is pure (see checks/). Must not import typer or rich.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from .checks import (ALL_CHECKS, Check, CheckResult, ClusterCheck, JobTarget, NodeCheck, NodeFacts, ProbeContext, Status,
                     result)
from .checks import clock, names, network, npu, system
from .probe import NOT_RUN, TIMED_OUT, Section, ask
from .errors import ExitCode, TransportError
from .outcome import Outcome, exit_code_for
from .fanout import node_error
from .group import NodeGroup
from .inventory import Inventory, Node
from .models import EventSink, NodeError, NodeResult
from .nodeset import generic, group_by, hint_with_fingerprints
from .network import NET_SECTIONS
from .parsers import ParseError
from .transport import Transport

# a builder returns one section's script, or several named sections (device discovery), or None where it does not apply
FACT_BUILDERS: dict[str, Callable[[Node, ProbeContext], str | Mapping[str, str] | None]] = {
    **network.FACTS, **clock.FACTS, **npu.FACTS, **system.FACTS,
}
LISTENER_SECONDS = 15.0
# the probe section that starts the master_port test's listener, last in the master's probe
LISTENER_SECTION = "listener"


@dataclass(frozen=True, slots=True)
class NodeReport:
    """Every selected check's result on one node, in registry order."""

    name: str
    host: str
    reachable: bool
    checks: tuple[CheckResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "reachable": self.reachable, "checks": [c.to_dict() for c in self.checks]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NodeReport":
        if not isinstance(data["name"], str):
            raise ValueError(f"node name {data['name']!r} is not a string")
        return cls(data["name"], str(data.get("host") or ""), bool(data.get("reachable", True)),
                   tuple(CheckResult.from_dict(c) for c in data["checks"]))


@dataclass(frozen=True, slots=True)
class PreflightReport:
    """Per-node results plus the cross-node summaries."""

    check_ids: tuple[str, ...]
    nodes: tuple[NodeReport, ...]
    cluster: tuple[CheckResult, ...]
    duration: float = 0.0

    @property
    def exit_code(self) -> ExitCode:
        """4 when a node was unreachable, else 3 when a check failed or could not be evaluated, else 0."""
        outcomes = [Outcome.UNREACHABLE for node in self.nodes if not node.reachable]
        outcomes += [c.status.outcome for node in self.nodes for c in node.checks]
        outcomes += [c.status.outcome for c in self.cluster]
        return exit_code_for(outcomes)

    @property
    def node_outcomes(self) -> list[tuple[str, Outcome]]:
        """Each node's outcome, in inventory order: unreachable, else failed when a check failed or was not evaluated."""
        def worst(node: NodeReport) -> Outcome:
            if not node.reachable:
                return Outcome.UNREACHABLE
            return next((c.status.outcome for c in node.checks if c.status.outcome != Outcome.OK), Outcome.OK)

        return [(node.name, worst(node)) for node in self.nodes]

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK

    def problems(self) -> list[tuple[tuple[str, Status, str, str | None], list[str]]]:
        """Every failing, unevaluated or warning check, grouped by (check, status, summary, hint) with its nodes in order."""
        found = [(n, c) for n in self.nodes for c in n.checks if c.status in (Status.FAIL, Status.ERROR, Status.WARN)]
        # the same error on many nodes differs by each node's own address: fold by the text with `<host>` in its place
        grouped = group_by(found, key=lambda p: (p[1].check, p[1].status, generic(p[1].summary, p[0].host) or "",
                                                  generic(p[1].hint, p[0].host)), name=lambda p: p[0].name)
        by_name = {n.name: n for n in self.nodes}
        problems = []
        for (check_id, status, summary, hint), names in grouped:
            if len(names) == 1:  # one node: its own words
                only = next(c for c in by_name[names[0]].checks if c.check == check_id)
                summary, hint = only.summary, only.hint
            else:  # a host key to verify: every node's own fingerprint, never folded away
                hint = hint_with_fingerprints(hint, summary, ((name, next(c.summary for c in by_name[name].checks
                                                                              if c.check == check_id)) for name in names))
            problems.append(((check_id, status, summary, hint), names))
        return problems

    def folded_problems(self) -> list[tuple[tuple[str, ...], Status, str, str | None, list[str]]]:
        """problems(), with checks that say the same thing on the same nodes folded into one line.

        An unreachable node gives one line for all its unevaluated checks, not one per check; at 1,000 nodes
        a problem is one line with its node set and its hint once.
        """
        merged: dict[tuple[Status, str, str | None, tuple[str, ...]], list[str]] = {}
        for (check_id, status, summary, hint), names in self.problems():
            merged.setdefault((status, summary, hint, tuple(names)), []).append(check_id)
        return [(tuple(ids), status, summary, hint, list(names)) for (status, summary, hint, names), ids in merged.items()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": list(self.check_ids),
            "nodes": [node.to_dict() for node in self.nodes],
            "cluster": [c.to_dict() for c in self.cluster],
            "duration": round(self.duration, 3),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PreflightReport":
        """The report back from a `preflight --json` document; KeyError/ValueError/TypeError on garbage."""
        duration = data.get("duration") or 0.0
        if not isinstance(duration, (int, float)):
            raise ValueError(f"duration {duration!r} is not a number")
        return cls(tuple(str(c) for c in data["checks"]), tuple(NodeReport.from_dict(n) for n in data["nodes"]),
                   tuple(CheckResult.from_dict(c) for c in data.get("cluster") or ()), float(duration))


@dataclass(frozen=True, slots=True)
class _Probed:
    """Phase-one outcome on a reachable node."""

    facts: NodeFacts
    failure: NodeError | None = None  # the connection broke or the probe timed out


# Probe sections that run NPU vendor tools (npu-smi, hccn_tool).
VENDOR_FACTS = frozenset({"npu", "hccn", "device_ips", "versions"})


def run_preflight(
    inventory: Inventory,
    checks: Sequence[Check] = ALL_CHECKS,
    *,
    on_event: EventSink | None = None,
    group: NodeGroup | None = None,
    job: JobTarget | None = None,
) -> PreflightReport:
    """Run the selected checks on every node in parallel, then the cross-node checks.

    Pass a `group` to keep its connections open for what follows, as `launch` does, and the `job` it will start
    (the `launcher` check looks for its launcher and script on every node).
    """
    started = time.monotonic()
    ctx = ProbeContext(inventory, inventory.preflight, job)
    cluster_checks = [c for c in checks if isinstance(c, ClusterCheck)]
    # Sections that call vendor tools (the ones that hang when a driver is wedged) run last, node checks' before
    # cluster checks': when tools hang and the probe spends its budget, what is left unrun is theirs, while the
    # node's own system facts (clock, network, disk, limits) are still judged.
    ordered = [c for c in checks if isinstance(c, NodeCheck)] + cluster_checks
    extra = (NET_SECTIONS if any(c.phase2 for c in cluster_checks) else ()) + (
        ("ports",) if any(c.id == "master_port" for c in cluster_checks) else ())
    needs = sorted(dict.fromkeys([*(fact for c in ordered for fact in c.needs), *extra]), key=lambda f: f in VENDOR_FACTS)
    want_clock = any(c.clock for c in cluster_checks)
    own_group = group is None
    nodes = group or NodeGroup(inventory)

    start_listener = any(c.id == "master_port" for c in cluster_checks)

    def phase1(node: Node, transport: Transport) -> _Probed:
        offset = uncertainty = None
        try:
            scripts: dict[str, str] = {}
            expected: dict[str, tuple[str, ...]] = {}
            for fact in needs:
                built = FACT_BUILDERS[fact](node, ctx)
                if isinstance(built, str):
                    scripts[fact] = built
                    expected[fact] = (fact,)
                elif built is not None:
                    scripts.update(built)
                    expected[fact] = tuple(built)
            if start_listener and node.name == inventory.master.name:
                # last, after `ports` saw the port as the job would find it: the cross-node round connects to it
                scripts[LISTENER_SECTION] = network.listener_command(ctx.config.master_port, LISTENER_SECONDS,
                                                                     expect=len(inventory.nodes))
            sections: dict[str, Section] = {}
            if scripts:
                answer = ask(transport, scripts, section_timeout=ctx.config.section_timeout,
                             timeout=node.command_timeout, clock=want_clock)
                sections = answer.sections
                if answer.clock is not None:
                    offset, uncertainty = clock_offset(answer.clock.remote, answer.clock.sent, answer.clock.received)
            if want_clock and (uncertainty is None or uncertainty > ctx.config.warn_clock_skew):
                # no reading, or one as uncertain as the whole probe (a transport that answers only at the end):
                # a reading of its own, as short a round trip as there is
                offset, uncertainty = measure_clock(transport)
            return _Probed(NodeFacts(node, sections, offset, uncertainty, expected=expected))
        except TransportError as exc:
            return _Probed(NodeFacts(node), failure=node_error(exc))

    try:
        first = nodes.run(phase1, on_event=on_event)
        probed = {r.node: r.value for r in first if r.value is not None and r.value.failure is None}
        reachable = [probed[n.name].facts for n in inventory.nodes if n.name in probed]
        if any(c.phase2 for c in cluster_checks) and reachable:
            reachable = _phase2(reachable, cluster_checks, ctx, nodes)
    finally:
        if own_group:
            nodes.close()

    verdicts = {c.id: _evaluate_cluster(c, reachable, ctx) for c in cluster_checks}
    reports: list[NodeReport] = []
    for item in first:
        node = inventory.node(item.node)
        if item.error is not None or (item.value is not None and item.value.failure is not None):
            error = item.error or (item.value.failure if item.value else None)
            assert error is not None
            reports.append(_unreachable(node, error, checks))
            continue
        facts = probed[node.name]
        results: list[CheckResult] = []
        for check in checks:
            if isinstance(check, NodeCheck):
                results.append(_evaluate_node(check, node, facts.facts, ctx))
            else:
                verdict = verdicts[check.id]
                results.append(verdict.per_node.get(node.name, result(check.id, Status.SKIP, "not applicable to this node")))
        reports.append(NodeReport(node.name, node.host, True, tuple(results)))
    return PreflightReport(
        tuple(c.id for c in checks), tuple(reports), tuple(verdicts[c.id].summary for c in cluster_checks), time.monotonic() - started
    )


def measure_clock(transport: Transport) -> tuple[float | None, float | None]:
    """A clock reading of its own (one round trip): the node's clock minus ours, and its uncertainty."""
    sent = time.time()
    output = transport.run(clock.CLOCK_COMMAND, timeout=10).stdout
    return clock_offset(output, sent, time.time())


def clock_offset(remote_text: str, sent: float, received: float) -> tuple[float | None, float | None]:
    """The node's clock minus ours, compensated by half the round trip (the reading's uncertainty)."""
    try:
        remote = clock.parse_clock(remote_text)
    except ParseError:
        return None, None
    half_rtt = (received - sent) / 2
    return remote - (sent + half_rtt), half_rtt


def _phase2(
    reachable: list[NodeFacts],
    cluster_checks: Sequence[ClusterCheck],
    ctx: ProbeContext,
    group: NodeGroup,
) -> list[NodeFacts]:
    """Cross-node round: every node pings its targets, connects to the listener the master's probe started, and looks
    up its own name and the others' addresses."""
    want_path = any(c.id == "path_mtu" for c in cluster_checks)
    want_port = any(c.id == "master_port" for c in cluster_checks)
    want_names = any(c.id == "name_resolution" for c in cluster_checks)
    master = next((f for f in reachable if f.node.name == ctx.inventory.master.name), None)
    listener_pid: str | None = None
    master_address: str | None = None
    if want_port and master is not None:
        master_address = network.node_address(master)
        # whatever the port's state, a listener the probe started is stopped below unless every node connected
        listener_pid = network.listener_pid(master.sections.get(LISTENER_SECTION))
        free, _ = network.master_port_free(master, ctx.config.master_port)
        if not free:
            want_port = False  # the master_port check reports the busy (or unknown) port itself

    def phase2(node: Node, transport: Transport) -> NodeFacts:
        facts = next(f for f in reachable if f.node.name == node.name)
        sections = network.phase2_sections(facts, reachable, ctx, path=want_path, port=want_port,
                                           master_address=master_address, listener=listener_pid is not None)
        if want_names:  # last: the port test's listener is not kept waiting by slow lookups
            sections.update(names.lookup_section(facts, reachable, ctx))
        if not sections:
            return facts
        try:
            return replace(facts, phase2=ask(transport, sections, section_timeout=ctx.config.section_timeout).sections)
        except TransportError:
            return facts  # no answer: the checks say "no answer from the port test"

    results: Sequence[NodeResult[NodeFacts]] = ()
    try:
        results = tuple(group.run(phase2, nodes=[f.node for f in reachable]))
    finally:
        connected = {r.node for r in results if r.value is not None and network.port_connected(r.value.phase2)}
        # the listener ends by itself once every node connected; otherwise it is still there: stop it
        if listener_pid is not None and master is not None and len(connected) < len(ctx.inventory.nodes):
            try:
                group.transport(master.node).run(f"kill {listener_pid} 2>/dev/null; true", timeout=10)
            except TransportError:
                pass
    updated = {r.node: r.value for r in results if r.value is not None}
    listener_ran = listener_pid is not None
    return [
        replace(updated.get(f.node.name, f), listener=listener_ran if master is not None and f.node.name == master.node.name else None)
        for f in reachable
    ]


def _unanswered(check_id: str, needs: Sequence[str], node: Node, facts: NodeFacts, ctx: ProbeContext) -> CheckResult | None:
    """An ERROR result when a section the check needs never answered on this node (hung, stopped, not run)."""
    hint_hang = "a tool on the node hangs: run it by hand; raise preflight.section_timeout if it is just slow"
    for fact in needs:
        for name in facts.expected.get(fact, ()):  # the sections the probe asked for to learn this fact
            section = facts.sections.get(name)
            if section is None or section.exit_code is None:
                return result(check_id, Status.ERROR,
                              f"probe section `{name}` did not finish within {ctx.config.section_timeout:g}s", hint_hang)
            if section.exit_code in TIMED_OUT:
                return result(check_id, Status.ERROR,
                              f"`{name}` timed out after {ctx.config.section_timeout:g}s on the node (stopped)", hint_hang)
            if section.exit_code == NOT_RUN:
                return result(check_id, Status.ERROR, f"`{name}` not run: earlier sections used the node's {node.command_timeout:g}s",
                              "a tool on the node hangs (see the checks that timed out); raise command_timeout if they are just slow")
    return None


def _evaluate_node(check: NodeCheck, node: Node, facts: NodeFacts, ctx: ProbeContext) -> CheckResult:
    unanswered = _unanswered(check.id, check.needs, node, facts, ctx)
    if unanswered is not None:
        return unanswered
    try:
        return check.evaluate(node, facts.sections, ctx)
    except (ParseError, ValueError, KeyError, IndexError) as exc:
        return result(check.id, Status.ERROR, f"could not evaluate: {type(exc).__name__}: {exc}")


def _evaluate_cluster(check: ClusterCheck, facts: Sequence[NodeFacts], ctx: ProbeContext) -> Any:
    """The check over the nodes that answered what it needs; the others get the reason as an ERROR."""
    from .checks import ClusterVerdict

    unanswered = {f.node.name: r for f in facts if (r := _unanswered(check.id, check.needs, f.node, f, ctx)) is not None}
    answered = [f for f in facts if f.node.name not in unanswered]
    if not facts:  # every node unreachable: a check over no node must not read as an all-clear
        return ClusterVerdict({}, result(check.id, Status.ERROR, "not evaluated: no node answered"))
    try:
        verdict = check.evaluate(answered, ctx)
    except (ParseError, ValueError, KeyError, IndexError) as exc:
        summary = result(check.id, Status.ERROR, f"could not evaluate: {type(exc).__name__}: {exc}")
        return ClusterVerdict({f.node.name: summary for f in facts}, summary)
    if not unanswered:
        return verdict
    names = ", ".join(sorted(unanswered))
    summary = result(check.id, Status.ERROR, f"not evaluated on {names}: {next(iter(unanswered.values())).summary}",
                     "a tool on the node hangs: run it by hand")
    return ClusterVerdict({**verdict.per_node, **unanswered}, summary)


def _unreachable(node: Node, error: NodeError, checks: Sequence[Check]) -> NodeReport:
    results = []
    for check in checks:
        if check.id == "ssh":
            results.append(result("ssh", Status.FAIL, f"{error.status.value}: {error.message}", error.hint))
        else:
            results.append(result(check.id, Status.ERROR, f"not evaluated: {error.status.value}: {error.message}"))
    return NodeReport(node.name, node.host, False, tuple(results))


def junit_xml(report: PreflightReport) -> str:
    """JUnit XML for CI: one testcase per node x check, plus one per cluster summary."""
    suite = ET.Element("testsuite", name="ascendctl preflight", time=f"{report.duration:.3f}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(classname: str, check: CheckResult) -> None:
        element = ET.SubElement(suite, "testcase", classname=classname, name=check.check)
        counts["tests"] += 1
        text = check.summary + (f"\nhint: {check.hint}" if check.hint else "")
        if check.status == Status.FAIL:
            counts["failures"] += 1
            ET.SubElement(element, "failure", message=check.summary).text = text
        elif check.status == Status.ERROR:
            counts["errors"] += 1
            ET.SubElement(element, "error", message=check.summary).text = text
        elif check.status == Status.SKIP:
            counts["skipped"] += 1
            ET.SubElement(element, "skipped", message=check.summary)
        else:
            ET.SubElement(element, "system-out").text = f"{check.status.value}: {text}"

    for node in report.nodes:
        for check in node.checks:
            case(f"preflight.{node.name}", check)
    for check in report.cluster:
        case("preflight.cluster", check)
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
