"""Device-IP discovery: the remote probe command, its parsers, and the fan-out that runs it.

Owns what a rank table needs to know about each node's NPUs: device IPs (from the inventory,
else `hccn_tool -i N -ip -g`, else the `address_N` lines of /etc/hccn.conf) and, for A3
SuperPoD tables, the super pod id and SDID (`npu-smi info -t spod-info`). One shell round trip
per node; command builders and parsers are pure. Must not import typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from .group import NodeGroup
from .inventory import Inventory, Node
from .models import EventSink, NodeResult, NodeResults
from .transport import Transport, TransportFactory

# Section headers in the probe's output; chosen so no vendor tool prints them.
MARK = "@@ascendctl"
HCCN_CONF = "/etc/hccn.conf"
# Non-interactive SSH sessions rarely have the driver tools on PATH; appended so a PATH entry wins.
_TOOL_DIRS = "/usr/local/Ascend/driver/tools:/usr/local/sbin:/usr/local/bin"

_IPADDR = re.compile(r"^\s*ipaddr\s*:\s*(\S+)\s*$", re.MULTILINE)
_HCCN_ADDRESS = re.compile(r"^\s*address_(\d+)\s*=\s*(\S+)\s*$", re.MULTILINE)
_SPOD_FIELD = re.compile(r"^\s*(SDID|Super Pod ID)\s*:\s*(\S+)\s*$", re.MULTILINE | re.IGNORECASE)
_HEADER = re.compile(rf"^{MARK} (.*)$")


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


def device_ip_probe_cmd(devices: Sequence[int], *, spod: bool = False, ips: bool = True) -> str:
    """The one shell command that reports device IPs (and, with `spod`, SDIDs) for `devices`.

    Tries `hccn_tool -i N -ip -g` for every device; when hccn_tool is missing, fails, or prints
    no address for some device, it also prints /etc/hccn.conf. Every section starts with a
    `@@ascendctl ...` header line so the parser never guesses.
    """
    ids = " ".join(str(int(d)) for d in devices)
    lines = [f'PATH="$PATH:{_TOOL_DIRS}"; export PATH']
    if ips:
        lines += [
            "fallback=",
            "if command -v hccn_tool >/dev/null 2>&1; then",
            f"  for i in {ids}; do",
            '    out=$(hccn_tool -i "$i" -ip -g 2>&1); rc=$?',
            f'    echo "{MARK} hccn_tool -i $i -ip -g exit=$rc"',
            "    printf '%s\\n' \"$out\"",
            '    case "$rc:$out" in 0:*ipaddr:*) ;; *) fallback=1 ;; esac',
            "  done",
            "else",
            f'  echo "{MARK} hccn_tool missing"',
            "  fallback=1",
            "fi",
            'if [ -n "$fallback" ]; then',
            f'  if [ -r {HCCN_CONF} ]; then echo "{MARK} {HCCN_CONF}"; cat {HCCN_CONF}; else echo "{MARK} {HCCN_CONF} missing"; fi',
            "fi",
        ]
    if spod:
        # npu-smi addresses chips as (NPU ID, Chip ID); rank tables use the Chip Logic ID.
        lines += [
            "if command -v npu-smi >/dev/null 2>&1; then",
            "  npu-smi info -m 2>/dev/null | awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ {print $1, $2, $3}' |",
            "  while read -r npu chip logic; do",
            f'    case " {ids} " in *" $logic "*)',
            f'      echo "{MARK} npu-smi spod-info device=$logic npu=$npu chip=$chip"',
            '      npu-smi info -t spod-info -i "$npu" -c "$chip" 2>&1 ;;',
            "    esac",
            "  done",
            "else",
            f'  echo "{MARK} npu-smi missing"',
            "fi",
        ]
    lines.append(f'echo "{MARK} end"')
    return "\n".join(lines) + "\n"


def split_sections(text: str) -> list[tuple[str, str]]:
    """Split probe output into (header, body) pairs, in order; text before any header is dropped."""
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            sections.append((match.group(1).strip(), []))
        elif sections:
            sections[-1][1].append(line)
    return [(header, "\n".join(body)) for header, body in sections]


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


@dataclass(frozen=True, slots=True)
class ProbeOutput:
    """The probe's output, parsed: per-device hccn_tool answers, hccn.conf, spod-info."""

    hccn_tool_missing: bool
    tool_ips: dict[int, str | None]
    tool_failures: dict[int, str]  # device -> "exit 3: <first line>"
    conf: dict[int, str] | None  # None when hccn.conf was not printed
    conf_missing: bool
    npu_smi_missing: bool
    spod: dict[int, SpodInfo]


def parse_probe(text: str) -> ProbeOutput:
    """Parse the output of `device_ip_probe_cmd` into its sections."""
    tool_ips: dict[int, str | None] = {}
    failures: dict[int, str] = {}
    spod: dict[int, SpodInfo] = {}
    conf: dict[int, str] | None = None
    hccn_tool_missing = conf_missing = npu_smi_missing = False
    for header, body in split_sections(text):
        words = header.split()
        if header == "hccn_tool missing":
            hccn_tool_missing = True
        elif header == f"{HCCN_CONF} missing":
            conf_missing = True
        elif header == HCCN_CONF:
            conf = parse_hccn_conf(body)
        elif header == "npu-smi missing":
            npu_smi_missing = True
        elif words[:2] == ["hccn_tool", "-i"] and len(words) >= 3 and words[2].isdigit():
            device = int(words[2])
            rc = words[-1].removeprefix("exit=")
            ip = parse_hccn_tool_ip(body)
            tool_ips[device] = ip if rc == "0" else None
            if rc != "0" or ip is None:
                first = next((line.strip() for line in body.splitlines() if line.strip()), "no output")
                failures[device] = f"exit {rc}: {first}" if rc != "0" else f"printed no ipaddr ({first})"
        elif words[:2] == ["npu-smi", "spod-info"]:
            fields = dict(word.split("=", 1) for word in words[2:] if "=" in word)
            if fields.get("device", "").isdigit():
                spod[int(fields["device"])] = parse_spod_info(body)
    return ProbeOutput(hccn_tool_missing, tool_ips, failures, conf, conf_missing, npu_smi_missing, spod)


def devices_from_probe(node: str, devices: Sequence[int], text: str, *, spod: bool = False) -> NodeDevices:
    """Choose each device's IP: hccn_tool first, then hccn.conf; say why when neither has one."""
    probe = parse_probe(text)
    found: list[DeviceAddress] = []
    pods: dict[str, list[int]] = {}
    for device in devices:
        ip = probe.tool_ips.get(device)
        source = "hccn_tool" if ip else ""
        note = None
        if ip is None and probe.conf is not None and device in probe.conf:
            ip, source = probe.conf[device], "hccn.conf"
        if ip is None:
            tool = "hccn_tool not found" if probe.hccn_tool_missing else f"hccn_tool -i {device} -ip -g: {probe.tool_failures.get(device, 'no answer')}"
            conf = f"{HCCN_CONF} not found" if probe.conf_missing or probe.conf is None else f"{HCCN_CONF} has no address_{device}"
            note = f"{tool}; {conf}"
        sdid = sdid_source = sdid_note = None
        if spod:
            info = probe.spod.get(device)
            if info is None:
                sdid_note = "npu-smi not found" if probe.npu_smi_missing else f"npu-smi info -m lists no chip with logic id {device}"
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

    def work(node: Node, transport: Transport) -> NodeDevices:
        want_ips, want_spod = needs_probe(node, spod=spod)
        command = device_ip_probe_cmd(wanted[node.name], spod=want_spod, ips=want_ips)
        result = transport.run(command)
        if result.exit_code != 0 or f"{MARK} end" not in result.stdout:
            tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
            return NodeDevices(node.name, (), failure=f"device probe failed (exit {result.exit_code}): {tail}")
        return merge_inventory(node, devices_from_probe(node.name, wanted[node.name], result.stdout, spod=want_spod))

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


def fold_ids(ids: Sequence[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3,5', for messages."""
    from ClusterShell.RangeSet import RangeSet

    return str(RangeSet.fromlist([str(i) for i in ids])) if ids else ""
