"""`backend: slurm` inventories (submit mode) and the step-scoped SLURM_* clearing, without a cluster."""

from __future__ import annotations

import pytest

from ascendctl.errors import InventoryError, UsageError
from ascendctl.inventory.load import parse_inventory
from ascendctl.jobs.submit import submit_options
from ascendctl.slurm import SubmitSettings, clean_environ

OUTSIDE: dict[str, str] = {}


def test_backend_slurm_outside_an_allocation_holds_the_sbatch_options_for_submit_mode() -> None:
    inv = parse_inventory("backend: slurm\nslurm: {partition: debug, account: ml, time: '2:00:00', nodes: 4}\n"
                          "defaults: {slots: 2}\n", source="inv.yaml", environ=OUTSIDE, submit=True)
    assert inv.backend == "slurm" and inv.nodes == ()
    assert inv.slurm == SubmitSettings("debug", "ml", "2:00:00", 4)
    wanted = submit_options(inv, None, None, None, None)
    assert (wanted.nodes, wanted.partition, wanted.account, wanted.time, wanted.inventory) == (4, "debug", "ml", "2:00:00", "inv.yaml")
    flags = submit_options(inv, "8", "gpu", "10", None)  # flags win
    assert (flags.nodes, flags.partition, flags.time, flags.account) == (8, "gpu", "10", "ml")


def test_backend_slurm_section_is_validated_with_key_paths() -> None:
    with pytest.raises(InventoryError) as err:
        parse_inventory("backend: slurm\nslurm:\n  nodes: 0\n  time: [1]\n  partiton: x\n  account: 'a b'\n",
                        source="inv.yaml", environ=OUTSIDE, submit=True)
    assert err.value.problems == [
        "inv.yaml:5: slurm.partiton: unknown key (did you mean partition?)",
        "inv.yaml:6: slurm.account: expected a Slurm name (got 'a b')",
        "inv.yaml:4: slurm.time: expected a time limit like 2:00:00, 1-00:00:00 or minutes (got [1])",
        "inv.yaml:3: slurm.nodes: expected a node count, an integer >= 1 (got 0)",
    ]
    with pytest.raises(InventoryError) as bad:
        parse_inventory("backend: pbs\nnodes: [a]\n", source="inv.yaml", environ=OUTSIDE)
    assert bad.value.problems == ["inv.yaml:1: backend: expected one of: ssh, slurm (got 'pbs')"]
    with pytest.raises(InventoryError) as both:
        parse_inventory("backend: slurm\nnodes: [a]\n", source="inv.yaml", environ=OUTSIDE, submit=True)
    assert "inv.yaml:2: nodes: with `backend: slurm` the nodes are the Slurm allocation's" in both.value.problems[0]


def test_backend_slurm_outside_an_allocation_is_refused_by_commands_other_than_launch() -> None:
    with pytest.raises(InventoryError) as err:
        parse_inventory("backend: slurm\n", source="inv.yaml", environ=OUTSIDE)
    assert "not inside one (SLURM_JOB_ID is not set)" in err.value.message and err.value.hint


def test_submit_mode_needs_a_node_count() -> None:
    inv = parse_inventory("backend: slurm\n", source="inv.yaml", environ=OUTSIDE, submit=True)
    with pytest.raises(UsageError, match="needs a node count"):
        submit_options(inv, None, None, None, None)
    with pytest.raises(UsageError, match="node count"):
        submit_options(inv, "h[01-02]", None, None, None)


def test_an_ssh_inventory_may_carry_a_slurm_section_for_launch_backend_slurm() -> None:
    inv = parse_inventory("slurm: {nodes: 2}\nnodes: [10.0.0.1]\n", source="inv.yaml", environ=OUTSIDE)
    assert inv.backend == "ssh" and inv.slurm == SubmitSettings(nodes=2) and inv.names == ["10.0.0.1"]
    assert submit_options(inv, None, None, None, None).inventory is None  # its SSH nodes must not reach the batch job


def test_clean_environ_drops_what_a_real_srun_step_sets_and_keeps_the_job() -> None:
    # the SLURM_* of a one-task step (`srun -N1 -n1 --nodelist=h02`) of a 3-node job, captured on the test hosts
    step = {"SLURMD_NODENAME": "h02", "SLURM_CPUS_ON_NODE": "2", "SLURM_DISTRIBUTION": "cyclic", "SLURM_GTIDS": "0",
            "SLURM_JOBID": "1", "SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "h[01-03]", "SLURM_JOB_NUM_NODES": "3",
            "SLURM_LAUNCH_NODE_IPADDR": "10.213.0.1", "SLURM_LOCALID": "0", "SLURM_NNODES": "1", "SLURM_NODEID": "0",
            "SLURM_NODELIST": "h[01-03]", "SLURM_NPROCS": "1", "SLURM_NTASKS": "1", "SLURM_PROCID": "0",
            "SLURM_SRUN_COMM_HOST": "10.213.0.1", "SLURM_SRUN_COMM_PORT": "42089", "SLURM_STEPID": "0", "SLURM_STEP_ID": "0",
            "SLURM_STEP_LAUNCHER_PORT": "42089", "SLURM_STEP_NODELIST": "h02", "SLURM_STEP_NUM_NODES": "1",
            "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_TASKS_PER_NODE": "1", "SLURM_TASKS_PER_NODE": "1",
            "SLURM_TASK_PID": "13477", "SLURM_TOPOLOGY_ADDR": "h02", "SLURM_UMASK": "0022", "PATH": "/bin"}
    assert clean_environ(step) == {"SLURM_CPUS_ON_NODE": "2", "SLURM_JOBID": "1", "SLURM_JOB_ID": "1",
                                   "SLURM_JOB_NODELIST": "h[01-03]", "SLURM_JOB_NUM_NODES": "3", "PATH": "/bin"}


def test_the_allocation_is_known_by_either_spelling_of_its_job_id() -> None:
    """One place says whether we run inside an allocation (launch used to look at SLURM_JOB_ID alone, and went to
    submit mode inside an allocation that set only the older SLURM_JOBID)."""
    from ascendctl.slurm import allocation_job_id

    assert allocation_job_id({"SLURM_JOB_ID": "41"}) == "41"
    assert allocation_job_id({"SLURM_JOBID": "42"}) == "42"
    assert allocation_job_id({"SLURM_JOB_ID": "", "SLURM_JOBID": ""}) is None
    assert allocation_job_id({}) is None
