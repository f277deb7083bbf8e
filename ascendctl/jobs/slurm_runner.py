"""The Slurm runner: a job's launchers as ONE srun step of the allocation, one task per node.

Start: `srun --jobid=J --overlap --nodes=N --ntasks-per-node=1 --kill-on-bad-exit=1` runs sh/slurm_task.sh on
every node; its stdin (`--input=all`) is one tar holding every node's directory (env file, command line,
wrapper), and each task unpacks only its own, checks SLURM_NODEID against the planned node rank and runs the
SSH runner's job_wrapper.sh in the foreground, so per-node exit codes come from the same exit files (srun's
own status hides the culprit). srun runs detached from ascendctl (its own session; output in the state dir),
so `--detach` and a later `status`/`logs -f`/`stop` work as with SSH. Follow, states and logs are the SSH
runner's, through the group, whose commands are srun steps of the allocation. Stop cancels the step
(`scancel JOB.STEP`), then verifies on every node that nothing carrying the job's marker is left.
Must not import typer or rich.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ascendctl.errors import AscendctlError
from ascendctl.models import NOT_STARTED, EndKind, NodeEnd, NodeResult, NodeResults
from ascendctl.remote.scripts import script
from ascendctl.slurm import clean_environ, find_step, job_state, run_tool, step_argv, tool
from ascendctl.jobs.record import save_job, state_dir
from ascendctl.jobs.ssh_runner import SSHRunner, start_payload

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node
    from ascendctl.remote.transport.base import Transport
    from ascendctl.jobs.plan import LaunchPlan
    from ascendctl.jobs.record import JobRecord
    from ascendctl.jobs.runner import NoticeSink

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0  # seconds for every task to have unpacked its job and written the wrapper's pid


def step_name(job_id: str) -> str:
    return f"ascendctl-{job_id}"


def launch_argv(plan: LaunchPlan, slurm_job: str) -> list[str]:
    """The srun command line of a job's launch step (no value of the job's environment is in it)."""
    names = [node.name for node in sorted(plan.nodes, key=lambda n: n.rank)]
    return step_argv(slurm_job, names, name=step_name(plan.job_id), kill_on_bad_exit=True) + [
        "/bin/sh", "-c", script("slurm_task.sh"), "slurm_task.sh", plan.log_dir, plan.job_id]


class SlurmRunner(SSHRunner):
    """Launchers as the tasks of one srun step; everything else as the SSH runner, over srun steps."""

    name = "slurm"
    watches_silence = False  # a step's output may arrive late or at once; Slurm ends the step of a node it loses

    def start(self, plan: LaunchPlan, record: JobRecord, *, notice: NoticeSink) -> JobRecord:
        allocation = self.group.inventory.allocation
        if allocation is None:
            raise AscendctlError("the slurm runner needs a Slurm allocation", hint="run inside salloc/sbatch")
        out_dir = state_dir() / "slurm"
        out_dir.mkdir(parents=True, exist_ok=True)
        srun_log = out_dir / f"{plan.job_id}.srun.log"
        self._clear_previous(plan)
        argv = launch_argv(plan, allocation.job_id)
        argv[0] = tool("srun")
        with open(srun_log, "wb") as sink:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.STDOUT, env=clean_environ(),
                                    start_new_session=True)
        assert proc.stdin is not None
        try:
            proc.stdin.write(start_payload(*plan.nodes, per_node_dirs=True))
            proc.stdin.close()
        except BrokenPipeError:
            pass
        from ascendctl.slurm import SUBMITTED_ENV

        record = replace(record, slurm_job=allocation.job_id, slurm_submitted=os.environ.get(SUBMITTED_ENV) == "1")
        pids = self._wait_started(plan, proc)
        started = time.time()
        for entry in record.nodes:
            pid = pids.get(entry.name)
            if pid is not None:
                record = record.with_node(replace(entry, pid=pid, started=started))
            else:
                why = _tail(srun_log) or "the task did not start its launcher"
                record = record.with_node(replace(entry, error=f"{NOT_STARTED}: {why}", ended=started))
        step = find_step(allocation.job_id, step_name(plan.job_id)) if proc.poll() is None else None
        record = replace(record, slurm_step=step)
        record = self._stop_if_not_all_started(record, plan, notice)
        save_job(record)
        return record

    def _clear_previous(self, plan: LaunchPlan) -> None:
        """Remove what an earlier job left in the node directories this one reuses (the same --log-dir: a relaunch of
        `--restarts`, a launch run again): the task removes them too, but the step starts while `_wait_started` already
        reads `pid`, and a previous job's pid and exit status there would read as this job's (started, then ended),
        which stopped a relaunch as soon as it started. A node that cannot be reached fails the launch step itself."""
        dirs = {node.name: node.dir for node in plan.nodes}

        def clear(node: Node, transport: Transport) -> None:
            transport.run(f"rm -f {_q(dirs[node.name] + '/pid')} {_q(dirs[node.name] + '/exit_code')}", timeout=10)

        self.group.run(clear)

    def _wait_started(self, plan: LaunchPlan, proc: subprocess.Popen[bytes]) -> dict[str, int]:
        """Each node's wrapper pid, once written (or the step ended without it)."""
        dirs = {node.name: node.dir for node in plan.nodes}
        pids: dict[str, int] = {}
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            ended = proc.poll() is not None

            def read_pid(node: Node, transport: Transport) -> str:
                return transport.run(f"cat {_q(dirs[node.name] + '/pid')} 2>/dev/null", timeout=10).stdout.strip()

            missing = self.group.nodes(n for n in dirs if n not in pids)
            for result in self.group.run(read_pid, nodes=missing):
                if result.value and result.value.isdigit():
                    pids[result.node] = int(result.value)
            if len(pids) == len(dirs) or ended:
                break
            time.sleep(0.3)
        return pids

    def states(self, record: JobRecord, nodes: Sequence[str]) -> NodeResults[NodeEnd]:
        """As over SSH; a node that cannot answer because the Slurm job ended (scancel, salloc left, time limit) is
        `gone` with Slurm's state, not `running` for ever."""
        results = super().states(record, nodes)
        if all(r.value is not None for r in results) or not record.slurm_job:
            return results
        from ascendctl.slurm import ENDED_STATES

        state = job_state(record.slurm_job)["state"]
        if state not in ENDED_STATES:
            return results
        gone = NodeEnd(EndKind.GONE, why=f"Slurm job {record.slurm_job} ended ({state}) before the launcher wrote its exit status")
        return NodeResults(tuple(r if r.value is not None else NodeResult(r.node, gone, None, r.duration) for r in results))

    def stop(self, record: JobRecord, nodes: Sequence[str], *, grace: float) -> NodeResults[str]:
        """scancel the launch step (TERM, KILL after Slurm's KillWait), then make sure nothing of the job is left."""
        if record.slurm_job and record.slurm_step:
            try:
                run_tool(["scancel", "--signal=TERM", record.slurm_step])
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline and find_step(record.slurm_job, step_name(record.id)):
                    time.sleep(0.2)
                run_tool(["scancel", record.slurm_step])
            except AscendctlError as exc:
                log.debug("scancel %s: %s", record.slurm_step, exc.message)
        return super().stop(record, nodes, grace=grace)


def _q(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " / ".join(lines[-3:])[-300:]
