"""Network checks: ssh, interface MTU, path MTU between nodes, and the master's rendezvous port.

`path_mtu` and `master_port` need a second, cross-node round: the facts of the first
(interface addresses) decide who pings whom. Command builders and evaluators are pure.
Must not import typer or rich.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ascendctl.nodeset import fold
from ascendctl.facts.parsers import ParseError
from ascendctl.facts.endpoint import ADDRS, LINKS, NET_SECTIONS, EndpointError, cluster_endpoint, cluster_link, net_sections
from ascendctl.facts.parsers.system import parse_ss_listeners
from ascendctl.preflight.checks.model import ClusterCheck, ClusterVerdict, NodeCheck, Status, result

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node
    from ascendctl.remote.probe import Section
    from ascendctl.preflight.checks.model import CheckResult, NodeFacts, ProbeContext

SMALL_PING = 1372  # fits any 1500-byte path with room for tunnels


# -- facts --------------------------------------------------------------------------------
def _net_fact(section: str) -> Callable[[Node, ProbeContext], str | None]:
    def build(node: Node, ctx: ProbeContext) -> str | None:
        return net_sections(node, ctx.inventory).get(section)
    return build


def ports_section(node: Node, ctx: ProbeContext) -> str | None:
    """Listening TCP ports, on the master only (is the rendezvous port free?)."""
    return "ss -Hltn" if node.name == ctx.inventory.master.name else None


FACTS: dict[str, Callable[[Node, ProbeContext], str | dict[str, str] | None]] = {
    **{section: _net_fact(section) for section in NET_SECTIONS}, "ports": ports_section}


def _probed(facts_or_sections: Mapping[str, Section]) -> bool:
    return all(s in facts_or_sections and facts_or_sections[s].exit_code is not None for s in (LINKS, ADDRS))


# -- ssh ----------------------------------------------------------------------------------
def _ssh_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    if node.transport == "local":
        return result("ssh", Status.PASS, "local transport (this machine)")
    user = f"{node.user}@" if node.user else ""
    return result("ssh", Status.PASS, f"key auth as {user}{node.host} without a prompt, host key verified")


SSH = NodeCheck("ssh", "SSH reachable, key auth, host key verified", (), _ssh_evaluate)


# -- mtu ----------------------------------------------------------------------------------
def _mtu_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    want = ctx.config.min_mtu
    if node.interface is None and len(ctx.inventory.nodes) == 1:
        return result("mtu", Status.SKIP, "one node and no `interface` set: no cluster traffic to check")
    try:
        link, _, why = cluster_link(node, sections)
    except ParseError as exc:
        return result("mtu", Status.ERROR, f"cannot read `ip` output: {exc}")
    if link is None:
        return result("mtu", Status.FAIL, why, "set `interface` in the inventory to the cluster NIC")
    if link.mtu < want:
        return result(
            "mtu", Status.FAIL, f"{link.name} MTU {link.mtu} < {want}",
            f"ip link set dev {link.name} mtu {want} (and persist it); every switch port on the path must allow jumbo frames too",
        )
    if not link.up:
        return result("mtu", Status.FAIL, f"{link.name} is {link.state}", f"ip link set dev {link.name} up; check the cable and switch port")
    return result("mtu", Status.PASS, f"{link.name} MTU {link.mtu}")


MTU = NodeCheck("mtu", "cluster interface MTU >= min_mtu", NET_SECTIONS, _mtu_evaluate)


# -- path_mtu and master_port: the cross-node round ------------------------------------------
def node_address(facts: NodeFacts) -> str:
    """Where other nodes reach this one: its cluster endpoint, else (no usable address) its inventory host."""
    if _probed(facts.sections):
        try:
            return cluster_endpoint(facts.node, facts.sections).ip
        except EndpointError:
            pass
    return facts.node.host


def jumbo_ready(facts: NodeFacts, ctx: ProbeContext) -> bool:
    """Both ends must be configured for jumbo frames before the path between them is judged."""
    if not _probed(facts.sections):
        return False
    try:
        link, _, _ = cluster_link(facts.node, facts.sections)
    except ParseError:
        return False
    return link is not None and link.mtu >= ctx.config.min_mtu


def ping_targets(facts: NodeFacts, reachable: Sequence[NodeFacts], ctx: ProbeContext) -> list[NodeFacts]:
    """The master and the ring neighbour, when both ends are ready for jumbo frames."""
    if not jumbo_ready(facts, ctx):
        return []
    by_name = {f.node.name: f for f in reachable}
    targets: list[NodeFacts] = []
    for other in (ctx.inventory.master, ctx.neighbour(facts.node)):
        if other is None or other.name == facts.node.name or other.name not in by_name:
            continue
        peer = by_name[other.name]
        if jumbo_ready(peer, ctx) and peer not in targets:
            targets.append(peer)
    return targets


PATH_SECTION, PORT_SECTION = "path", "port"


def phase2_sections(facts: NodeFacts, reachable: Sequence[NodeFacts], ctx: ProbeContext, *, path: bool, port: bool,
                    master_address: str | None, listener: bool) -> dict[str, str]:
    """Probe sections of the cross-node round: pings (don't-fragment jumbo and small) to each target, a TCP connect.

    `path` prints `ping <name> <ip> <jumbo rc> <small rc>` per target (or `ping missing`); `port`
    prints `port N`: 0 (connected), 2 (refused: the packets got there), 3 (timed out or
    unreachable), 1 (failed, kind unknown) or 99 (no tool to try with).
    """
    sections: dict[str, str] = {}
    if path:
        size = ctx.config.min_mtu - 28  # IPv4 + ICMP headers
        lines = ["command -v ping >/dev/null 2>&1 || { echo 'ping missing'; exit 0; }"]
        for peer in ping_targets(facts, reachable, ctx):
            ip = shlex.quote(node_address(peer))
            # jumbo and small pings run side by side, every target at once; a lost jumbo reply is asked again
            # (a second ping only when the first got no answer: the healthy path costs one round trip)
            big = f"ping -n -q -c 1 -W 1 -M do -s {size} {ip} >/dev/null 2>&1"
            lines.append(
                f"( ping -n -q -c 1 -W 1 -s {SMALL_PING} {ip} >/dev/null 2>&1 & s=$!; "
                f"{big} || {big}; big=$?; wait $s; "
                f"echo \"ping {peer.node.name} {ip} $big $?\" ) &"
            )
        if len(lines) > 1:
            sections[PATH_SECTION] = "\n".join(lines) + "\nwait\n"
    if port and master_address is not None:
        host, number = shlex.quote(master_address), ctx.config.master_port
        connect = ("import socket,sys; s=socket.socket(); s.settimeout(2); r=s.connect_ex((sys.argv[1], int(sys.argv[2]))); "
                   "sys.exit(0 if r == 0 else 2 if r == 111 else 3)")
        python_try = f"python3 -c {shlex.quote(connect)} \"$1\" \"$2\""
        bash_try = "timeout 2 bash -c \"exec 3<>/dev/tcp/$1/$2\" 2>/dev/null"
        if listener:
            # A listener answers: bash's /dev/tcp is enough and far cheaper than starting Python.
            order = [("bash", bash_try), ("nc", "nc -z -w 2 \"$1\" \"$2\""), ("python3", python_try)]
            tries = 8  # the listener may still be starting
        else:
            # Only Python tells "refused" (packets arrived) from "timed out" (dropped).
            order = [("python3", python_try), ("nc", "nc -z -w 2 \"$1\" \"$2\""), ("bash", bash_try)]
            tries = 1
        chain = "; ".join(f"{'if' if i == 0 else 'elif'} command -v {tool} >/dev/null 2>&1; then {cmd}" for i, (tool, cmd) in enumerate(order))
        sections[PORT_SECTION] = (
            f"tcp() {{ {chain}; else return 99; fi; }}; "
            f"i=0; while :; do tcp {host} {number}; r=$?; i=$((i+1)); "
            f"{{ [ $r = 0 ] || [ $r = 99 ] || [ $i -ge {tries} ]; }} && break; sleep 0.25; done; echo \"port $r\""
        )
    return sections


def listener_command(port: int, seconds: float, expect: int) -> str:
    """A short-lived TCP listener on the master (python3), accepting and closing connections.

    It ends after `expect` connections (one per node's port test) or `seconds`, whichever comes first, so a
    healthy run leaves nothing behind on the port the job is about to use without a round trip to stop it.
    """
    script = (
        "import socket,time\n"
        "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('0.0.0.0', {port})); s.listen(256); s.settimeout(0.2); end=time.time()+{seconds:g}; n=0\n"
        f"while time.time() < end and n < {int(expect)}:\n"
        "    try:\n        c, _ = s.accept(); c.close(); n += 1\n"
        "    except OSError:\n        pass\n"
    )
    return (
        f"if command -v python3 >/dev/null 2>&1; then nohup python3 -c {shlex.quote(script)} >/dev/null 2>&1 </dev/null & "
        "echo \"listener $!\"; else echo 'listener none'; fi"
    )


def port_connected(phase2: Mapping[str, Section]) -> bool:
    """Whether the node's port test connected (`port 0`)."""
    return _parse_phase2(phase2)[1] == 0


def listener_pid(section: Section | None) -> str | None:
    """The listener's process id from what `listener_command` printed (None: not started, no python3, no answer)."""
    words = section.output.split() if section is not None and section.exit_code == 0 else []
    return words[1] if len(words) == 2 and words[0] == "listener" and words[1].isdigit() else None


def _parse_phase2(sections: Mapping[str, Section]) -> tuple[list[tuple[str, str, bool, bool]], int | None, bool]:
    pings: list[tuple[str, str, bool, bool]] = []
    port: int | None = None
    ping_missing = False
    text = "\n".join(sections[name].output for name in (PATH_SECTION, PORT_SECTION) if name in sections)
    for line in text.splitlines():
        words = line.split()
        if len(words) == 5 and words[0] == "ping":
            pings.append((words[1], words[2], words[3] == "0", words[4] == "0"))
        elif len(words) == 2 and words[0] == "port" and words[1].isdigit():
            port = int(words[1])
        elif line.strip() == "ping missing":
            ping_missing = True
    return pings, port, ping_missing


def _path_mtu_evaluate(facts: Sequence[NodeFacts], ctx: ProbeContext) -> ClusterVerdict:
    size = ctx.config.min_mtu - 28
    per_node: dict[str, CheckResult] = {}
    if len(ctx.inventory.nodes) < 2:
        summary = result("path_mtu", Status.SKIP, "one node: no path to check")
        return ClusterVerdict({f.node.name: summary for f in facts}, summary)
    failures: list[tuple[str, str, bool]] = []  # (src, dst, small ping ok)
    passed: set[str] = set()  # nodes with at least one pair that carried jumbo frames
    tested: dict[str, list[str]] = {}
    for f in facts:
        if not jumbo_ready(f, ctx):
            per_node[f.node.name] = result("path_mtu", Status.SKIP, f"interface not configured for MTU {ctx.config.min_mtu} (see mtu)")
            continue
        pings, _, missing = _parse_phase2(f.phase2)
        if missing:
            per_node[f.node.name] = result("path_mtu", Status.ERROR, "ping not found", "install iputils-ping")
            continue
        tested[f.node.name] = []
        for dst, _ip, big, small in pings:
            tested[f.node.name].append(dst)
            tested.setdefault(dst, [])
            if not big:
                failures.append((f.node.name, dst, small))
            else:
                passed.update((f.node.name, dst))
    common = _common_endpoints(failures)
    culprits = [name for name in common if name not in passed] or common
    for name, peers in tested.items():
        if name in per_node:
            continue
        mine = [(s, d, small) for s, d, small in failures if name in (s, d)]
        if not mine:
            detail = f" to {fold(peers)}" if peers else ""
            per_node[name] = result("path_mtu", Status.PASS, f"{size}-byte don't-fragment pings pass{detail}")
        elif culprits and name not in culprits:
            per_node[name] = result("path_mtu", Status.PASS, f"ok; failures explained by {fold(culprits)}")
        else:
            pairs = ", ".join(f"{s}->{d}" for s, d, _ in mine)
            if all(small for _, _, small in mine):
                per_node[name] = result(
                    "path_mtu", Status.FAIL,
                    f"jumbo frames dropped on the path ({pairs}: {size}-byte DF pings lost, {SMALL_PING}-byte pings pass)",
                    "a switch port or bond on this node's path is below the interface MTU: "
                    "set the switch port MTU to 9216 (or match min_mtu) and re-check",
                )
            else:
                per_node[name] = result("path_mtu", Status.FAIL, f"no reply at all ({pairs})", "check routing, cabling and firewalls between the nodes")
    bad = [name for name, r in per_node.items() if r.status in (Status.FAIL, Status.ERROR)]
    if bad:
        summary = result("path_mtu", Status.FAIL, f"jumbo frames do not pass to/from {fold(bad)}", per_node[bad[0]].hint)
    elif not tested:
        summary = result("path_mtu", Status.SKIP, "no pair of nodes configured for jumbo frames")
    else:
        summary = result("path_mtu", Status.PASS, f"{size}-byte don't-fragment pings pass between {fold(tested)}")
    return ClusterVerdict(per_node, summary)


def _common_endpoints(failures: list[tuple[str, str, bool]]) -> list[str]:
    """Nodes present in every failing pair: the likely culprits (one bad port breaks all its pairs)."""
    if not failures:
        return []
    common = set(failures[0][:2])
    for src, dst, _ in failures[1:]:
        common &= {src, dst}
    return sorted(common)


PATH_MTU = ClusterCheck("path_mtu", "jumbo frames pass between nodes", NET_SECTIONS, _path_mtu_evaluate, phase2=True)


def master_port_free(master: NodeFacts, port: int) -> tuple[bool | None, str]:
    """Is the port free on the master? (None when unknown.)"""
    section = master.sections.get("ports")
    if section is None or section.exit_code is None:
        return None, "no answer"
    if section.exit_code != 0:
        return None, f"`ss -Hltn` failed: {section.output.strip()[:80]}"
    try:
        listeners = parse_ss_listeners(section.output)
    except ParseError as exc:
        return None, str(exc)
    busy = [f"{item.address}:{item.port}" for item in listeners if item.port == port]
    return (not busy), ", ".join(busy)


def _master_port_evaluate(facts: Sequence[NodeFacts], ctx: ProbeContext) -> ClusterVerdict:
    port = ctx.config.master_port
    master = next((f for f in facts if f.node.name == ctx.inventory.master.name), None)
    if master is None:
        summary = result("master_port", Status.ERROR, f"master {ctx.inventory.master.name} unreachable (see ssh)")
        return ClusterVerdict({f.node.name: summary for f in facts}, summary)
    free, detail = master_port_free(master, port)
    if free is False:
        summary = result(
            "master_port", Status.FAIL, f"port {port} is already in use on master {master.node.name} ({detail})",
            f"a leftover job may hold it: `ascendctl exec -- ss -ltnp 'sport = :{port}'`, stop it, or pick another master_port",
        )
        return ClusterVerdict({master.node.name: summary}, summary)
    if free is None:
        summary = result("master_port", Status.ERROR, f"cannot tell whether port {port} is free on {master.node.name}: {detail}")
        return ClusterVerdict({master.node.name: summary}, summary)
    per_node: dict[str, CheckResult] = {}
    blocked: list[str] = []
    for f in facts:
        _, code, _ = _parse_phase2(f.phase2)
        target = f"{master.node.name}:{port}"
        if code is None:
            per_node[f.node.name] = result("master_port", Status.ERROR, "no answer from the port test")
        elif code == 0:
            per_node[f.node.name] = result("master_port", Status.PASS, f"can reach {target}")
        elif code == 2 and not master.listener:
            # No listener could be started (no python3 on the master): a refusal still proves
            # that packets reach the master and no firewall drops them.
            per_node[f.node.name] = result("master_port", Status.PASS, f"{target} answers (refused, nothing listening yet)")
        elif code == 99:
            per_node[f.node.name] = result("master_port", Status.SKIP, "no python3, nc or bash to test TCP with")
        else:
            blocked.append(f.node.name)
            per_node[f.node.name] = result(
                "master_port", Status.FAIL, f"cannot connect to {target}",
                f"open TCP {port} from the cluster network on {master.node.name} (firewall/security group) and check routing",
            )
    if blocked:
        summary = result("master_port", Status.FAIL, f"{fold(blocked)} cannot reach {master.node.name}:{port}", per_node[blocked[0]].hint)
    else:
        summary = result("master_port", Status.PASS, f"port {port} free on {master.node.name} and reachable from every node")
    return ClusterVerdict(per_node, summary)


MASTER_PORT = ClusterCheck("master_port", "rendezvous port free on the master and reachable", ("ports", *NET_SECTIONS), _master_port_evaluate,
                           phase2=True)
