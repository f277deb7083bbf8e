"""The library face: every name in ascendctl.__all__ loads, and a type checker sees real types, not Any."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ascendctl


def test_every_export_resolves() -> None:
    for name in ascendctl.__all__:
        assert getattr(ascendctl, name) is not None, name
    assert {"run_preflight", "PreflightReport", "launch_job", "select_nodes", "collect_bundle", "triage"} <= set(ascendctl.__all__)


def test_a_type_checker_sees_the_real_signatures(tmp_path: Path) -> None:
    user = tmp_path / "user_code.py"
    user.write_text("from ascendctl import load_inventory, run_preflight\n"
                    "report = run_preflight(load_inventory('x.yaml'))\n"
                    "reveal_type(report)\n"
                    "bad: int = report\n")  # must be an error: report is a PreflightReport, not Any
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
                            capture_output=True, text=True, cwd=tmp_path)
    assert 'Revealed type is "ascendctl.preflight.result.PreflightReport"' in result.stdout, result.stdout
    assert "Incompatible types in assignment" in result.stdout, result.stdout
