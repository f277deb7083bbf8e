"""Architecture rules: only cli imports typer, only ui imports rich, paramiko loads only for SSH."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ascendctl"


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_does_not_import_cli_stack() -> None:
    code = (
        "import ascendctl.fanout, ascendctl.inventory, ascendctl.execute, ascendctl.transport.local, "
        "ascendctl.transport.ssh, sys; assert not {'typer', 'rich', 'click'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_only_cli_imports_typer_and_only_ui_imports_rich() -> None:
    for path in PACKAGE.rglob("*.py"):
        modules = imported_modules(path)
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith("cli/"):
            assert "typer" not in modules, rel
        if not rel.startswith("ui/"):
            assert "rich" not in modules, rel
        assert "click" not in modules, rel
        if rel != "report/html.py":
            assert "jinja2" not in modules, rel
        if rel != "transport/ssh.py":
            assert "paramiko" not in modules, rel


def test_version_and_local_exec_do_not_load_paramiko() -> None:
    code = (
        "import sys; sys.argv=['ascendctl','--version']\n"
        "from ascendctl import cli\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "assert 'paramiko' not in sys.modules and 'rich.progress' not in sys.modules\n"
        "from ascendctl import load_inventory, run_command\n"
        "r = run_command(load_inventory(None, environ={}), 'true')\n"
        "assert r.exit_code == 0 and 'paramiko' not in sys.modules"
    )
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/", env=env)
