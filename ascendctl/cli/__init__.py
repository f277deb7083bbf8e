"""Command-line interface: the only package that imports Typer.

Each command is parse -> one core call -> render (ui) -> exit code, in one module per
command group, mounted on `app.app`. The single error boundary is `common.cli_errors`.
"""

from __future__ import annotations

from ascendctl.cli.app import app, inventory_app
# Command groups register themselves on `app` when imported; the order here is the --help order.
from ascendctl.cli import inventory_cmd, exec_cmd, preflight_cmd, netcheck_cmd, render_cmd, launch_cmd, stacks_cmd, collect_cmd, triage_cmd, perf_cmd, report_cmd, nodes_cmd  # noqa: E402,F401  (imported for their commands)

__all__ = ["app", "inventory_app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
