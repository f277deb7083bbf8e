"""The launchers ascendctl starts (msrun, torchrun): every fact about them, and nowhere else.

One frozen LauncherSpec per launcher: its name, the package that installs it, its default rendezvous port,
where its binary is on a node, its command line, the variables it needs, the prefix it puts on its workers'
lines and the regex that reads a rank back from its output, whether it takes a c10d rendezvous, and what may
come first after `--` instead of a script file. `LAUNCHERS` maps name -> spec (in the order help text lists
them); `launcher_spec` looks one up and refuses an unknown name with a UsageError.

A foundation module: it imports only ascendctl.errors and the standard library (a node is anything with a
`python`, so inventory.load is not imported even for its annotations).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Protocol

from ascendctl.errors import UsageError

DEFAULT_HCCL_CONNECT_TIMEOUT = 1200  # HCCL's own default (120 s) is too short for hundreds of nodes starting together
DEFAULT_CLUSTER_TIMEOUT = 600  # msrun --cluster_time_out: seconds its scheduler waits for every worker to register
MASTER_PORT_ENV = "MASTER_PORT"  # the rendezvous port, as every launcher (and `render env` without one) exports it
HCCL_CONNECT_TIMEOUT_ENV = "HCCL_CONNECT_TIMEOUT"
# torchrun puts this template before each worker line (role, local rank, global rank), so triage can attribute a
# line without a job record; set through the variable torchelastic reads it from
TORCHRUN_LINE_PREFIX_ENV = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"
TORCHRUN_LINE_PREFIX = "[${role_name}${local_rank}]:[rank${rank}]:"


class HasPython(Protocol):
    """What a launcher's binary is found from: a node's interpreter (inventory.load.Node is one)."""

    @property
    def python(self) -> str: ...


@dataclass(frozen=True, slots=True)
class LauncherArgs:
    """What one node's launcher command line says besides the script: the job's geometry and this node's place in it."""

    nodes: int  # nodes in the job
    nproc: int  # workers on each node
    node_rank: int
    master_addr: str
    port: int
    worker_log_dir: str  # where the launcher writes its workers' logs on the node
    job_id: str
    rdzv: bool = False  # a c10d rendezvous instead of static node ranks (launchers that take one)
    cluster_timeout: int = DEFAULT_CLUSTER_TIMEOUT  # msrun --cluster_time_out


@dataclass(frozen=True, slots=True)
class LineOrigin:
    """Who printed a line, as a launcher's own text says: the global rank, and the local rank when it gives one."""

    rank: int
    local_rank: int | None = None


@dataclass(frozen=True, slots=True)
class LauncherSpec:
    """Everything ascendctl knows about one launcher."""

    name: str  # as `--launcher` takes it, and the binary's name
    package: str  # what to install on a node to have the binary (preflight's hint names it)
    default_port: int  # MASTER_PORT when --master-port is not given
    options: Callable[[LauncherArgs], list[str]]  # the launcher's own options for one node (after the binary, before the script)
    env: tuple[tuple[str, str], ...]  # variables set for this launcher only (after the common ones: see launch_env)
    line_prefix: str | None  # the prefix the launcher puts before every worker line (a template); None: it adds none
    line_rx: re.Pattern[str]  # reads `rank` (and `local_rank` where given) from a line of the launcher's output
    rendezvous: bool  # takes --rdzv: ranks are then given out at start, so no node's first rank is known beforehand
    run_modes: tuple[str, ...] = ()  # what may come first after `--` in place of a script file (`-m module`, ...)
    # logs the launcher's own processes write on the master node (under the workers' log dir) that a failed job's
    # verdict must read: what they say is never printed on the launcher's output (msrun's scheduler names the node that
    # timed out only in scheduler.log)
    master_logs: tuple[str, ...] = ()

    def binary(self, node: HasPython) -> str:
        """The launcher next to the node's python when that is an absolute path, else the one on PATH."""
        if node.python.startswith("/") and "/" in node.python:
            return f"{node.python.rsplit('/', 1)[0]}/{self.name}"
        return self.name

    def argv(self, node: HasPython, args: LauncherArgs, script: tuple[str, ...] | list[str] = ()) -> list[str]:
        """The node's launcher command line, word by word (not quoted)."""
        return [self.binary(node), *self.options(args), *script]

    def first_rank(self, node_rank: int, nproc: int, *, rdzv: bool) -> int | None:
        """The global rank of a node's local rank 0; None when a rendezvous gives ranks out at start."""
        return None if rdzv and self.rendezvous else node_rank * nproc

    def read_line(self, line: str) -> LineOrigin | None:
        """The rank a line of this launcher's output names (see `line_rx`), or None when it names none."""
        found = self.line_rx.search(line)
        if found is None:
            return None
        local = found.groupdict().get("local_rank")
        return LineOrigin(int(found.group("rank")), int(local) if local is not None else None)


def _msrun_options(a: LauncherArgs) -> list[str]:
    return [f"--worker_num={a.nodes * a.nproc}", f"--local_worker_num={a.nproc}", f"--master_addr={a.master_addr}",
            f"--master_port={a.port}", f"--node_rank={a.node_rank}", f"--log_dir={a.worker_log_dir}", "--join=True",
            f"--cluster_time_out={a.cluster_timeout}"]


def _torchrun_options(a: LauncherArgs) -> list[str]:
    if a.rdzv:
        args = [f"--nnodes={a.nodes}", f"--nproc-per-node={a.nproc}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={a.master_addr}:{a.port}", f"--rdzv-id={a.job_id}"]
    else:
        args = [f"--nnodes={a.nodes}", f"--nproc-per-node={a.nproc}", f"--node-rank={a.node_rank}",
                f"--master-addr={a.master_addr}", f"--master-port={a.port}"]
    # per-rank log files (and torchrun's error files) under the node's directory, and every line on the console too
    return args + [f"--log-dir={a.worker_log_dir}", "--tee=3"]


MSRUN = LauncherSpec(
    name="msrun",
    package="MindSpore",
    default_port=8118,
    options=_msrun_options,
    env=(),
    # msrun puts no prefix on its workers' lines (each worker has its own log file, worker_<rank>.log under
    # --log_dir); its own line starting a worker names the rank and that file
    line_prefix=None,
    line_rx=re.compile(r"Start worker process with rank id:(?P<rank>\d+), log file:(?P<log>\S+?)\.?(?:\s|$)"),
    rendezvous=False,
    master_logs=("scheduler.log",),  # the scheduler (node rank 0's msrun starts it) logs heartbeat timeouts there
)

TORCHRUN = LauncherSpec(
    name="torchrun",
    package="torch",
    default_port=29500,
    options=_torchrun_options,
    env=((TORCHRUN_LINE_PREFIX_ENV, TORCHRUN_LINE_PREFIX),),
    line_prefix=TORCHRUN_LINE_PREFIX,  # e.g. `[default3]:[rank11]:` (role name, local rank, global rank)
    line_rx=re.compile(r"^\[(?P<role>[^\]]*?)(?P<local_rank>\d+)\]:\[rank(?P<rank>\d+)\]:"),
    rendezvous=True,
    run_modes=("-m", "--module", "--no-python", "--no_python"),  # torchrun's ways to say what runs instead of a script file
)

LAUNCHERS: Mapping[str, LauncherSpec] = MappingProxyType({spec.name: spec for spec in (MSRUN, TORCHRUN)})
LAUNCHER_NAMES: tuple[str, ...] = tuple(LAUNCHERS)
DEFAULT_MASTER_PORT = TORCHRUN.default_port  # without a launcher (`render env`): torch's default


def launcher_spec(name: str) -> LauncherSpec:
    """The spec of the launcher called `name`; UsageError naming the ones there are for any other."""
    spec = LAUNCHERS.get(name)
    if spec is None:
        raise UsageError(f"--launcher {name!r}: expected one of {', '.join(LAUNCHERS)}")
    return spec


def master_port(launcher: str | None, port: int | None = None) -> int:
    """The rendezvous port: the one given, else the launcher's default (torch's without a known launcher)."""
    spec = LAUNCHERS.get(launcher or "")
    return port or (spec.default_port if spec is not None else DEFAULT_MASTER_PORT)


def launch_env(launcher: str | None, *, port: int | None = None,
               hccl_connect_timeout: int = DEFAULT_HCCL_CONNECT_TIMEOUT) -> tuple[tuple[str, str], ...]:
    """The variables every launcher's job needs, in export order: the rendezvous port and HCCL's connect timeout."""
    return ((MASTER_PORT_ENV, str(master_port(launcher, port))), (HCCL_CONNECT_TIMEOUT_ENV, str(hccl_connect_timeout)))


def launcher_binary(node: HasPython, launcher: str) -> str:
    """The binary of `launcher` on `node` (LauncherSpec.binary); UsageError for an unknown launcher."""
    return launcher_spec(launcher).binary(node)


def default_ports_help() -> str:
    """`8118 (msrun), 29500 (torchrun)`: the default ports, for help text."""
    return ", ".join(f"{spec.default_port} ({spec.name})" for spec in LAUNCHERS.values())
