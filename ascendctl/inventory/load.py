"""Inventory: YAML file (or an MPI/DeepSpeed hostfile) -> validated, range-expanded Inventory of Node records.

Every problem in a file is reported at once, each naming the file, line and key path.
Every input has a bound (file size, YAML values and nesting, aliases, node count), checked
before the work it bounds, so hostile files fail fast with exit code 2.
Must not import typer, rich or paramiko.
"""

from __future__ import annotations

import difflib
import os
import re
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import yaml

from ascendctl.collector import gc_paused
from ascendctl.errors import InventoryError
from ascendctl.inventory.hostfile import FORMS, is_hostfile, parse_hostfile
from ascendctl.nodeset import list_size, range_size
from ascendctl.paths import hidden_char, name_problem
from ascendctl.slurm import SubmitSettings, allocation_job_id
from ascendctl.inventory.settings import (DEFAULTS, CLUSTER_SETTINGS, RESTART_VALIDATORS, PreflightConfig, DEFAULTS_SETTINGS, NODE_ONLY_SETTINGS, NODE_SETTINGS, SETTINGS_BY_NAME, SettingError,
                       env_var_name, resolve_settings, shown)

if TYPE_CHECKING:
    from ascendctl.models import Resolved
    from ascendctl.slurm import Allocation

TOP_LEVEL_KEYS = ("defaults", "nodes", "groups", "backend", "slurm", "restart")
BACKENDS = ("ssh", "slurm")
SLURM_KEYS = ("partition", "account", "time", "nodes")  # the `slurm:` section (submit mode)
RESTART_KEYS = tuple(RESTART_VALIDATORS)  # the `restart:` section
# libyaml's loader is ~4x faster on 1,000-node files and keeps the marks we need for line numbers.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
NODE_ONLY_KEYS = ("host", "name")
DEFAULT_INVENTORY_FILE = "inventory.yaml"
BUILTIN_SOURCE = "<built-in: this machine>"
# Bounds on what an inventory may hold (README "Inventory"); each is checked before the work it bounds.
MAX_NODES = 100_000  # after range expansion; ranges are sized by arithmetic before they are expanded
MAX_INVENTORY_BYTES = 16 * 1024 * 1024  # 100,000 explicit entries with a few keys each take ~8 MB
MAX_YAML_VALUES = 2_000_000  # scalars, lists and mappings, an alias counting as the size of what it repeats
MAX_YAML_ALIASES = 100_000  # enough for `<<: *common` on every node
MAX_YAML_DEPTH = 32  # an inventory nests 4 levels; libyaml's composer recurses (deep nesting crashes it)


@dataclass(frozen=True, slots=True)
class Node:
    """One cluster node with its effective settings (defaults: inventory/settings.py's DEFAULTS)."""

    name: str
    host: str
    index: int  # position in the inventory; launchers derive node ranks from it
    transport: str = DEFAULTS["transport"]
    user: str | None = DEFAULTS["user"]
    port: int = DEFAULTS["port"]
    identity_file: str | None = DEFAULTS["identity_file"]
    known_hosts: str = DEFAULTS["known_hosts"]
    accept_new_host_keys: bool = DEFAULTS["accept_new_host_keys"]
    jump_host: str | None = DEFAULTS["jump_host"]
    interface: str | None = DEFAULTS["interface"]
    slots: int = DEFAULTS["slots"]
    connect_timeout: float = DEFAULTS["connect_timeout"]
    command_timeout: float = DEFAULTS["command_timeout"]
    env: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    accelerator: str = DEFAULTS["accelerator"]
    python: str = DEFAULTS["python"]
    # Rank-table inputs (ascendctl render); per-device values are in device-id order.
    device_ips: tuple[str, ...] | None = None
    host_ip: str | None = None
    device_port: int | tuple[int, ...] | None = None
    host_port: int | tuple[int, ...] | None = None
    backup_device_ips: tuple[str, ...] | None = None
    backup_device_port: int | tuple[int, ...] | None = None
    super_pod_id: str | None = None
    super_device_ids: tuple[int, ...] | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def address(self) -> str:
        """How the node appears in messages: user@host:port for SSH, 'local' otherwise."""
        if self.transport == "local":
            return "local"
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"{user}{self.host}{port}"


@dataclass(frozen=True, slots=True)
class RestartSettings:
    """The `restart:` section: this cluster's policy for `launch --restarts`; each flag given wins over its key.

    None: the key is absent (the flag's built-in default applies). Spares are the `@spares` group."""

    restarts: int | None = None
    backoff: float | None = None
    allow_shrink: bool | None = None
    no_progress_attempts: int | None = None
    checkpoint_dir: str | None = None
    where: str = ""  # `inv.yaml:12: restart`, for messages that name the file


@dataclass(frozen=True, slots=True)
class Inventory:
    """The whole cluster: nodes in inventory order plus cluster-wide settings."""

    source: str  # file path, or BUILTIN_SOURCE
    nodes: tuple[Node, ...]
    fanout: int = DEFAULTS["fanout"]
    connect_retries: int = DEFAULTS["connect_retries"]
    ssh_config: str = DEFAULTS["ssh_config"]
    preflight: PreflightConfig = field(default_factory=PreflightConfig)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    allocation: Allocation | None = None  # the Slurm job the nodes came from: commands run as its srun steps
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)  # `@name` -> node names
    backend: str = "ssh"  # `backend: slurm`: the nodes are a Slurm allocation's; outside one, `launch` submits
    slurm: SubmitSettings | None = None  # the `slurm:` section (sbatch options for submit mode)
    restart: RestartSettings | None = None  # the `restart:` section (launch --restarts's policy)

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.nodes]

    def node(self, name: str) -> Node:
        """Return the node called `name`; KeyError if there is none."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    @property
    def master(self) -> Node:
        """The first node: master address for launchers and the path checks."""
        return self.nodes[0]


def local_accelerators(dev: Path = Path("/dev")) -> int:
    """Accelerators this machine has: Ascend NPUs (/dev/davinciN), else NVIDIA GPUs (/dev/nvidiaN), else 0."""
    for pattern in ("davinci[0-9]*", "nvidia[0-9]*"):
        found = [p for p in dev.glob(pattern) if p.name.rstrip("0123456789") in ("davinci", "nvidia")]
        if found:
            return len(found)
    return 0


def builtin_inventory(*, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Inventory:
    """One node, this machine, through the local transport: works on a fresh install.

    Its slots are the machine's accelerators, one worker on a machine without any (not 8 workers on a laptop).
    """
    return _build(
        BUILTIN_SOURCE,
        defaults={"transport": "local", "slots": max(1, local_accelerators())},
        raw_nodes=[({"host": "localhost", "name": socket.gethostname() or "localhost"}, "nodes[0]")],
        flags=flags,
        environ=environ,
        errors=[],
        where=lambda _path: BUILTIN_SOURCE,
    )


def allocation_inventory(*, flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
                         defaults: Mapping[str, Any] | None = None, file: str | None = None) -> Inventory:
    """The nodes of the Slurm allocation we run in: names from its node list, addresses from `scontrol show node`.

    Slots come from the allocation (SLURM_NTASKS_PER_NODE, else SLURM_GPUS_ON_NODE), else the usual default.
    Every node is reached through srun steps of the allocation (`transport: slurm`), not SSH. `defaults` are an
    inventory file's (`backend: slurm`, named by `file`); its explicit `slots` wins over the allocation's.
    """
    from ascendctl.slurm import allocation_from_environ, show_nodes

    env = os.environ if environ is None else environ
    allocation = allocation_from_environ(env)
    assert allocation is not None
    info = show_nodes(allocation.nodes, environ=env)
    given = dict(defaults or {})
    slots_source = None
    for var in ("SLURM_NTASKS_PER_NODE", "SLURM_GPUS_ON_NODE"):
        value = env.get(var, "").split("(")[0].split(",")[0]
        if "slots" not in given and value.isdigit() and int(value) > 0:
            given["slots"], slots_source = int(value), f"Slurm allocation ({var}={value})"
            break
    raw = [({"host": info[name].addr if name in info else name, "name": name}, f"nodes[{i}]")
           for i, name in enumerate(allocation.nodes)]
    source = f"<Slurm job {allocation.job_id}>" if file is None else f"{file} (backend: slurm, Slurm job {allocation.job_id})"
    built = _build(source, defaults=given, raw_nodes=raw, flags=flags, environ=env, errors=[], where=lambda p: f"{source}: {p}")
    nodes = []
    for node in built.nodes:
        sources = dict(node.sources)
        sources.update({"name": allocation.source, "transport": f"Slurm allocation (SLURM_JOB_ID={allocation.job_id})",
                        "host": "scontrol show node (NodeAddr)" if node.name in info else "node name (no NodeAddr)"})
        if slots_source and sources.get("slots") == "inventory":
            sources["slots"] = slots_source
        nodes.append(replace(node, transport="slurm", sources=sources))
    return replace(built, nodes=tuple(nodes), allocation=allocation, backend="slurm")


def find_inventory(explicit: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Which inventory file to use: the flag, then ASCENDCTL_INVENTORY, then ./inventory.yaml."""
    env = os.environ if environ is None else environ
    if explicit:
        return explicit
    if env.get("ASCENDCTL_INVENTORY"):
        return env["ASCENDCTL_INVENTORY"]
    if Path(DEFAULT_INVENTORY_FILE).is_file():
        return DEFAULT_INVENTORY_FILE
    return None


def load_inventory(
    path: str | os.PathLike[str] | None = None,
    *,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    submit: bool = False,
) -> Inventory:
    """Load, validate and expand an inventory; None means the built-in one-node default.

    `flags` are command-line overrides (the highest precedence). A `backend: slurm` file outside an allocation
    has no nodes: only `submit=True` (launch's submit mode) accepts it.
    """
    env = os.environ if environ is None else environ
    located = find_inventory(None if path is None else os.fspath(path), env)
    if located is None and allocation_job_id(env):
        return allocation_inventory(flags=flags, environ=env)
    if located is None:
        return builtin_inventory(flags=flags, environ=env)
    name = located
    try:
        with open(located, "rb") as handle:  # bounded read: the path may be a pipe or /dev/zero
            raw = handle.read(MAX_INVENTORY_BYTES + 1)
        if len(raw) > MAX_INVENTORY_BYTES:
            raise InventoryError([_too_big(name)])
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise InventoryError([f"{name}: file not found"], hint="pass -i FILE or set ASCENDCTL_INVENTORY") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError([f"{name}: cannot read: {exc}"]) from None
    return parse_inventory(text, source=name, flags=flags, environ=env, submit=submit)


def _too_big(source: str) -> str:
    return f"{source}: larger than {MAX_INVENTORY_BYTES // (1024 * 1024)} MiB (an inventory of {MAX_NODES:,} nodes fits in half of that)"


def parse_inventory(
    text: str,
    *,
    source: str = "<string>",
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    submit: bool = False,
) -> Inventory:
    """Parse inventory YAML text, or a hostfile (hostfile.py); raise InventoryError listing every problem."""
    if is_hostfile(text):
        return _parse_hostfile(text, source=source, flags=flags, environ=environ)
    with gc_paused():
        return _parse(text, source=source, flags=flags, environ=environ, submit=submit)


def _parse_hostfile(text: str, *, source: str, flags: Mapping[str, Any] | None, environ: Mapping[str, str] | None) -> Inventory:
    """A hostfile's lines as nodes `{host, slots}`, built and validated exactly as a YAML inventory's are."""
    entries, problems = parse_hostfile(text, MAX_NODES)
    errors = [f"{source}:{line}: {problem}" for line, problem in problems]

    def where(key_path: str) -> str:
        """`file:line: key`: an entry's key path is `line N`, its keys `line N.slots`."""
        line, _, key = key_path.removeprefix("line ").partition(".")
        return f"{source}:{line}: {key or 'line'}"

    raw_nodes: list[tuple[dict[str, Any], str]] = [
        ({"host": e.host} if e.slots is None else {"host": e.host, "slots": e.slots}, f"line {e.line}") for e in entries]
    if not raw_nodes and not errors:
        errors.append(f"{source}: no hosts (expected lines like {FORMS})")
    try:
        with gc_paused():
            return _build(source, defaults={}, raw_nodes=raw_nodes, flags=flags, environ=environ, errors=errors, where=where)
    except InventoryError as exc:  # in file order: the syntax problems were found before the others
        line_of = {problem: int(m.group(1)) if (m := re.match(re.escape(source) + r":(\d+):", problem)) else 0
                   for problem in exc.problems}
        raise InventoryError(sorted(exc.problems, key=line_of.__getitem__), hint=exc.hint) from None


def _parse(text: str, *, source: str, flags: Mapping[str, Any] | None, environ: Mapping[str, str] | None,
           submit: bool = False) -> Inventory:
    data, lines = _load_yaml(text, source)
    errors: list[str] = []

    def where(key_path: str) -> str:
        """`file:line: key.path`, the line of the key or of its nearest ancestor (values reached through an alias)."""
        # a key holding a newline or a bidi control (an unknown key, a bad group name) is shown escaped
        shown_path = key_path if key_path.isprintable() else key_path.encode("unicode_escape").decode("ascii")
        probe = key_path
        while probe:
            line = lines.get(probe)
            if line:
                return f"{source}:{line}: {shown_path}"
            probe = probe[: max(probe.rfind("."), probe.rfind("["), 0)]
        return f"{source}: {shown_path}"

    if not isinstance(data, dict):
        raise InventoryError([f"{source}: expected a mapping with `defaults:` and `nodes:` at the top level"])
    _check_unknown(data, TOP_LEVEL_KEYS, "", where, errors)

    defaults_raw = data.get("defaults") or {}
    if not isinstance(defaults_raw, dict):
        errors.append(f"{where('defaults')}: expected a mapping")
        defaults_raw = {}
    defaults = _validate_settings(defaults_raw, "defaults", DEFAULTS_SETTINGS, where, errors)

    backend = data.get("backend", "ssh")
    if backend not in BACKENDS:
        errors.append(f"{where('backend')}: expected one of: {', '.join(BACKENDS)} (got {shown(backend)})")
        backend = "ssh"
    slurm = _slurm_section(data["slurm"], where, errors) if "slurm" in data else None
    restart = _restart_section(data["restart"], where, errors) if "restart" in data else None
    if backend == "slurm":
        built = _slurm_backend(data, source=source, defaults=defaults, slurm=slurm, flags=flags, environ=environ,
                               submit=submit, where=where, errors=errors)
        return replace(built, restart=restart)

    raw_nodes: list[tuple[dict[str, Any], str]] = []
    nodes_raw = data.get("nodes")
    if nodes_raw is None or nodes_raw == []:
        errors.append(f"{where('nodes')}: no nodes (expected a list with at least one `- host: ...`)")
    elif not isinstance(nodes_raw, list):
        errors.append(f"{where('nodes')}: expected a list of nodes")
    elif len(nodes_raw) > MAX_NODES:
        errors.append(f"{where('nodes')}: {len(nodes_raw):,} entries; an inventory holds at most {MAX_NODES:,} nodes")
    else:
        for i, entry in enumerate(nodes_raw):
            key_path = f"nodes[{i}]"
            if isinstance(entry, str):  # shorthand: `- 10.0.0.11`
                entry = {"host": entry}
            if not isinstance(entry, dict):
                errors.append(f"{where(key_path)}: expected a mapping like {{host: 10.0.0.11}} or a host name")
                continue
            raw_nodes.append((entry, key_path))
    groups_raw = data.get("groups") or {}
    inventory = _build(source, defaults=defaults, raw_nodes=raw_nodes, flags=flags, environ=environ, errors=errors, where=where,
                       validate_more=lambda nodes: _groups_from(groups_raw, nodes, where, errors))
    return replace(inventory, slurm=slurm, restart=restart)


def _restart_section(raw: Any, where: Any, errors: list[str]) -> RestartSettings | None:
    """`restart: {restarts, backoff, allow_shrink, no_progress_attempts, checkpoint_dir}`, checked like settings."""
    if not isinstance(raw, dict):
        errors.append(f"{where('restart')}: expected a mapping like {{restarts: 3, checkpoint_dir: /ckpt}}")
        return None
    if "spares" in raw:  # one place says which nodes are spares: the group (and --spares)
        errors.append(f"{where('restart.spares')}: the spares are the `spares` group: `groups: {{spares: 'n[15-16]'}}` "
                      "(or launch --spares)")
    _check_unknown({k: v for k, v in raw.items() if k != "spares"}, RESTART_KEYS, "restart", where, errors)
    values: dict[str, Any] = {}
    for key, validate in RESTART_VALIDATORS.items():
        if raw.get(key) is None:
            continue
        try:
            values[key] = validate(raw[key])
        except ValueError as exc:
            errors.append(f"{where('restart.' + key)}: {exc} (got {shown(raw[key])})")
    return RestartSettings(**values, where=where("restart"))


def _slurm_section(raw: Any, where: Any, errors: list[str]) -> SubmitSettings | None:
    """`slurm: {partition, account, time, nodes}`: sbatch's options for submit mode, checked like settings."""
    if not isinstance(raw, dict):
        errors.append(f"{where('slurm')}: expected a mapping like {{partition: debug, nodes: 4}}")
        return None
    _check_unknown(raw, SLURM_KEYS, "slurm", where, errors)
    values: dict[str, Any] = {}
    for key in ("partition", "account", "time"):
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip() \
                or not re.fullmatch(r"[A-Za-z0-9_.:,+-]+", str(value)):
            what = "a time limit like 2:00:00, 1-00:00:00 or minutes" if key == "time" else "a Slurm name"
            errors.append(f"{where('slurm.' + key)}: expected {what} (got {shown(value)})")
            continue
        values[key] = str(value)
    count = raw.get("nodes")
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            errors.append(f"{where('slurm.nodes')}: expected a node count, an integer >= 1 (got {shown(count)})")
        else:
            values["nodes"] = count
    return SubmitSettings(**values)


def _slurm_backend(data: dict[str, Any], *, source: str, defaults: dict[str, Any], slurm: SubmitSettings | None,
                   flags: Mapping[str, Any] | None, environ: Mapping[str, str] | None, submit: bool, where: Any,
                   errors: list[str]) -> Inventory:
    """`backend: slurm`: the nodes are the allocation's (with this file's defaults); outside one, none (submit mode)."""
    env = os.environ if environ is None else environ
    for key in ("nodes", "groups"):
        if key in data:
            errors.append(f"{where(key)}: with `backend: slurm` the nodes are the Slurm allocation's: drop `{key}:`"
                          + (" (a node count for submit mode is `slurm.nodes`)" if key == "nodes" else ""))
    if errors:
        raise InventoryError(errors)
    if allocation_job_id(env):
        inventory = allocation_inventory(flags=flags, environ=env, defaults=defaults, file=source)
        return replace(inventory, slurm=slurm)
    if not submit:
        raise InventoryError([f"{source}: `backend: slurm`: the nodes come from a Slurm allocation, and this is not "
                              "inside one (SLURM_JOB_ID is not set)"],
                             hint="run it inside salloc/sbatch, or `ascendctl launch` to submit a batch job")
    built = _build(source, defaults=defaults, raw_nodes=[], flags=flags, environ=environ, errors=errors, where=where)
    return replace(built, backend="slurm", slurm=slurm)


_GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")  # fullmatch: `$` would let a trailing newline through


class NodeNames:
    """What a list of items stands for in an inventory: each item a node's name or its host (indexed once)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.names = {node.name for node in nodes}
        self.by_host: dict[str, list[str]] = {}
        for node in nodes:
            self.by_host.setdefault(node.host, []).append(node.name)

    def lookup(self, items: Iterable[str]) -> tuple[set[str], list[str]]:
        """The node names `items` stand for, and the items that are neither a name nor a host."""
        found: set[str] = set()
        missing: list[str] = []
        for item in items:
            if item in self.names:
                found.add(item)
            elif item in self.by_host:
                found.update(self.by_host[item])
            else:
                missing.append(item)
        return found, missing


def _groups_from(raw: Any, nodes: list[Node], where: Any, errors: list[str]) -> dict[str, tuple[str, ...]]:
    """`groups: {rack1: 'n[01-16]', login: [n01, n02]}`: each group's members, as node names in inventory order."""
    from ascendctl.nodeset import fold

    if not isinstance(raw, dict):
        errors.append(f"{where('groups')}: expected a mapping like {{rack1: 'n[01-16]'}}")
        return {}
    order = {node.name: i for i, node in enumerate(nodes)}
    index = NodeNames(nodes)  # once: a group may list thousands of names
    groups: dict[str, tuple[str, ...]] = {}
    for name, members in raw.items():
        key_path = f"groups.{name}"
        if not isinstance(name, str) or not _GROUP_NAME.fullmatch(name) or name == "all":
            errors.append(f"{where(key_path)}: bad group name {name!r} (letters, digits, `_.:-`; `all` is built in)")
            continue
        if isinstance(members, str):
            patterns = [members]
        elif isinstance(members, list) and all(isinstance(m, str) for m in members):
            patterns = list(members)
        else:
            errors.append(f"{where(key_path)}: expected a node set like 'n[01-16]' or a list of node names")
            continue
        from ClusterShell.NodeSet import NodeSet, NodeSetException

        names: set[str] = set()
        unknown: list[str] = []
        for pattern in patterns:
            problem = hidden_char(pattern)
            if problem is not None:
                errors.append(f"{where(key_path)}: bad node set {shown(pattern)}: it cannot contain control or invisible "
                              f"characters ({problem})")
                continue
            try:  # sized before NodeSet expands it; no @groups or operators (NodeSet would resolve the site's groups)
                size = list_size(pattern.strip())
            except ValueError as exc:
                errors.append(f"{where(key_path)}: bad node set {shown(pattern)}: {exc}")
                continue
            if size > MAX_NODES:
                errors.append(f"{where(key_path)}: {shown(pattern)} is {size:,} names; an inventory holds at most {MAX_NODES:,} nodes")
                continue
            try:
                items = list(NodeSet(pattern))
            except NodeSetException as exc:
                errors.append(f"{where(key_path)}: bad node set {pattern!r}: {exc}")
                continue
            found, missing = index.lookup(items)
            names.update(found)
            unknown += missing
        if unknown:
            errors.append(f"{where(key_path)}: {fold(unknown)}: no such node")
        groups[name] = tuple(sorted(names, key=order.__getitem__))
    return groups


def _build(
    source: str,
    *,
    defaults: dict[str, Any],
    raw_nodes: list[tuple[dict[str, Any], str]],
    flags: Mapping[str, Any] | None,
    environ: Mapping[str, str] | None,
    errors: list[str],
    where: Any,
    validate_more: Callable[[list[Node]], dict[str, tuple[str, ...]]] | None = None,
) -> Inventory:
    env_values = _settings_from_environ(os.environ if environ is None else environ, errors)
    flag_values = _validate_flags(flags or {}, errors)
    nodes: list[Node] = []
    seen_hosts: dict[str, str] = {}
    seen_names: dict[str, str] = {}
    shared: tuple[dict[str, Any], dict[str, str]] | None = None  # the resolution of entries without keys of their own
    budget = MAX_NODES
    for entry, key_path in raw_nodes:
        _check_unknown(entry, NODE_ONLY_KEYS + NODE_SETTINGS, key_path, where, errors, extra_hint=CLUSTER_SETTINGS)
        node_settings = _validate_settings(
            {k: v for k, v in entry.items() if k not in NODE_ONLY_KEYS}, key_path, NODE_SETTINGS, where, errors
        )
        pairs = _expand_node(entry, key_path, where, errors, budget)
        if pairs is None:  # past the node cap: one error, then no more expansion
            budget = 0
            continue
        budget -= len(pairs)
        if not pairs:
            continue
        # Resolved once per entry (a range shares it), and once for every entry without keys of its own.
        if node_settings or shared is None:
            resolved = resolve_settings(NODE_SETTINGS, defaults=defaults, node=node_settings, environ=env_values, flags=flag_values)
            values_sources = ({k: item.value for k, item in resolved.items()}, {k: item.source for k, item in resolved.items()})
            if not node_settings:
                shared = values_sources
        else:
            values_sources = shared
        values, sources = values_sources
        for name, host in pairs:
            duplicate_host = host in seen_hosts
            if duplicate_host:
                errors.append(f"{where(key_path + '.host')}: duplicate host {host!r} (also in {seen_hosts[host]})")
            seen_hosts.setdefault(host, key_path)
            if name in seen_names and not duplicate_host:  # one line per problem, not two
                errors.append(f"{where(key_path + '.name')}: duplicate name {name!r} (also in {seen_names[name]})")
            seen_names.setdefault(name, key_path)
            nodes.append(Node(name=name, host=host, index=len(nodes), sources=sources, **values))
    groups = validate_more(nodes) if validate_more is not None else {}
    if errors:
        raise InventoryError(errors)
    cluster = resolve_settings(CLUSTER_SETTINGS, defaults=defaults, environ=env_values, flags=flag_values)
    return Inventory(
        source=source,
        nodes=tuple(nodes),
        fanout=cluster["fanout"].value,
        connect_retries=cluster["connect_retries"].value,
        ssh_config=cluster["ssh_config"].value,
        preflight=cluster["preflight"].value,
        sources={key: item.source for key, item in cluster.items()},
        groups=groups,
    )


def _expand_node(entry: dict[str, Any], key_path: str, where: Any, errors: list[str], budget: int) -> list[tuple[str, str]] | None:
    """Expand `host`/`name` ranges (ClusterShell NodeSet syntax) into (name, host) pairs; None past the node cap.

    `budget` is how many nodes the inventory may still hold; ranges are sized before they are expanded.
    """
    host = entry.get("host")
    if host is None:
        errors.append(f"{where(key_path)}.host: required key missing")
        return []
    if not isinstance(host, str) or not host.strip():
        errors.append(f"{where(key_path + '.host')}: expected a host name, address or range like node[01-16]")
        return []
    name = entry.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        errors.append(f"{where(key_path + '.name')}: expected a name or a range like n[1-16]")
        return []
    # Before any range or whitespace rule: U+0085 is whitespace to str.split() and strip(), and must be named as what it is.
    hidden = [(key, value, problem) for key, value in ((".host", host), (".name", name))
              if value is not None and (problem := hidden_char(value)) is not None]
    for key, value, problem in hidden:
        if key == ".host" and name is not None:
            what, used = "not a host name or address: a host", ""
        else:
            what = "not a node name: a name"
            used = " (the host is the node's name when `name` is not given)" if key == ".host" else ""
        errors.append(f"{where(key_path + key)}: {shown(value)}: {what} cannot contain control or invisible characters "
                      f"({problem}){used}")
    if hidden:
        return []
    for pattern, key in ((host, ".host"), (name, ".name")):
        if pattern is None or budget <= 0 or "[" not in pattern:
            continue
        try:
            size = range_size(pattern.strip())
        except ValueError:
            continue  # malformed: _expand_range says how
        if size > budget:
            already = f" after the {MAX_NODES - budget:,} before it" if budget < MAX_NODES else ""
            errors.append(f"{where(key_path + key)}: {pattern.strip()!r} is {size:,} nodes{already}; "
                          f"an inventory holds at most {MAX_NODES:,} nodes")
            return None
    if budget <= 0:
        return None
    hosts = _expand_range(host, key_path + ".host", where, errors)
    if name is None:
        return _named([(h, h) for h in hosts], key_path + ".host", where, errors)
    names = _expand_range(name, key_path + ".name", where, errors)
    if hosts and names and len(names) != len(hosts):
        errors.append(
            f"{where(key_path + '.name')}: {len(names)} name(s) for {len(hosts)} host(s); "
            "a host range needs a name range of the same length"
        )
        return []
    return _named(list(zip(names, hosts)), key_path + ".name", where, errors)


def _named(pairs: list[tuple[str, str]], key_path: str, where: Any, errors: list[str]) -> list[tuple[str, str]]:
    """The pairs, if every name can be a node name (it becomes a directory name); else one error for the entry."""
    for name, _host in pairs:
        problem = name_problem(name)
        if problem is not None:
            used = " (the host is the node's name when `name` is not given)" if key_path.endswith(".host") else ""
            errors.append(f"{where(key_path)}: {shown(name)}: not a node name: {problem}{used}")
            return []
    return pairs


def _expand_range(pattern: str, key_path: str, where: Any, errors: list[str]) -> list[str]:
    pattern = pattern.strip()
    if "[" not in pattern and "]" not in pattern:
        if "," in pattern or pattern.split() != [pattern]:  # split(): whitespace at C speed
            errors.append(f"{where(key_path)}: {shown(pattern)}: one host per entry (use a range like node[01-16])")
            return []
        return [pattern]
    try:
        range_size(pattern)  # our grammar first: NodeSet also reads lists, set operators and @groups
    except ValueError as exc:
        errors.append(f"{where(key_path)}: malformed range {shown(pattern)}: {exc}")
        return []
    from ClusterShell.NodeSet import NodeSet, NodeSetException  # imported only for ranges

    try:
        return list(NodeSet(pattern))  # sorted, repeats removed
    except NodeSetException as exc:
        errors.append(f"{where(key_path)}: malformed range {shown(pattern)}: {exc}")
        return []


def _validate_settings(
    raw: dict[str, Any], key_path: str, allowed: tuple[str, ...], where: Any, errors: list[str]
) -> dict[str, Any]:
    """Validate known setting keys; unknown keys are reported by _check_unknown."""
    out: dict[str, Any] = {}
    if key_path == "defaults":
        _check_unknown(raw, allowed, key_path, where, errors, node_only=NODE_ONLY_SETTINGS)
    for key, value in raw.items():
        if key not in allowed:
            continue
        try:
            out[key] = SETTINGS_BY_NAME[key].validate(value)
        except SettingError as exc:
            errors.extend(f"{where(f'{key_path}.{key}.{sub}')}: {problem}" for sub, problem in exc.problems)
        except ValueError as exc:
            errors.append(f"{where(key_path + '.' + key)}: {exc} (got {shown(value)})")
    return out


def _validate_flags(flags: Mapping[str, Any], errors: list[str]) -> dict[str, Any]:
    """Command-line overrides pass the same validators as the inventory's values."""
    out: dict[str, Any] = {}
    for key, value in flags.items():
        spec = SETTINGS_BY_NAME.get(key)
        if spec is None:
            out[key] = value
            continue
        try:
            out[key] = spec.validate(value)
        except ValueError as exc:
            errors.append(f"command line: --{key.replace('_', '-')} {shown(value)}: {exc}")
    return out


def _check_unknown(
    mapping: dict[str, Any],
    allowed: tuple[str, ...],
    key_path: str,
    where: Any,
    errors: list[str],
    extra_hint: tuple[str, ...] = (),
    node_only: tuple[str, ...] = (),
) -> None:
    for key in mapping:
        if key in allowed:
            continue
        full = f"{key_path}.{key}" if key_path else str(key)
        if key in extra_hint:
            errors.append(f"{where(full)}: `{key}` can only be set under `defaults:`")
            continue
        if key in node_only:
            errors.append(f"{where(full)}: `{key}` can only be set per node, under `nodes:`")
            continue
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
        suggestion = f" (did you mean {close[0]}?)" if close else f" (expected one of: {', '.join(allowed)})"
        errors.append(f"{where(full)}: unknown key{suggestion}")


def _settings_from_environ(environ: Mapping[str, str], errors: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for spec in SETTINGS_BY_NAME.values():
        var = env_var_name(spec.name)
        if spec.from_env is None or var not in environ or environ[var] == "":
            continue
        try:
            values[spec.name] = spec.validate(spec.from_env(environ[var]))
        except ValueError as exc:
            errors.append(f"environment: {var}={shown(environ[var])}: {exc}")
    return values


def _load_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """Safe-load YAML within the bounds, refusing duplicate keys; return the data and a key-path -> line map."""
    if len(text) > MAX_INVENTORY_BYTES:
        raise InventoryError([_too_big(source)])
    try:
        _check_bounds(text, source)
        loader = _SAFE_LOADER(text)
        try:
            root = loader.get_single_node()
            lines, duplicates = _walk(root)
            if duplicates:
                raise InventoryError([f"{source}:{line}: {path}: duplicate key (first on line {first})"
                                      for line, path, first in duplicates])
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        hint = "quote ranges inside {...}: {host: 'node[01-16]'}" if "'['" in str(exc) or "'{'" in str(exc) else None
        raise InventoryError([f"{source}{line}: YAML syntax error: {problem}"], hint=hint) from None
    except yaml.YAMLError as exc:
        raise InventoryError([f"{source}: YAML syntax error: {exc}"]) from None
    return data, lines


_BOUNDS_HINT = "write the values out, or share them with fewer, smaller anchors"


def _too_deep() -> str:
    return f"nested deeper than {MAX_YAML_DEPTH} levels"


def _check_bounds(text: str, source: str) -> None:
    """Read the YAML events (libyaml, no composition) and refuse a file past a bound before anything is built.

    Counts values with each alias as the size of what it repeats, so a "billion laughs" is refused after
    reading a few hundred bytes; refuses recursive aliases and nesting that would crash libyaml's composer.
    """
    parser = _SAFE_LOADER(text)
    sizes: dict[str, int] = {}  # anchor -> values it stands for
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, values counted before it) of each open collection
    values = aliases = 0

    def refuse(event: yaml.Event, problem: str) -> InventoryError:
        line = f":{event.start_mark.line + 1}" if event.start_mark else ""
        return InventoryError([f"{source}{line}: {problem}"], hint=_BOUNDS_HINT)

    try:
        while True:
            try:
                event = parser.get_event()
            except yaml.MarkedYAMLError as exc:
                # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) has its own flow-nesting limit (1,000), which its
                # scanner meets while looking up to 1,024 characters ahead, before the parser hands over the
                # event that passes ours: that refusal is this bound, so it gets this bound's message.
                if "nesting depth" not in str(exc.problem):
                    raise
                mark = exc.problem_mark or exc.context_mark
                line = f":{mark.line + 1}" if mark else ""
                raise InventoryError([f"{source}{line}: {_too_deep()}"], hint=_BOUNDS_HINT) from None
            kind = type(event)
            if kind is yaml.ScalarEvent:
                values += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if len(open_nodes) >= MAX_YAML_DEPTH:
                    raise refuse(event, _too_deep())
                open_nodes.append((event.anchor, values))
                values += 1
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                anchor, before = open_nodes.pop()
                if anchor is not None:
                    sizes[anchor] = values - before
            elif kind is yaml.AliasEvent:
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise refuse(event, f"more than {MAX_YAML_ALIASES:,} aliases")
                if any(anchor == event.anchor for anchor, _ in open_nodes):
                    raise refuse(event, f"alias *{event.anchor} refers to a value that contains it")
                values += sizes.get(event.anchor, 0)  # an undefined alias: the composer reports it
            elif kind is yaml.StreamEndEvent:
                return
            if values > MAX_YAML_VALUES:
                raise refuse(event, f"more than {MAX_YAML_VALUES:,} values once aliases are expanded")
    finally:
        parser.dispose()


def _walk(root: yaml.Node | None) -> tuple[dict[str, int], list[tuple[int, str, int]]]:
    """One pass over the composed graph: the line of every key path, and duplicate keys as (line, path, first line).

    A node reached again through an alias is not walked again (its keys were seen at its anchor),
    so the pass is linear in the file, not in the expanded tree.
    """
    lines: dict[str, int] = {}
    duplicates: list[tuple[int, str, int]] = []
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [] if root is None else [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                scalar = isinstance(key_node, yaml.ScalarNode)
                key = str(key_node.value) if scalar else "<complex key>"
                child = f"{path}.{key}" if path else key
                line = key_node.start_mark.line + 1
                if scalar and key_node.tag != "tag:yaml.org,2002:merge":  # `<<` may repeat: each merges
                    ident = (key_node.tag, key_node.value)
                    if ident in first:
                        duplicates.append((line, child, first[ident]))
                    else:
                        first[ident] = line
                lines[child] = line
                stack.append((value_node, child))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                child = f"{path}[{i}]"
                lines[child] = item.start_mark.line + 1
                stack.append((item, child))
    return lines, duplicates
