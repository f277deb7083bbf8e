"""Ascend NPU checks from `npu-smi` and `hccn_tool`: count, health, leftover processes, links, device IPs.

On a node without the Ascend tools these are skipped, unless the inventory says the node has
NPUs (`accelerator: ascend`), then they fail. Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ascendctl.facts.devices import HCCN_CONF_SECTION, device_sections, devices_from_sections, ip_section, parse_hccn_conf
from ascendctl.nodeset import fold_ids
from ascendctl.models import NodeResult
from ascendctl.nodeset import fold
from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.hccn import parse_link, parse_net_health
from ascendctl.facts.parsers.npu_smi import Health, parse_npu_info
from ascendctl.preflight.checks.model import CheckResult, ClusterCheck, ClusterVerdict, NodeCheck, Status, result

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node
    from ascendctl.facts.parsers.npu_smi import NpuInfo
    from ascendctl.remote.probe import Section
    from ascendctl.preflight.checks.model import NodeFacts, ProbeContext

ABSENT = "@@absent"
# a tool that refuses the node's user: the driver's device files are root's and its group's (HwHiAiUser by default)
_DENIED_RX = re.compile(r"[Pp]ermission denied|[Oo]peration not permitted|\bEACCES\b|\bEPERM\b|[Nn]o permission|"
                        r"(?:does not|doesn't) have (?:the )?permission|must be (?:run as )?root")


def _npu_section(node: Node, ctx: ProbeContext) -> str | None:
    if node.accelerator == "none":
        return None
    return f"if command -v npu-smi >/dev/null 2>&1; then npu-smi info; else echo '{ABSENT}'; fi"


def _hccn_section(node: Node, ctx: ProbeContext) -> str | None:
    if node.accelerator == "none":
        return None
    ids = " ".join(str(d) for d in range(node.slots))
    return (
        f"command -v hccn_tool >/dev/null 2>&1 || {{ echo '{ABSENT}'; exit 0; }}\n"
        f"for i in {ids}; do echo \"--dev $i\"; hccn_tool -i $i -link -g 2>&1; echo '--health'; hccn_tool -i $i -net_health -g 2>&1; done"
    )


def _device_ips_sections(node: Node, ctx: ProbeContext) -> dict[str, str] | None:
    """The device-discovery sections (devices.py): hccn_tool per device and /etc/hccn.conf."""
    if node.accelerator == "none" or node.device_ips is not None:
        return None
    return device_sections(range(node.slots))


FACTS: dict[str, Callable[[Node, ProbeContext], str | dict[str, str] | None]] = {
    "npu": _npu_section, "hccn": _hccn_section, "device_ips": _device_ips_sections}


def _absent(check: str, node: Node, tool: str) -> CheckResult:
    if node.accelerator == "ascend":
        return result(check, Status.FAIL, f"{tool} not found, but the inventory says this node has Ascend NPUs",
                      "install the Ascend driver (npu-smi, hccn_tool live in /usr/local/Ascend/driver/tools)")
    return result(check, Status.SKIP, f"no {tool} on this node (not an Ascend node; set accelerator: ascend to require it)")


def _denied(check: str, node: Node, tool: str, output: str) -> CheckResult | None:
    """A check the node's user may not run: skipped, saying so and why, instead of a driver fault."""
    m = _DENIED_RX.search(output)
    if m is None:
        return None
    line = next((ln.strip() for ln in output.splitlines() if _DENIED_RX.search(ln)), m.group(0))
    who = node.user or "the login user"
    return result(check, Status.SKIP, f"needs root: {tool} refused user {who} ({line[:120]})",
                  f"run this check as root (`user: root` for the node) or add {who} to the driver's group "
                  "(HwHiAiUser by default, see /dev/davinci*)")


def _read_npu(check: str, node: Node, sections: Mapping[str, Section]) -> NpuInfo | CheckResult:
    section = sections.get("npu")
    if node.accelerator == "none" or section is None:
        return result(check, Status.SKIP, "accelerator: none")
    if section.output.strip() == ABSENT:
        return _absent(check, node, "npu-smi")
    if section.exit_code != 0:
        denied = _denied(check, node, "npu-smi", section.output)
        if denied is not None:
            return denied
        return result(check, Status.FAIL, f"`npu-smi info` failed (exit {section.exit_code}): {section.output.strip()[-120:]}",
                      "the driver may be down: check `dmesg` for davinci/driver errors and reload the driver or reboot")
    try:
        return parse_npu_info(section.output)
    except ParseError as exc:
        return result(check, Status.ERROR, f"cannot read `npu-smi info`: {exc}")


def _count_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    info = _read_npu("npu_count", node, sections)
    if isinstance(info, CheckResult):
        return info
    devices = len(info.chips)
    name = info.chips[0].name if info.chips else "?"
    if devices == node.slots:
        return result("npu_count", Status.PASS, f"{devices}/{node.slots} devices visible ({name})")
    per_npu = max((len(info.chips_of(n)) for n in info.npu_ids), default=1)  # A3: two dies per NPU
    missing = [i for i in range(node.slots // per_npu) if i not in info.npu_ids]
    detail = f": NPU {fold_ids(missing)} missing" if missing and devices < node.slots else ""
    return result(
        "npu_count", Status.FAIL, f"{devices}/{node.slots} devices visible{detail}",
        "a missing device usually means a driver or hardware fault: check `dmesg`, `npu-smi info`, reseat or replace the card; "
        "or fix `slots` in the inventory",
    )


NPU_COUNT = NodeCheck("npu_count", "NPUs visible == slots", ("npu",), _count_evaluate)


def _health_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    info = _read_npu("npu_health", node, sections)
    if isinstance(info, CheckResult):
        return info
    bad = [chip for chip in info.chips if chip.health != Health.OK]
    if not bad:
        return result("npu_health", Status.PASS, f"all {len(info.chips)} devices OK")
    listing = ", ".join(f"NPU {c.npu_id}" + (f" chip {c.chip_id}" if len(info.chips_of(c.npu_id)) > 1 else "") + f" {c.health_raw}" for c in bad)
    worst = Status.FAIL if any(c.health in (Health.ALARM, Health.CRITICAL) for c in bad) else Status.WARN
    first = bad[0].npu_id
    return result("npu_health", worst, listing,
                  f"`npu-smi info -t health -i {first}` shows the error codes; clear a transient alarm with a device reset "
                  "(`npu-smi set -t reset -i N -c 0`), otherwise keep the node out of the job (`-x NODE` on launch)")


NPU_HEALTH = NodeCheck("npu_health", "NPU health OK", ("npu",), _health_evaluate)


def _stale_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    info = _read_npu("npu_stale_procs", node, sections)
    if isinstance(info, CheckResult):
        return info
    if not info.processes:
        return result("npu_stale_procs", Status.PASS, "no processes on the devices")
    listing = ", ".join(f"NPU {p.npu_id}: pid {p.pid} {p.name} ({p.memory_mb:.0f} MB)" for p in info.processes)
    pids = " ".join(str(p.pid) for p in info.processes)
    return result("npu_stale_procs", Status.FAIL, listing,
                  f"a leftover job holds the devices and the next launch will fail: stop it (`kill {pids}`) and re-check")


NPU_STALE_PROCS = NodeCheck("npu_stale_procs", "no leftover processes on the NPUs", ("npu",), _stale_evaluate)


def _hccn_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    section = sections.get("hccn")
    if node.accelerator == "none" or section is None:
        return result("hccn_link", Status.SKIP, "accelerator: none")
    if section.output.strip() == ABSENT:
        return _absent("hccn_link", node, "hccn_tool")
    denied = _denied("hccn_link", node, "hccn_tool", section.output)
    if denied is not None:
        return denied
    problems: list[str] = []
    first_bad: int | None = None
    for chunk in section.output.split("--dev ")[1:]:
        head, _, rest = chunk.partition("\n")
        link_text, _, health_text = rest.partition("--health\n")
        device = int(head.strip()) if head.strip().isdigit() else -1
        try:
            link = parse_link(link_text)
            health = parse_net_health(health_text)
        except ParseError as exc:
            problems.append(f"device {device}: cannot read hccn_tool output ({exc})")
            first_bad = device if first_bad is None else first_bad
            continue
        if link != "UP":
            problems.append(f"device {device} link {link}")
        if not health.ok:
            problems.append(f"device {device} net health {health.status}")
        if (link != "UP" or not health.ok) and first_bad is None:
            first_bad = device
    if problems:
        return result("hccn_link", Status.FAIL, "; ".join(problems),
                      f"check the optical module, cable and switch port of device {first_bad} "
                      f"(`hccn_tool -i {first_bad} -link -g`, `-net_health -g`, `-optical -g`); "
                      "net health needs a reachable detect IP (`hccn_tool -i N -netdetect -s address IP`)")
    return result("hccn_link", Status.PASS, f"{node.slots} device links UP, net health Success")


HCCN_LINK = NodeCheck("hccn_link", "NPU NIC links UP and healthy", ("hccn",), _hccn_evaluate)


def _device_ips_evaluate(facts: Sequence[NodeFacts], ctx: ProbeContext) -> ClusterVerdict:
    from ascendctl.facts.devices import devices_from_inventory
    from ascendctl.facts.device_check import validate_devices

    results: list[NodeResult[object]] = []
    per_node: dict[str, CheckResult] = {}
    checked: list[str] = []
    for f in facts:
        node = f.node
        tools = [f.sections.get(ip_section(d)) for d in range(node.slots)]
        conf = f.sections.get(HCCN_CONF_SECTION)
        # no hccn_tool and no address lines in /etc/hccn.conf (an empty placeholder counts as none): nothing to check
        absent = all(t is None or t.exit_code == 127 for t in tools) and (
            conf is None or not conf.ok or not parse_hccn_conf(conf.output))
        if node.accelerator == "none":
            per_node[node.name] = result("device_ips", Status.SKIP, "accelerator: none")
        elif node.device_ips is not None:
            results.append(NodeResult(node.name, value=devices_from_inventory(node, range(node.slots))))
            checked.append(node.name)
        elif absent:
            per_node[node.name] = _absent("device_ips", node, "hccn_tool or /etc/hccn.conf")
        else:
            results.append(NodeResult(node.name, value=devices_from_sections(node.name, range(node.slots), f.sections)))
            checked.append(node.name)
    problems = validate_devices(ctx.inventory, results)  # type: ignore[arg-type]
    by_node: dict[str, list[str]] = {}
    for problem in problems:
        by_node.setdefault(problem.node or "", []).append(f"device {problem.device}: {problem.message}" if problem.device is not None else problem.message)
    for name in checked:
        if name in by_node:
            per_node[name] = result("device_ips", Status.FAIL, "; ".join(by_node[name]),
                                    "each device needs its own address: fix /etc/hccn.conf or `hccn_tool -i N -ip -s address A netmask M`")
        else:
            per_node[name] = result("device_ips", Status.PASS, f"{len(range(ctx.inventory.node(name).slots))} device IPs, unique in the cluster")
    if not checked:
        summary = result("device_ips", Status.SKIP, "no node reports device IPs")
    elif problems:
        bad = [name for name in checked if name in by_node]
        summary = result("device_ips", Status.FAIL, f"device IP problems on {fold(bad)}", per_node[bad[0]].hint)
    else:
        summary = result("device_ips", Status.PASS, f"device IPs present and unique across {fold(checked)}")
    return ClusterVerdict(per_node, summary)


DEVICE_IPS = ClusterCheck("device_ips", "device IPs present and unique across the cluster", ("device_ips",), _device_ips_evaluate)
