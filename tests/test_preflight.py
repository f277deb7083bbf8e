"""Preflight without real hosts: the probe framing, every evaluator on captured output, orchestration on fakes."""

from __future__ import annotations

import re
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import pytest

from ascendctl.preflight.checks.model import ProbeContext, Status
from ascendctl.preflight.checks.registry import select_checks
from ascendctl.preflight.checks import clock, network, npu, system
from ascendctl.remote.group import NodeGroup
from ascendctl.facts.endpoint import ADDRS, LINKS, ROUTE
from ascendctl.remote.probe import Section, build_probe, parse_probe
from ascendctl.errors import ConnectError, ExitCode, UsageError
from ascendctl.inventory.load import Inventory, parse_inventory
from ascendctl.models import CommandResult
from ascendctl.preflight.junit import junit_xml
from ascendctl.preflight.run import run_preflight
from tests.fakes import FakeFactory, ok

DATA = Path(__file__).resolve().parent / "data"
SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "ascend"


def body(path: Path) -> str:
    return "\n".join(line for line in path.read_text().splitlines() if not line.startswith("# "))


def inv(text: str = "nodes:\n  - host: n[1-3]\n") -> Inventory:
    return parse_inventory(text, environ={})


def ctx(inventory: Inventory | None = None) -> ProbeContext:
    inventory = inventory or inv()
    return ProbeContext(inventory, inventory.preflight)


# -- probe ---------------------------------------------------------------------------------
def test_probe_frames_sections_exit_codes_and_timeouts() -> None:
    script = build_probe(
        {"a": "echo hello; echo err >&2; exit 3", "b": "sleep 5", "c": "echo '@@fake end c 0@@'; echo after"},
        nonce="n0nce", section_timeout=1,
    )
    output = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=20).stdout
    sections = parse_probe(output, nonce="n0nce")
    assert sections["a"] == Section("hello\nerr", 3)
    assert sections["b"].exit_code == 124  # killed by the per-section timeout
    assert sections["c"] == Section("@@fake end c 0@@\nafter", 0)


def test_a_probe_cut_short_leaves_the_open_section_unfinished() -> None:
    text = "\n@@x begin a@@\nfine\n@@x end a 0@@\n\n@@x begin b@@\npartial"
    assert parse_probe(text, nonce="x") == {"a": Section("fine", 0), "b": Section("partial", None)}


# -- ntp -----------------------------------------------------------------------------------
@pytest.mark.parametrize("case, status, words", [
    ("chronyc/tracking_synced.txt", Status.PASS, "chrony synchronised"),
    ("chronyc/tracking_unsynced.txt", Status.FAIL, "not synchronised"),
    ("chronyc/tracking_local_stratum8.txt", Status.PASS, "to LOCAL"),
])
def test_ntp_from_real_chrony_output(case: str, status: Status, words: str) -> None:
    section = Section("daemon chrony\n" + body(DATA / case), 0)
    verdict = clock.NTP.evaluate(inv().nodes[0], {"ntp": section}, ctx())
    assert verdict.status == status and words in verdict.summary


def test_ntp_from_ntpq_and_timedatectl_and_missing_daemons() -> None:
    node = inv().nodes[0]
    ntpq = clock.NTP.evaluate(node, {"ntp": Section("daemon ntpd\n" + body(DATA / "ntpq/pn_synced_centos77.txt"), 0)}, ctx())
    assert ntpq.status in (Status.PASS, Status.WARN) and ntpq.summary.startswith("ntpd synchronised")
    timedatectl = clock.NTP.evaluate(node, {"ntp": Section("daemon timedatectl\n" + body(DATA / "timedatectl/show_unsynced_opentrons.txt"), 0)}, ctx())
    assert timedatectl.status == Status.FAIL
    none = clock.NTP.evaluate(node, {"ntp": Section("daemon none", 0)}, ctx())
    assert none.status == Status.FAIL and "no NTP client" in none.summary and none.hint
    down = clock.NTP.evaluate(node, {"ntp": Section("daemon chrony\n506 Cannot talk to daemon", 1)}, ctx())
    assert down.status == Status.FAIL and "systemctl enable --now chrony" in (down.hint or "")
    garbage = clock.NTP.evaluate(node, {"ntp": Section("daemon chrony\nwhat is this", 0)}, ctx())
    assert garbage.status == Status.ERROR


def test_clock_skew_thresholds() -> None:
    from ascendctl.preflight.checks.model import NodeFacts

    nodes = inv().nodes
    facts = [NodeFacts(nodes[0], clock_offset=0.002, clock_uncertainty=0.001),
             NodeFacts(nodes[1], clock_offset=-0.4, clock_uncertainty=0.001),
             NodeFacts(nodes[2], clock_offset=30.1, clock_uncertainty=0.002)]
    verdict = clock.CLOCK_SKEW.evaluate(facts, ctx())
    assert [verdict.per_node[n.name].status for n in nodes] == [Status.PASS, Status.WARN, Status.FAIL]
    assert verdict.per_node["n3"].summary == "clock 30.100 s ahead of this host (+/- 0.002 s)"
    assert verdict.per_node["n2"].summary.startswith("clock 0.400 s behind")
    assert verdict.summary.status == Status.FAIL and verdict.summary.summary.startswith("n3 off by more than 1 s")


def test_clock_skew_never_vouches_for_more_than_the_error_bar_allows() -> None:
    """0.257 s +/- 0.3 s is not 'within 0.1 s': the reading cannot confirm it, so it warns (issue #30)."""
    from ascendctl.preflight.checks.model import NodeFacts

    nodes = inv().nodes
    facts = [NodeFacts(nodes[0], clock_offset=0.002, clock_uncertainty=0.001),
             NodeFacts(nodes[1], clock_offset=0.257, clock_uncertainty=0.3)]
    verdict = clock.CLOCK_SKEW.evaluate(facts, ctx())
    assert verdict.per_node["n1"].status == Status.PASS
    unsure = verdict.per_node["n2"]
    assert unsure.status == Status.WARN and unsure.summary.endswith("cannot confirm within 0.1 s") and "-w NODE" in (unsure.hint or "")
    assert verdict.summary.status == Status.WARN and verdict.summary.summary.startswith("n2: clock 0.257 s ahead")
    sure = clock.CLOCK_SKEW.evaluate(facts[:1], ctx())
    assert sure.summary.status == Status.PASS and sure.summary.summary == "every node within 0.003 s of this host (error bars included)"


def test_a_cluster_check_over_no_answering_node_is_not_a_pass() -> None:
    from ascendctl.preflight.checks.model import ClusterCheck
    from ascendctl.preflight.run import _evaluate_cluster

    cluster_checks = [c for c in select_checks() if isinstance(c, ClusterCheck)]
    assert len(cluster_checks) >= 5
    for check in cluster_checks:
        verdict = _evaluate_cluster(check, [], ctx())
        assert verdict.summary.status == Status.ERROR and verdict.summary.summary == "not evaluated: no node answered"


# -- network -------------------------------------------------------------------------------
def net_section(mtu: int, name: str = "eth0", address: str = "10.0.0.1") -> dict[str, Section]:
    """The three network probe sections of one node (links, addresses, route to the master), as `ip` prints them."""
    return {
        LINKS: Section(
            "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\"
            "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n"
            f"2: {name}@if9: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {mtu} qdisc noqueue state UP mode DEFAULT group default qlen 1000\\"
            "    link/ether 5e:1c:d4:8d:b8:95 brd ff:ff:ff:ff:ff:ff link-netnsid 0\n", 0),
        ADDRS: Section(f"2: {name}    inet {address}/16 scope global {name}\\       valid_lft forever preferred_lft forever\n", 0),
        ROUTE: Section(f"10.0.0.9 dev {name} src {address} uid 0 \\    cache \n", 0),
    }


def test_mtu_uses_the_route_to_the_master_or_the_configured_interface() -> None:
    node = inv().nodes[1]
    assert network.MTU.evaluate(node, net_section(9000), ctx()).summary == "eth0 MTU 9000"
    low = network.MTU.evaluate(node, net_section(1500), ctx())
    assert low.status == Status.FAIL and low.summary == "eth0 MTU 1500 < 9000" and "ip link set dev eth0 mtu 9000" in (low.hint or "")
    other = inv("defaults: {interface: ib0}\nnodes: [a, b]\n")
    missing = network.MTU.evaluate(other.nodes[0], net_section(9000), ctx(other))
    assert missing.status == Status.FAIL and missing.summary == "interface ib0 not found (have: eth0)"


def test_the_route_section_resolves_a_host_name_but_asks_an_address_directly() -> None:
    from ascendctl.facts.endpoint import net_sections

    by_address = inv("nodes: [10.0.0.1, 10.0.0.2]\n")
    assert net_sections(by_address.nodes[1], by_address)[ROUTE] == "ip -o route get 10.0.0.1 2>/dev/null"
    by_name = inv("nodes: [n1, n2]\n")
    route = net_sections(by_name.nodes[1], by_name)[ROUTE]
    assert route.startswith("t=$(getent ahostsv4 n1 ") and route.endswith('ip -o route get "$t" 2>/dev/null')
    # both forms are shell the node can parse
    for nodes in (by_address, by_name):
        text = net_sections(nodes.nodes[1], nodes)[ROUTE]
        assert subprocess.run(["sh", "-n", "-c", text]).returncode == 0


def test_path_mtu_blames_the_node_common_to_every_failing_pair() -> None:
    from ascendctl.preflight.checks.model import NodeFacts

    inventory = inv("nodes:\n  - host: n[1-4]\n")
    facts = []
    for i, node in enumerate(inventory.nodes):
        pings = {"n1": "", "n2": "ping n1 10.0.0.1 0 0\nping n3 10.0.0.3 1 0\n", "n3": "ping n1 10.0.0.1 1 0\nping n4 10.0.0.4 1 0\n",
                 "n4": "ping n1 10.0.0.1 0 0\n"}[node.name]
        if node.name == "n1":
            pings = "ping n2 10.0.0.2 0 0\n"
        facts.append(NodeFacts(node, net_section(9000, address=f"10.0.0.{i + 1}"), phase2={"path": Section(pings, 0)}))
    verdict = network.PATH_MTU.evaluate(facts, ctx(inventory))
    statuses = {name: r.status for name, r in verdict.per_node.items()}
    assert statuses == {"n1": Status.PASS, "n2": Status.PASS, "n3": Status.FAIL, "n4": Status.PASS}
    assert "n2->n3" in verdict.per_node["n3"].summary and "1372-byte pings pass" in verdict.per_node["n3"].summary
    assert verdict.per_node["n2"].summary == "ok; failures explained by n3"
    assert verdict.summary.summary == "jumbo frames do not pass to/from n3"


def test_master_port_busy_and_unreachable() -> None:
    from ascendctl.preflight.checks.model import NodeFacts

    inventory = inv("nodes: [m, w]\n")
    busy = NodeFacts(inventory.nodes[0], {"ports": Section("LISTEN 0 128 0.0.0.0:29500 0.0.0.0:*", 0)})
    verdict = network.MASTER_PORT.evaluate([busy, NodeFacts(inventory.nodes[1])], ctx(inventory))
    assert verdict.summary.status == Status.FAIL and "already in use on master m (0.0.0.0:29500)" in verdict.summary.summary
    free = NodeFacts(inventory.nodes[0], {"ports": Section("", 0)}, phase2={"port": Section("port 0", 0)}, listener=True)
    worker = NodeFacts(inventory.nodes[1], phase2={"port": Section("port 3", 0)})
    verdict = network.MASTER_PORT.evaluate([free, worker], ctx(inventory))
    assert verdict.per_node["w"].status == Status.FAIL and "firewall" in (verdict.per_node["w"].hint or "")
    refused_without_listener = NodeFacts(inventory.nodes[1], phase2={"port": Section("port 2", 0)})
    verdict = network.MASTER_PORT.evaluate([NodeFacts(inventory.nodes[0], {"ports": Section("", 0)}, phase2={"port": Section("port 2", 0)},
                                                      listener=False), refused_without_listener], ctx(inventory))
    assert verdict.summary.status == Status.PASS


# -- npu -----------------------------------------------------------------------------------
def npu_section(sample: str) -> dict[str, Section]:
    return {"npu": Section(body(SAMPLES / sample), 0)}


def test_npu_checks_on_the_real_910b4_sample() -> None:
    node = inv().nodes[0]
    sections = npu_section("npu-smi-info_910B4_24.1.rc3.txt")
    assert npu.NPU_COUNT.evaluate(node, sections, ctx()).summary.startswith("8/8 devices visible")
    assert npu.NPU_HEALTH.evaluate(node, sections, ctx()).status == Status.PASS
    stale = npu.NPU_STALE_PROCS.evaluate(node, sections, ctx())
    assert stale.status == Status.FAIL and "pid 582939" in stale.summary and "kill 582939" in (stale.hint or "")


def test_npu_checks_on_a3_and_910a_samples() -> None:
    a3 = inv("defaults: {slots: 16}\nnodes: [a]\n")
    verdict = npu.NPU_COUNT.evaluate(a3.nodes[0], npu_section("npu-smi-info_910C-A3_24.1.rc3.3.txt"), ctx(a3))
    assert verdict.status == Status.PASS and verdict.summary.startswith("16/16")
    four = inv("defaults: {slots: 4}\nnodes: [a]\n")
    health = npu.NPU_HEALTH.evaluate(four.nodes[0], npu_section("npu-smi-info_910A_23.0.rc1.txt"), ctx(four))
    assert health.status == Status.WARN and "Warning" in health.summary


def test_npu_checks_skip_or_fail_without_tools_by_accelerator_setting() -> None:
    absent = {"npu": Section(npu.ABSENT, 0), "hccn": Section(npu.ABSENT, 0)}
    auto = inv("nodes: [a]\n").nodes[0]
    ascend = inv("defaults: {accelerator: ascend}\nnodes: [a]\n").nodes[0]
    none = inv("defaults: {accelerator: none}\nnodes: [a]\n").nodes[0]
    assert npu.NPU_COUNT.evaluate(auto, absent, ctx()).status == Status.SKIP
    assert npu.HCCN_LINK.evaluate(auto, absent, ctx()).status == Status.SKIP
    failed = npu.NPU_COUNT.evaluate(ascend, absent, ctx())
    assert failed.status == Status.FAIL and "inventory says this node has Ascend NPUs" in failed.summary
    assert npu.NPU_HEALTH.evaluate(none, {}, ctx()).status == Status.SKIP
    assert npu.FACTS["npu"](none, ctx()) is None


def test_hccn_link_reads_every_device() -> None:
    node = inv("defaults: {slots: 2}\nnodes: [a]\n").nodes[0]
    up = "link status: UP\n"
    good = Section(f"--dev 0\n{up}--health\nnet health status: Success\n--dev 1\n{up}--health\nnet health status: Success\n", 0)
    assert npu.HCCN_LINK.evaluate(node, {"hccn": good}, ctx()).status == Status.PASS
    bad = Section(f"--dev 0\nlink status: DOWN\n--health\nnet health status: Success\n--dev 1\n{up}--health\nnet health status: Socket failed\n", 0)
    verdict = npu.HCCN_LINK.evaluate(node, {"hccn": bad}, ctx())
    assert verdict.status == Status.FAIL and verdict.summary == "device 0 link DOWN; device 1 net health Socket failed"


# -- system --------------------------------------------------------------------------------
def test_disk_limits_and_versions() -> None:
    node = inv().nodes[0]
    df = Section("Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100000000 99000000 1000000 99% /", 0)
    disk = system.DISK.evaluate(node, {"disk": df}, ctx())
    assert disk.status == Status.FAIL and disk.summary.startswith("1.0 GiB free for /tmp (on /) < 10 GiB")
    limits = system.LIMITS.evaluate(node, {"limits": Section("1024\nunlimited", 0)}, ctx())
    assert limits.status == Status.WARN and limits.summary == "open files 1024 < 65536"
    assert system.LIMITS.evaluate(node, {"limits": Section("1048576\nunlimited", 0)}, ctx()).status == Status.PASS
    from ascendctl.preflight.checks.model import NodeFacts

    nodes = inv().nodes
    def versions(torch: str) -> Section:
        return Section(f"--driver\nVersion=23.0.7\n--python\npython 3.11.7\nmindspore -\ntorch {torch}\ntorch_npu -\n", 0)
    facts = [NodeFacts(nodes[0], {"versions": versions("2.1.0")}), NodeFacts(nodes[1], {"versions": versions("2.1.0")}),
             NodeFacts(nodes[2], {"versions": versions("2.2.0")})]
    verdict = system.VERSIONS.evaluate(facts, ctx())
    assert verdict.per_node["n3"].status == Status.FAIL and verdict.per_node["n3"].summary == "torch 2.2.0 (most nodes: 2.1.0)"
    assert verdict.per_node["n1"].status == Status.PASS
    assert "torch: 2.1.0 on n[1-2]; 2.2.0 on n3" in verdict.summary.summary
    assert system.read_versions(versions("x"))["driver"] == "23.0.7"


# -- orchestration -------------------------------------------------------------------------
def answer_probe(outputs: dict[str, str]) -> object:
    """A fake node that answers each probe section with canned output."""
    def reply(command: str) -> CommandResult:
        nonce = re.search(r"@@(\w+) begin", command)
        assert nonce
        parts = []
        for name in re.findall(r"@@\w+ begin (\w+)@@", command):
            parts.append(f"\n@@{nonce.group(1)} begin {name}@@\n{outputs.get(name, '')}\n@@{nonce.group(1)} end {name} 0@@")
        return CommandResult(command, 0, "".join(parts) + "\n", "", 0.0)
    return reply


def test_unreachable_node_fails_ssh_and_exit_4_wins() -> None:
    inventory = inv("nodes: [a, b]\n")
    factory = FakeFactory(
        inventory,
        default=[(r"^date", ok("1700000000.0\n")), (r"@@", answer_probe({"ntp": "daemon none"}))],
        connect_errors={"b": ConnectError("connection refused by b:22", hint="is sshd running?")},
    )
    report = run_preflight(inventory, select_checks(["ssh", "ntp"]), group=NodeGroup(inventory, factory=factory))
    a, b = report.nodes
    assert [(c.check, c.status) for c in a.checks] == [("ssh", Status.PASS), ("ntp", Status.FAIL)]
    assert [(c.check, c.status) for c in b.checks] == [("ssh", Status.FAIL), ("ntp", Status.ERROR)]
    assert b.checks[0].summary == "unreachable: connection refused by b:22" and b.checks[0].hint == "is sshd running?"
    assert report.exit_code == ExitCode.NODES_UNREACHABLE
    doc = report.to_dict()
    assert set(doc) >= {"ok", "nodes", "cluster"} and doc["ok"] is False
    assert set(doc["nodes"][0]["checks"][0]) == {"id", "status", "summary", "hint"}


def test_garbage_from_a_node_is_an_error_result_not_a_crash() -> None:
    inventory = inv("nodes: [a]\n")
    factory = FakeFactory(inventory, default=[(r"@@", lambda cmd: CommandResult(cmd, 0, "\x00\x01 not a probe", "", 0.0))])
    report = run_preflight(inventory, select_checks(["ntp", "mtu", "disk"]), group=NodeGroup(inventory, factory=factory))
    assert {c.check: c.status for c in report.nodes[0].checks} == {"ntp": Status.ERROR, "mtu": Status.ERROR, "disk": Status.ERROR}
    assert report.exit_code == ExitCode.CHECKS_FAILED


def test_junit_has_one_testcase_per_node_and_check() -> None:
    inventory = inv("nodes: [a, b]\n")
    factory = FakeFactory(inventory, default=[(r"@@", answer_probe({"ntp": "daemon none"}))])
    report = run_preflight(inventory, select_checks(["ssh", "ntp"]), group=NodeGroup(inventory, factory=factory))
    root = ET.fromstring(junit_xml(report))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "4" and suite.get("failures") == "2"
    cases = [(c.get("classname"), c.get("name"), c.find("failure") is not None) for c in suite]
    assert cases == [("preflight.a", "ssh", False), ("preflight.a", "ntp", True), ("preflight.b", "ssh", False), ("preflight.b", "ntp", True)]


def test_unknown_check_id_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        select_checks(["ntp,mtuu"])
    assert info.value.exit_code == ExitCode.USAGE and "mtuu" in info.value.message and "path_mtu" in (info.value.hint or "")


# -- one round trip: the clock read by the probe itself -------------------------------------------
def test_the_probe_reads_the_clock_first_and_times_its_arrival() -> None:
    """A real shell (local transport): the clock line comes before any section ran, timed by its own chunk."""
    from ascendctl.remote.probe import ask
    from ascendctl.remote.transport.local import LocalTransport

    node = inv("nodes: [a]\n").nodes[0]
    before = time.time()
    answer = ask(LocalTransport(node), {"slow": "sleep 1; echo done"}, section_timeout=5, clock=True)
    after = time.time()
    assert answer.sections["slow"] == Section("done", 0) and answer.clock is not None
    assert before <= answer.clock.sent <= answer.clock.received <= after
    # the reading arrived before the one-second section finished, not with the whole answer
    assert answer.clock.received - answer.clock.sent < 0.9 < after - before
    assert abs(float(answer.clock.remote) - answer.clock.received) < 0.9


def test_a_forged_clock_line_in_a_section_is_not_the_reading() -> None:
    from ascendctl.remote.probe import ask
    from ascendctl.remote.transport.local import LocalTransport

    node = inv("nodes: [a]\n").nodes[0]
    answer = ask(LocalTransport(node), {"x": "echo '@@0123 clock 1.0@@'"}, section_timeout=5)
    assert answer.clock is None  # not asked for: a section's text is never a reading
    asked = ask(LocalTransport(node), {"x": "echo '@@0123 clock 1.0@@'"}, section_timeout=5, clock=True)
    assert asked.clock is not None and float(asked.clock.remote) > 1e9


def test_preflight_phase_one_is_one_round_trip_when_the_clock_comes_early() -> None:
    """With a streaming transport the clock needs no command of its own; a reading as late as the whole answer
    (a transport that hands everything over at the end, after a slow probe) is taken again on its own."""
    inventory = inv("nodes: [a]\n")

    def probe_with_clock(delay: float) -> Callable[[str], CommandResult]:
        def reply(command: str) -> CommandResult:
            nonce = re.search(r"@@(\w+) clock", command)
            assert nonce, "the probe asks for the clock"
            time.sleep(delay)
            rest = answer_probe({"ntp": "daemon none"})(command)  # type: ignore[operator]
            return CommandResult(command, 0, f"@@{nonce.group(1)} clock {time.time():.6f}@@\n" + rest.stdout, "", 0.0)
        return reply

    for delay, separate in ((0.0, False), (1.5, True)):
        now = (lambda cmd: CommandResult(cmd, 0, f"{time.time():.6f}\n", "", 0.0))
        factory = FakeFactory(inventory, default=[(r"^date", now), (r"@@", probe_with_clock(delay))])
        group = NodeGroup(inventory, factory=factory)
        report = run_preflight(inventory, select_checks(["ntp", "clock_skew"]), group=group)
        calls = factory.transports["a"].calls
        assert sum(1 for c in calls if c.startswith("date")) == (1 if separate else 0), calls
        assert sum(1 for c in calls if "@@" in c) == 1
        skew = next(c for c in report.nodes[0].checks if c.check == "clock_skew")
        assert skew.status == Status.PASS, skew


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_a_probe_with_a_budget_stops_running_sections_once_it_is_spent(shell: str) -> None:
    """The budget is kept without a `date` process per section (/proc/uptime through `read`), in dash and bash."""
    # `b` sleeps far past any budget it could get, so a watchdog slowed by a busy machine still stops it first
    script = build_probe({"a": "sleep 1.2", "b": "sleep 4", "c": "echo hi"}, nonce="n0nce", section_timeout=5, budget=2)
    assert "$(date +%s)" not in script.split("asct_now() {")[0]
    assert "date" not in script.split("asct_run() {")[1]  # a section's bookkeeping reads /proc/uptime, no process
    output = subprocess.run([shell, "-c", script], capture_output=True, text=True, timeout=20).stdout
    sections = parse_probe(output, nonce="n0nce")
    assert sections["a"] == Section("", 0)
    # the budget is kept in whole seconds: `b` is cut to what was left, or not run when nothing whole was
    assert sections["b"].exit_code in (124, 125)
    assert sections["c"].exit_code == 125 and sections["c"].output.startswith("not run: the probe spent its 2s")


def test_a_listener_the_probe_started_is_stopped_when_the_port_test_does_not_run() -> None:
    """The master's probe starts the listener before anyone knows whether the port is free; when its state cannot
    be read (`ss` failed) the port test is skipped, and the listener must not be left on the job's port."""
    from tests.fakes import probe_reply

    inventory = inv("nodes: [a, b]\n")
    now = (lambda cmd: CommandResult(cmd, 0, f"{time.time():.6f}\n", "", 0.0))
    reply = probe_reply({"ports": "ss: cannot open netlink socket", "listener": "listener 4242"}, {"ports": 1})
    factory = FakeFactory(inventory, default=[(r"^date", now), (r"^kill 4242", ok()), (r"@@", reply)])
    report = run_preflight(inventory, select_checks(["master_port"]), group=NodeGroup(inventory, factory=factory))
    master_calls = factory.transports["a"].calls
    assert any("begin listener@@" in c for c in master_calls)  # started by the master's probe
    assert not any("begin listener@@" in c for c in factory.transports["b"].calls)
    assert sum(1 for c in master_calls if c.startswith("kill 4242")) == 1
    assert report.cluster[0].status == Status.ERROR and "cannot tell whether port" in report.cluster[0].summary


# -- name_resolution (issue #30): lookups in the cross-node round ----------------------------------
def names_facts(outputs: dict[str, str], inventory: Inventory | None = None, codes: dict[str, int] | None = None) -> list:
    """Facts of nodes n1..nN at 10.0.0.1..N whose name lookups printed `outputs[name]` (absent: no answer)."""
    from ascendctl.preflight.checks.model import NodeFacts
    from ascendctl.preflight.checks.names import NAMES_SECTION

    inventory = inventory or inv()
    facts = []
    for i, node in enumerate(inventory.nodes):
        if node.name not in outputs:
            continue
        phase2 = {NAMES_SECTION: Section(outputs[node.name], (codes or {}).get(node.name, 0))} if outputs[node.name] is not None else {}
        facts.append(NodeFacts(node, net_section(9000, address=f"10.0.0.{i + 1}"), phase2=phase2))
    return facts


def lookups(host: str, addresses: dict[str, str], *, host_cs: int = 1, host_rc: int = 0, host_addrs: str | None = None,
            extra: str = "") -> str:
    """What sh/name_lookup.sh prints: `addresses` maps each address to the rest of its `addr` line."""
    own = host_addrs if host_addrs is not None else f"10.0.0.{host[1:]}"
    lines = [f"asked {len(addresses)}", f"host {host} {host_cs} {host_rc} {own}"]
    lines += [f"addr {address} {rest}" for address, rest in addresses.items()]
    return "\n".join(lines + ([extra] if extra else []))


def healthy(address: str, name: str) -> str:
    return f"1 0 {name} 1 0 1 {address}"


def all_healthy(host: str, n: int = 3) -> str:
    return lookups(host, {f"10.0.0.{i}": healthy(f"10.0.0.{i}", f"n{i}") for i in range(1, n + 1)})


def test_name_resolution_passes_when_every_lookup_is_fast_and_consistent() -> None:
    from ascendctl.preflight.checks import names

    verdict = names.NAME_RESOLUTION.evaluate(names_facts({f"n{i}": all_healthy(f"n{i}") for i in (1, 2, 3)}), ctx())
    assert {r.status for r in verdict.per_node.values()} == {Status.PASS}
    assert verdict.per_node["n1"].summary == "hostname and 3 node address(es) resolve forward and reverse, each within 0.3 s"
    assert verdict.summary.status == Status.PASS and "within 0.3 s" in verdict.summary.summary


def test_a_slow_lookup_fails_with_the_hosts_file_hint_and_a_stalled_resolver_folds_into_one_line() -> None:
    from ascendctl.preflight.checks import names
    from ascendctl.preflight.result import NodeReport, PreflightReport

    slow = lookups("n3", {"10.0.0.1": "124 124 - - - - ", "10.0.0.2": "31 2 - - - - ", "10.0.0.3": healthy("10.0.0.3", "n3")})
    outputs = {"n1": all_healthy("n1"), "n2": all_healthy("n2"), "n3": slow}
    verdict = names.NAME_RESOLUTION.evaluate(names_facts(outputs), ctx())
    bad = verdict.per_node["n3"]
    assert bad.status == Status.FAIL
    assert bad.summary == "name lookups take over 0.3 s: reverse 10.0.0.1 (n1), reverse 10.0.0.2 (n2)"
    assert "/etc/hosts with every node's cluster address and name, or a reachable DNS server" in (bad.hint or "")
    assert verdict.per_node["n1"].status == Status.PASS
    assert verdict.summary.status == Status.FAIL and verdict.summary.summary == "name lookups fail or stall on n3"
    # 1,000 nodes behind one stalled resolver: each node's lookers stop after their first slow lookups (which ones
    # differs from node to node); the summary says what kind, so the report is one line for all of them
    big = inv("nodes:\n  - host: n[1-12]\n")
    stalled = {}
    for k, node in enumerate(big.nodes, start=1):
        first = [f"10.0.0.{(k + j - 1) % 12 + 1}" for j in range(8)]
        stalled[node.name] = lookups(node.name, {a: "200 124 - - - - " for a in first}, host_cs=200, host_rc=124,
                                     extra="stopped 1\nstopped 1\nstopped 1\nstopped 1").replace("asked 8", "asked 12")
    verdict = names.NAME_RESOLUTION.evaluate(names_facts(stalled, big), ctx(big))
    texts = {r.summary for r in verdict.per_node.values()}
    assert texts == {"name lookups take over 0.3 s (its hostname, reverse lookups): the resolver stalls; "
                     "stopped after the first slow ones, 4 of 12 addresses not checked"}
    report = PreflightReport(("name_resolution",), tuple(NodeReport(n.name, n.host, True, (verdict.per_node[n.name],))
                                                         for n in big.nodes), (verdict.summary,))
    assert [names_ for _, names_ in report.problems()] == [[n.name for n in big.nodes]]


def test_missing_and_inconsistent_names_fail_naming_the_nodes_and_addresses() -> None:
    from ascendctl.preflight.checks import names

    missing = lookups("n1", {"10.0.0.1": healthy("10.0.0.1", "n1"), "10.0.0.2": "1 2 - - - - ",
                             "10.0.0.3": healthy("10.0.0.3", "n3")}, host_rc=2, host_addrs="")
    inconsistent = lookups("n2", {"10.0.0.1": healthy("10.0.0.1", "n1"), "10.0.0.2": "1 0 n2 1 0 0 10.0.0.9",
                                  "10.0.0.3": "1 0 old-n3 1 2 0 "})
    verdict = names.NAME_RESOLUTION.evaluate(names_facts({"n1": missing, "n2": inconsistent, "n3": all_healthy("n3")}), ctx())
    one, two = verdict.per_node["n1"], verdict.per_node["n2"]
    assert one.status == Status.FAIL and one.summary == "its hostname does not resolve, no name for 10.0.0.2 (n2)"
    assert "same /etc/hosts" in (one.hint or "")
    assert two.status == Status.FAIL and two.summary == (
        "not back to the same address: 10.0.0.2 (n2) -> n2 -> 10.0.0.9, 10.0.0.3 (n3) -> old-n3, which does not resolve")
    assert verdict.per_node["n3"].status == Status.PASS
    assert verdict.summary.summary == "name lookups fail or stall on n[1-2]"


def test_a_hostname_that_resolves_only_to_loopback_warns() -> None:
    from ascendctl.preflight.checks import names

    loopback = lookups("n1", {f"10.0.0.{i}": healthy(f"10.0.0.{i}", f"n{i}") for i in (1, 2)}, host_addrs="127.0.1.1")
    inventory = inv("nodes: [n1, n2]\n")
    verdict = names.NAME_RESOLUTION.evaluate(names_facts({"n1": loopback, "n2": all_healthy("n2", 2)}, inventory), ctx(inventory))
    warn = verdict.per_node["n1"]
    assert warn.status == Status.WARN and warn.summary == "its hostname resolves to 127.0.1.1 (loopback), not its cluster address 10.0.0.1"
    assert "GLOO_SOCKET_IFNAME" in (warn.hint or "") and "10.0.0.1 <hostname>" in (warn.hint or "")
    assert verdict.summary.status == Status.WARN


def test_name_resolution_without_an_answer_garbage_or_a_stopped_section_is_never_a_traceback() -> None:
    from ascendctl.preflight.checks import names
    from ascendctl.preflight.run import _evaluate_cluster

    outputs: dict[str, str] = {"n1": all_healthy("n1"), "n2": "\x00\x01 not what the script prints", "n3": None}  # type: ignore[dict-item]
    verdict = _evaluate_cluster(names.NAME_RESOLUTION, names_facts(outputs), ctx())
    assert verdict.per_node["n1"].status == Status.PASS
    assert verdict.per_node["n2"].status == Status.ERROR and verdict.per_node["n2"].summary.startswith("cannot read the name lookups")
    assert verdict.per_node["n3"].status == Status.ERROR and "no answer" in verdict.per_node["n3"].summary
    assert verdict.summary.status == Status.FAIL
    # the probe runner stopped the section at section_timeout (a node without `timeout` and a stalled resolver)
    cut = names_facts({"n1": "asked 3", "n2": all_healthy("n2"), "n3": all_healthy("n3")}, codes={"n1": 124})
    stopped = names.NAME_RESOLUTION.evaluate(cut, ctx()).per_node["n1"]
    assert stopped.status == Status.FAIL and stopped.summary.startswith("name lookups did not finish within section_timeout 20s")
    missing = names.NAME_RESOLUTION.evaluate(names_facts({"n1": "asked 3\ngetent missing", "n2": all_healthy("n2")}), ctx())
    assert missing.per_node["n1"].status == Status.ERROR and "libc-bin" in (missing.per_node["n1"].hint or "")
    # one node answered (the others unreachable): nothing to compare, nothing to crash on
    assert names.NAME_RESOLUTION.evaluate(names_facts({"n2": all_healthy("n2")}), ctx()).per_node["n2"].status == Status.PASS


def test_the_lookup_section_asks_its_own_address_first_then_the_ring_and_is_bounded() -> None:
    from ascendctl.preflight.checks import names

    inventory = inv("nodes:\n  - host: n[1-300]\n")
    facts = []
    for i, node in enumerate(inventory.nodes):
        from ascendctl.preflight.checks.model import NodeFacts
        facts.append(NodeFacts(node, net_section(9000, address=f"10.0.{i // 250}.{i % 250 + 1}")))
    text = names.lookup_section(facts[10], facts, ctx(inventory))[names.NAMES_SECTION]
    args = text.splitlines()[0].split()
    assert args[:6] == ["set", "--", "30", "2", "4", "2"]  # 0.3 s, stopped at 2 s, 4 lookers, 2 slow lookups each
    addresses = args[6:]
    assert len(addresses) == names.MAX_ADDRESSES and addresses[:2] == ["10.0.0.11", "10.0.0.12"]
    assert subprocess.run(["sh", "-n", "-c", text]).returncode == 0
    assert names.lookup_section(facts[0], facts[:1], ctx(inv("nodes: [n1]\n"))) == {}
    assert names.stop_seconds(0.3) == 2 and names.stop_seconds(2.5) == 4


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_the_lookup_script_times_each_lookup_and_stops_a_stalled_one(shell: str, tmp_path: Path) -> None:
    """The real script with a getent that answers from a table and stalls on one address (`timeout` stops it)."""
    from ascendctl.preflight.checks import names

    fake = tmp_path / "getent"
    fake.write_text("#!/bin/sh\ncase \"$1 $2\" in\n"
                    "  'hosts 10.0.0.1') echo '10.0.0.1 n1' ;;\n  'hosts 10.0.0.2') echo '10.0.0.2 n2' ;;\n"
                    "  'hosts 10.0.0.3') sleep 30 ;;\n"
                    "  'ahosts n1') printf '10.0.0.1 STREAM n1\\n10.0.0.1 DGRAM\\n' ;;\n"
                    "  'ahosts n2') printf '10.0.0.9 STREAM n2\\n' ;;\n"
                    "  *) printf '10.0.0.1 STREAM x\\n' ;;\nesac\n")
    fake.chmod(0o755)
    section = names.lookup_section(names_facts({"n1": ""})[0], names_facts({"n1": "", "n2": "", "n3": ""}), ctx())
    text = section[names.NAMES_SECTION].replace("set -- 30 2 ", "set -- 30 1 ")  # stop after 1 s: a quicker test
    started = time.monotonic()
    out = subprocess.run([shell, "-c", text], capture_output=True, text=True, timeout=20,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert time.monotonic() - started < 5 and out.returncode == 0, out
    parsed = names.parse_lookups(out.stdout)
    assert parsed.asked == 3 and parsed.host is not None and parsed.host.addresses == ("10.0.0.1",)
    by = {a.address: a for a in parsed.addresses}
    assert by["10.0.0.1"].maps_back is True and by["10.0.0.2"].maps_back is False and by["10.0.0.2"].forward == ("10.0.0.9",)
    assert by["10.0.0.3"].rc == 124 and by["10.0.0.3"].name is None
    verdict = names.NAME_RESOLUTION.evaluate(names_facts({"n1": out.stdout, "n2": all_healthy("n2"), "n3": all_healthy("n3")}), ctx())
    assert verdict.per_node["n1"].summary == ("name lookups take over 0.3 s: reverse 10.0.0.3 (n3); "
                                              "not back to the same address: 10.0.0.2 (n2) -> n2 -> 10.0.0.9")


def test_name_resolution_rides_in_the_one_cross_node_round() -> None:
    """No third round: the lookups are a section of the round that pings and tests the port."""
    from tests.fakes import ip_sections, probe_reply

    inventory = inv("nodes: [10.0.0.11, 10.0.0.12]\n")
    now = (lambda cmd: CommandResult(cmd, 0, f"{time.time():.6f}\n", "", 0.0))
    both = {"10.0.0.11": healthy("10.0.0.11", "a"), "10.0.0.12": healthy("10.0.0.12", "b")}
    rules = {}
    for node in inventory.nodes:
        outputs = {**ip_sections("eth0", node.host), "ports": "", "listener": "listener none", "port": "port 2",
                   "names": lookups("a", both, host_addrs=node.host)}
        rules[node.name] = [(r"^date", now), (r"@@", probe_reply(outputs))]
    factory = FakeFactory(inventory, rules)
    report = run_preflight(inventory, select_checks(["path_mtu", "master_port", "name_resolution"]),
                           group=NodeGroup(inventory, factory=factory))
    for name in ("10.0.0.11", "10.0.0.12"):
        probes = [c for c in factory.transports[name].calls if "@@" in c]
        assert len(probes) == 2, [p[:80] for p in probes]  # the probe, then ONE cross-node round
        assert "begin names@@" in probes[1] and "begin port@@" in probes[1] and "begin names@@" not in probes[0]
    for node in report.nodes:
        result = {c.check: c for c in node.checks}["name_resolution"]
        assert result.status == Status.PASS, result


def test_a_run_that_fails_before_any_check_still_writes_its_junit_through_the_one_writer(tmp_path: Path) -> None:
    """--junit is written when asked, also for a broken inventory: one errored testcase, in the same envelope
    (<testsuites>, declaration, counts) as a real run's report."""
    from typer.testing import CliRunner

    from ascendctl.cli import app

    broken = tmp_path / "cluster.yaml"
    broken.write_text("nodes: [\n", encoding="utf-8")
    junit = tmp_path / "preflight.xml"
    result = CliRunner().invoke(app, ["preflight", "-i", str(broken), "--junit", str(junit)])
    assert result.exit_code == ExitCode.USAGE
    text = junit.read_text(encoding="utf-8")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    suite = ET.fromstring(text).find("testsuite")
    assert suite is not None and suite.get("tests") == "1" and suite.get("errors") == "1" and suite.get("failures") == "0"
    error = suite.find("testcase/error")
    assert error is not None and str(broken) in (error.text or "")


@pytest.mark.parametrize("output, status, words", [
    ("py-spy no\nuid 1000\nptrace_scope 1", Status.WARN, "py-spy not found"),
    ("py-spy yes\nuid 1000\nptrace_scope 1", Status.WARN, "ptrace_scope=1"),
    ("py-spy yes\nuid 0\nptrace_scope 1", Status.PASS, "native frames"),
    ("py-spy yes\nuid 0\nptrace_scope 3", Status.WARN, "nobody"),
    ("py-spy yes\nuid 1000\nptrace_scope 0", Status.PASS, "ptrace_scope 0"),
    ("py-spy yes\nuid 1000\nptrace_scope none", Status.PASS, "ptrace allowed"),
    ("garbage", Status.WARN, "could not tell"),
])
def test_stacks_check_names_what_stacks_will_get_and_never_fails(output: str, status: Status, words: str) -> None:
    """Issue #27: py-spy present or not, ptrace allowed or not: a warning at most (the faulthandler hook always works)."""
    got = system.STACKS.evaluate(inv().nodes[0], {"stacks": Section(output, 0)}, ctx())
    assert got.status == status and words in got.summary, got
