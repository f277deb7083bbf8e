"""The device network of Ascend nodes: `hccn_tool -i N -ping -g address <peer device IP>` between paired nodes.

Device IPs come from devices.py (inventory `device_ips`, else `hccn_tool -i N -ip -g`, else /etc/hccn.conf), asked
in netcheck's one probe per node. For every pair the schedule measured, device N of the pair's first node pings
device N of the second (HCCL's RoCE plane joins same-numbered devices across nodes); an echo crosses both ways,
so one direction per pair is enough. Each node's pings are sections of one probe. Then `judge_devices` names
a device whose every ping failed (with at least two peers) as a broken DEVICE, else each failed ping as a broken
device LINK. Pure except `run_device_pings`; must not import typer or rich.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.hccn import parse_ping
from ascendctl.remote.probe import NOT_RUN, ask

if TYPE_CHECKING:
    from ascendctl.facts.devices import NodeDevices
    from ascendctl.remote.group import NodeGroup
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.remote.transport.base import Transport

HCCN_TOOL_SECTION = "netcheck.hccn_tool"
HCCN_TOOL_CHECK = "command -v hccn_tool"


@dataclass(frozen=True, slots=True)
class DevicePing:
    """Device `device` of `node` pinged device `device` of `peer` at `peer_ip`: packets sent and answered, or why not."""

    node: str
    peer: str
    device: int
    peer_ip: str
    transmitted: int = 0
    received: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.transmitted > 0 and self.received == self.transmitted

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "device": self.device, "peer": self.peer, "peer_device": self.device,
                "peer_ip": self.peer_ip, "transmitted": self.transmitted, "received": self.received, "error": self.error,
                "ok": self.ok}


@dataclass(frozen=True, slots=True)
class DeviceVerdict:
    pings: tuple[DevicePing, ...] = ()
    broken_devices: tuple[tuple[str, int, str], ...] = ()  # (node, device, why)
    broken_links: tuple[DevicePing, ...] = ()
    skipped: str | None = None  # why no device was pinged, when none was

    @property
    def clean(self) -> bool:
        return not (self.broken_devices or self.broken_links)

    def to_dict(self) -> dict[str, Any]:
        return {"pings": [p.to_dict() for p in self.pings],
                "broken_devices": [{"node": n, "device": d, "error": why} for n, d, why in self.broken_devices],
                "broken_links": [p.to_dict() for p in self.broken_links], "skipped": self.skipped}


def ping_command(device: int, address: str) -> str:
    """One ping from a device to an address (a missing hccn_tool is exit status 127)."""
    return f"command -v hccn_tool >/dev/null 2>&1 || exit 127; hccn_tool -i {int(device)} -ping -g address {shlex.quote(address)}"


def ping_targets(pairs: Iterable[tuple[str, str]], devices: Mapping[str, NodeDevices]) -> dict[str, list[tuple[str, int, str]]]:
    """Per pinging node, (peer, device, peer device IP): device N of each pair's first node to device N of the second.

    A pair measured in several rounds is pinged once; devices without an IP on either side are left out.
    """
    targets: dict[str, list[tuple[str, int, str]]] = {}
    seen: set[frozenset[str]] = set()
    for a, b in pairs:
        if frozenset((a, b)) in seen or a not in devices or b not in devices:
            continue
        seen.add(frozenset((a, b)))
        for device in devices[a].devices:
            peer_ip = devices[b].ip_of(device.device_id)
            if device.ip and peer_ip:
                targets.setdefault(a, []).append((b, device.device_id, peer_ip))
    return targets


def ping_from_section(node: str, peer: str, device: int, peer_ip: str, output: str, exit_code: int | None) -> DevicePing:
    """A DevicePing from what the section printed: the summary line counts, even when the tool exited non-zero."""
    try:
        result = parse_ping(output)
    except ParseError:
        first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
        why = ("hccn_tool not found" if exit_code == 127 else "not run: the probe's time was spent" if exit_code == NOT_RUN
               else "no answer" if exit_code is None else f"exit {exit_code}: {first[:160]}")
        return DevicePing(node, peer, device, peer_ip, error=f"hccn_tool -i {device} -ping -g address {peer_ip}: {why}")
    error = None
    if result.problem:
        error = result.problem
    elif result.received < result.transmitted:
        error = f"{result.transmitted - result.received} of {result.transmitted} packets lost ({result.loss_percent:g}%)"
    return DevicePing(node, peer, device, peer_ip, result.transmitted, result.received, error)


def judge_devices(pings: Sequence[DevicePing]) -> DeviceVerdict:
    """A device none of whose pings (sent or received) got through, with at least two peers, is broken; else each failed ping is a broken link."""
    involved: dict[tuple[str, int], list[DevicePing]] = {}
    for p in pings:
        involved.setdefault((p.node, p.device), []).append(p)
        involved.setdefault((p.peer, p.device), []).append(p)
    broken: list[tuple[str, int, str]] = []
    for (node, device), mine in involved.items():
        peers = {p.peer if p.node == node else p.node for p in mine}
        if len(peers) >= 2 and not any(p.ok for p in mine):
            why = next(p.error for p in mine if p.error)
            broken.append((node, device, f"every ping with {len(peers)} peers failed ({why})"))
    gone = {(n, d) for n, d, _ in broken}
    links = tuple(p for p in pings if not p.ok and (p.node, p.device) not in gone and (p.peer, p.device) not in gone)
    return DeviceVerdict(tuple(pings), tuple(sorted(broken)), links)


def run_device_pings(group: NodeGroup, inventory: Inventory, pairs: Iterable[tuple[str, str]],
                     devices: Mapping[str, NodeDevices]) -> DeviceVerdict:
    """Every pinging node's pings as one probe, all nodes at once; a node that fails to answer makes its pings errors."""
    targets = ping_targets(pairs, devices)
    if not targets:
        return DeviceVerdict(skipped="no paired nodes with device IPs on both sides")
    by_name = {node.name: node for node in inventory.nodes}

    def work(node: Node, transport: Transport) -> list[DevicePing]:
        mine = targets[node.name]
        sections = {f"ping.{i}": ping_command(device, ip) for i, (_, device, ip) in enumerate(mine)}
        answer = ask(transport, sections, section_timeout=inventory.preflight.section_timeout, timeout=node.command_timeout)
        found = []
        for i, (peer, device, ip) in enumerate(mine):
            section = answer.sections.get(f"ping.{i}")
            found.append(ping_from_section(node.name, peer, device, ip, section.output if section else "",
                                           section.exit_code if section else None))
        return found

    pings: list[DevicePing] = []
    for result in group.run(work, nodes=[by_name[name] for name in targets]):
        if result.value is not None:
            pings.extend(result.value)
        elif result.error is not None:
            pings.extend(DevicePing(result.node, peer, device, ip, error=result.error.message)
                         for peer, device, ip in targets[result.node])
    return judge_devices(pings)
