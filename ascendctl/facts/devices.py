"""Device-IP discovery: the remote probe command, its parsers, and the fan-out that runs it.

Owns what a rank table needs to know about each node's NPUs: device IPs (from the inventory,
else `hccn_tool -i N -ip -g`, else the `address_N` lines of /etc/hccn.conf) and, for A3
SuperPoD tables, the super pod id and SDID (`npu-smi info -t spod-info`). The questions are
sections of the one framed probe (probe.py): one round trip per node (two for SuperPoD tables,
whose spod-info needs the chip map first). Section builders and parsers are pure. Must not
import typer or rich.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from ascendctl.remote.group import NodeGroup
from ascendctl.models import NodeResult, NodeResults
from ascendctl.remote.probe import ask

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import EventSink
    from ascendctl.remote.probe import Section
    from ascendctl.remote.transport.base import Transport
    from ascendctl.remote.transport.factory import TransportFactory

HCCN_CONF = "/etc/hccn.conf"
HCCN_CONF_SECTION = "hccn.conf"
NPU_MAP_SECTION = "npu-smi.map"

_IPADDR = re.compile(r"^\s*ipaddr\s*:\s*(\S+)\s*$", re.MULTILINE)
_HCCN_ADDRESS = re.compile(r"^\s*address_(\d+)\s*=\s*(\S+)\s*$", re.MULTILINE)
_SPOD_FIELD = re.compile(r"^\s*(SDID|Super Pod ID)\s*:\s*(\S+)\s*$", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DeviceAddress:
    """One device's IP (None when no source had one), where it came from, and why it is missing."""

    device_id: int
    ip: str | None
    source: str  # inventory | hccn_tool | hccn.conf | rank table | "" when missing
    note: str | None = None  # why the IP is missing, for the problem message
    super_device_id: str | None = None  # v1.2 SDID
    super_device_source: str = ""
    super_device_note: str | None = None


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """What one node reported (or the inventory said) about its devices, in device-id order."""

    node: str
    devices: tuple[DeviceAddress, ...]
    super_pod_id: str | None = None
    super_pod_source: str = ""
    problems: tuple[str, ...] = field(default=())  # node-level oddities seen while parsing, e.g. mixed pod ids
    failure: str | None = None  # the probe ran but did not finish: nothing above can be trusted

    def ip_of(self, device_id: int) -> str | None:
        for device in self.devices:
            if device.device_id == device_id:
                return device.ip
        return None


@dataclass(frozen=True, slots=True)
class SpodInfo:
    """`npu-smi info -t spod-info` of one device: its SDID and super pod."""

    sdid: str | None
    super_pod_id: str | None


def ip_section(device: int) -> str:
    return f"hccn_tool.ip.{device}"


def device_sections(devices: Sequence[int], *, ips: bool = True, spod: bool = False, conf: str = HCCN_CONF) -> dict[str, str]:
    """Probe sections: `hccn_tool -i N -ip -g` per device and /etc/hccn.conf (for the IPs), `npu-smi info -m` (for spod).

    A missing tool or file is exit status 127 of its section.
    """
    sections: dict[str, str] = {}
    if ips:
        for device in devices:
            sections[ip_section(device)] = f"command -v hccn_tool >/dev/null 2>&1 || exit 127; hccn_tool -i {int(device)} -ip -g"
        sections[HCCN_CONF_SECTION] = f"[ -r {shlex.quote(conf)} ] || exit 127; cat {shlex.quote(conf)}"
    if spod:
        sections[NPU_MAP_SECTION] = "command -v npu-smi >/dev/null 2>&1 || exit 127; npu-smi info -m"
    return sections


def spod_sections(chips: Mapping[int, tuple[str, str]]) -> dict[str, str]:
    """`npu-smi info -t spod-info` per device (logic id -> its NPU id and chip id from `npu-smi info -m`)."""
    return {f"spod.{logic}": f"npu-smi info -t spod-info -i {shlex.quote(npu)} -c {shlex.quote(chip)}"
            for logic, (npu, chip) in chips.items()}


def parse_npu_map(text: str) -> dict[int, tuple[str, str]]:
    """`npu-smi info -m` (NPU ID, Chip ID, Chip Logic ID, ...) as {logic id: (NPU id, chip id)}; rank tables use logic ids."""
    chips: dict[int, tuple[str, str]] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 3 and all(w.isdigit() for w in words[:3]):
            chips[int(words[2])] = (words[0], words[1])
    return chips


def parse_hccn_tool_ip(text: str) -> str | None:
    """The address in `hccn_tool -i N -ip -g` output (`ipaddr:10.10.0.10`), or None."""
    match = _IPADDR.search(text)
    return match.group(1) if match else None


def parse_hccn_conf(text: str) -> dict[int, str]:
    """`address_N=IP` lines of /etc/hccn.conf as {device id: IP}; comment lines are skipped."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _HCCN_ADDRESS.match(line)
        if match:
            found.setdefault(int(match.group(1)), match.group(2))
    return found


def parse_spod_info(text: str) -> SpodInfo:
    """`SDID : 16777216` and `Super Pod ID : 0` from `npu-smi info -t spod-info -i N -c C`."""
    values = {key.lower(): value for key, value in _SPOD_FIELD.findall(text)}
    return SpodInfo(values.get("sdid"), values.get("super pod id"))


def devices_from_sections(node: str, devices: Sequence[int], sections: Mapping[str, Section], *,
                          spod: bool = False, spod_info: Mapping[str, Section] | None = None) -> NodeDevices:
    """Choose each device's IP: hccn_tool first, then hccn.conf; say why when neither has one."""
    conf_section = sections.get(HCCN_CONF_SECTION)
    conf = parse_hccn_conf(conf_section.output) if conf_section is not None and conf_section.ok else None
    found: list[DeviceAddress] = []
    pods: dict[str, list[int]] = {}
    map_section = sections.get(NPU_MAP_SECTION)
    for device in devices:
        tool = sections.get(ip_section(device))
        ip = parse_hccn_tool_ip(tool.output) if tool is not None and tool.ok else None
        source = "hccn_tool" if ip else ""
        note = None
        if ip is None and conf is not None and device in conf:
            ip, source = conf[device], "hccn.conf"
        if ip is None:
            if tool is not None and tool.exit_code == 127:
                why_tool = "hccn_tool not found"
            else:
                first = next((line.strip() for line in (tool.output if tool else "").splitlines() if line.strip()), "no output")
                rc = tool.exit_code if tool is not None else None
                why_tool = f"hccn_tool -i {device} -ip -g: " + (f"exit {rc}: {first}" if rc not in (0, None) else
                                                                 f"printed no ipaddr ({first})" if rc == 0 else "no answer")
            why_conf = f"{HCCN_CONF} not found" if conf is None else f"{HCCN_CONF} has no address_{device}"
            note = f"{why_tool}; {why_conf}"
        sdid = sdid_source = sdid_note = None
        if spod:
            info_section = (spod_info or {}).get(f"spod.{device}")
            info = parse_spod_info(info_section.output) if info_section is not None else None
            if info is None:
                sdid_note = ("npu-smi not found" if map_section is not None and map_section.exit_code == 127
                             else f"npu-smi info -m lists no chip with logic id {device}")
            elif info.sdid is None:
                sdid_note = "npu-smi info -t spod-info printed no SDID"
            else:
                sdid, sdid_source = info.sdid, "npu-smi"
            if info is not None and info.super_pod_id is not None:
                pods.setdefault(info.super_pod_id, []).append(device)
        found.append(DeviceAddress(device, ip, source, note, sdid, sdid_source or "", sdid_note))
    problems: list[str] = []
    pod = next(iter(pods), None)
    if len(pods) > 1:
        listing = ", ".join(f"{pod_id} (devices {','.join(map(str, ids))})" for pod_id, ids in pods.items())
        problems.append(f"devices report different super pod ids: {listing}")
    return NodeDevices(node, tuple(found), pod, "npu-smi" if pod is not None else "", tuple(problems))


def devices_from_inventory(node: Node, devices: Sequence[int]) -> NodeDevices:
    """A node's devices as the inventory gives them (`device_ips`, `super_device_ids`, `super_pod_id`)."""
    ips = node.device_ips or ()
    sdids = node.super_device_ids
    found = []
    for device in devices:
        ip = ips[device] if device < len(ips) else None
        note = None if ip is not None else f"device_ips has {len(ips)} entr{'y' if len(ips) == 1 else 'ies'}, none for device {device}"
        sdid = sdid_note = None
        if sdids is not None:
            if device < len(sdids):
                sdid = str(sdids[device])
            else:
                sdid_note = f"super_device_ids has {len(sdids)} entries, none for device {device}"
        found.append(DeviceAddress(device, ip, "inventory" if ip else "", note, sdid, "inventory" if sdid else "", sdid_note))
    return NodeDevices(node.name, tuple(found), node.super_pod_id, "inventory" if node.super_pod_id else "")


def merge_inventory(node: Node, discovered: NodeDevices) -> NodeDevices:
    """Inventory values win over what the node reported; the node fills in the rest."""
    given = devices_from_inventory(node, [d.device_id for d in discovered.devices])
    merged = []
    for mine, theirs in zip(given.devices, discovered.devices):
        use_ip = mine if node.device_ips is not None else theirs
        use_sdid = mine if node.super_device_ids is not None else theirs
        merged.append(
            DeviceAddress(
                mine.device_id, use_ip.ip, use_ip.source, use_ip.note,
                use_sdid.super_device_id, use_sdid.super_device_source, use_sdid.super_device_note,
            )
        )
    if node.super_pod_id is not None:
        return NodeDevices(node.name, tuple(merged), node.super_pod_id, "inventory", ())
    return NodeDevices(node.name, tuple(merged), discovered.super_pod_id, discovered.super_pod_source, discovered.problems)


def node_device_ids(node: Node, selected: Sequence[int] | None) -> list[int]:
    """The devices to describe on `node`: `--devices`, else one per slot (0..slots-1)."""
    return list(selected) if selected is not None else list(range(node.slots))


def needs_probe(node: Node, *, spod: bool) -> tuple[bool, bool]:
    """Which parts of the probe this node needs: (device IPs, spod info)."""
    want_ips = node.device_ips is None
    want_spod = spod and (node.super_device_ids is None or node.super_pod_id is None)
    return want_ips, want_spod


def discover_devices(
    inventory: Inventory,
    *,
    devices: Sequence[int] | None = None,
    per_node: dict[str, Sequence[int]] | None = None,
    spod: bool = False,
    on_event: EventSink | None = None,
    factory: TransportFactory | None = None,
) -> NodeResults[NodeDevices]:
    """Every node's devices, in inventory order: from the inventory where it has them, else one probe per node.

    `per_node` overrides the device list of named nodes (checking an existing rank table).
    A node that cannot be reached, or whose probe cannot run, is a NodeResult with an error.
    """
    wanted = {node.name: list((per_node or {}).get(node.name, node_device_ids(node, devices))) for node in inventory.nodes}
    remote = [node for node in inventory.nodes if any(needs_probe(node, spod=spod))]

    section_timeout = inventory.preflight.section_timeout

    def work(node: Node, transport: Transport) -> NodeDevices:
        want_ips, want_spod = needs_probe(node, spod=spod)
        answer = ask(transport, device_sections(wanted[node.name], ips=want_ips, spod=want_spod),
                     section_timeout=section_timeout, timeout=node.command_timeout)
        failure = answer.failure("device probe")
        if failure is not None:
            return NodeDevices(node.name, (), failure=failure)
        spod_info: dict[str, Section] = {}
        chip_map = answer.sections.get(NPU_MAP_SECTION)
        if want_spod and chip_map is not None and chip_map.ok:
            chips = {logic: ids for logic, ids in parse_npu_map(chip_map.output).items() if logic in wanted[node.name]}
            if chips:
                spod_info = ask(transport, spod_sections(chips), section_timeout=section_timeout,
                                timeout=node.command_timeout).sections
        return merge_inventory(node, devices_from_sections(node.name, wanted[node.name], answer.sections, spod=want_spod,
                                                           spod_info=spod_info))

    probed: dict[str, NodeResult[NodeDevices]] = {}
    if remote:
        with NodeGroup(inventory, factory=factory, keep=False) as group:
            probed = group.run(work, nodes=remote, on_event=on_event).by_node()
    return NodeResults(tuple(
        probed[node.name] if node.name in probed else NodeResult(node.name, value=devices_from_inventory(node, wanted[node.name]))
        for node in inventory.nodes
    ))


def parse_device_range(text: str) -> list[int]:
    """`0-7`, `0,2,4-6` or `8-15` as a sorted list of device ids (ClusterShell RangeSet syntax)."""
    from ClusterShell.RangeSet import RangeSet, RangeSetParseError  # imported only when --devices is given

    try:
        ids = sorted({int(item) for item in RangeSet(text.strip())})
    except (RangeSetParseError, ValueError) as exc:
        raise ValueError(f"expected device ids like 0-7 or 0,2,4-6 (got {text!r}: {exc})") from None
    if not ids:
        raise ValueError(f"expected device ids like 0-7 or 0,2,4-6 (got {text!r})")
    return ids
