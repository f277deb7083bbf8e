"""What makes the devices nodes report unfit for an HCCL rank table (count, IPs, ports, SuperPoD ids), one Problem
per node and device: shared by `render ranktable` and preflight's device_ips check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ascendctl.errors import ExitCode
from ascendctl.nodeset import fold_ids
from ascendctl.facts.endpoint import canonical_ip
from ascendctl.models import NodeStatus
from ascendctl.outcome import Outcome, exit_code_for, node_outcome

if TYPE_CHECKING:
    from ascendctl.facts.devices import DeviceAddress, NodeDevices
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import NodeResult, NodeResults


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong, on one line: the node and device it concerns, or the file place."""

    message: str
    node: str | None = None
    device: int | None = None
    code: str = "invalid"  # invalid | mismatch | a NodeStatus value for nodes that did not answer
    where: str | None = None  # file and key path, for problems in a rank table file
    hint: str | None = None

    @property
    def subject(self) -> str:
        parts = [self.where or self.node or ""]
        if self.where and self.node:
            parts.append(self.node)
        if self.device is not None:
            parts.append(f"device {self.device}")
        return ": ".join(part for part in parts if part)

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}" if self.subject else self.message

    @property
    def outcome(self) -> Outcome:
        """A problem of a node that did not answer is that node's transport outcome; anything else is invalid input."""
        if self.code in {s.value for s in NodeStatus}:
            return node_outcome(NodeStatus(self.code))
        return Outcome.FAILED

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "node": self.node, "device": self.device, "message": str(self)}


def exit_code_of(problems: Sequence[Problem]) -> ExitCode:
    """4 if some node did not answer, else 3 if anything is invalid, else 0."""
    return exit_code_for(p.outcome for p in problems)


# --------------------------------------------------------------------------- validation


def _valid_ip(text: str) -> bool:
    return canonical_ip(text) is not None


def per_device(value: int | tuple[int, ...] | None, device: int) -> int | None:
    """A setting given once for every device, or as a list in device-id order."""
    if value is None or isinstance(value, int):
        return value
    return value[device] if device < len(value) else None


def host_addresses(inventory: Inventory) -> dict[str, str]:
    """Every host-side IP in the inventory -> the node it belongs to (to spot device IPs reused as host IPs)."""
    owners: dict[str, str] = {}
    for node in inventory.nodes:
        for address in (node.host, node.host_ip):
            canonical = canonical_ip(address) if address else None
            if canonical:
                owners.setdefault(canonical, node.name)
    return owners


def validate_devices(
    inventory: Inventory,
    results: Sequence[NodeResult[NodeDevices]] | NodeResults[NodeDevices],
    *,
    version: str = "1.0",
    selected: Sequence[int] | None = None,
) -> list[Problem]:
    """Every reason the rank table would be wrong, one per node/device, in inventory order."""
    problems: list[Problem] = []
    hosts = host_addresses(inventory)
    seen_ips: dict[str, tuple[str, int]] = {}
    seen_sdids: dict[tuple[str, str], tuple[str, int]] = {}
    by_node = {result.node: result for result in results}
    for node in inventory.nodes:
        result = by_node.get(node.name)
        if result is None:
            continue
        if result.error is not None:
            problems.append(Problem(result.error.message, node.name, code=result.error.status.value, hint=result.error.hint))
            continue
        info = result.value
        assert info is not None
        if info.failure:
            problems.append(Problem(info.failure, node.name, code=NodeStatus.FAILED.value))
            continue
        problems += [Problem(text, node.name) for text in info.problems]
        problems += _check_count(node, info, selected)
        problems += _check_ports(node, info, version)
        for device in info.devices:
            problems += _check_ip(node, device, hosts, seen_ips)
        if version == "1.2":
            problems += _check_superpod(node, info, seen_sdids)
    return problems


def _check_count(node: Node, info: NodeDevices, selected: Sequence[int] | None) -> list[Problem]:
    count = len(info.devices)
    if selected is not None and count != node.slots:
        return [Problem(f"--devices {fold_ids(list(selected))} selects {count} device(s) but slots is {node.slots}", node.name)]
    if count != node.slots:
        return [Problem(f"{count} device(s) but slots is {node.slots}", node.name)]
    if node.device_ips is not None and selected is None and len(node.device_ips) > node.slots:
        return [Problem(f"device_ips lists {len(node.device_ips)} addresses but slots is {node.slots}", node.name)]
    return []


def _check_ip(node: Node, device: DeviceAddress, hosts: Mapping[str, str], seen: dict[str, tuple[str, int]]) -> list[Problem]:
    if device.ip is None:
        return [Problem("no device IP" + (f" ({device.note})" if device.note else ""), node.name, device.device_id,
                        hint="give the nodes' device IPs in the inventory (`device_ips: [...]` per node, in device-id order), "
                        "or make `hccn_tool -i N -ip -g` answer on them")]
    canonical = canonical_ip(device.ip)
    if canonical is None:
        return [Problem(f"malformed device IP {device.ip!r} (from {device.source or 'unknown'})", node.name, device.device_id)]
    found: list[Problem] = []
    if canonical in seen:
        other, other_device = seen[canonical]
        found.append(Problem(f"duplicate device IP {device.ip}: also {other} device {other_device}", node.name, device.device_id))
    else:
        seen[canonical] = (node.name, device.device_id)
    if canonical in hosts:
        found.append(Problem(f"device IP {device.ip} is also the host IP of {hosts[canonical]}", node.name, device.device_id))
    return found


def _check_ports(node: Node, info: NodeDevices, version: str) -> list[Problem]:
    found: list[Problem] = []
    keys = ["device_port", "host_port"] + (["backup_device_port"] if version == "1.2" else [])
    for key in keys:
        value = getattr(node, key)
        if isinstance(value, tuple):
            for device in info.devices:
                if device.device_id >= len(value):
                    found.append(Problem(f"{key} lists {len(value)} port(s), none for device {device.device_id}", node.name, device.device_id))
    if version == "1.2" and node.backup_device_ips is not None:
        for device in info.devices:
            backup = node.backup_device_ips[device.device_id] if device.device_id < len(node.backup_device_ips) else None
            if backup is None:
                found.append(Problem(f"backup_device_ips lists {len(node.backup_device_ips)} address(es), none for device {device.device_id}",
                                     node.name, device.device_id))
            elif not _valid_ip(backup):
                found.append(Problem(f"malformed backup device IP {backup!r}", node.name, device.device_id))
    return found


def _check_superpod(node: Node, info: NodeDevices, seen: dict[tuple[str, str], tuple[str, int]]) -> list[Problem]:
    found: list[Problem] = []
    if info.super_pod_id is None:
        found.append(Problem("no super pod id (set super_pod_id, or check npu-smi info -t spod-info on the node)", node.name))
    for device in info.devices:
        if device.super_device_id is None:
            why = f" ({device.super_device_note})" if device.super_device_note else ""
            found.append(Problem(f"no super_device_id{why}", node.name, device.device_id))
        elif info.super_pod_id is not None:
            key = (info.super_pod_id, device.super_device_id)
            if key in seen:
                other, other_device = seen[key]
                found.append(Problem(f"duplicate super_device_id {device.super_device_id} in super pod {info.super_pod_id}: "
                                     f"also {other} device {other_device}", node.name, device.device_id))
            else:
                seen[key] = (node.name, device.device_id)
    return found
