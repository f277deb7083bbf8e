"""The one cluster-endpoint resolver: which interface and address a node's training traffic uses.

Preflight (MTU, path MTU, master port), launch (HCCL_IF_IP, MASTER_ADDR), `launch --dry-run` and
`render env` all ask `cluster_endpoint`. The node's facts come from the probe sections built here
(`ip -o link`, `ip -o -4 addr`, the route towards the master), run through the one framed probe.
The inventory's `interface` wins; without it, the interface of the route towards the master (or, on a
one-node cluster, of the default route). An interface without an IPv4 address is an error, never a
silent fallback to the management address. `host_ip` is only the rank table's field. Must not import
typer or rich.
"""

from __future__ import annotations

import ipaddress
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from ascendctl.remote.probe import ask
from ascendctl.errors import AscendctlError, ExitCode
from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.system import parse_ip_addr, parse_ip_link, parse_ip_route_get

if TYPE_CHECKING:
    from ascendctl.remote.probe import Section
    from ascendctl.remote.group import NodeGroup
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.facts.parsers.system import Address, Link
    from ascendctl.remote.transport.base import Transport

# probe sections of the network facts (shared with preflight's checks)
LINKS, ADDRS, ROUTE = "net.links", "net.addrs", "net.route"
NET_SECTIONS = (LINKS, ADDRS, ROUTE)


class EndpointError(AscendctlError):
    """A node's cluster interface has no usable address (or is missing): nothing may be started with a guess."""

    exit_code = ExitCode.CHECKS_FAILED


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a node's training traffic goes: the interface, its IPv4 address, and how that was decided."""

    node: str
    ifname: str | None
    ip: str
    source: str  # e.g. "eth1 (inventory interface)", "eth0 (route to the master)", "loopback (one node)"
    mtu: int | None = None


def route_target(node: Node, inventory: Inventory) -> Node | None:
    """The node whose route tells this node's cluster interface: the master, or for the master its ring neighbour."""
    nodes = inventory.nodes
    if len(nodes) < 2:
        return None
    master = inventory.master
    return master if node.name != master.name else nodes[(node.index + 1) % len(nodes)]


def net_sections(node: Node, inventory: Inventory) -> dict[str, str]:
    """The probe sections a node's endpoint needs: links, IPv4 addresses, and the route towards its target."""
    # `ip` warns on stderr about peer netns references; the probe merges stderr into the section, so drop it
    sections = {LINKS: "ip -o link show 2>/dev/null", ADDRS: "ip -o -4 addr show 2>/dev/null"}
    target = route_target(node, inventory)
    if target is not None:
        host = shlex.quote(target.host)
        if _is_ipv4(target.host):  # an address already: no resolver and awk processes to start
            sections[ROUTE] = f"ip -o route get {host} 2>/dev/null"
        else:
            sections[ROUTE] = (f"t=$(getent ahostsv4 {host} 2>/dev/null | awk 'NR==1{{print $1}}'); [ -n \"$t\" ] || t={host}; "
                               "ip -o route get \"$t\" 2>/dev/null")
    else:
        sections[ROUTE] = "ip -o route show default 2>/dev/null | head -n 1"
    return sections


def canonical_ip(text: str) -> str | None:
    """The address in canonical form (so 2001:db8::1 and 2001:DB8:0::1 compare equal), or None if malformed or
    unspecified (0.0.0.0 names no node)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return None if address.is_unspecified else str(address)


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def _route_dev(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    if text.startswith("default"):
        parts = text.split()
        return parts[parts.index("dev") + 1] if "dev" in parts and parts.index("dev") + 1 < len(parts) else None
    return parse_ip_route_get(text).dev


def cluster_link(node: Node, sections: Mapping[str, Section]) -> tuple[Link | None, Address | None, str]:
    """The node's cluster interface, its primary IPv4 address, and (when there is none) why. Raises ParseError."""
    links = parse_ip_link(sections[LINKS].output if LINKS in sections else "")
    addrs = parse_ip_addr(sections[ADDRS].output if ADDRS in sections else "")
    name = node.interface
    chosen_by = "inventory interface"
    if name is None:
        route = sections.get(ROUTE)
        name = _route_dev(route.output) if route is not None and route.exit_code == 0 else None
        chosen_by = "route to the master" if name else ""
    if name is None:
        return None, None, "no interface configured and no route found"
    link = next((item for item in links if item.name == name), None)
    if link is None:
        have = ", ".join(item.name for item in links if item.name != "lo")
        return None, None, f"interface {name} not found (have: {have or 'none'})"
    address = next((a for a in addrs if a.ifname == name and not a.secondary), None)
    if address is None:
        return link, None, f"interface {name} ({chosen_by}) has no IPv4 address"
    return link, address, chosen_by


def cluster_endpoint(node: Node, sections: Mapping[str, Section], *, single_node: bool = False) -> Endpoint:
    """The node's endpoint from its probe sections; raises EndpointError naming the node when there is no address."""
    try:
        link, address, why = cluster_link(node, sections)
    except ParseError as exc:
        raise EndpointError(f"{node.name}: cannot read `ip` output: {exc}") from None
    if link is not None and address is not None:
        return Endpoint(node.name, link.name, address.address, f"{link.name} ({why})", link.mtu)
    if node.interface is None and single_node and link is None:
        return Endpoint(node.name, None, "127.0.0.1", "loopback (one node, no interface configured)")
    hint = ("set `interface` in the inventory to the cluster NIC and give it an address" if node.interface
            else "set `interface` in the inventory to the cluster NIC")
    raise EndpointError(f"{node.name}: {why}", hint=hint)


def resolve_endpoints(group: NodeGroup, *, nodes: list[Node] | None = None) -> dict[str, Endpoint]:
    """Every node's endpoint, asked from the nodes in one probe each (errors: unreachable nodes, missing addresses)."""
    inventory = group.inventory
    targets = nodes if nodes is not None else list(inventory.nodes)
    single = len(inventory.nodes) == 1

    def resolve(node: Node, transport: Transport) -> Endpoint:
        answer = ask(transport, net_sections(node, inventory), section_timeout=inventory.preflight.section_timeout,
                     timeout=node.command_timeout)
        return cluster_endpoint(node, answer.sections, single_node=single)

    results = group.run(resolve, nodes=targets)
    unreachable = [r for r in results if r.error is not None and r.error.status.value != "error"]
    if unreachable:
        raise AscendctlError("; ".join(f"{r.node}: {r.error.message}" for r in unreachable if r.error),
                             hint="`ascendctl preflight` says more", exit_code=ExitCode.NODES_UNREACHABLE)
    failed = [r for r in results if r.error is not None]
    if failed:
        raise EndpointError("\n".join(r.error.message for r in failed if r.error),
                            hint="set `interface` in the inventory to the cluster NIC and make sure it has an IPv4 address")
    return {r.node: r.value for r in results if r.value is not None}
