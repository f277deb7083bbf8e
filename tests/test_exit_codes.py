"""One test per ExitCode member, through the real CLI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ascendctl import cli
from ascendctl.errors import ExitCode
from ascendctl.outcome import Outcome

runner = CliRunner()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ok_is_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, ["exec", "--", "true"], catch_exceptions=False)
    assert result.exit_code == ExitCode.OK == 0


def test_error_is_1_for_an_internal_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("something broke")

    monkeypatch.setattr("ascendctl.execute.run_command", broken)
    result = runner.invoke(cli.app, ["exec", "--", "true"])
    assert result.exit_code == ExitCode.ERROR == 1
    assert "ascendctl: internal error: ValueError: something broke (details: " in result.stderr
    assert "Traceback" not in result.output


def test_usage_is_2_for_bad_flags_and_bad_inventory(write_inventory) -> None:  # type: ignore[no-untyped-def]
    assert runner.invoke(cli.app, ["exec", "--no-such-flag", "--", "true"]).exit_code == ExitCode.USAGE == 2
    path = write_inventory("nodes:\n  - {host: a, slot: 4}\n")
    result = runner.invoke(cli.app, ["inventory", "validate", "-i", str(path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"ascendctl: error: {path}:2: nodes[0].slot: unknown key (did you mean slots?)\n"


def test_checks_failed_is_3_when_the_command_fails_somewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, ["exec", "--", "exit 7"], catch_exceptions=False)
    assert result.exit_code == ExitCode.CHECKS_FAILED == 3
    assert "failed, exit 7" in result.stdout


def test_nodes_unreachable_is_4(write_inventory) -> None:  # type: ignore[no-untyped-def]
    port = closed_port()
    path = write_inventory(f"defaults: {{port: {port}, connect_timeout: 2, connect_retries: 0}}\nnodes: [127.0.0.1]\n")
    result = runner.invoke(cli.app, ["exec", "-i", str(path), "--", "true"], catch_exceptions=False)
    assert result.exit_code == ExitCode.NODES_UNREACHABLE == 4
    assert f"connection refused by 127.0.0.1:{port}" in result.stdout


def test_nodes_unreachable_wins_over_checks_failed(write_inventory) -> None:  # type: ignore[no-untyped-def]
    port = closed_port()
    path = write_inventory(
        f"defaults: {{connect_retries: 0}}\nnodes:\n  - {{host: local1, transport: local}}\n  - {{host: 127.0.0.1, port: {port}}}\n"
    )
    result = runner.invoke(cli.app, ["exec", "-i", str(path), "--", "false"], catch_exceptions=False)
    assert result.exit_code == 4


def test_interrupted_is_130_and_names_incomplete_nodes(tmp_path: Path) -> None:
    pause = f"30.{os.getpid()}"  # a duration no other process on the machine sleeps: pgrep finds only ours
    env = {**os.environ, "PYTHONPATH": str(Path(cli.__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ascendctl", "exec", "--", f"sleep {pause}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60  # a hang guard on a loaded machine, not a speed assertion
    while subprocess.run(["pgrep", "-f", f"^sleep {pause}$"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline and proc.poll() is None, "the command never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == ExitCode.INTERRUPTED == 130
    assert "ascendctl: error: interrupted: " in err and "did not complete" in err
    assert subprocess.run(["pgrep", "-f", f"^sleep {pause}$"], capture_output=True).returncode == 1


def test_job_failed_is_5_when_the_training_job_ran_and_failed(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    launcher = bin_dir / "torchrun"
    launcher.write_text("#!/bin/sh\necho 'rank 0: ValueError: bad input'\nexit 7\n")
    launcher.chmod(0o755)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"defaults:\n  transport: local\n  slots: 1\n  python: {bin_dir}/python\nnodes:\n  - {{name: a, host: 127.0.0.1}}\n")
    result = runner.invoke(cli.app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--log-dir",
                                     str(tmp_path / "logs"), "--", "train.py"], catch_exceptions=False)
    assert result.exit_code == ExitCode.JOB_FAILED == 5, result.output
    status = runner.invoke(cli.app, ["status"], catch_exceptions=False)
    assert status.exit_code == 5 and "failed" in status.stdout


@pytest.mark.parametrize("name, code", [("SIGINT", ExitCode.INTERRUPTED), ("SIGTERM", ExitCode.TERMINATED), ("SIGHUP", ExitCode.HANGUP)])
def test_stop_signals_exit_128_plus_their_number(name: str, code: ExitCode) -> None:
    # end to end, launch on local nodes: tests/test_launch.py::test_stop_signals_tear_down_every_node_...
    from ascendctl.errors import STOP_SIGNALS, stop_exit_code
    from ascendctl.outcome import EXIT_CODES, exit_code_for, stop_outcome

    assert name in STOP_SIGNALS
    assert stop_exit_code(name) == code == 128 + signal.Signals[name]
    assert EXIT_CODES[stop_outcome(name)] == code
    assert exit_code_for([stop_outcome(name), Outcome.ERROR, Outcome.JOB_FAILED]) == code  # a stop signal wins
