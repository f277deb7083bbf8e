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
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .devices import DeviceAddress, NodeDevices, discover_devices, fold_ids
from .errors import AscendctlError, ExitCode, TemplateError, parse_json
from .inventory import Inventory, Node
from .outcome import Outcome, exit_code_for, node_outcome
from .models import EventSink, NodeResult, NodeResults, NodeStatus
from .environment import DEFAULT_HCCL_CONNECT_TIMEOUT, NodeEnvironment, node_environment
from .group import NodeGroup
from .network import canonical_ip, resolve_endpoints
from .transport import TransportFactory

if TYPE_CHECKING:  # only the annotation needs it (importlib.abc has it on 3.10, where the floor is)
    from importlib.abc import Traversable

HOSTFILE_FORMATS = ("openmpi", "deepspeed", "mpich", "plain")
RANK_TABLE_VERSIONS = ("1.0", "1.2")
SERVER_ID_CHOICES = ("host", "name")
_REPO_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


# --------------------------------------------------------------------------- templates


@dataclass(frozen=True, slots=True)
class Template:
    """A text template and how messages should name it."""

    text: str
    label: str  # e.g. templates/hostfile-openmpi.tmpl, or the user's path


def template_dirs(templates: str | os.PathLike[str] | None = None) -> list[tuple[Traversable, str]]:
    """Where templates are looked up, in order, with the label used in messages."""
    found: list[tuple[Traversable, str]] = []
    if templates is not None:
        found.append((Path(templates), os.fspath(templates)))
    packaged = resources.files("ascendctl") / "templates"
    if packaged.is_dir():  # a wheel install: force-included by pyproject.toml
        found.append((packaged, "templates"))
    elif _REPO_TEMPLATES.is_dir():  # a source checkout or editable install
        found.append((_REPO_TEMPLATES, "templates"))
    return found


def load_template(name: str, templates: str | os.PathLike[str] | None = None) -> Template:
    """Read template `name`: from `templates` first, then the copy shipped with ascendctl."""
    if templates is not None and not Path(templates).is_dir():
        raise TemplateError(f"{os.fspath(templates)}: templates directory not found")
    for directory, label in template_dirs(templates):
        candidate = directory / name
        if candidate.is_file():
            try:
                return Template(candidate.read_text(encoding="utf-8"), f"{label}/{name}")
            except (OSError, UnicodeDecodeError) as exc:
                raise TemplateError(f"{label}/{name}: cannot read: {exc}") from None
    where = " or ".join(label for _, label in template_dirs(templates)) or "templates"
    raise TemplateError(f"{name}: template not found in {where}", hint="pass --templates DIR holding your own copy")


def render_template(template: Template, values: Mapping[str, object]) -> str:
    """Strict `${var}` substitution: an unknown variable is a TemplateError naming file and variable."""
    try:
        return string.Template(template.text).substitute(values)
    except KeyError as exc:
        known = ", ".join("${" + key + "}" for key in values)
        raise TemplateError(f"{template.label}: unknown variable ${{{exc.args[0]}}}", hint=f"known variables: {known}") from None
    except ValueError as exc:  # `$` not followed by a name: the message carries line and column
        raise TemplateError(f"{template.label}: {exc}", hint="write a literal $ as $$") from None


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


# --------------------------------------------------------------------------- problems


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


def _per_device(value: int | tuple[int, ...] | None, device: int) -> int | None:
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
    optional: list[tuple[str, object]] = [("device_port", _per_device(node.device_port, device.device_id))]
    if version == "1.2":
        backups = node.backup_device_ips
        optional += [
            ("backup_device_ip", backups[device.device_id] if backups is not None and device.device_id < len(backups) else None),
            ("backup_device_port", _per_device(node.backup_device_port, device.device_id)),
        ]
    optional.append(("host_port", _per_device(node.host_port, device.device_id)))
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


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` through a temp file and rename, so a reader never sees half a rank table."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise AscendctlError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None


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
