"""`ascendctl preflight`: is this cluster ready to train?

Connects to every node once and reuses the connection for each round: one probe that reads
the clock and gathers every fact the selected checks need (on the master it also starts the
port test's listener), then (for path MTU, the master port and name resolution) one cross-node round.
Evaluation is pure (see checks/). Must not import typer or rich.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ascendctl.preflight.checks.registry import ALL_CHECKS
from ascendctl.preflight.checks.model import CheckResult, ClusterCheck, NodeCheck, NodeFacts, ProbeContext, Status, result
from ascendctl.preflight.checks import clock, names, network, npu, system
from ascendctl.remote.probe import NOT_RUN, TIMED_OUT, ask
from ascendctl.errors import TransportError
from ascendctl.remote.fanout import node_error
from ascendctl.remote.group import NodeGroup
from ascendctl.facts.endpoint import NET_SECTIONS
from ascendctl.facts.parsers import ParseError
from ascendctl.preflight.result import NodeReport, PreflightReport

if TYPE_CHECKING:
    from ascendctl.preflight.checks.model import Check, JobTarget
    from ascendctl.remote.probe import Section
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import EventSink, NodeError, NodeResult
    from ascendctl.remote.transport.base import Transport

# a builder returns one section's script, or several named sections (device discovery), or None where it does not apply
FACT_BUILDERS: dict[str, Callable[[Node, ProbeContext], str | Mapping[str, str] | None]] = {
    **network.FACTS, **clock.FACTS, **npu.FACTS, **system.FACTS,
}
LISTENER_SECONDS = 15.0
# the probe section that starts the master_port test's listener, last in the master's probe
LISTENER_SECTION = "listener"


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
    from ascendctl.preflight.checks.model import ClusterVerdict

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
