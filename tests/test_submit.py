"""Submit mode (`launch --backend slurm` outside an allocation, jobs/submit.py) and quarantined nodes: they go into the
batch script as `#SBATCH --exclude=...` and are said once; --include-quarantined excludes nothing and reaches the
launch inside the allocation. Stand-in `scontrol` and `sbatch` on PATH (as tests/test_nodestate.py's); the real
Slurm cluster: tests/cluster/test_slurm_hosts.py."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.inventory.load import load_inventory
from ascendctl.inventory.nodestate import quarantine_nodes, submit_exclusions
from ascendctl.jobs.plan import LaunchOptions
from ascendctl.jobs.submit import render_submission, submit, submit_options
from ascendctl.slurm import Allocation

runner = CliRunner()


@pytest.fixture
def slurm_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-in `scontrol` (its config names the cluster `c1`; `update` drains) and `sbatch` (keeps the script it was
    given on stdin, answers job 77); every call is logged, one line each."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "slurm.log"
    (bin_dir / "scontrol").write_text(f"""#!/bin/sh
echo "scontrol $*" >> {log}
case "$1 $2" in
  "show config") printf 'Configuration data as of 2026-11-26T23:00:00\\nAccountingStorageType = (null)\\nClusterName             = c1\\n' ;;
  "update "*) ;;
  *) echo "unexpected: $*" >&2; exit 1 ;;
esac
""")
    (bin_dir / "sbatch").write_text(f"""#!/bin/sh
echo "sbatch $*" >> {log}
cat > {tmp_path}/submitted.sh
echo "77;c1"
""")
    for tool in ("scontrol", "sbatch"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CLUSTER_NAME", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    return log


def quarantine_in_an_allocation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """What `nodes quarantine` (or a restart) inside an allocation of cluster c1 records: the cluster's node state."""
    (tmp_path / "alloc.yaml").write_text("nodes:\n  - {name: 'h0[1-4]', host: 'h0[1-4]'}\n")
    inv = load_inventory(tmp_path / "alloc.yaml")
    inv = replace(inv, allocation=Allocation("42", inv.names, "test"), source="<Slurm job 42>")
    with monkeypatch.context() as inside:
        inside.setenv("SLURM_CLUSTER_NAME", "c1")
        quarantine_nodes(inv, list(names), "HARDWARE in job j1", by="a", command="launch --restarts")


def backend_inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text("backend: slurm\nslurm: {nodes: 2, partition: debug}\ndefaults: {slots: 1}\n")
    return path


def test_quarantined_nodes_of_the_cluster_are_excluded_from_the_batch_script_and_said_once(
        tmp_path: Path, slurm_tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quarantine_in_an_allocation(tmp_path, monkeypatch, "h02", "h04")
    inv = backend_inventory(tmp_path)
    result = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--dry-run", "--", "train.py"])
    assert result.exit_code == 0, result.output
    assert "#SBATCH --partition=debug\n#SBATCH --exclude=h02,h04\n" in result.stdout
    assert "--include-quarantined" not in result.stdout
    said = [line for line in result.stderr.splitlines() if "quarantined" in line]
    assert said == ["ascendctl: notice: leaving out 2 quarantined nodes: h[02,04] (sbatch --exclude; ascendctl nodes; "
                    "--include-quarantined to use them)"], result.stderr
    assert "scontrol show config" in slurm_tools.read_text()  # outside a job the cluster's name is Slurm's own


def test_include_quarantined_excludes_nothing_and_the_launch_inside_keeps_them_too(
        tmp_path: Path, slurm_tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quarantine_in_an_allocation(tmp_path, monkeypatch, "h02")
    result = runner.invoke(app, ["launch", "-i", str(backend_inventory(tmp_path)), "--launcher", "torchrun", "--dry-run",
                                 "--include-quarantined", "--", "train.py"])
    assert result.exit_code == 0, result.output
    assert "--exclude" not in result.stdout and "quarantined" not in result.stderr
    assert " --include-quarantined -- train.py" in result.stdout  # the inner launch takes them as well


def test_sbatch_is_given_the_script_with_the_exclusion(tmp_path: Path, slurm_tools: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    quarantine_in_an_allocation(tmp_path, monkeypatch, "h03")
    inv = load_inventory(backend_inventory(tmp_path), submit=True)
    wanted = submit_options(inv, None, None, None, None, exclude=tuple(submit_exclusions(inv)))
    job = submit(render_submission(LaunchOptions("torchrun", ("train.py",)), wanted, job_id="j9"))
    assert job == "77"
    assert "#SBATCH --exclude=h03\n" in (tmp_path / "submitted.sh").read_text()


def test_the_exclusions_join_the_inventorys_own_quarantined_nodes_and_skip_names_that_are_not_node_names(
        tmp_path: Path, slurm_tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An SSH inventory submitted with --backend slurm: its own node state counts too; a state file edited by hand
    cannot put a line into the batch script."""
    quarantine_in_an_allocation(tmp_path, monkeypatch, "h01")
    path = tmp_path / "ssh.yaml"
    path.write_text("slurm: {nodes: 1}\nnodes:\n  - {name: 'h0[1-4]', host: 'h0[1-4]'}\n")
    inv = load_inventory(path, submit=True)
    book = quarantine_nodes(inv, ["h04"], "preflight: npu.count", by="a", command="preflight").book
    assert list(submit_exclusions(inv)) == ["h01", "h04"]
    book.path.write_text(book.path.read_text().replace('"h04"', '"h04\\n#SBATCH --wrap=x"'))
    assert list(submit_exclusions(inv)) == ["h01"]
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "other")  # another cluster's state is not this one's
    assert list(submit_exclusions(inv)) == []


def test_a_submission_without_quarantined_nodes_or_with_include_quarantined_has_no_exclude_line() -> None:
    from ascendctl.inventory.load import parse_inventory

    inv = parse_inventory("backend: slurm\nslurm: {nodes: 1}\n", source="inv.yaml", environ={}, submit=True)
    for wanted in (submit_options(inv, None, None, None, None),
                   submit_options(inv, None, None, None, None, exclude=("h1",), include_quarantined=True)):
        script = render_submission(LaunchOptions("torchrun", ("t.py",)), wanted, job_id="j1").script
        assert "--exclude" not in script
    assert "#SBATCH --exclude=h1\n" in render_submission(
        LaunchOptions("torchrun", ("t.py",)), submit_options(inv, None, None, None, None, exclude=("h1",)), job_id="j1").script


def test_submit_mode_refuses_restarts_and_its_inner_launch_never_runs_the_inventorys_loop(
        tmp_path: Path, slurm_tools: Path) -> None:
    """The submitting launch follows one job id: a restart loop inside the allocation would go on under other ids."""
    inv = backend_inventory(tmp_path)
    flagged = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--restarts", "2", "--dry-run",
                                  "--", "train.py"])
    assert flagged.exit_code == 2 and "restarts run inside a Slurm allocation, not in submit mode" in flagged.stderr
    assert "(asked by --restarts 2;" in flagged.stderr
    inv.write_text(inv.read_text() + "restart: {restarts: 3}\n")
    from_file = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--dry-run", "--", "train.py"])
    assert from_file.exit_code == 2 and "--restarts 0 to submit without restarts" in from_file.stderr
    assert f"(asked by {inv}:4: restart.restarts = 3;" in from_file.stderr  # a user who gave no flag is told why
    off = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--restarts", "0", "--dry-run",
                              "--", "train.py"])
    assert off.exit_code == 0, off.output
    assert " --restarts 0 " in off.stdout  # the launch inside the allocation does not take the file's restart.restarts
