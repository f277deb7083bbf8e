"""`ascendctl launch`: build a per-node launch plan (pure), start it detached on every node, follow it, tear it down.

Every remote action is a shell string from a pure builder here (`start_command`, `follow_command`,
`teardown_command`, ...). Each node's launcher runs under `setsid` in its own session, with the
job marker `ASCENDCTL_JOB=<job>/<node>` in its environment: msrun and torchrun start their workers
in new sessions too, so teardown finds every process of the job by that marker, not by group.
Must not import typer or rich.
"""

from __future__ import annotations

import logging
import queue
import re
import shlex
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .errors import AscendctlError, ExitCode, Interrupted, TransportError, UsageError
from .fanout import fanout
from .inventory import Inventory, Node
from .jobs import JobRecord, NodeJob, load_job, new_job_id, save_job
from .outcome import Outcome, exit_code_for
from .transport import Transport, TransportFactory
from .triage.times import parse_utc_offset

if TYPE_CHECKING:
    from .triage import TriageReport

log = logging.getLogger(__name__)

LAUNCHERS = ("msrun", "torchrun")
DEFAULT_PORTS = {"msrun": 8118, "torchrun": 29500}
DEFAULT_GRACE = 10.0
DEFAULT_CLUSTER_TIMEOUT = 600
JOB_MARKER = "ASCENDCTL_JOB"
EXIT_TAG = "ascendctl-exit:"
DRY_RUN_JOB_ID = "dry-run"
SECRET_WORDS = ("TOKEN", "KEY", "PASSWORD", "SECRET", "CREDENTIAL")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

LineSink = Callable[[str, str], None]  # (node name, one line of output without the newline)
NoticeSink = Callable[[str], None]


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


@dataclass(frozen=True, slots=True)
class NodePlan:
    """One node's part of the plan: the exact launcher command and its environment."""

    name: str
    host: str
    rank: int
    workers: int
    command: str  # launcher command line, every word shell-quoted
    env: tuple[tuple[str, str], ...]  # (name, shell expression of the value: quoted, or 'dir:"$PATH"')
    dir: str  # this node's directory under the job's log dir: launcher.log, exit_code, pid, workers/
    first_rank: int | None = None  # global rank of local rank 0 (None with a rendezvous)
    address: str | None = None  # the cluster address the job uses on this node

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


@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    """How a launch (or a follow of a detached job) ended."""

    record: JobRecord
    interrupted: bool = False
    detached: bool = False
    verdict: "TriageReport | None" = None  # the triage engine's answer when the job failed

    @property
    def exit_code(self) -> ExitCode:
        """130 interrupted; 4 a node was lost; 5 the job ran and failed; 0 it succeeded (or started, detached)."""
        if self.interrupted:
            return exit_code_for([Outcome.INTERRUPTED])
        return exit_code_for(job_outcomes(self.record, started_only=self.detached))


def job_outcomes(record: JobRecord, *, started_only: bool = False) -> list[Outcome]:
    """A job's outcomes: each node lost, and the job's own end (failed, interrupted, stopped) unless only its start counts."""
    outcomes = [Outcome.UNREACHABLE for n in record.nodes if n.error and n.error.startswith(("unreachable", "lost track"))]
    if any(n.error and n.error.startswith("not started") for n in record.nodes):
        outcomes.append(Outcome.FAILED)
    if not started_only:
        outcomes.append({"failed": Outcome.JOB_FAILED, "interrupted": Outcome.INTERRUPTED}.get(record.status, Outcome.OK))
    return outcomes


class LaunchRefused(AscendctlError):
    """Preflight or the start on some node failed, so nothing (more) was started."""


# -- plan (pure) ------------------------------------------------------------------------------
def parse_env_assignments(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`K=V` strings to pairs; a bad name is a usage error that names it."""
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--env {item!r}: expected NAME=VALUE")
        check_env_name(name, f"--env {item!r}")
        pairs.append((name, value))
    return tuple(pairs)


def check_env_name(name: str, where: str) -> None:
    """Raise UsageError unless `name` is a valid shell variable name."""
    if not _NAME_RE.match(name):
        raise UsageError(f"{where}: invalid environment variable name {name!r} (expected [A-Za-z_][A-Za-z0-9_]*)")


def launcher_binary(node: Node, launcher: str) -> str:
    """The launcher next to the node's python when that is an absolute path, else the one on PATH."""
    if node.python.startswith("/") and "/" in node.python:
        return f"{node.python.rsplit('/', 1)[0]}/{launcher}"
    return launcher


def default_log_dir(inventory: Inventory, job_id: str) -> str:
    return f"{inventory.preflight.log_dir.rstrip('/')}/ascendctl/{job_id}"


def launcher_command(options: LaunchOptions, plan_args: Mapping[str, Any], node: Node, node_dir: str) -> str:
    """The launcher command line for one node (every word quoted)."""
    binary = launcher_binary(node, options.launcher)
    nodes, nproc, rank = plan_args["nodes"], plan_args["nproc"], node.index
    addr, port = plan_args["master_addr"], plan_args["master_port"]
    if options.launcher == "msrun":
        args = [binary, f"--worker_num={nodes * nproc}", f"--local_worker_num={nproc}", f"--master_addr={addr}",
                f"--master_port={port}", f"--node_rank={rank}", f"--log_dir={node_dir}/workers", "--join=True",
                f"--cluster_time_out={options.cluster_timeout}"]
    elif options.rdzv:
        args = [binary, f"--nnodes={nodes}", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={addr}:{port}", f"--rdzv-id={plan_args['job_id']}"]
    else:
        args = [binary, f"--nnodes={nodes}", f"--nproc-per-node={nproc}", f"--node-rank={rank}",
                f"--master-addr={addr}", f"--master-port={port}"]
    if options.launcher == "torchrun":
        # per-rank log files (and torchrun's error files) under the node's directory, and every line on the console too
        args += [f"--log-dir={node_dir}/workers", "--tee=3"]
    return shlex.join([*args, *options.script])


def node_env(node: Node, options: LaunchOptions, address: str, extra: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The node's exported variables in order; later ones win. Values are shell expressions."""
    env: dict[str, str] = {"HCCL_IF_IP": shlex.quote(address)}
    if options.launcher == "torchrun":
        # each console line says its local and global rank: triage attributes lines without a job record too
        env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = shlex.quote("[${role_name}${local_rank}]:[rank${rank}]:")
    if node.interface:
        for name in ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            env[name] = shlex.quote(node.interface)
    if options.rank_table:
        env["RANK_TABLE_FILE"] = shlex.quote(options.rank_table)
    for name, value in node.env.items():
        check_env_name(name, f"{node.name}: env")
        env[name] = shlex.quote(str(value))
    for name, value in extra:
        env[name] = shlex.quote(value)
    if node.python.startswith("/"):
        # msrun starts its workers with the first python on PATH: make it the job's interpreter.
        env["PATH"] = shlex.quote(node.python.rsplit("/", 1)[0]) + ':"$PATH"'
    return tuple(env.items())


def build_plan(
    inventory: Inventory,
    options: LaunchOptions,
    *,
    job_id: str,
    addresses: Mapping[str, str] | None = None,
) -> LaunchPlan:
    """Per-node commands and environments; `addresses` are cluster-interface addresses by node name."""
    if options.launcher not in LAUNCHERS:
        raise UsageError(f"--launcher {options.launcher!r}: expected one of {', '.join(LAUNCHERS)}")
    if not options.script:
        raise UsageError("no script given", hint="ascendctl launch --launcher msrun -- train.py [ARGS...]")
    if not inventory.nodes:
        raise UsageError(f"{inventory.source}: no nodes")
    extra = parse_env_assignments(options.env)
    known = dict(addresses or {})

    def address(node: Node) -> str:
        return known.get(node.name) or node.host_ip or node.host

    master = inventory.master
    nproc = options.nproc_per_node or master.slots
    master_addr = options.master_addr or address(master)
    master_port = options.master_port or DEFAULT_PORTS[options.launcher]
    log_dir = (options.log_dir or default_log_dir(inventory, job_id)).rstrip("/") or "/"
    plan_args = {"nodes": len(inventory.nodes), "nproc": nproc, "master_addr": master_addr, "master_port": master_port,
                 "job_id": job_id}
    nodes = []
    for node in inventory.nodes:
        node_dir = f"{log_dir}/{node.name}"
        nodes.append(NodePlan(node.name, node.host, node.index, nproc, launcher_command(options, plan_args, node, node_dir),
                              node_env(node, options, address(node), extra), node_dir,
                              None if options.rdzv and options.launcher == "torchrun" else node.index * nproc, address(node)))
    return LaunchPlan(job_id, options.launcher, options.script, master_addr, master_port, log_dir, options.grace, tuple(nodes))


def render_plan(plan: LaunchPlan) -> str:
    """The dry-run text: per node the exact command line and environment."""
    lines = [
        f"launcher: {plan.launcher}",
        f"nodes: {len(plan.nodes)}, workers: {plan.world_size}",
        f"master: {plan.master_addr}:{plan.master_port}",
        f"log dir: {plan.log_dir}",
    ]
    for node in plan.nodes:
        lines += ["", f"[{node.name}] node rank {node.rank}, host {node.host}, {node.workers} workers, log {node.log}"]
        lines += [f"  {name}={value}" for name, value in node.env]
        lines.append(f"  {node.command}")
    return "\n".join(lines) + "\n"


def recorded_env(env: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The environment as a job record keeps it: plain values, secrets redacted."""
    plain = {}
    for name, value in env:
        secret = any(word in name.upper() for word in SECRET_WORDS)
        plain[name] = "<redacted>" if secret else " ".join(shlex.split(value))
    return plain


# -- remote commands (pure) -------------------------------------------------------------------
def marker(job_id: str, node: str) -> str:
    return f"{JOB_MARKER}={job_id}/{node}"


def stamper_script() -> str:
    """The node-side line stamper (ascendctl/sh/stamp_lines.sh): the node's time in front of every launcher line."""
    from importlib.resources import files

    return (files("ascendctl") / "sh" / "stamp_lines.sh").read_text(encoding="utf-8")


def wrapper_script(node: NodePlan) -> str:
    """What runs under setsid on the node: exports, the launcher into a stamper into its log, then its exit status.

    The launcher writes into a FIFO read by the stamper (bash; plain `cat` when a node has no bash), so the
    launcher itself runs in this shell, whose TERM handler keeps it alive to record the exit status.
    """
    q = shlex.quote
    exports = "".join(f"export {name}={value}\n" for name, value in node.env)
    fifo = q(node.dir + "/.launcher.out")
    return (
        f"echo $$ > {q(node.dir + '/pid')}\n"
        # A handler (not an ignore, which children would inherit) keeps this shell alive to record the status.
        "trap : TERM INT HUP\n"
        f"{exports}"
        f"rm -f {fifo} && mkfifo {fifo} || exit 1\n"
        f"if command -v bash >/dev/null 2>&1; then bash -c {q(stamper_script())} < {fifo} > {q(node.log)} 2>&1 & "
        f"else cat < {fifo} > {q(node.log)} & fi\n"
        "stamper=$!\n"
        f"{node.command} < /dev/null > {fifo} 2>&1\n"
        "rc=$?\n"
        # the stamper ends when the last writer is gone; give it a moment to write the launcher's last lines
        "i=0; while kill -0 $stamper 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\n"
        f"rm -f {fifo}\n"
        f"echo $rc > {q(node.dir + '/exit_code.tmp')} && mv {q(node.dir + '/exit_code.tmp')} {q(node.dir + '/exit_code')}\n"
    )


def start_command(job_id: str, node: NodePlan) -> str:
    """Start the node's launcher detached (own session, stdin from /dev/null); prints its pid and the node's UTC offset."""
    q = shlex.quote
    return (
        f"mkdir -p {q(node.worker_log_dir)} && rm -f {q(node.dir + '/exit_code')} && : > {q(node.log)} && "
        f"{{ env {q(marker(job_id, node.name))} setsid /bin/sh -c {q(wrapper_script(node))} "
        "< /dev/null > /dev/null 2>&1 & echo $! $(date +%z); }"
    )


def follow_command(node_dir: str, pid: int, *, interval: float = 0.2) -> str:
    """Print the launcher log as it grows until the launcher's shell ends, then `ascendctl-exit:<rc> <time>` on stderr.

    Whether the launcher is done is decided before each read, so the last read sees all of its output.
    """
    q = shlex.quote
    log_file, exit_file = q(node_dir + "/launcher.log"), q(node_dir + "/exit_code")
    return (
        "off=0; while :; do "
        f"fin=0; [ -f {exit_file} ] && fin=1; kill -0 {pid} 2>/dev/null || fin=1; "
        f"size=$(stat -c %s {log_file} 2>/dev/null || echo 0); "
        f"if [ \"$size\" -gt \"$off\" ]; then tail -c +$((off+1)) {log_file} | head -c $((size-off)); off=$size; fi; "
        f"[ $fin = 1 ] && break; sleep {interval}; done; "
        f"rc=$(cat {exit_file} 2>/dev/null); t=$(date -r {exit_file} +%s.%N 2>/dev/null); "
        f"echo \"{EXIT_TAG}${{rc:-none}} ${{t:-none}}\" >&2"
    )


def teardown_command(job_id: str, node: str, grace: float) -> str:
    """SIGTERM every process of the job on this node, SIGKILL what is left after `grace`; prints term|kill|none."""
    mark = shlex.quote(marker(job_id, node))
    return (
        f"pids() {{ grep -lzxF {mark} /proc/[0-9]*/environ 2>/dev/null | sed 's|^/proc/\\([0-9]*\\)/environ$|\\1|'; }}; "
        "p=$(pids); [ -z \"$p\" ] && { echo none; exit 0; }; "
        f"kill -TERM $p 2>/dev/null; end=$(( $(date +%s%3N) + {int(grace * 1000)} )); "
        "while [ -n \"$(pids)\" ] && [ \"$(date +%s%3N)\" -lt $end ]; do sleep 0.1; done; "
        "[ -z \"$(pids)\" ] && { echo term; exit 0; }; "
        "for k in 1 2 3 4 5; do p=$(pids); [ -z \"$p\" ] && break; kill -KILL $p 2>/dev/null; sleep 0.05; done; "
        "echo kill; [ -z \"$(pids)\" ]"
    )


def state_command(node_dir: str, pid: int | None) -> str:
    """`exit <rc>`, `running` or `gone` for one node."""
    q = shlex.quote
    alive = f"kill -0 {pid} 2>/dev/null" if pid else "false"
    return (f"if [ -f {q(node_dir + '/exit_code')} ]; then echo \"exit $(cat {q(node_dir + '/exit_code')})\"; "
            f"elif {alive}; then echo running; else echo gone; fi")


def address_command(interface: str) -> str:
    return f"ip -o -4 addr show dev {shlex.quote(interface)} 2>/dev/null"


def parse_address(output: str) -> str | None:
    """First IPv4 address in `ip -o -4 addr show` output."""
    match = re.search(r"\binet (\d+\.\d+\.\d+\.\d+)/", output)
    return match.group(1) if match else None


def parse_exit_tag(stderr: str) -> tuple[int | None, float | None] | None:
    """(exit code, exit time) from the follower's last line; None when the follower never got there."""
    match = None
    for match in re.finditer(re.escape(EXIT_TAG) + r"(\S+) (\S+)", stderr):
        pass
    if match is None:
        return None
    code, when = match.group(1), match.group(2)
    return (int(code) if code.lstrip("-").isdigit() else None, float(when) if re.fullmatch(r"[0-9.]+", when) else None)


# -- execution --------------------------------------------------------------------------------
def probe_addresses(inventory: Inventory, factory: TransportFactory, transports: dict[str, Transport]) -> dict[str, str]:
    """Each node's address on its cluster interface (nodes without an interface are skipped)."""

    def probe(node: Node) -> str | None:
        transport = transports.get(node.name) or factory.open(node)
        transports[node.name] = transport
        if not node.interface:
            return None
        return parse_address(transport.run(address_command(node.interface), timeout=node.command_timeout).stdout)

    results = fanout(list(inventory.nodes), probe, max_workers=inventory.fanout)
    failed = [(r.node, r.error.message) for r in results if r.error is not None]
    if failed:
        raise LaunchRefused("; ".join(f"{name}: {msg}" for name, msg in failed), exit_code=ExitCode.NODES_UNREACHABLE)
    return {r.node: r.value for r in results if r.value}


def run_launch_preflight(inventory: Inventory, port: int, factory: TransportFactory,
                         transports: dict[str, Transport] | None = None) -> None:
    """ssh, master_port (the launch port) and npu_stale_procs; raise LaunchRefused saying why on failure."""
    from .checks import select_checks
    from .preflight import run_preflight

    checked = replace(inventory, preflight=replace(inventory.preflight, master_port=port))
    report = run_preflight(checked, select_checks(["ssh", "master_port", "npu_stale_procs"]), factory=factory,
                           transports=transports)
    if report.ok:
        return
    problems = []
    for node in report.nodes:
        problems += [f"{node.name}: {c.check}: {c.summary}" for c in node.checks if c.status.value in ("fail", "error")]
        if not node.reachable and not node.checks:
            problems.append(f"{node.name}: unreachable")
    problems += [f"cluster: {c.check}: {c.summary}" for c in report.cluster if c.status.value in ("fail", "error")]
    raise LaunchRefused("preflight failed, nothing started:\n" + "\n".join(problems or ["see `ascendctl preflight`"]),
                        hint="fix the above or pass --no-preflight", exit_code=report.exit_code)


def launch_job(
    inventory: Inventory,
    options: LaunchOptions,
    *,
    preflight: bool = True,
    detach: bool = False,
    on_line: LineSink | None = None,
    on_notice: NoticeSink | None = None,
    factory: TransportFactory | None = None,
    job_id: str | None = None,
) -> LaunchOutcome:
    """Preflight, start every node's launcher detached, then follow it (unless `detach`) and tear down on failure."""
    job_id = job_id or new_job_id()
    notice = on_notice or (lambda _msg: None)
    own = factory is None
    factory = factory or TransportFactory(inventory)
    transports: dict[str, Transport] = {}
    try:
        if preflight:
            port = options.master_port or DEFAULT_PORTS.get(options.launcher, 0)
            run_launch_preflight(inventory, port, factory, transports)  # its connections are reused below
        plan = build_plan(inventory, options, job_id=job_id, addresses=probe_addresses(inventory, factory, transports))
        try:
            record = start_plan(inventory, plan, factory=factory, transports=transports, notice=notice)
        except (KeyboardInterrupt, Interrupted):
            # Ctrl-C while starting: some launchers may be up; the marker finds them even without a pid.
            notice("interrupted while starting: stopping the job on every node")
            fresh = TransportFactory(inventory)  # the interrupted one may be closed
            try:
                record = teardown(inventory, load_job(plan.job_id), inventory.names, grace=options.grace, factory=fresh)
            finally:
                fresh.close_all()
            record = replace(record, status="interrupted", ended=time.time())
            save_job(record)
            return LaunchOutcome(record, interrupted=True)
        if record.status != "running" or detach:
            return LaunchOutcome(record, detached=detach and record.status == "running")
        return follow(inventory, record, factory=factory, transports=transports, on_line=on_line, notice=notice,
                      teardown_on_failure=True, grace=options.grace)
    finally:
        if own:
            factory.close_all()


def start_plan(
    inventory: Inventory,
    plan: LaunchPlan,
    *,
    factory: TransportFactory,
    transports: dict[str, Transport],
    notice: NoticeSink,
) -> JobRecord:
    """Start every node's launcher; if one fails to start, tear the started ones down."""
    now = time.time()
    record = JobRecord(
        id=plan.job_id, launcher=plan.launcher, inventory=inventory.source, script=list(plan.script),
        master_addr=plan.master_addr, master_port=plan.master_port, log_dir=plan.log_dir,
        nodes=tuple(NodeJob(n.name, n.host, n.rank, n.command, recorded_env(n.env), n.log, n.worker_log_dir, workers=n.workers,
                            first_rank=n.first_rank, address=n.address) for n in plan.nodes),
        started=now,
    )
    save_job(record)
    by_name = {node.name: node for node in inventory.nodes}

    plans = {node.name: node for node in plan.nodes}

    def start(node: Node) -> tuple[int, int | None]:
        node_plan = plans[node.name]
        transport = transports.get(node_plan.name) or factory.open(by_name[node_plan.name])
        transports[node_plan.name] = transport
        result = transport.run(start_command(plan.job_id, node_plan), timeout=by_name[node_plan.name].command_timeout)
        words = result.stdout.split()
        if not result.ok or not words or not words[0].isdigit():
            raise AscendctlError(f"start failed (exit {result.exit_code}): {(result.stderr or result.stdout).strip()[-300:]}")
        return int(words[0]), parse_utc_offset(words[1]) if len(words) > 1 else None

    results = fanout(list(inventory.nodes), start, max_workers=inventory.fanout)
    started = time.time()
    for result in results:
        entry = next(n for n in record.nodes if n.name == result.node)
        if result.value is not None:
            record = record.with_node(replace(entry, pid=result.value[0], utc_offset=result.value[1], started=started))
        else:
            assert result.error is not None
            record = record.with_node(replace(entry, error=f"not started: {result.error.message}", ended=started))
    bad = [n for n in record.nodes if n.pid is None]
    if bad:
        notice(f"{', '.join(n.name for n in bad)}: could not start; stopping the others")
        record = replace(record, first_failure={"node": bad[0].name, "rank": None, "exit_code": None, "signal": None,
                                                "time": started, "reason": bad[0].error})
        record = teardown(inventory, record, [n.name for n in record.nodes if n.pid is not None], grace=plan.grace,
                          factory=factory, transports=transports)
        record = replace(record, status="failed", ended=time.time())
    save_job(record)
    return record


def teardown(
    inventory: Inventory,
    record: JobRecord,
    names: Sequence[str],
    *,
    grace: float,
    factory: TransportFactory,
    transports: Mapping[str, Transport] | None = None,
) -> JobRecord:
    """SIGTERM then SIGKILL every process of the job on `names`, in parallel; records the signal used.

    Open connections are reused (a new channel on each): many new connections at once would run
    into sshd's MaxStartups. A connection that fails is replaced by a fresh one, once.
    """
    targets = [inventory.node(name) for name in names if name in inventory.names]
    reuse = dict(transports or {})

    def stop(node: Node) -> str:
        command = teardown_command(record.id, node.name, grace)
        result = None
        if node.name in reuse:
            try:
                result = reuse[node.name].run(command, timeout=grace + 15)
            except TransportError:
                result = None
        if result is None:
            transport = factory.open(node)
            try:
                result = transport.run(command, timeout=grace + 15)
            finally:
                factory.release(transport)
        return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "none"

    results = fanout(targets, stop, max_workers=inventory.fanout)
    for result in results:
        entry = next(n for n in record.nodes if n.name == result.node)
        if result.value is not None:
            sig = {"term": "SIGTERM", "kill": "SIGKILL"}.get(result.value)
            record = record.with_node(replace(entry, signal=sig or entry.signal))
        elif entry.error is None:
            assert result.error is not None
            record = record.with_node(replace(entry, error=f"teardown failed: {result.error.message}"))
    return record


@dataclass(frozen=True, slots=True)
class _Ended:
    name: str
    exit_code: int | None
    when: float
    unreachable: str | None = None


def follow(
    inventory: Inventory,
    record: JobRecord,
    *,
    factory: TransportFactory,
    transports: dict[str, Transport] | None = None,
    on_line: LineSink | None = None,
    notice: NoticeSink | None = None,
    teardown_on_failure: bool = True,
    nodes: Sequence[str] | None = None,
    grace: float = DEFAULT_GRACE,
) -> LaunchOutcome:
    """Stream every node's launcher log until all have ended; on a failure or Ctrl-C tear the rest down.

    Each line goes to `on_line` without its node-side time stamp, and with it to the triage engine, whose
    verdict becomes the record's `first_failure` when the job failed.
    """
    from .triage import LiveTriage, split_stamp

    transports = transports if transports is not None else {}
    say = notice or (lambda _msg: None)
    events: queue.Queue[_Ended] = queue.Queue()
    names = [n.name for n in record.nodes if n.pid is not None and (nodes is None or n.name in nodes)]
    entries = {n.name: n for n in record.nodes}
    live = LiveTriage()

    def follower(name: str) -> None:
        entry = entries[name]
        buffer = bytearray()

        def emit(raw: bytes) -> None:
            line = raw.decode("utf-8", "replace")
            live.line(name, line)
            if on_line:
                on_line(name, split_stamp(line)[1])

        def out(chunk: bytes) -> None:
            buffer.extend(chunk)
            while b"\n" in buffer:
                line, _, rest = bytes(buffer).partition(b"\n")
                buffer[:] = rest
                emit(line)

        err: list[bytes] = []
        try:
            transport = transports.get(name) or factory.open(inventory.node(name))
            transports[name] = transport
            assert entry.pid is not None
            result = transport.stream(follow_command(entry.log.rsplit("/", 1)[0], entry.pid), on_stdout=out,
                                      on_stderr=err.append, timeout=float("inf"))
            if buffer:
                emit(bytes(buffer))
            tag = parse_exit_tag(b"".join(err).decode("utf-8", "replace") or result.stderr)
            if tag is None:
                events.put(_Ended(name, None, time.time(), "connection closed before the launcher ended"))
            else:
                events.put(_Ended(name, tag[0], tag[1] or time.time()))
        except Exception as exc:  # an unreachable host is an outcome, not a crash
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            events.put(_Ended(name, None, time.time(), message))

    threads = [threading.Thread(target=follower, args=(name,), daemon=True, name=f"follow-{name}") for name in names]
    for thread in threads:
        thread.start()
    pending = set(names)
    failures: list[_Ended] = []
    stopper: threading.Thread | None = None
    stop_deadline = float("inf")
    torn: dict[str, JobRecord] = {}
    teardown_started: list[float] = []
    interrupted = False

    def stop_rest(reason: str) -> None:
        say(reason)
        teardown_started.append(time.time())
        targets = [n for n in names if n in pending]
        torn["record"] = teardown(inventory, record, targets, grace=grace, factory=factory, transports=transports)
        log.debug("teardown of %d nodes done", len(targets))

    try:
        while pending:
            try:
                ended = events.get(timeout=0.25)
            except queue.Empty:
                if stopper is not None and not stopper.is_alive() and time.monotonic() > stop_deadline:
                    break  # followers of unreachable nodes may never come back
                continue
            pending.discard(ended.name)
            log.debug("%s: launcher ended (%s), %d still running", ended.name, ended.unreachable or ended.exit_code, len(pending))
            entry = entries[ended.name]
            entries[ended.name] = replace(entry, exit_code=ended.exit_code, ended=ended.when,
                                          error=ended.unreachable and f"unreachable: {ended.unreachable}")
            bad = ended.unreachable is not None or ended.exit_code != 0
            if bad:
                failures.append(ended)
                if stopper is None and teardown_on_failure and pending:
                    what = f"unreachable ({ended.unreachable})" if ended.unreachable else f"exited {ended.exit_code}"
                    stopper = threading.Thread(target=stop_rest, args=(f"{ended.name}: launcher {what}; stopping the other nodes",),
                                               daemon=True)
                    stopper.start()
                    stop_deadline = time.monotonic() + grace + 10
    except KeyboardInterrupt:
        if not teardown_on_failure:  # only watching (`logs -f`): Ctrl-C stops watching, never the job
            return LaunchOutcome(record, interrupted=True)
        interrupted = True
        say("interrupted: stopping the job on every node")
        if stopper is not None:
            stopper.join()
        stop_rest_targets = [n for n in names if n in pending]
        teardown_started.append(time.time())
        torn["record"] = teardown(inventory, record, stop_rest_targets, grace=grace, factory=factory, transports=transports)
        deadline = time.monotonic() + 5
        while pending and time.monotonic() < deadline:
            try:
                ended = events.get(timeout=0.25)
            except queue.Empty:
                continue
            pending.discard(ended.name)
            entries[ended.name] = replace(entries[ended.name], exit_code=ended.exit_code, ended=ended.when)
    if stopper is not None:
        stopper.join()
    for thread in threads:  # the last lines of the nodes torn down reach the engine before it decides
        thread.join(timeout=2)
    log.debug("every follower ended")
    for name in pending:  # never heard back
        entries[name] = replace(entries[name], error=entries[name].error or "lost track of the launcher")
    signals = {n.name: n for n in torn["record"].nodes} if "record" in torn else {}
    final = []
    for n in record.nodes:
        entry = entries[n.name]
        if n.name in signals:
            entry = replace(entry, signal=signals[n.name].signal, error=entry.error or signals[n.name].error)
        final.append(entry)
    record = replace(record, nodes=tuple(final), ended=time.time(),
                     teardown_started=teardown_started[0] if teardown_started else record.teardown_started)
    if interrupted:
        status = "interrupted"
    elif record.status == "stopped":
        status = "stopped"
    elif failures:
        status = "failed"
    elif all(n.exit_code == 0 for n in record.nodes):
        status = "succeeded"
    else:
        status = "failed"
    verdict = live.report(record.to_dict()) if status == "failed" else None
    first = verdict_record(verdict) if verdict is not None else None
    record = replace(record, status=status, first_failure=first or record.first_failure)
    save_job(record)
    return LaunchOutcome(record, interrupted=interrupted, verdict=verdict)


def verdict_record(report: "TriageReport") -> dict[str, Any]:
    """The triage verdict as a job record keeps it (`first_failure`)."""
    f = report.first_failure
    return {"node": f.node if f else None, "rank": f.rank if f else None, "category": report.category.value if report.category else None,
            "headline": report.headline(), "reason": report.reason, "rule": report.rule, "confidence": report.confidence,
            "single_culprit": report.single_culprit, "time": f.time if f else None, "file": f.file if f else None,
            "line": f.line if f else None, "text": f.text if f else None, "exit_code": f.exit_code if f else None,
            "signal": f.signal if f else None, "victims": [v.to_dict() for v in report.victims],
            "launcher_blamed": report.launcher_blamed, "hints": list(report.hints)}


# -- detached jobs ----------------------------------------------------------------------------
def _job_inventory(record: JobRecord, inventory: Inventory | None) -> Inventory:
    if inventory is not None:
        return inventory
    from .inventory import load_inventory

    return load_inventory(None if record.inventory.startswith("<") else record.inventory)


def _node_states(record: JobRecord, inv: Inventory) -> dict[str, str]:
    """`exit <rc>`, `running` or `gone` per reachable node of the job."""
    factory = TransportFactory(inv)
    entries = {n.name: n for n in record.nodes}

    def state(node: Node) -> str:
        entry = entries[node.name]
        transport = factory.open(node)
        try:
            return transport.run(state_command(entry.log.rsplit("/", 1)[0], entry.pid)).stdout.strip()
        finally:
            factory.release(transport)

    try:
        results = fanout([n for n in inv.nodes if n.name in entries], state, max_workers=inv.fanout)
    finally:
        factory.close_all()
    return {r.node: r.value for r in results if r.value is not None}


def _with_states(record: JobRecord, states: Mapping[str, str]) -> JobRecord:
    for name, value in states.items():
        entry = next(n for n in record.nodes if n.name == name)
        if value.startswith("exit "):
            code = value.split()[1]
            record = record.with_node(replace(entry, exit_code=int(code) if code.lstrip("-").isdigit() else None))
        elif value == "gone" and entry.exit_code is None and entry.signal is None:
            record = record.with_node(replace(entry, error=entry.error or "launcher gone without an exit status"))
    return record


def refresh_job(record: JobRecord, inventory: Inventory | None = None) -> JobRecord:
    """Ask each node of a running job whether its launcher is still running; save what changed."""
    if record.status != "running":
        return record
    inv = _job_inventory(record, inventory)
    record = _with_states(record, _node_states(record, inv))
    if all(n.exit_code is not None or n.error for n in record.nodes):
        ok = all(n.exit_code == 0 for n in record.nodes)
        record = replace(record, status="succeeded" if ok else "failed", ended=time.time())
        save_job(record)
    return record


def stop_job(job_id: str | None, *, grace: float = DEFAULT_GRACE, inventory: Inventory | None = None) -> JobRecord:
    """Tear a (detached) job down on every node and record it as stopped."""
    record = load_job(job_id)
    inv = _job_inventory(record, inventory)
    factory = TransportFactory(inv)
    try:
        record = teardown(inv, record, [n.name for n in record.nodes if n.pid is not None], grace=grace, factory=factory)
    finally:
        factory.close_all()
    record = _with_states(record, _node_states(record, inv))
    status = record.status if record.status != "running" else "stopped"
    record = replace(record, status=status, ended=record.ended or time.time())
    save_job(record)
    return record


def job_logs(
    job_id: str | None,
    *,
    follow_logs: bool = False,
    node: str | None = None,
    on_line: LineSink | None = None,
    inventory: Inventory | None = None,
) -> LaunchOutcome:
    """Print (or follow until the launchers end) the launcher logs of a job; following never stops the job."""
    record = load_job(job_id)
    if node is not None and node not in {n.name for n in record.nodes}:
        raise UsageError(f"job {record.id} has no node {node!r}", hint=", ".join(n.name for n in record.nodes))
    inv = _job_inventory(record, inventory)
    factory = TransportFactory(inv)
    try:
        if follow_logs:
            wanted = [node] if node else None
            try:
                return follow(inv, record, factory=factory, on_line=on_line, teardown_on_failure=False, nodes=wanted)
            except KeyboardInterrupt:
                return LaunchOutcome(record, interrupted=True)

        targets = [n for n in record.nodes if node is None or n.name == node]

        def cat(entry: NodeJob) -> str:
            transport = factory.open(inv.node(entry.name))
            try:
                return transport.run(f"cat {shlex.quote(entry.log)}").stdout
            finally:
                factory.release(transport)

        by_name = {n.name: n for n in targets}
        results = fanout([inv.node(n.name) for n in targets], lambda nd: cat(by_name[nd.name]), max_workers=inv.fanout)
        from .triage import split_stamp

        for result in results:
            text = result.value if result.value is not None else f"(unreachable: {result.error.message if result.error else ''})\n"
            for line in text.splitlines():
                if on_line:
                    on_line(result.node, split_stamp(line)[1])
        return LaunchOutcome(record, detached=True)
    finally:
        factory.close_all()
