"""What ascendctl knows about Slurm: the allocation it runs in, node states, and the srun/sbatch command lines.

Node names come from `scontrol show hostnames` (never a hand-written hostlist parser), addresses and states
from `scontrol show node`, job states from `squeue --json` (then `scontrol show job`; never sacct, which needs
accounting). Every Slurm command runs with the step-scoped `SLURM_*` variables cleared, so a step started from
inside another step is a step of the allocation, not of the outer step. Must not import typer or rich.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ascendctl.errors import AscendctlError, parse_json
from ascendctl.launchers import DEFAULT_MASTER_PORT

# Variables that describe the step (or task) we may be running in; an inner srun must not inherit them
# (it would take the outer step's task layout, or refuse to overlap it).
STEP_SCOPED = ("SLURM_STEP_", "SLURM_STEPID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASK_PID",
               "SLURM_GTIDS", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE", "SLURM_CPU_BIND",
               "SLURM_DISTRIBUTION", "SLURM_SRUN_COMM_", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_LABELIO", "SLURM_UMASK",
               "SLURM_PTY_", "SLURM_OVERLAP", "SLURM_EXACT", "SLURM_CPUS_PER_TASK", "SLURM_MEM_PER_", "SLURM_NODELIST",
               "SLURM_NNODES", "SLURM_STEP_NUM_", "SLURM_SPANK_", "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR",
               "SLURM_PRIO_PROCESS", "SLURM_KILL_BAD_EXIT", "SLURM_NTASKS_PER_NODE")
UNAVAILABLE_STATES = ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWERED_DOWN", "POWER_DOWN", "FUTURE", "REBOOT")
# A step's processes on a node (tasks and everything they start) all carry this in their environment.
DEFAULT_PORT_BASE = DEFAULT_MASTER_PORT  # a job in an allocation gets a port above the launchers' default
PORT_SPAN = 1000
# Job states after which a Slurm job runs nothing any more (squeue/scontrol JobState).
ENDED_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
                "PREEMPTED", "GONE")
SUBMITTED_ENV = "ASCENDCTL_SLURM_SUBMITTED"  # set in a batch job `launch --backend slurm` submitted


@dataclass(frozen=True, slots=True)
class Allocation:
    """The Slurm job ascendctl runs inside (or submitted): its id and node names in SLURM_NODEID order."""

    job_id: str
    nodes: tuple[str, ...]
    source: str  # where the node list came from, for `inventory show`


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """One node as `scontrol show node` reports it."""

    name: str
    addr: str
    state: str  # e.g. IDLE, ALLOCATED+DRAIN, DOWN*
    reason: str | None = None
    cpus: int | None = None

    @property
    def unavailable(self) -> str | None:
        """Why Slurm will not run steps here ('drained: <reason>'), or None."""
        flags = set(re.split(r"[+]", self.state.rstrip("*~#!%$@^-").upper()))
        if self.state.endswith("*"):
            flags.add("NOT_RESPONDING")
        bad = [f for f in UNAVAILABLE_STATES if f in flags or (f == "DRAIN" and "DRAINED" in flags)]
        if not bad:
            return None
        word = {"DRAIN": "drained", "DOWN": "down", "FAIL": "failed", "NOT_RESPONDING": "not responding"}.get(bad[0], bad[0].lower())
        return f"Slurm reports node {self.name} {word} ({self.state})" + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True, slots=True)
class SubmitSettings:
    """An inventory's `slurm:` section: what sbatch is asked for in submit mode (flags win)."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    nodes: int | None = None


def clean_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` without step-scoped SLURM_* variables: what an inner srun/scontrol must see."""
    env = dict(os.environ if environ is None else environ)
    return {k: v for k, v in env.items() if not k.startswith(STEP_SCOPED)}


def tool(name: str) -> str:
    """The path of a Slurm client command, or an error saying it is missing."""
    path = shutil.which(name)
    if path is None:
        raise AscendctlError(f"slurm: `{name}` not found on PATH",
                             hint="run ascendctl on a Slurm login or compute node (with the Slurm client commands), "
                                  "or pass an inventory (-i FILE) to use SSH")
    return path


def run_tool(argv: Sequence[str], *, timeout: float = 30, environ: Mapping[str, str] | None = None,
             stdin: bytes | None = None) -> str:
    """Run a Slurm client command; its stdout, or an AscendctlError with its stderr."""
    full = [tool(argv[0]), *argv[1:]]
    try:
        proc = subprocess.run(full, input=stdin, capture_output=True, timeout=timeout, env=clean_environ(environ))
    except subprocess.TimeoutExpired:
        raise AscendctlError(f"slurm: `{' '.join(argv)}` did not answer within {timeout:g}s") from None
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip() or f"exit {proc.returncode}"
        raise AscendctlError(f"slurm: `{' '.join(argv)}` failed: {message}")
    return proc.stdout.decode(errors="replace")


def expand_hostnames(nodelist: str, *, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """A Slurm hostlist (h[01-03],x1) as names, in Slurm's order, through `scontrol show hostnames`."""
    return tuple(run_tool(["scontrol", "show", "hostnames", nodelist], environ=environ).split())


def parse_fields(line: str, *, tail: str | None = None) -> dict[str, str]:
    """One line of `scontrol show ... -o` as key -> value; `tail` is a last key whose value (spaces and all) is the rest."""
    reason = None
    if tail is not None and f" {tail}=" in line:
        line, reason = line.split(f" {tail}=", 1)
    fields = {m.group(1): m.group(2) for m in re.finditer(r"(\w+)=(.*?)(?=\s+\w+=|\s*$)", line)}
    if reason is not None and tail is not None:
        fields[tail] = reason.strip()
    return fields


def parse_nodes(text: str) -> dict[str, SlurmNode]:
    """`scontrol show node -o` output as SlurmNode records by name."""
    nodes: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        fields = parse_fields(line, tail="Reason")  # a node's Reason is last and may hold spaces
        if "NodeName" not in fields:
            continue
        cpus = fields.get("CPUTot", "")
        nodes[fields["NodeName"]] = SlurmNode(fields["NodeName"], fields.get("NodeAddr") or fields["NodeName"],
                                              fields.get("State", "UNKNOWN"), fields.get("Reason") or None,
                                              int(cpus) if cpus.isdigit() else None)
    return nodes


def show_nodes(names: Sequence[str], *, environ: Mapping[str, str] | None = None) -> dict[str, SlurmNode]:
    """Address, state and reason of these nodes (one scontrol call)."""
    if not names:
        return {}
    return parse_nodes(run_tool(["scontrol", "show", "node", "-o", ",".join(names)], environ=environ))


def allocation_job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The job id of the allocation we run in (SLURM_JOB_ID, or the older SLURM_JOBID); None outside one."""
    env = os.environ if environ is None else environ
    return env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or None


def allocation_from_environ(environ: Mapping[str, str] | None = None) -> Allocation | None:
    """The allocation we run in (SLURM_JOB_ID set), with its node names; None outside one."""
    env = os.environ if environ is None else environ
    job = allocation_job_id(env)
    if not job:
        return None
    nodelist = env.get("SLURM_JOB_NODELIST")
    source = "SLURM_JOB_NODELIST"
    if not nodelist:
        nodelist = job_field(job, "NodeList", environ=env)
        source = f"scontrol show job {job}"
    if not nodelist or nodelist == "(null)":
        raise AscendctlError(f"slurm: job {job} has no nodes (yet)", hint="is the allocation granted? see `squeue -j " + job + "`")
    return Allocation(job, expand_hostnames(nodelist, environ=env), f"{source} ({nodelist}) via scontrol show hostnames")


def job_field(job: str, name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    """One field of `scontrol show job -o JOB`."""
    fields = parse_fields(run_tool(["scontrol", "show", "job", "-o", job], environ=environ).strip())
    return fields.get(name)


def job_state(job: str, *, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A job's state from `squeue --json` (while Slurm still lists it), else from `scontrol show job`.

    Returns {"state": "RUNNING"|"COMPLETED"|..., "nodes": "h[01-02]", "exit_code": int|None} ("state": "GONE"
    when Slurm has forgotten the job).
    """
    try:
        data = parse_json(run_tool(["squeue", "--json", "--jobs", job], environ=environ))
        for entry in data.get("jobs", []):
            if str(entry.get("job_id")) == str(job):
                code = entry.get("exit_code")
                return {"state": str(entry.get("job_state", "UNKNOWN")), "nodes": entry.get("nodes") or "",
                        "exit_code": code if isinstance(code, int) else None}
    except (AscendctlError, ValueError):
        pass
    try:
        fields = parse_fields(run_tool(["scontrol", "show", "job", "-o", job], environ=environ).strip())
    except AscendctlError:
        return {"state": "GONE", "nodes": "", "exit_code": None}
    code = fields.get("ExitCode", "").split(":")[0]
    return {"state": fields.get("JobState", "UNKNOWN"), "nodes": fields.get("NodeList", ""),
            "exit_code": int(code) if code.isdigit() else None}


def master_port_for(job_id: str) -> int:
    """A rendezvous port derived from the job id, so two jobs sharing a node do not collide."""
    digits = re.sub(r"\D", "", job_id) or "0"
    return DEFAULT_PORT_BASE + int(digits) % PORT_SPAN


def step_argv(job_id: str, nodes: Sequence[str], *, name: str | None = None, kill_on_bad_exit: bool = False,
              label: bool = True, input_all: bool = True) -> list[str]:
    """srun for one step over `nodes` of the allocation, one task per node (the program follows)."""
    argv = ["srun", f"--jobid={job_id}", "--overlap", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1", f"--nodelist={','.join(nodes)}", "--quiet"]
    if label:
        argv.append("--label")
    if input_all:
        argv.append("--input=all")
    if kill_on_bad_exit:
        argv.append("--kill-on-bad-exit=1")
    if name:
        argv.append(f"--job-name={name}")
    return argv


def find_step(job_id: str, name: str, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The id (JOB.STEP) of the running step called `name`, from `squeue --steps`."""
    out = run_tool(["squeue", "--steps", "--jobs", job_id, "--noheader", "--format=%i %j"], environ=environ)
    for line in out.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[1].strip() == name:
            return words[0]
    return None
