"""At scale the terminal stays readable: 64 real hosts, one injected error kind, one line per kind.

Errors differ from node to node only by the node's own address; exec, preflight and launch's preflight fold
them into one node set with the message (`<host>` in place of the address) and the hint once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec

runner = CliRunner()
pytestmark = pytest.mark.slow


def test_one_error_kind_on_eight_of_64_hosts_is_one_line_everywhere(cluster_factory: Any, tmp_path: Path) -> None:
    specs = [HostSpec(f"h{i:02d}", chrony="none", known_host=i <= 56) for i in range(1, 65)]
    cluster: Cluster = cluster_factory(specs)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"connect_retries": 0})

    result = runner.invoke(app, ["exec", "-i", str(inventory), "--", "echo same"])
    assert result.exit_code == 4
    blocks = [line for line in result.stdout.splitlines() if line.startswith("h[")]
    assert [b.split(" ")[0] for b in blocks] == ["h[01-56]", "h[57-64]"], blocks
    assert result.stdout.count("unknown host key") == 1, result.stdout
    assert result.stdout.count("hint:") == 1
    assert len([line for line in result.stderr.splitlines() if "h[57-64]" in line]) == 1, result.stderr

    result = runner.invoke(app, ["preflight", "-i", str(inventory), "--only", "ssh,disk,limits"])
    assert result.exit_code == 4
    problem_lines = [line for line in result.stdout.splitlines() if line.startswith(("fail ", "error "))]
    assert problem_lines == [line for line in problem_lines if " h[57-64]: " in line] and len(problem_lines) == 2, problem_lines
    assert result.stdout.count("hint: add it with `ssh-keyscan`") == 1  # the host-key hint once

    result = runner.invoke(app, ["launch", "-i", str(inventory), "--launcher", "torchrun", "--", "/nonexistent/train.py"])
    assert result.exit_code == 4
    failures = [line for line in result.stderr.splitlines() if "h[" in line and ": ssh" in line]
    assert len(failures) == 1 and "h[57-64]" in failures[0], result.stderr
    # the working hosts' missing script is one line too, with its hint once
    assert len([line for line in result.stderr.splitlines() if "script /nonexistent/train.py not found" in line]) == 1
    assert result.stderr.count("put the script on every node") == 1
