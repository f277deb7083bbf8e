"""Submit mode: outside an allocation, `launch --backend slurm` renders a batch script and submits it with sbatch.

The batch script (templates/sbatch.tmpl, shown by --dry-run) runs the same `ascendctl launch` inside the
allocation, where the nodes come from the allocation and the job is one srun step (slurm_runner.py). The job
id is chosen here and passed in, so this side follows the batch output file and the job's record (same
state directory); --env values go into sbatch's environment (exported to the job), never into the script or argv.
Quarantined nodes (of the Slurm cluster and of the inventory, inventory/nodestate.submit_exclusions) go into the script
as `#SBATCH --exclude=...` unless --include-quarantined, which the launch inside is then given too.
Job state while waiting: `squeue --json`, then `scontrol show job`. Must not import typer or rich.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from ascendctl.jobs.environment import parse_env_assignments
from ascendctl.errors import AscendctlError, UsageError
from ascendctl.templating import load_template, render_template
from ascendctl.slurm import SubmitSettings, clean_environ, job_state, tool
from ascendctl.jobs.record import JobError, JobRecordError, load_job, state_dir
from ascendctl.slurm import ENDED_STATES, SUBMITTED_ENV

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory
    from ascendctl.jobs.plan import LaunchOptions
    from ascendctl.jobs.runner import NoticeSink



@dataclass(frozen=True, slots=True)
class SubmitOptions:
    """What sbatch is asked for (flags, else the inventory's `slurm:` section)."""

    nodes: int
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    inventory: str | None = None  # a `backend: slurm` inventory file: the launch inside the allocation reads its defaults
    exclude: tuple[str, ...] = ()  # quarantined nodes (inventory/nodestate.submit_exclusions): sbatch --exclude
    include_quarantined: bool = False  # --include-quarantined: nothing excluded, and the launch inside keeps them too


@dataclass(frozen=True, slots=True)
class Submission:
    """A rendered batch script and the environment its --env values travel in."""

    job_id: str
    script: str
    environment: Mapping[str, str]


def submit_options(inventory: "Inventory", nodes: str | None, partition: str | None, time: str | None,
                   account: str | None, *, exclude: Sequence[str] = (), include_quarantined: bool = False) -> SubmitOptions:
    """What to ask sbatch for: the flags, else the inventory's `slurm:` section; a node count is required. `exclude`:
    the nodes sbatch must not give the job (the quarantined ones, unless `include_quarantined`)."""
    section = inventory.slurm or SubmitSettings()
    if nodes is not None and (not nodes.isdigit() or int(nodes) < 1):
        raise UsageError(f"-w/--nodes {nodes}: in submit mode this is a node count (an integer >= 1)",
                         hint="or run inside salloc/sbatch to pick nodes by name")
    count = int(nodes) if nodes is not None else section.nodes
    if count is None:
        raise UsageError("submit mode needs a node count: --nodes N, or `slurm: {nodes: N}` in the inventory",
                         hint="or run inside salloc/sbatch")
    return SubmitOptions(count, partition or section.partition, time or section.time, account or section.account,
                         inventory=inventory.source if inventory.backend == "slurm" else None,
                         exclude=() if include_quarantined else tuple(exclude), include_quarantined=include_quarantined)


def inner_launch_args(options: LaunchOptions, job_id: str, *, preflight: bool, inventory: str | None = None,
                      include_quarantined: bool = False) -> list[str]:
    """`ascendctl launch` arguments for inside the allocation (env names only: values come from the environment).

    `--restarts 0`: the submitting launch follows this one job id; a restart loop inside (the inventory's `restart:`)
    would go on under other ids unseen."""
    args = ["-i", str(Path(inventory).absolute())] if inventory else []
    args += ["--launcher", options.launcher, "--job-id", job_id, "--restarts", "0", "--cluster-timeout", str(options.cluster_timeout),
            "--grace", f"{options.grace:g}"]
    for flag, value in (("--nproc-per-node", options.nproc_per_node), ("--master-addr", options.master_addr),
                        ("--master-port", options.master_port), ("--log-dir", options.log_dir), ("--rank-table", options.rank_table)):
        if value is not None:
            args += [flag, str(value)]
    for name, _value in parse_env_assignments(options.env):
        args += ["--env", name]
    if options.rdzv:
        args.append("--rdzv")
    if options.buffered:
        args.append("--buffered")
    if options.flight_recorder:
        args.append("--flight-recorder")
    if not preflight:
        args.append("--no-preflight")
    if include_quarantined:
        args.append("--include-quarantined")
    return args + ["--", *options.script]


def render_submission(options: LaunchOptions, submit: SubmitOptions, *, job_id: str, preflight: bool = True,
                      templates: str | None = None) -> Submission:
    """The batch script for this launch (pure: --dry-run prints it)."""
    extra = [f"#SBATCH --{key}={value}" for key, value in (("partition", submit.partition), ("time", submit.time),
                                                          ("account", submit.account)) if value]
    if submit.exclude:  # node names, comma-separated: the hostlist form sbatch takes whatever the names look like
        extra.append(f"#SBATCH --exclude={','.join(submit.exclude)}")
    values = {
        "job_name": f"ascendctl-{job_id}", "nodes": submit.nodes, "output": f"{state_dir()}/slurm/{job_id}.out",
        "sbatch_options": "\n".join(extra), "ascendctl": shlex.join([sys.executable, "-m", "ascendctl"]),
        "launch_args": shlex.join(inner_launch_args(options, job_id, preflight=preflight, inventory=submit.inventory,
                                                    include_quarantined=submit.include_quarantined)),
    }
    script = render_template(load_template("sbatch.tmpl", templates), values)
    return Submission(job_id, script, dict(parse_env_assignments(options.env)))


def submit(submission: Submission) -> str:
    """sbatch the script (on stdin); the Slurm job id."""
    (state_dir() / "slurm").mkdir(parents=True, exist_ok=True)
    env = {**clean_environ(), **submission.environment, SUBMITTED_ENV: "1"}
    env.pop("SLURM_JOB_ID", None)
    env.pop("SLURM_JOBID", None)
    proc = subprocess.run([tool("sbatch"), "--parsable", "--export=ALL"], input=submission.script.encode(), env=env,
                          capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise AscendctlError(f"slurm: sbatch failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode().strip().split(";")[0]


def wait_for_record(job_id: str, slurm_job: str, *, notice: NoticeSink, poll: float = 0.5) -> None:
    """Until the job inside the allocation has written its record; an error if the Slurm job ended first."""
    last = None
    while True:
        try:
            load_job(job_id)
            return
        except JobRecordError:
            raise  # written, but not readable: waiting will not mend it
        except JobError:
            pass
        state = job_state(slurm_job)
        if state["state"] != last:
            notice(f"slurm job {slurm_job}: {state['state'].lower()}")
            last = state["state"]
        if state["state"] in ENDED_STATES:
            try:
                load_job(job_id)
                return
            except JobRecordError:
                raise
            except JobError:
                out = state_dir() / "slurm" / f"{job_id}.out"
                tail = out.read_text(errors="replace")[-1500:] if out.exists() else ""
                raise AscendctlError(f"slurm job {slurm_job} ended ({state['state']}) before the launch started"
                                     + (f":\n{tail}" if tail else ""), hint=f"see {out}") from None
        time.sleep(poll)

