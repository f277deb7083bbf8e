"""tests/sim/npu_smi.py: the generated POSIX sh npu-smi replays real samples and its mutations parse back."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ascendctl.facts.parsers.npu_smi import Health, parse_npu_health, parse_npu_info, parse_npu_topo
from tests.sim.npu_smi import SAMPLE_FILES, SAMPLES, npu_smi_script, read_sample


def run(script: str, tmp_path: Path, command: str) -> subprocess.CompletedProcess[str]:
    """Install ``script`` as npu-smi on PATH and run ``command`` with sh -c."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "npu-smi"
    exe.write_text(script, encoding="utf-8")
    exe.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C"}
    return subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=10)


@pytest.mark.parametrize("sample", ["910B4", "910C", "910A", "310P3"])
def test_unmutated_info_replays_the_sample(sample: str, tmp_path: Path) -> None:
    result = run(npu_smi_script(sample), tmp_path, "npu-smi info")
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip("\n") == read_sample(SAMPLE_FILES[sample]).rstrip("\n")
    assert parse_npu_info(result.stdout) == parse_npu_info((SAMPLES / SAMPLE_FILES[sample]).read_text())


def test_script_is_posix_sh_with_quoted_heredocs() -> None:
    script = npu_smi_script("910B4", health={1: "Alarm"})
    assert script.startswith("#!/bin/sh\n")
    assert "<<'ASCENDCTL_NPU_SMI_EOF'" in script
    assert "# SOURCE" not in script and "# DESC" not in script
    if shutil.which("dash"):
        subprocess.run(["dash", "-n"], input=script, text=True, check=True)


def test_health_alarm_shows_in_info_and_health_query(tmp_path: Path) -> None:
    script = npu_smi_script("910B4", health={3: "Alarm"})
    info = parse_npu_info(run(script, tmp_path, "npu-smi info").stdout)
    assert info.health_of(3) is Health.ALARM
    assert [info.health_of(n) for n in (0, 1, 2, 4, 5, 6, 7)] == [Health.OK] * 7
    alarm = run(script, tmp_path, "npu-smi info -t health -i 3")
    assert alarm.returncode == 0
    assert parse_npu_health(alarm.stdout).health is Health.ALARM
    assert parse_npu_health(run(script, tmp_path, "npu-smi info -i 0 -c 0 -t health").stdout).health is Health.OK


def test_a3_health_applies_to_both_dies(tmp_path: Path) -> None:
    info = parse_npu_info(run(npu_smi_script("910C", health={5: "Critical"}), tmp_path, "npu-smi info").stdout)
    assert [chip.health for chip in info.chips_of(5)] == [Health.CRITICAL, Health.CRITICAL]
    assert info.npu_count == 8


def test_dropped_device_gives_seven_of_eight(tmp_path: Path) -> None:
    script = npu_smi_script("910B4", drop_devices={6})
    info = parse_npu_info(run(script, tmp_path, "npu-smi info").stdout)
    assert info.npu_ids == (0, 1, 2, 3, 4, 5, 7)
    assert [p.pid for p in info.processes] == [582939, 695171, 99976]  # NPU 6's process went with it
    topo = parse_npu_topo(run(script, tmp_path, "npu-smi info -t topo").stdout)
    assert topo.columns == ("NPU0", "NPU1", "NPU2", "NPU3", "NPU4", "NPU5", "NPU7")
    assert topo.row("NPU7").cpu_affinity == "48-71"
    missing = run(script, tmp_path, "npu-smi info -t health -i 6")
    assert missing.returncode != 0
    assert "6" in missing.stderr


def test_process_rows_added_and_cleared(tmp_path: Path) -> None:
    script = npu_smi_script("910B4", clear_processes=True, processes=[(2, 4242, "python3", 1234), (2, 4243, "", 10)])
    info = parse_npu_info(run(script, tmp_path, "npu-smi info").stdout)
    assert [(p.npu_id, p.chip_id, p.pid, p.name, p.memory) for p in info.processes] == [(2, 0, 4242, "python3", 1234), (2, 0, 4243, "", 10)]
    assert info.idle_npus == (0, 1, 3, 4, 5, 6, 7)


def test_process_rows_added_to_a_busy_a3_npu(tmp_path: Path) -> None:
    info = parse_npu_info(run(npu_smi_script("910C", processes=[(4, 777, "torchrun", 64)]), tmp_path, "npu-smi info").stdout)
    assert [p.pid for p in info.processes_of(4)] == [957687, 957770, 777]


def test_topo_replays_the_sample(tmp_path: Path) -> None:
    result = run(npu_smi_script("910B4"), tmp_path, "npu-smi info -t topo")
    assert result.returncode == 0
    assert parse_npu_topo(result.stdout) == parse_npu_topo((SAMPLES / "npu-smi-info-t-topo_910B_8npu.txt").read_text())


def test_topo_unavailable_for_boards_without_a_sample(tmp_path: Path) -> None:
    result = run(npu_smi_script("310P3"), tmp_path, "npu-smi info -t topo")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "topology" in result.stderr


@pytest.mark.parametrize("command", ["npu-smi", "npu-smi bogus", "npu-smi info -x", "npu-smi info -t", "npu-smi info -t ecc -i 0"])
def test_unknown_arguments_fail_with_a_message(command: str, tmp_path: Path) -> None:
    result = run(npu_smi_script("910B4"), tmp_path, command)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "invalid command or parameter" in result.stderr
    assert "Usage: npu-smi info" in result.stderr


def test_help(tmp_path: Path) -> None:
    result = run(npu_smi_script("910A"), tmp_path, "npu-smi info -h")
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]")


def test_bad_mutations_are_rejected() -> None:
    with pytest.raises(ValueError, match="sample"):
        npu_smi_script("910Z")
    with pytest.raises(ValueError, match="not in the 910A sample"):
        npu_smi_script("910A", health={7: "Alarm"})
    with pytest.raises(ValueError, match="does not fit"):
        npu_smi_script("910B4", health={0: "A very long health description"})
