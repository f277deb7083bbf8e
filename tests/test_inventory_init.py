"""`ascendctl inventory init`: a commented inventory that loads back as the nodes it was written from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.inventory.load import load_inventory

runner = CliRunner()


def init(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["inventory", "init", *args])
    return result.exit_code, result.stdout, result.stderr


def test_from_a_hostfile_the_written_file_loads_as_the_same_nodes(tmp_path: Path) -> None:
    hosts = tmp_path / "hostfile"
    hosts.write_text("# rack 1\n10.0.0.1 slots=8\n10.0.0.2 slots=8 max_slots=8\n10.0.0.3:4\n")
    out = tmp_path / "inv.yaml"
    code, stdout, stderr = init("--from-hostfile", str(hosts), "-o", str(out))
    assert code == 0, stderr
    assert stdout == f"{out}\n"
    assert f"wrote 3 node(s) from the hostfile {hosts} to {out}" in stderr
    written = load_inventory(out)
    assert [(n.name, n.host, n.slots) for n in written.nodes] == [(n.name, n.host, n.slots) for n in load_inventory(hosts).nodes]
    text = out.read_text()
    assert "  slots: 8 " in text and "  - {host: 10.0.0.3, slots: 4}" in text  # the common value once, the odd one per node
    for key in ("# user:", "# identity_file:", "# known_hosts:", "# interface:", "# preflight:", "#   min_mtu: 9000",
                "#   max_clock_skew: 1.0", "# groups:"):
        assert key in text, key
    assert "SSH user" in text and "cluster network interface" in text  # each key is explained
    # Round trip: uncommenting the documented keys still gives a valid inventory.
    uncommented = text.replace("  # user: root", "  user: root").replace("  # interface: eth0", "  interface: eth0")
    out.write_text(uncommented)
    assert {(n.user, n.interface) for n in load_inventory(out).nodes} == {("root", "eth0")}


def test_from_a_node_set_and_to_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDCTL_SLOTS", "3")  # the environment does not leak into the file
    code, stdout, _ = init("-w", "n[01-03],login1", "-o", "-")
    assert code == 0
    target = tmp_path / "from-stdout.yaml"
    target.write_text(stdout)
    monkeypatch.delenv("ASCENDCTL_SLOTS")
    assert [(n.name, n.host, n.slots) for n in load_inventory(target).nodes] == [  # in NodeSet's sorted order
        ("login1", "login1", 8), ("n01", "n01", 8), ("n02", "n02", 8), ("n03", "n03", 8)]


def test_existing_files_are_kept_without_force(tmp_path: Path) -> None:
    out = tmp_path / "inventory.yaml"
    out.write_text("keep me\n")
    code, _, stderr = init("-w", "n1", "-o", str(out))
    assert code == 2 and f"{out}: already exists; not overwritten" in stderr and "--force" in stderr
    assert out.read_text() == "keep me\n"
    code, _, _ = init("-w", "n1", "-o", str(out), "--force")
    assert code == 0 and load_inventory(out).names == ["n1"]


@pytest.mark.parametrize("args, message", [
    ((), "no nodes to write"),
    (("-w", "n[1-200000]"), "stands for 200,000 names"),
    (("-w", "n1", "--from-hostfile", "x"), "give one source of nodes"),
])
def test_bad_sources_are_usage_errors(args: tuple[str, ...], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOBID", raising=False)
    code, _, stderr = init(*args)
    assert code == 2 and message in stderr and "Traceback" not in stderr
    assert not (tmp_path / "inventory.yaml").exists()


def test_a_bad_hostfile_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    hosts = tmp_path / "hostfile"
    hosts.write_text("n1 slots=8\nn2 slots=-1\n")
    code, _, stderr = init("--from-hostfile", str(hosts), "-o", str(tmp_path / "inv.yaml"))
    assert code == 2 and f"{hosts}:2: slots:" in stderr
    assert not (tmp_path / "inv.yaml").exists()


def test_from_the_slurm_allocation_through_scontrol_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """slurm.py finds `scontrol` on PATH, so a fake one stands in for the Slurm client here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text('#!/bin/sh\n'
                        'case "$1 $2" in\n'
                        '  "show hostnames") printf "h01\\nh02\\n" ;;\n'
                        '  "show node") printf "NodeName=h01 NodeAddr=10.1.0.1 State=ALLOCATED\\n'
                        'NodeName=h02 NodeAddr=10.1.0.2 State=ALLOCATED\\n" ;;\n'
                        '  *) echo "unexpected: $*" >&2; exit 1 ;;\n'
                        'esac\n')
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "h[01-02]")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "4")
    out = tmp_path / "inv.yaml"
    code, _, stderr = init("-o", str(out))
    assert code == 0, stderr
    assert "from the nodes of Slurm job 42" in out.read_text()
    monkeypatch.delenv("SLURM_JOB_ID")
    written = load_inventory(out)
    assert [(n.name, n.host, n.slots, n.transport) for n in written.nodes] == [
        ("h01", "10.1.0.1", 4, "ssh"), ("h02", "10.1.0.2", 4, "ssh")]
