"""CLI contract: help everywhere, README coverage, JSON envelope keys, text output shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from ascendctl import __version__
from ascendctl.cli import app

runner = CliRunner()
README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def all_commands() -> list[list[str]]:
    """Every leaf command path, e.g. ['exec'], ['inventory', 'show']."""
    root: Any = get_command(app)
    paths: list[list[str]] = []

    def walk(group: Any, prefix: list[str]) -> None:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                walk(command, prefix + [name])
            else:
                paths.append(prefix + [name])

    walk(root, [])
    return paths


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"ascendctl {__version__}\n"


@pytest.mark.parametrize("path", all_commands(), ids=lambda p: " ".join(p))
def test_every_command_has_help_and_a_readme_mention(path: list[str]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.stdout
    assert re.search(r"\w", result.stdout.split("Usage:")[1])
    assert f"ascendctl {' '.join(path)}" in README, f"README.md does not mention `ascendctl {' '.join(path)}`"


def test_every_exit_code_is_documented_in_readme() -> None:
    from ascendctl.errors import ExitCode

    for code in ExitCode:
        assert re.search(rf"\| {int(code)} \| `{code.name}` \|", README), code


def test_exec_json_envelope_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["exec", "--json", "--", "echo", "hi"], catch_exceptions=False)
    doc = json.loads(result.stdout)
    assert list(doc) == ["schema", "command", "status", "exit_code", "remote_command", "nodes", "errors"]
    assert doc["schema"] == 1 and doc["status"] == "ok" and doc["exit_code"] == 0
    assert doc["remote_command"] == "echo hi"
    (node,) = doc["nodes"]
    assert set(node) >= {"name", "host", "status", "exit_code", "stdout", "stderr", "error"}
    assert node["stdout"] == "hi\n" and node["status"] == "ok"
    assert result.stderr == ""


def test_exec_text_output_groups_by_outcome(write_inventory: Any) -> None:
    path = write_inventory(
        "defaults: {transport: local}\nnodes:\n  - {host: 'l[1-3]'}\n  - {host: x1}\n"
    )
    result = runner.invoke(app, ["exec", "-i", str(path), "--", "echo same; [ $$ -gt 0 ]"], catch_exceptions=False)
    assert result.exit_code == 0
    header = "l[1-3],x1 (4) ok, exit 0 "
    assert result.stdout.splitlines()[:2] == [header + "-" * (100 - len(header)), "same"]
    result = runner.invoke(app, ["exec", "-i", str(path), "--", "echo $$"], catch_exceptions=False)
    assert len([line for line in result.stdout.splitlines() if line.endswith("ok, exit 0 " + "-" * 3) or " (1) ok" in line]) == 4


def test_node_text_with_markup_is_printed_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["exec", "--", "echo '[bold]x[/] [/]'"], catch_exceptions=False)
    assert "[bold]x[/] [/]" in result.stdout


def test_inventory_show_lists_sources(write_inventory: Any) -> None:
    path = write_inventory("defaults: {slots: 4}\nnodes:\n  - {host: 'n[1-3]'}\n  - {host: m1, slots: 2}\n")
    result = runner.invoke(app, ["inventory", "show", "-i", str(path)], catch_exceptions=False)
    assert result.exit_code == 0
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["slots", "4", "inventory", "n[1-3]"] in rows
    assert ["slots", "2", "node", "m1"] in rows
    assert ["port", "22", "default", "m1,n[1-3]"] in rows
    doc = json.loads(runner.invoke(app, ["inventory", "show", "-i", str(path), "--json"]).stdout)
    assert [n["name"] for n in doc["nodes"]] == ["n1", "n2", "n3", "m1"]
    assert doc["nodes"][3]["settings"]["slots"] == {"value": 2, "source": "node"}


def test_inventory_show_never_prints_a_secret(write_inventory: Any) -> None:
    path = write_inventory("defaults: {env: {DB_PASSWORD: hunter2-pw, DATA: 'https://u:tok3n-x@h/p', MODE: fast}}\n"
                           "nodes:\n  - {host: n1}\n")
    for extra in ([], ["--json"]):
        result = runner.invoke(app, ["inventory", "show", "-i", str(path), *extra], catch_exceptions=False)
        assert result.exit_code == 0 and "MODE" in result.stdout
        assert "hunter2-pw" not in result.stdout and "tok3n-x" not in result.stdout, result.stdout


def test_inventory_validate_reports_every_problem_and_no_traceback(write_inventory: Any) -> None:
    path = write_inventory("defaults: {prot: 22}\nnodes:\n  - {host: a}\n  - {host: a}\n")
    result = runner.invoke(app, ["inventory", "validate", "-i", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"ascendctl: error: {path}:1: defaults.prot: unknown key (did you mean port?)",
        f"ascendctl: error: {path}:4: nodes[1].host: duplicate host 'a' (also in nodes[0])",
    ]
    assert "Traceback" not in result.output


def test_cli_errors_lets_typer_exit_through() -> None:
    from ascendctl.cli.common import cli_errors

    @cli_errors
    def exits() -> None:
        raise typer.Exit(3)

    with pytest.raises(typer.Exit) as info:
        exits()
    assert info.value.exit_code == 3


def test_shell_completion_is_on_and_completes_commands_and_options() -> None:
    """`--show-completion` prints a script, and the completion protocol it calls answers with our commands."""
    import os
    import subprocess
    import sys

    from pathlib import Path

    exe = str(Path(sys.executable).with_name("ascendctl"))  # the installed console script, as a shell would run it
    script = subprocess.run([exe, "--show-completion", "bash"], capture_output=True, text=True)
    assert script.returncode == 0 and "_ascendctl_completion" in script.stdout and "complete " in script.stdout
    env = {**os.environ, "_ASCENDCTL_COMPLETE": "complete_bash", "COMP_WORDS": "ascendctl pre", "COMP_CWORD": "1"}
    words = subprocess.run([exe], env=env, capture_output=True, text=True).stdout.split()
    assert "preflight" in words and "exec" not in words
    env.update(COMP_WORDS="ascendctl exec --no", COMP_CWORD="2")
    words = subprocess.run([exe], env=env, capture_output=True, text=True).stdout.split()
    assert "--nodes" in words


def test_verbosity_flags_are_accepted_after_the_command() -> None:
    for flags in (["-v"], ["-vv"], ["-q"], ["--debug"]):
        result = runner.invoke(app, ["inventory", "validate", *flags])
        assert result.exit_code == 0, (flags, result.output)
    assert runner.invoke(app, ["inventory", "validate", "-v", "2"]).exit_code == 2  # -v counts; it takes no value


def test_the_node_options_are_declared_once() -> None:
    """-i -w -x --connect-timeout --command-timeout --fanout --accept-new-host-keys --rerun-failed: declared in
    cli/common.py only (NODE_OPTIONS); each command names the ones it takes, and every command shows them alike."""
    from ascendctl.cli.common import NODE_OPTIONS

    package = Path(__file__).resolve().parent.parent / "ascendctl" / "cli"
    for module in package.glob("*_cmd.py"):
        text = module.read_text(encoding="utf-8")
        for declared in ("InventoryOpt", "ConnectTimeoutOpt", "CommandTimeoutOpt", "FanoutOpt", "AcceptKeysOpt", "RerunFailedOpt",
                         "flags_of("):
            assert declared not in text, f"{module.name} declares {declared} itself"
    group = typer.main.get_command(app)
    helps: dict[str, set[str]] = {}

    def walk(command: Any) -> None:
        if hasattr(command, "commands"):  # a group
            for sub in command.commands.values():
                walk(sub)
            return
        for param in command.params:
            if param.name in NODE_OPTIONS and param.name != "nodes":  # `render env -w` and `logs -w` say what they do there
                helps.setdefault(param.name, set()).add(f"{param.opts} {getattr(param, 'help', '')}")

    walk(group)
    assert set(helps) == set(NODE_OPTIONS) - {"nodes"}
    assert {name: len(texts) for name, texts in helps.items()} == {name: 1 for name in helps}
