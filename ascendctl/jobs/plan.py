"""A job plan: per node the exact launcher command line and environment. Pure: `--dry-run` prints what a run starts.

The node's environment comes from environment.node_environment and its cluster address from
network.cluster_endpoint: the same answer a `render env` gives. Must not import typer or rich.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Mapping

from ascendctl.jobs.environment import node_environment, parse_env_assignments
from ascendctl.errors import UsageError
from ascendctl.launchers import DEFAULT_CLUSTER_TIMEOUT, LauncherArgs, launcher_spec, master_port
from ascendctl.facts.endpoint import Endpoint
from ascendctl.paths import child, current_user
from ascendctl.inventory.settings import DEFAULT_SILENCE_LIMIT
from ascendctl.stacks.hook import LIVE_DIR, STACKS_DIR, hook_dir

if TYPE_CHECKING:
    from ascendctl.jobs.supervise import HangPolicy
    from ascendctl.jobs.environment import NodeEnvironment
    from ascendctl.inventory.load import Inventory, Node

DEFAULT_GRACE = 10.0
DRY_RUN_JOB_ID = "dry-run"


@dataclass(frozen=True, slots=True)
class LaunchOptions:
    """What the user asked for; everything not given is derived from the inventory."""

    launcher: str
    script: tuple[str, ...]
    nproc_per_node: int | None = None
    master_addr: str | None = None
    master_port: int | None = None
    log_dir: str | None = None  # the job's log directory on every node; default <preflight.log_dir>/ascendctl/<job>
    env: tuple[str, ...] = ()  # K=V, as given on the command line
    rank_table: str | None = None
    rdzv: bool = False  # torchrun c10d rendezvous instead of static ranks
    cluster_timeout: int = DEFAULT_CLUSTER_TIMEOUT  # msrun --cluster_time_out
    grace: float = DEFAULT_GRACE
    buffered: bool = False  # leave Python's stdout buffering alone (default: PYTHONUNBUFFERED=1, lines stream as printed)
    silence_limit: float = DEFAULT_SILENCE_LIMIT  # a followed node silent this long (not even a heartbeat) is lost
    hang: HangPolicy | None = None  # --hang-timeout/--on-hang/--progress: when a job that runs on is hung, and what then
    flight_recorder: bool = False  # --flight-recorder: torch's Flight Recorder on every rank, dumped by `stacks`


@dataclass(frozen=True, slots=True)
class NodePlan:
    """One node's part of the plan: the exact launcher command and its environment."""

    name: str
    host: str
    rank: int  # node rank
    workers: int
    command: str  # launcher command line, every word shell-quoted
    environment: NodeEnvironment
    dir: str  # this node's directory under the job's log dir: launcher.log, exit_code, pid, workers/
    first_rank: int | None  # global rank of its local rank 0 (None with a rendezvous)
    endpoint: Endpoint

    @property
    def log(self) -> str:
        return f"{self.dir}/launcher.log"

    @property
    def worker_log_dir(self) -> str:
        return f"{self.dir}/workers"


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """Every node's launcher, in inventory order (node rank = inventory index)."""

    job_id: str
    launcher: str
    script: tuple[str, ...]
    master_addr: str
    master_port: int
    log_dir: str
    grace: float
    nodes: tuple[NodePlan, ...]

    @property
    def world_size(self) -> int:
        return sum(node.workers for node in self.nodes)


def default_log_dir(inventory: Inventory, job_id: str) -> str:
    """`<preflight.log_dir>/ascendctl-<user>/<job>`, the same path on every node.

    Per user: a shared `/tmp/ascendctl` belonged to whoever launched first, and every other user's launch failed
    with `Permission denied` on it. The user is the one the nodes are reached as (the master's `user`), else ours.
    """
    return f"{inventory.preflight.log_dir.rstrip('/')}/ascendctl-{_safe_user(inventory.master.user)}/{job_id}"


def _safe_user(user: str | None) -> str:
    user = user or current_user()
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in user) or "user"


def launcher_command(options: LaunchOptions, node: Node, *, nodes: int, nproc: int, master_addr: str, port: int,
                     job_id: str, node_dir: str) -> str:
    """The launcher command line for one node (every word quoted); the launcher's spec builds it."""
    args = LauncherArgs(nodes=nodes, nproc=nproc, node_rank=node.index, master_addr=master_addr, port=port,
                        worker_log_dir=f"{node_dir}/workers", job_id=job_id, rdzv=options.rdzv,
                        cluster_timeout=options.cluster_timeout)
    return shlex.join(launcher_spec(options.launcher).argv(node, args, options.script))


def check_script_first(options: LaunchOptions) -> None:
    """The words after `--` are the script and its arguments: a launcher option there would land on the launcher's
    command line unseen by ascendctl (which sets --nnodes, --node-rank, ... itself), and be recorded as the script.
    A launcher's run modes (torchrun's `-m module`, ...) may come first: they say what runs instead of a script file."""
    first = options.script[0]
    if not first.startswith("-") or first in launcher_spec(options.launcher).run_modes:
        return
    raise UsageError(f"{first!r} after -- would be the training script: the script comes first after --, its own "
                     f"arguments after it; {options.launcher}'s options are set by ascendctl",
                     hint="ascendctl launch --launcher torchrun --nproc-per-node 8 -- train.py --epochs 3 "
                     "(launch --help lists the launcher settings it takes: --nproc-per-node, --master-port, --rdzv, "
                     "--cluster-timeout, ...)")


def build_plan(inventory: Inventory, options: LaunchOptions, *, job_id: str, endpoints: Mapping[str, Endpoint]) -> LaunchPlan:
    """Per-node commands and environments; `endpoints` are the nodes' cluster endpoints (network.resolve_endpoints)."""
    spec = launcher_spec(options.launcher)  # UsageError for a launcher we do not start
    if not options.script:
        raise UsageError("no script given", hint="ascendctl launch --launcher msrun -- train.py [ARGS...]")
    check_script_first(options)
    if not inventory.nodes:
        raise UsageError(f"{inventory.source}: no nodes")
    extra = parse_env_assignments(options.env)
    master = inventory.master
    master_endpoint = endpoints[master.name]
    if options.master_addr:
        master_endpoint = Endpoint(master.name, None, options.master_addr, "--master-addr")
    nproc = options.nproc_per_node or master.slots
    port = master_port(options.launcher, options.master_port)
    log_dir = (options.log_dir or default_log_dir(inventory, job_id)).rstrip("/") or "/"
    nodes = []
    for node in inventory.nodes:
        node_dir = str(child(PurePosixPath(log_dir), node.name))
        command = launcher_command(options, node, nodes=len(inventory.nodes), nproc=nproc, master_addr=master_endpoint.ip,
                                   port=port, job_id=job_id, node_dir=node_dir)
        environment = node_environment(node, endpoints[node.name], master_endpoint, launcher=options.launcher, port=port,
                                       rank_table=options.rank_table, extra=extra, unbuffered=not options.buffered,
                                       stacks_hook=hook_dir(node_dir),  # `ascendctl stacks` (docs/stacks.md)
                                       flight_recorder=f"{node_dir}/{STACKS_DIR}/{LIVE_DIR}" if options.flight_recorder else None)
        first_rank = spec.first_rank(node.index, nproc, rdzv=options.rdzv)
        nodes.append(NodePlan(node.name, node.host, node.index, nproc, command, environment, node_dir, first_rank,
                              endpoints[node.name]))
    return LaunchPlan(job_id, options.launcher, options.script, master_endpoint.ip, port, log_dir, options.grace, tuple(nodes))


def plan_to_dict(plan: LaunchPlan) -> dict[str, Any]:
    """The dry-run as data (`launch --dry-run --json`): the same facts as render_plan, secrets redacted."""
    return {
        "job_id": plan.job_id, "launcher": plan.launcher, "script": list(plan.script), "master_addr": plan.master_addr,
        "master_port": plan.master_port, "log_dir": plan.log_dir, "world_size": plan.world_size,
        "nodes": [{"name": n.name, "host": n.host, "node_rank": n.rank, "workers": n.workers, "first_rank": n.first_rank,
                   "log": n.log, "cluster_address": n.endpoint.ip, "address_source": n.endpoint.source,
                   "command": n.command, "env": n.environment.to_dict(redact=True)["env"]} for n in plan.nodes],
    }


def render_plan(plan: LaunchPlan) -> str:
    """The dry-run text: per node the exact command line and environment (secrets redacted)."""
    lines = [
        f"launcher: {plan.launcher}",
        f"nodes: {len(plan.nodes)}, workers: {plan.world_size}",
        f"master: {plan.master_addr}:{plan.master_port}",
        f"log dir: {plan.log_dir}",
    ]
    for node in plan.nodes:
        lines += ["", f"[{node.name}] node rank {node.rank}, host {node.host}, {node.workers} workers, log {node.log}",
                  f"  cluster address: {node.endpoint.ip} via {node.endpoint.source}"]
        lines += [f"  {line}" for line in node.environment.shell_lines(redact=True)]
        lines.append(f"  {node.command}")
    return "\n".join(lines) + "\n"
