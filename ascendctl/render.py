"""Render what a multi-node launch needs: hostfiles, HCCL rank tables and per-node env exports.

Hostfiles come from text templates (`templates/hostfile-<format>.tmpl`, strict `${var}`
substitution, loops in Python). Rank tables are built as dicts and dumped with json, never
templated. Every device address is validated before anything is written; each problem names
its node and device. Must not import typer or rich.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ascendctl.facts.devices import DeviceAddress, NodeDevices, discover_devices
from ascendctl.errors import AscendctlError, ExitCode, parse_json
from ascendctl.templating import load_template, render_template
from ascendctl.facts.device_check import Problem, exit_code_of, per_device, validate_devices
from ascendctl.models import NodeResult, NodeStatus
from ascendctl.jobs.environment import node_environment
from ascendctl.launchers import DEFAULT_HCCL_CONNECT_TIMEOUT
from ascendctl.remote.group import NodeGroup
from ascendctl.facts.endpoint import resolve_endpoints

if TYPE_CHECKING:  # only the annotation needs it (importlib.abc has it on 3.10, where the floor is)
    from importlib.abc import Traversable
    from ascendctl.inventory.load import Inventory, Node
    from ascendctl.models import EventSink, NodeResults
    from ascendctl.jobs.environment import NodeEnvironment
    from ascendctl.remote.transport.factory import TransportFactory

HOSTFILE_FORMATS = ("openmpi", "deepspeed", "mpich", "plain")
RANK_TABLE_VERSIONS = ("1.0", "1.2")
SERVER_ID_CHOICES = ("host", "name")


def render_hostfile(inventory: Inventory, fmt: str = "openmpi", *, templates: str | os.PathLike[str] | None = None) -> str:
    """A hostfile for MPI/DeepSpeed launchers: the format's template rendered once per node, in inventory order."""
    if fmt not in HOSTFILE_FORMATS:
        raise AscendctlError(f"unknown hostfile format {fmt!r} (expected one of: {', '.join(HOSTFILE_FORMATS)})",
                             exit_code=ExitCode.USAGE)
    template = load_template(f"hostfile-{fmt}.tmpl", templates)
    return "".join(
        render_template(template, {"host": node.host, "name": node.name, "slots": node.slots, "index": node.index})
        for node in inventory.nodes
    )


# --------------------------------------------------------------------------- rank tables


def build_rank_table(
    inventory: Inventory,
    nodes: Sequence[NodeDevices],
    *,
    version: str = "1.0",
    server_id: str = "host",
    host_nic_ip: str | None = "reserve",
) -> dict[str, Any]:
    """The HCCL rank table as a dict; `nodes` must have passed validate_devices.

    Rank ids follow inventory order, then device id, contiguous from 0. Every value is a
    string, as HCCL's own examples write them.
    """
    if version not in RANK_TABLE_VERSIONS:
        raise AscendctlError(f"unknown rank table version {version!r} (expected one of: {', '.join(RANK_TABLE_VERSIONS)})",
                             exit_code=ExitCode.USAGE)
    by_name = {info.node: info for info in nodes}
    servers: list[dict[str, Any]] = []
    pods: dict[str, list[dict[str, str]]] = {}
    rank = 0
    for node in inventory.nodes:
        info = by_name.get(node.name)
        if info is None:
            continue
        sid = node.host if server_id == "host" else node.name
        server: dict[str, Any] = {"server_id": sid}
        if node.host_ip is not None:
            server["host_ip"] = node.host_ip
        devices = []
        for device in sorted(info.devices, key=lambda d: d.device_id):
            devices.append(_device_entry(node, device, rank, version))
            rank += 1
        server["device"] = devices
        if version == "1.0" and host_nic_ip is not None:
            server["host_nic_ip"] = host_nic_ip
        servers.append(server)
        if version == "1.2":
            pods.setdefault(str(info.super_pod_id), []).append({"server_id": sid})
    table: dict[str, Any] = {"version": version, "server_count": str(len(servers)), "server_list": servers}
    if version == "1.2":
        table["super_pod_list"] = [{"super_pod_id": pod, "server_list": members} for pod, members in pods.items()]
    table["status"] = "completed"
    return table


def _device_entry(node: Node, device: DeviceAddress, rank: int, version: str) -> dict[str, str]:
    entry = {"device_id": str(device.device_id)}
    if version == "1.2":
        entry["super_device_id"] = str(device.super_device_id)
    entry["device_ip"] = str(device.ip)
    optional: list[tuple[str, object]] = [("device_port", per_device(node.device_port, device.device_id))]
    if version == "1.2":
        backups = node.backup_device_ips
        optional += [
            ("backup_device_ip", backups[device.device_id] if backups is not None and device.device_id < len(backups) else None),
            ("backup_device_port", per_device(node.backup_device_port, device.device_id)),
        ]
    optional.append(("host_port", per_device(node.host_port, device.device_id)))
    for key, value in optional:
        if value is not None:
            entry[key] = str(value)
    entry["rank_id"] = str(rank)
    return entry


def rank_table_json(table: Mapping[str, Any]) -> str:
    """The file text: 4-space indent like HCCL's documented examples, one trailing newline."""
    return json.dumps(table, indent=4, ensure_ascii=False) + "\n"


@dataclass(frozen=True, slots=True)
class RankTableResult:
    """A rendered rank table, or the problems that stopped it; plus the device facts it came from."""

    table: Mapping[str, Any] | None = field(hash=False, compare=False)
    problems: tuple[Problem, ...]
    nodes: tuple[NodeResult[NodeDevices], ...]

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_of(self.problems)

    @property
    def ranks(self) -> int:
        return sum(len(server["device"]) for server in self.table["server_list"]) if self.table else 0

    def text(self) -> str:
        if self.table is None:
            raise AscendctlError("no rank table: validation failed")
        return rank_table_json(self.table)


def render_rank_table(
    inventory: Inventory,
    *,
    version: str = "1.0",
    devices: Sequence[int] | None = None,
    server_id: str = "host",
    host_nic_ip: str | None = "reserve",
    on_event: EventSink | None = None,
    factory: TransportFactory | None = None,
) -> RankTableResult:
    """Gather device IPs (inventory, else the nodes), validate them, and build the rank table if all is well."""
    if version not in RANK_TABLE_VERSIONS:
        raise AscendctlError(f"unknown rank table version {version!r} (expected one of: {', '.join(RANK_TABLE_VERSIONS)})",
                             exit_code=ExitCode.USAGE)
    if server_id not in SERVER_ID_CHOICES:
        raise AscendctlError(f"unknown server id source {server_id!r} (expected host or name)", exit_code=ExitCode.USAGE)
    results = discover_devices(inventory, devices=devices, spod=version == "1.2", on_event=on_event, factory=factory)
    problems = validate_devices(inventory, results, version=version, selected=devices)
    table = None
    if not problems:
        found = [result.value for result in results if result.value is not None]
        table = build_rank_table(inventory, found, version=version, server_id=server_id, host_nic_ip=host_nic_ip)
    return RankTableResult(table, tuple(problems), results.results)


# --------------------------------------------------------------------------- checking an existing file


@dataclass(frozen=True, slots=True)
class RankTableCheck:
    """The verdict on an existing rank table file against the inventory and the live nodes."""

    source: str
    version: str | None
    servers: int
    ranks: int
    problems: tuple[Problem, ...]

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_of(self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.source, "version": self.version, "servers": self.servers, "ranks": self.ranks}


@dataclass(frozen=True, slots=True)
class _FileServer:
    node: Node
    where: str
    host_ip: str | None
    devices: tuple[DeviceAddress, ...]
    super_pod_id: str | None


def read_rank_table(path: str | os.PathLike[str]) -> tuple[Any, list[Problem]]:
    """Load a rank table file; bad JSON is a problem (exit 3), an unreadable file an error (exit 1)."""
    label = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AscendctlError(f"{label}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AscendctlError(f"{label}: cannot read: {exc}") from None
    try:
        return parse_json(text), []
    except json.JSONDecodeError as exc:
        return None, [Problem(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", where=label)]
    except ValueError as exc:  # nested too deeply for the parser
        return None, [Problem(f"not valid JSON: {exc}", where=label)]


def check_rank_table(
    inventory: Inventory,
    table: Any,
    *,
    source: str = "rank_table.json",
    on_event: EventSink | None = None,
    factory: TransportFactory | None = None,
) -> RankTableCheck:
    """Validate an existing rank table the way `render ranktable` would, and compare it with what the nodes report."""
    problems: list[Problem] = []
    if not isinstance(table, dict):
        return RankTableCheck(source, None, 0, 0, (Problem("expected a JSON object with server_list", where=source),))
    version = table.get("version")
    if version not in RANK_TABLE_VERSIONS:
        problems.append(Problem(f"unsupported version {version!r} (expected one of: {', '.join(RANK_TABLE_VERSIONS)})",
                                where=f"{source}: version"))
    v = str(version) if version in RANK_TABLE_VERSIONS else "1.0"
    servers, ranks = _parse_servers(inventory, table, source, v, problems)
    if table.get("status") != "completed":
        problems.append(Problem(f"status is {table.get('status')!r}, HCCL expects 'completed'", where=f"{source}: status"))
    if str(table.get("server_count")) != str(len(table.get("server_list") or [])):
        problems.append(Problem(f"server_count is {table.get('server_count')!r} but server_list has "
                                f"{len(table.get('server_list') or [])} server(s)", where=f"{source}: server_count"))
    expected_ranks = list(range(len(ranks)))
    if sorted(r for r in ranks if r is not None) != expected_ranks:
        problems.append(Problem(f"rank_id values are not 0..{len(ranks) - 1}, each once", where=f"{source}: rank_id"))
    listed = {server.node.name for server in servers}
    for node in inventory.nodes:
        if node.name not in listed:
            problems.append(Problem(f"in the inventory but not in {source}", node.name))
    # The file's own addressing, validated like a freshly rendered table.
    file_results = [
        NodeResult(s.node.name, value=NodeDevices(s.node.name, s.devices, s.super_pod_id, "rank table" if s.super_pod_id else ""))
        for s in servers
    ]
    sub = dataclasses.replace(inventory, nodes=tuple(s.node for s in servers))
    problems += validate_devices(inventory, file_results, version=v, selected=None)
    # And what the nodes themselves say now.
    if servers:
        live = discover_devices(sub, per_node={s.node.name: [d.device_id for d in s.devices] for s in servers},
                                spod=v == "1.2", on_event=on_event, factory=factory)
        problems += _compare_live(servers, live, v)
    return RankTableCheck(source, str(version) if version is not None else None, len(servers), len(ranks), tuple(problems))


def check_rank_table_file(
    inventory: Inventory,
    path: str | os.PathLike[str],
    *,
    on_event: EventSink | None = None,
    factory: TransportFactory | None = None,
) -> RankTableCheck:
    """`render ranktable --check FILE`: read the file, then check_rank_table; bad JSON is a problem, not a crash."""
    table, problems = read_rank_table(path)
    if problems:
        return RankTableCheck(os.fspath(path), None, 0, 0, tuple(problems))
    return check_rank_table(inventory, table, source=os.fspath(path), on_event=on_event, factory=factory)


def _parse_servers(inventory: Inventory, table: dict[str, Any], source: str, version: str,
                   problems: list[Problem]) -> tuple[list[_FileServer], list[int | None]]:
    by_key: dict[str, Node] = {}
    for node in inventory.nodes:
        by_key.setdefault(node.host, node)
        by_key.setdefault(node.name, node)
    pods: dict[str, str] = {}
    for pod in table.get("super_pod_list") or []:
        for member in (pod.get("server_list") or []) if isinstance(pod, dict) else []:
            if isinstance(member, dict) and "server_id" in member:
                pods[str(member["server_id"])] = str(pod.get("super_pod_id"))
    servers: list[_FileServer] = []
    ranks: list[int | None] = []
    server_list = table.get("server_list")
    if not isinstance(server_list, list):
        problems.append(Problem("server_list: expected a list of servers", where=source))
        return servers, ranks
    used: set[str] = set()
    for s_index, server in enumerate(server_list):
        where = f"{source}: server_list[{s_index}]"
        if not isinstance(server, dict) or not isinstance(server.get("device"), list):
            problems.append(Problem("expected {server_id, device: [...]}", where=where))
            continue
        sid = str(server.get("server_id"))
        found = by_key.get(sid)
        if found is None:
            problems.append(Problem(f"server_id {sid!r} matches no node host or name in the inventory", where=where))
            continue
        node = found
        if node.name in used:
            problems.append(Problem(f"server_id {sid!r} appears twice", node.name, where=where))
            continue
        used.add(node.name)
        devices: list[DeviceAddress] = []
        for d_index, entry in enumerate(server["device"]):
            d_where = f"{where}.device[{d_index}]"
            if not isinstance(entry, dict) or not str(entry.get("device_id", "")).isdigit():
                problems.append(Problem("expected a device_id made of digits", node.name, where=d_where))
                continue
            rank = str(entry.get("rank_id", ""))
            ranks.append(int(rank) if rank.isdigit() else None)
            ip = entry.get("device_ip")
            sdid = entry.get("super_device_id")
            devices.append(DeviceAddress(
                int(entry["device_id"]), str(ip) if ip is not None else None, "rank table",
                None if ip is not None else "no device_ip in the rank table",
                str(sdid) if sdid is not None else None, "rank table" if sdid is not None else "",
                None if sdid is not None else "no super_device_id in the rank table",
            ))
        servers.append(_FileServer(node, where, server.get("host_ip"), tuple(devices), pods.get(sid) if version == "1.2" else None))
    return servers, ranks


def _compare_live(servers: Sequence[_FileServer], live: NodeResults[NodeDevices], version: str) -> list[Problem]:
    problems: list[Problem] = []
    by_node = live.by_node()
    for server in servers:
        result = by_node[server.node.name]
        if result.error is not None:
            problems.append(Problem(result.error.message, server.node.name, code=result.error.status.value, hint=result.error.hint))
            continue
        info = result.value
        assert info is not None
        if info.failure:
            problems.append(Problem(info.failure, server.node.name, code=NodeStatus.FAILED.value))
            continue
        for written, actual in zip(server.devices, info.devices):
            if actual.ip is None:
                problems.append(Problem(f"the node reports no device IP ({actual.note})", server.node.name, written.device_id, "mismatch"))
            elif written.ip is not None and _same_ip(written.ip, actual.ip) is False:
                said = "the inventory says" if actual.source == "inventory" else f"the node reports (via {actual.source})"
                problems.append(Problem(f"rank table has {written.ip}, {said} {actual.ip}", server.node.name, written.device_id, "mismatch"))
            if version == "1.2" and actual.super_device_id is not None and written.super_device_id is not None \
                    and written.super_device_id != actual.super_device_id:
                problems.append(Problem(f"rank table has super_device_id {written.super_device_id}, the node has "
                                        f"{actual.super_device_id}", server.node.name, written.device_id, "mismatch"))
        if version == "1.2" and info.super_pod_id is not None and server.super_pod_id is not None \
                and info.super_pod_id != server.super_pod_id:
            problems.append(Problem(f"rank table puts it in super pod {server.super_pod_id}, the node reports {info.super_pod_id}",
                                    server.node.name, code="mismatch"))
    return problems


def _same_ip(a: str, b: str) -> bool | None:
    """True/False when both parse, None when either is malformed (reported elsewhere)."""
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return None


# --------------------------------------------------------------------------- env


def render_env(
    inventory: Inventory,
    *,
    launcher: str | None = None,
    rank_table_file: str | None = None,
    master_port: int | None = None,
    hccl_connect_timeout: int = DEFAULT_HCCL_CONNECT_TIMEOUT,
    factory: TransportFactory | None = None,
) -> tuple[NodeEnvironment, ...]:
    """Each node's environment, as `launch` would export it: the nodes are asked for their cluster endpoints.

    RANK_TABLE_FILE only when given (made absolute), as `launch --rank-table`: a set RANK_TABLE_FILE switches
    HCCL and MindSpore to rank-table mode, so no default is guessed. The inventory's `env` wins over the rest.
    """
    with NodeGroup(inventory, factory=factory) as group:
        endpoints = resolve_endpoints(group)
    master = endpoints[inventory.master.name]
    return tuple(node_environment(node, endpoints[node.name], master, launcher=launcher, port=master_port, rank_table=rank_table_file,
                                  hccl_connect_timeout=hccl_connect_timeout, unbuffered=True) for node in inventory.nodes)
