"""Deeply nested JSON from outside (a file on the command line, a bundle, a node's output, a state file).

The stdlib parser raises RecursionError on a few thousand levels of `[`; every reader goes through
errors.parse_json, which makes that a ValueError, so each reader's own "not valid JSON" path applies
(issue #30: `render ranktable --check` died with a RecursionError traceback).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ascendctl.errors import parse_json
from ascendctl.netcheck.backends import BackendOutputError, parse_received

DEEP = "[" * 100_000 + "]" * 100_000


def ascendctl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ascendctl", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_parse_json_makes_deep_nesting_a_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json(DEEP)
    with pytest.raises(ValueError):
        parse_json(b"{" + b'"a":' * 50_000)
    assert parse_json("[[1]]") == [[1]]


def test_ranktable_check_of_deep_json_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "inv.yaml").write_text("nodes:\n  - {host: 10.0.0.1, name: n1, device_ips: [10.1.0.1]}\n")
    (tmp_path / "rt.json").write_text(DEEP)
    result = ascendctl("render", "ranktable", "-i", "inv.yaml", "--check", "rt.json", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert "rt.json: not valid JSON: JSON nested too deeply" in result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr


def test_report_of_a_deep_json_document_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "doc.json").write_text(DEEP)
    result = ascendctl("report", "doc.json", "-o", "r.html", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "doc.json" in result.stderr and "nested too deeply" in result.stderr and "Traceback" not in result.stderr


def test_triage_of_a_bundle_with_a_deep_job_record_notes_it_and_goes_on(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    logs = bundle / "nodes" / "n1" / "logs"
    logs.mkdir(parents=True)
    (bundle / "job.json").write_text(DEEP)
    (logs / "launcher.log").write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    result = ascendctl("triage", str(bundle), "--json", cwd=tmp_path)
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr, result.stderr
    assert result.returncode in (0, 3), result.stderr


def test_a_node_printing_deep_json_as_its_result_is_unreadable_output() -> None:
    with pytest.raises(BackendOutputError, match="unreadable result line"):
        parse_received("{" + '"a":{' * 50_000)
