"""Setting definitions and the one function that resolves them with their sources.

Precedence, lowest to highest: built-in default < inventory `defaults:` < the node's
own keys < `ASCENDCTL_<KEY>` environment variables < command-line flags.
Pure: no I/O beyond reading the mapping it is given. Must not import typer or rich.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ascendctl.models import Resolved
from ascendctl.paths import hidden_char
from ascendctl.launchers import DEFAULT_MASTER_PORT, default_ports_help

Validator = Callable[[Any], Any]  # returns the normalised value or raises ValueError(expectation)


class SettingError(ValueError):
    """Problems under a setting's own keys, all at once: (sub-key path, message) pairs, e.g. ("min_mtu", "expected ...")."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{key}: {message}" for key, message in problems))
        self.problems = problems


def shown(value: Any) -> str:
    """A value as error messages quote it: repr, shortened so a huge value cannot flood the output."""
    import reprlib

    return reprlib.repr(value)


def _plain(text: str) -> str:
    """`text`, refused (ValueError) when it holds a control or invisible character: every string setting becomes a
    user, host, path or command on a node, and reaches the terminal."""
    problem = hidden_char(text)
    if problem is not None:
        raise ValueError(f"cannot contain control or invisible characters ({problem})")
    return text


def _str(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("expected a non-empty string")
    return _plain(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _int_range(low: int, high: int) -> Validator:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer from {low} to {high}")
        if not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}")
        return value

    return check


def _number(high: float = math.inf, what: str = "a number of seconds", *, zero_ok: bool = False) -> Validator:
    """A finite number greater than 0 (or >= 0 with `zero_ok`) and at most `high` (NaN and infinities are refused)."""
    expected = f"expected {what} {'>= 0' if zero_ok else 'greater than 0'}"
    if math.isfinite(high):
        expected += f" and at most {high:g}"

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(expected)
        if not (0 <= value if zero_ok else 0 < value) or value > high:
            raise ValueError(expected)
        return float(value)

    return check


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _choice(*choices: str) -> Validator:
    def check(value: Any) -> str:
        if value not in choices:
            raise ValueError("expected one of " + ", ".join(choices))
        return str(value)

    return check


def _env_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError("expected a mapping of NAME: value")
    out: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for key, item in value.items():
        if not isinstance(key, str) or not key.replace("_", "a").isalnum() or key[0].isdigit() or not key.isascii():
            problems.append((str(key), "invalid environment variable name"))
        elif isinstance(item, (dict, list)) or item is None:
            problems.append((key, f"expected a string or number (got {shown(item)})"))
        elif (problem := hidden_char(str(item))) is not None:  # exported into the job's shell, shown by launch --dry-run
            problems.append((key, f"cannot contain control or invisible characters ({problem}) (got {shown(item)})"))
        else:
            out[key] = str(item).lower() if isinstance(item, bool) else str(item)
    if problems:
        raise SettingError(problems)
    return out


def _str_list(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise ValueError("expected a list of addresses in device-id order, like [192.168.1.8, 192.168.1.9]")
    return tuple(_plain(item) for item in value)


def _int_list(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value):
        raise ValueError("expected a list of non-negative integers in device-id order")
    return tuple(value)


def _port_or_ports(value: Any) -> int | tuple[int, ...]:
    """One port for every device, or a list with one port per device id."""
    ports = value if isinstance(value, list) else [value]
    if not ports or not all(isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535 for p in ports):
        raise ValueError("expected a port from 1 to 65535, or a list of them in device-id order")
    return tuple(ports) if isinstance(value, list) else int(value)


def _id_str(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise ValueError("expected an id (string or integer)")
    return _plain(str(value))


def _check(validate: Validator, default: Any, doc: str) -> Any:
    """A PreflightConfig field: its default, the validator its inventory value must pass, and what it means."""
    return field(default=default, metadata={"validate": validate, "doc": doc})


@dataclass(frozen=True, slots=True)
class PreflightConfig:
    """Preflight thresholds (`defaults: preflight:` in the inventory); defaults suit most clusters."""

    # 68 is the IPv4 minimum; the don't-fragment ping size is min_mtu - 28
    min_mtu: int = _check(_int_range(68, 65535), 9000, "the cluster NIC and the path between nodes must pass frames this big")
    max_clock_skew: float = _check(_number(3600), 1.0, "seconds between a node's clock and this host's: fail above")
    warn_clock_skew: float = _check(_number(3600), 0.1, "seconds of clock skew that warn (below max_clock_skew)")
    master_port: int = _check(_int_range(1, 65535), DEFAULT_MASTER_PORT, f"rendezvous port that must be free on the master ({default_ports_help()})")
    log_dir: str = _check(_str, "/tmp", "where job logs go; its free space is checked")
    min_free_disk_gb: float = _check(_number(1e6, "a number of gigabytes"), 10.0, "gigabytes log_dir must have free")
    min_open_files: int = _check(_int_range(1, 1 << 20), 65536, "`ulimit -n` below this warns")
    section_timeout: float = _check(_number(3600), 20.0, "seconds one probe section (one tool) may take on a node")
    max_lookup_seconds: float = _check(_number(60), 0.3, "seconds one name lookup (hostname, reverse of a node's address) may take: fail above")

    @classmethod
    def from_dict(cls, raw: Any) -> "PreflightConfig":
        """Validate a `preflight:` mapping; SettingError names every bad key."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ValueError("expected a mapping of preflight thresholds")
        fields = cls.__dataclass_fields__
        values: dict[str, Any] = {}
        problems: list[tuple[str, str]] = []
        for key, value in raw.items():
            if key not in fields:
                close = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.6)
                problems.append((str(key), "unknown key" + (f" (did you mean {close[0]}?)" if close else f" (expected one of: {', '.join(fields)})")))
                continue
            try:
                values[key] = fields[key].metadata["validate"](value)
            except ValueError as exc:
                problems.append((key, f"{exc} (got {shown(value)})"))
        if problems:
            raise SettingError(problems)
        return cls(**values)


def _preflight(value: Any) -> PreflightConfig:
    return PreflightConfig.from_dict(value)


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """One inventory setting: its validator, default, scope and meaning."""

    name: str
    validate: Validator
    default: Any
    doc: str
    per_node: bool = True  # may a node override it?
    from_env: Callable[[str], Any] | None = None  # parses ASCENDCTL_<NAME>
    node_only: bool = False  # only under a node, never in `defaults:` (values that differ by nature, like addresses)


# The `restart:` section (launch --restarts's policy; the flags' bounds): each key's validator.
RESTART_VALIDATORS: dict[str, Validator] = {
    "restarts": _int_range(0, 10_000),
    "backoff": _number(zero_ok=True),
    "allow_shrink": _bool,
    "no_progress_attempts": _int_range(1, 10_000),
    "checkpoint_dir": _str,
}


def _env_int(text: str) -> int:
    return int(text)


def _env_float(text: str) -> float:
    return float(text)


def _env_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec("transport", _choice("ssh", "openssh", "local"), "ssh", "how to reach the node: ssh (Paramiko; the system ssh when the ssh config needs it), openssh (the system ssh client, multiplexed), or local (this machine, no SSH)", from_env=str),
    SettingSpec("user", _opt_str, None, "SSH user (default: ~/.ssh/config, else the current user)", from_env=str),
    SettingSpec("port", _int_range(1, 65535), 22, "SSH port", from_env=_env_int),
    SettingSpec("identity_file", _opt_str, None, "private key file (default: ~/.ssh/config, ssh-agent and ~/.ssh/id_*)", from_env=str),
    SettingSpec("known_hosts", _str, "~/.ssh/known_hosts", "the only known_hosts file host keys are verified against (default: the files ssh uses: UserKnownHostsFile/GlobalKnownHostsFile, else ~/.ssh/known_hosts{,2}, /etc/ssh/ssh_known_hosts{,2})", from_env=str),
    SettingSpec("accept_new_host_keys", _bool, False, "accept and record unknown host keys (never changed ones)", from_env=_env_bool),
    SettingSpec("jump_host", _opt_str, None, "bastion to tunnel through: [user@]host[:port]", from_env=str),
    SettingSpec("interface", _opt_str, None, "cluster network interface, e.g. eth0", from_env=str),
    SettingSpec("slots", _int_range(1, 1024), 8, "devices (NPUs/GPUs) per node", from_env=_env_int),
    SettingSpec("connect_timeout", _number(3600), 10.0, "seconds to connect and authenticate", from_env=_env_float),
    SettingSpec("command_timeout", _number(7 * 86400), 60.0, "seconds a remote command may run", from_env=_env_float),
    SettingSpec("env", _env_map, {}, "environment variables for jobs (merged: defaults, then node)"),
    SettingSpec("accelerator", _choice("auto", "ascend", "none"), "auto", "ascend: NPU checks fail without Ascend tools; auto: they are skipped; none: never run", from_env=str),
    SettingSpec("python", _str, "python3", "the job's Python interpreter on the node (versions check, launchers)", from_env=str),
    SettingSpec("preflight", _preflight, PreflightConfig(), "preflight thresholds: min_mtu, max_clock_skew, master_port, ...", per_node=False),
    SettingSpec("fanout", _int_range(1, 4096), 64, "nodes contacted at once", per_node=False, from_env=_env_int),
    SettingSpec("connect_retries", _int_range(0, 20), 3, "retries after a transient connect failure", per_node=False, from_env=_env_int),
    SettingSpec("ssh_config", _str, "~/.ssh/config", "OpenSSH client config consulted for HostName, User, Port, IdentityFile, ProxyJump, host-key files and names (default: then /etc/ssh/ssh_config too; Include followed)", per_node=False, from_env=str),
    # Rank-table inputs (ascendctl render): per-device values are lists in device-id order.
    SettingSpec("device_ips", _str_list, None, "device (NPU NIC) IPs in device-id order; default: ask the node (hccn_tool, /etc/hccn.conf)", node_only=True),
    SettingSpec("host_ip", _opt_str, None, "host IP written to the rank table as host_ip (A3)", node_only=True),
    SettingSpec("device_port", _port_or_ports, None, "rank table device_port: one port, or a list per device id", from_env=_env_int),
    SettingSpec("host_port", _port_or_ports, None, "rank table host_port (A3): one port, or a list per device id", from_env=_env_int),
    SettingSpec("backup_device_ips", _str_list, None, "rank table v1.2 backup_device_ip per device id", node_only=True),
    SettingSpec("backup_device_port", _port_or_ports, None, "rank table v1.2 backup_device_port: one port, or a list per device id", from_env=_env_int),
    SettingSpec("super_pod_id", _id_str, None, "rank table v1.2 super pod of this node; default: ask the node (npu-smi spod-info)"),
    SettingSpec("super_device_ids", _int_list, None, "rank table v1.2 super_device_id per device id; default: ask the node (npu-smi spod-info SDID)", node_only=True),
)

SETTINGS_BY_NAME: dict[str, SettingSpec] = {spec.name: spec for spec in SETTINGS}
DEFAULTS: dict[str, Any] = {spec.name: spec.default for spec in SETTINGS}  # the only place a setting's default is written
NODE_SETTINGS: tuple[str, ...] = tuple(spec.name for spec in SETTINGS if spec.per_node)
CLUSTER_SETTINGS: tuple[str, ...] = tuple(spec.name for spec in SETTINGS if not spec.per_node)
NODE_ONLY_SETTINGS: tuple[str, ...] = tuple(spec.name for spec in SETTINGS if spec.node_only)
DEFAULTS_SETTINGS: tuple[str, ...] = tuple(spec.name for spec in SETTINGS if not spec.node_only)  # allowed under `defaults:`
# Seconds a followed node (`launch`, `logs -f`) may send nothing at all, not even its follower's heartbeat, before it is
# lost: a quiet job still sends heartbeats, so only a node that went dark (link down, host frozen) reaches it.
# `--silence-limit` overrides it; here only, so the flag's default and the library's are one value.
DEFAULT_SILENCE_LIMIT = 60.0
MIN_SILENCE_LIMIT = 3.0  # the follower's heartbeat counts whole seconds

MERGED_SETTINGS = frozenset({"env"})  # mappings merged across levels instead of replaced


def env_var_name(setting: str) -> str:
    """Environment variable that overrides `setting`."""
    return "ASCENDCTL_" + setting.upper()


def resolve_settings(
    names: tuple[str, ...],
    *,
    defaults: Mapping[str, Any],
    node: Mapping[str, Any] | None = None,
    environ: Mapping[str, Any] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> dict[str, Resolved]:
    """Resolve each named setting through the precedence chain, recording the winning source.

    Values must already be validated; `environ` holds values parsed from ASCENDCTL_* variables.
    """
    layers: tuple[tuple[str, Mapping[str, Any]], ...] = (
        ("inventory", defaults),
        ("node", node or {}),
        ("env", environ or {}),
        ("flag", flags or {}),
    )
    resolved: dict[str, Resolved] = {}
    for name in names:
        current = Resolved(SETTINGS_BY_NAME[name].default, "default")
        for source, layer in layers:
            if name not in layer or layer[name] is None and source in ("env", "flag"):
                continue
            if name in MERGED_SETTINGS:
                merged = {**current.value, **layer[name]}
                current = Resolved(merged, source)
            else:
                current = Resolved(layer[name], source)
        resolved[name] = current
    return resolved
