"""Pure parts of the Slurm support: scontrol parsing, node availability, the step round's framing (run under sh)."""

from __future__ import annotations

import os
import subprocess

from ascendctl.inventory.load import Node
from ascendctl.slurm import SlurmNode, clean_environ, master_port_for, parse_fields, parse_nodes, step_argv
from ascendctl.remote.transport.slurm import _Ask, parse_round, round_script

NODE_LINE = ("NodeName=h03 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 NodeAddr=10.213.2.13 NodeHostName=h03 "
             "OS=Linux 6.1 #1 SMP PREEMPT_DYNAMIC @0 State=IDLE+DRAIN ThreadsPerCore=1 "
             "Reason=disk on fire [root@2026-11-23T19:25:53]")


def test_node_line_keeps_a_reason_with_spaces_and_values_with_spaces() -> None:
    nodes = parse_nodes(NODE_LINE + "\n")
    assert nodes["h03"] == SlurmNode("h03", "10.213.2.13", "IDLE+DRAIN", "disk on fire [root@2026-11-23T19:25:53]", 2)
    assert parse_fields("JobId=7 JobState=RUNNING Reason=None NodeList=h[01-03] TRES=cpu=6,node=3")["NodeList"] == "h[01-03]"


def test_unavailable_states_name_slurms_reason() -> None:
    assert SlurmNode("a", "a", "ALLOCATED").unavailable is None
    assert SlurmNode("a", "a", "MIXED").unavailable is None
    drained = SlurmNode("a", "a", "ALLOCATED+DRAIN", "ECC").unavailable
    assert drained == "Slurm reports node a drained (ALLOCATED+DRAIN): ECC"
    assert "down" in (SlurmNode("a", "a", "DOWN*", "Not responding").unavailable or "")
    assert "not responding" in (SlurmNode("a", "a", "IDLE*").unavailable or "")


def test_nested_steps_lose_step_scoped_variables_only() -> None:
    env = clean_environ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_NODEID": "1", "SLURM_CONF": "/c", "PATH": "/bin",
                         "SLURM_NTASKS": "3", "SLURM_JOB_NODELIST": "h[1-3]", "SLURM_CPU_BIND_TYPE": "x"})
    assert env == {"SLURM_JOB_ID": "7", "SLURM_CONF": "/c", "PATH": "/bin", "SLURM_JOB_NODELIST": "h[1-3]"}


def test_step_argv_and_port() -> None:
    argv = step_argv("42", ["h01", "h02"], kill_on_bad_exit=True)
    assert argv[:5] == ["srun", "--jobid=42", "--overlap", "--nodes=2", "--ntasks=2"]
    assert "--ntasks-per-node=1" in argv and "--label" in argv and "--kill-on-bad-exit=1" in argv
    assert master_port_for("1234") == 29500 + 234 and master_port_for("1234") != master_port_for("1235")


def test_round_script_runs_each_nodes_command_and_frames_its_answer() -> None:
    asks = [_Ask(Node("n1", "n1", 0), "cat; echo oops >&2; exit 3", b"in'put\n" * 400, 10.0),
            _Ask(Node("n2", "n2", 1), "printf 'x%.0s' $(seq 300)", None, 10.0)]
    script = round_script(asks, "abc")
    outs = []
    for name in ("n1", "n2", "n3"):
        proc = subprocess.run(["sh"], input=script, capture_output=True, env={**os.environ, "SLURMD_NODENAME": name})
        # srun --label prefixes every line with the task id
        outs += [f"{i}: {line}" for i, line in enumerate(proc.stdout.decode().splitlines())]
    answers = parse_round("\n".join(outs), "abc")
    assert set(answers) == {"n1", "n2"}
    assert answers["n1"]["out"] == "in'put\n" * 400 and answers["n1"]["err"] == "oops\n" and answers["n1"]["rc"] == "3"
    assert answers["n2"]["out"] == "x" * 300 and answers["n2"]["rc"] == "0"
