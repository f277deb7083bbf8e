"""A real Slurm cluster on the test hosts of harness.py: munged, slurmctld and one slurmd per host.

`start_slurm(cluster)` writes a slurm.conf into a temp dir (clients find it through SLURM_CONF), starts
one `munged` (its own key and socket, root namespace: AF_UNIX path sockets work across network
namespaces), `slurmctld` in the first host's network and UTS namespaces (its hostname is SlurmctldHost)
and one `slurmd -N <host>` per host in that host's network and UTS namespaces. They are entered with
`nsenter --net --uts` rather than `ip netns exec` (which remounts /sys) or the host's mount namespace,
so slurmd keeps the machine's /sys and the jobs see the machine's file system (job dirs carry the node
name, so they do not collide). Accounting off, proctrack/linuxproc, task/none, select/linear. Every
daemon is started and stopped by pid; `SlurmCluster.stop()` also cancels every job it still knows.
Needs the Debian packages slurm-wlm and munge (scripts/test.sh installs them).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .harness import Cluster, Host

SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "salloc", "scontrol", "squeue", "scancel")
PARTITION = "debug"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class SlurmCluster:
    """The running daemons of one test cluster and the environment its clients need."""

    cluster: Cluster
    workdir: Path
    conf: Path
    munge_socket: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    jobs: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> list[Host]:
        return self.cluster.hosts

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Our environment plus SLURM_CONF, without any SLURM_* of an outer allocation."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_"))}
        env["SLURM_CONF"] = str(self.conf)
        env.update(extra or {})
        return env

    def run(self, argv: Sequence[str], *, timeout: float = 60, check: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """A Slurm client command from the test process (the root namespace, like a login node)."""
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=self.env(env))
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def node_state(self, node: str) -> str:
        out = self.run(["scontrol", "show", "node", "-o", node]).stdout
        for word in out.split():
            if word.startswith("State="):
                return word.split("=", 1)[1]
        return "?"

    def wait_idle(self, timeout: float = 60) -> None:
        """Until every node is IDLE (slurmd registered)."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False).stdout
            states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
            if len(states) == len(self.hosts) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.3)
        raise RuntimeError(f"slurm nodes not idle after {timeout}s: {states}\n{self.logs()}")

    def hold(self, nodes: int, *, timeout: float = 60, nodelist: str | None = None) -> str:
        """An allocation of `nodes` nodes that lives until cancelled (sbatch --wrap 'sleep 3600'); its job id."""
        argv = ["sbatch", "--parsable", f"--nodes={nodes}", "--job-name=asct-hold", f"--output={self.workdir}/hold-%j.out",
                "--wrap", "exec sleep 3600"]
        if nodelist:
            argv.insert(2, f"--nodelist={nodelist}")
        job = self.run(argv).stdout.strip().split(";")[0]
        self.jobs.append(job)
        self.wait_state(job, "RUNNING", timeout=timeout)
        return job

    def job_field(self, job: str, name: str) -> str | None:
        out = self.run(["scontrol", "show", "job", "-o", job], check=False).stdout
        for word in out.split():
            if word.startswith(name + "="):
                return word.split("=", 1)[1]
        return None

    def wait_state(self, job: str, state: str, *, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = self.job_field(job, "JobState")
            if seen == state:
                return
            time.sleep(0.2)
        raise RuntimeError(f"job {job} not {state} after {timeout}s (last {seen})\n{self.logs()}")

    def allocation_env(self, job: str) -> dict[str, str]:
        """What a process inside the allocation sees (the variables ascendctl reads), as salloc would set them."""
        nodelist = self.job_field(job, "NodeList") or ""
        num = self.job_field(job, "NumNodes") or ""
        return self.env({"SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_JOB_NODELIST": nodelist,
                         "SLURM_NNODES": num.split("-")[0], "SLURM_JOB_NUM_NODES": num.split("-")[0]})

    def cancel(self, job: str) -> None:
        self.run(["scancel", job], check=False)

    def logs(self) -> str:
        parts = []
        for path in sorted(self.workdir.glob("*.log")):
            text = path.read_text(errors="replace")
            parts.append(f"--- {path.name}\n{text[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Cancel our jobs, then stop every daemon by pid (TERM, then KILL)."""
        for job in self.jobs:
            try:
                self.run(["scancel", job], check=False, timeout=10)
            except Exception:
                pass
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.procs.clear()


def require_slurm() -> None:
    """Fail (never skip) when the Slurm or munge binaries are missing."""
    missing = [b for b in SLURM_BINARIES if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]
    if missing:
        raise RuntimeError(f"missing Slurm binaries {missing}: install the Debian packages slurm-wlm and munge "
                           "(scripts/test.sh does)")


def slurm_conf(cluster: Cluster, workdir: Path, munge_socket: Path, *, cpus: int) -> str:
    ctl = cluster.hosts[0]
    lines = [
        f"ClusterName=asct{cluster.index}",
        f"SlurmctldHost={ctl.name}({ctl.ip})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={workdir}/state",
        f"SlurmdSpoolDir={workdir}/spool/%n",
        f"SlurmctldPidFile={workdir}/slurmctld.pid",
        f"SlurmdPidFile={workdir}/slurmd-%n.pid",
        f"SlurmctldLogFile={workdir}/slurmctld.log",
        f"SlurmdLogFile={workdir}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SelectType=select/linear",
        "SchedulerType=sched/builtin",
        "MpiDefault=none",
        "ReturnToService=2",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=300",
        "SlurmdTimeout=120",
        "PlugStackConfig=/dev/null",
        f"TmpFS={workdir}/tmp",
    ]
    for h in cluster.hosts:
        lines.append(f"NodeName={h.name} NodeAddr={h.ip} CPUs={cpus} State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def start_slurm(cluster: Cluster, *, workdir: Path | None = None, timeout: float = 60) -> SlurmCluster:
    """Start munged, slurmctld and one slurmd per host of `cluster`; returns once every node is idle."""
    require_slurm()
    wd = Path(workdir or cluster.workdir / "slurm").absolute()
    for sub in ("state", "spool", "tmp", "munge"):
        (wd / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(wd / "munge", 0o700)
    key = wd / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    sock = wd / "munge" / "munge.sock"
    conf = wd / "slurm.conf"
    conf.write_text(slurm_conf(cluster, wd, sock, cpus=os.cpu_count() or 1))
    slurm = SlurmCluster(cluster, wd, conf, sock)
    env = slurm.env()
    try:
        slurm.procs["munged"] = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}", f"--pid-file={wd}/munge/munged.pid",
             f"--log-file={wd}/munged.log", f"--seed-file={wd}/munge/seed"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(wd / "munged.err.log", "wb"), env=env)
        _wait_path(sock, 15, slurm)
        ctl = cluster.hosts[0]
        slurm.procs["slurmctld"] = subprocess.Popen(
            _nsenter(ctl) + ["slurmctld", "-D", "-i", "-f", str(conf)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(wd / "slurmctld.err.log", "wb"), env=env)
        for h in cluster.hosts:
            slurm.procs[f"slurmd-{h.name}"] = subprocess.Popen(
                _nsenter(h) + ["slurmd", "-D", "-N", h.name, "-f", str(conf)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(wd / f"slurmd-{h.name}.err.log", "wb"), env=env)
        slurm.wait_idle(timeout)
    except BaseException:
        slurm.stop()
        raise
    return slurm


def _nsenter(h: Host) -> list[str]:
    """Enter the host's network and UTS namespaces only (not its mount namespace, see the module docstring)."""
    return ["nsenter", f"--net=/proc/{h.holder_pid}/ns/net", f"--uts=/proc/{h.holder_pid}/ns/uts", "--"]


def _wait_path(path: Path, timeout: float, slurm: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{path} did not appear after {timeout}s\n{slurm.logs()}")


def leftover_job_processes(job_id: str) -> list[str]:
    """Every process on the machine (all test hosts share its pid namespace) whose environment holds ascendctl's
    marker of job `job_id` (ASCENDCTL_JOB=<job>/<node>), as "pid cmdline" lines."""
    needle = f"ASCENDCTL_JOB={job_id}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(entry.name + " " + (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found
