"""The one environment builder: what a node's training processes get, for `launch`, `launch --dry-run` and `render env`.

Values are plain strings built from the node's cluster endpoint (network.py), the master's endpoint,
the launcher, the rank table and the inventory; quoting happens only when they are written as shell.
The launchers' facts (default master ports, HCCL_CONNECT_TIMEOUT, torchrun's line prefix) come from launchers.py.
Must not import typer or rich.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ascendctl.errors import UsageError
from ascendctl.launchers import LAUNCHERS, DEFAULT_HCCL_CONNECT_TIMEOUT, launch_env
from ascendctl.redact import REDACTED, is_secret_name, redact_value

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node
    from ascendctl.facts.endpoint import Endpoint

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_env_name(name: str, where: str) -> None:
    """Raise UsageError unless `name` is a valid shell variable name."""
    if not _NAME_RE.match(name):
        raise UsageError(f"{where}: invalid environment variable name {name!r} (expected [A-Za-z_][A-Za-z0-9_]*)")


def parse_env_assignments(items: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """`NAME=VALUE` strings to pairs; a bare `NAME` takes its value from our own environment (`environ`), so a
    secret need not be typed on the command line (where `ps` and shell history see it). A bad name, or a bare
    name that is not set, is a usage error that names it."""
    source = os.environ if environ is None else environ
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        check_env_name(name, f"--env {item!r}")
        if not sep:
            if name not in source:
                raise UsageError(f"--env {name}: {name} is not set in this environment (use NAME=VALUE, or export {name} first)")
            value = source[name]
        pairs.append((name, value))
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class NodeEnvironment:
    """One node's environment, in export order (later wins), with plain values; `path_prepend` goes before $PATH,
    `python_path_prepend` (launch: the job's stacks hook, docs/stacks.md) before $PYTHONPATH, which may be unset."""

    node: str
    host: str
    values: tuple[tuple[str, str], ...]
    path_prepend: str | None = None
    python_path_prepend: str | None = None

    def shell_lines(self, *, redact: bool = False) -> list[str]:
        """`NAME=value` lines with values quoted for sh (secrets replaced when `redact`)."""
        lines = []
        for name, value in self.values:
            shown = REDACTED if redact and is_secret_name(name) else (redact_value(value) if redact else value)
            lines.append(f"{name}={shlex.quote(shown)}")
        if self.python_path_prepend is not None:  # no trailing `:` when unset: an empty entry would add the cwd
            lines.append(f'PYTHONPATH={shlex.quote(self.python_path_prepend)}${{PYTHONPATH:+:"$PYTHONPATH"}}')
        if self.path_prepend is not None:
            lines.append(f'PATH={shlex.quote(self.path_prepend)}:"$PATH"')
        return lines

    def exports(self, *, redact: bool = False) -> str:
        """The environment as `export NAME=value` lines for sh."""
        return "".join(f"export {line}\n" for line in self.shell_lines(redact=redact))

    def to_dict(self, *, redact: bool = True) -> dict[str, Any]:
        env = {name: (REDACTED if redact and is_secret_name(name) else value) for name, value in self.values}
        if self.python_path_prepend is not None:
            env["PYTHONPATH"] = f"{self.python_path_prepend}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else \
                f"{self.python_path_prepend}${{PYTHONPATH:+:$PYTHONPATH}}"
        if self.path_prepend is not None:
            env["PATH"] = f"{self.path_prepend}:$PATH"
        return {"name": self.node, "host": self.host, "env": env}


def node_environment(
    node: Node,
    endpoint: Endpoint,
    master: Endpoint,
    *,
    launcher: str | None = None,
    port: int | None = None,
    rank_table: str | None = None,
    hccl_connect_timeout: int = DEFAULT_HCCL_CONNECT_TIMEOUT,
    extra: Sequence[tuple[str, str]] = (),
    unbuffered: bool = False,
    stacks_hook: str | None = None,
    flight_recorder: str | None = None,
) -> NodeEnvironment:
    """Everything a node's training processes get: cluster address and interface, master, rank table, the inventory's
    `env`, `--env`, and the job's interpreter first on PATH (msrun starts workers with the first python on PATH).

    `unbuffered` (launch's default) sets PYTHONUNBUFFERED=1 for the launcher and, by inheritance, every worker: their
    stdout is a pipe, which Python block-buffers, so step lines would reach `logs -f` in 8 KiB bursts, out of order
    with stderr, and after a rank's exit (what `srun -u` is for). The inventory's `env` and `--env` may still set it.

    `stacks_hook` (launch only: the node's job directory has it) is the directory of the sitecustomize.py that lets
    `ascendctl stacks` take every rank's stack; it goes first on PYTHONPATH, before whatever PYTHONPATH is set.

    `flight_recorder` (launch --flight-recorder: the node's stacks/live directory) turns on torch's Flight Recorder
    (flight_recorder_env) before the inventory's `env` and `--env`, which may still change its variables."""
    env: dict[str, str] = {"HCCL_IF_IP": endpoint.ip}
    if endpoint.ifname:
        for name in ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            env[name] = endpoint.ifname
    env["MASTER_ADDR"] = master.ip
    env.update(launch_env(launcher, port=port, hccl_connect_timeout=hccl_connect_timeout))
    if rank_table:  # relative to where ascendctl runs (a shared filesystem), never to the launcher's directory
        env["RANK_TABLE_FILE"] = str(Path(rank_table).absolute())
    spec = LAUNCHERS.get(launcher or "")
    if spec is not None:  # the launcher's own variables (torchrun: its line-prefix template)
        env.update(spec.env)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    if flight_recorder:
        env.update(flight_recorder_env(flight_recorder))
    for name, value in node.env.items():
        check_env_name(name, f"{node.name}: env")
        env[name] = str(value)
    for name, value in extra:
        env[name] = value
    prepend = node.python.rsplit("/", 1)[0] if node.python.startswith("/") else None
    return NodeEnvironment(node.name, node.host, tuple(env.items()), prepend, stacks_hook)


FLIGHT_RECORDER_ENTRIES = 2000  # collectives each rank keeps (the size torch's and torchtitan's docs use)


def flight_recorder_env(live_dir: str, entries: int = FLIGHT_RECORDER_ENTRIES) -> dict[str, str]:
    """torch's Flight Recorder for every rank: a ring of `entries` collectives, dumped on request by the stacks hook
    (ASCENDCTL_FLIGHT_RECORDER=1: `ascendctl stacks` gathers it) and, on a watchdog timeout (NCCL, HCCL), by torch
    itself to `<live_dir>/torch-fr-rank-<rank>` (torch appends the global rank to the prefix).

    torch's names are TORCH_FR_*: torch 2.13 still reads the older TORCH_NCCL_TRACE_BUFFER_SIZE and
    TORCH_NCCL_DEBUG_INFO_TEMP_FILE after them, but warns on every rank that they are deprecated, so they are not set
    (a torch old enough to know only those has no recorder to dump from a thread either: `_dump_fr_trace_json`).
    torch_npu's ProcessGroupHCCL reads TORCH_HCCL_* (its tools/flight_recorder docs). The monitoring threads that
    abort a rank (TORCH_*_ENABLE_MONITORING) are left as they are: recording must not change how a job ends."""
    prefix = f"{live_dir}/torch-fr-rank-"
    size = str(entries)
    return {"ASCENDCTL_FLIGHT_RECORDER": "1",
            "TORCH_FR_BUFFER_SIZE": size, "TORCH_FR_DUMP_TEMP_FILE": prefix, "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_HCCL_TRACE_BUFFER_SIZE": size, "TORCH_HCCL_DEBUG_INFO_TEMP_FILE": prefix, "TORCH_HCCL_DUMP_ON_TIMEOUT": "1"}


def env_snippet(envs: Sequence[NodeEnvironment], *, redact: bool = False) -> str:
    """Shell text: one `# node (host)` block of export lines per node."""
    return "\n".join(f"# {e.node} ({e.host})\n{e.exports(redact=redact)}" for e in envs)


def redacted_names(envs: Sequence[NodeEnvironment]) -> list[str]:
    """The variables a redacted rendering hides, for saying so."""
    return sorted({name for e in envs for name, _ in e.values if is_secret_name(name)})
