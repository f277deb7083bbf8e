"""ascendctl: cluster launcher and ops CLI for multi-node Ascend NPU (and GPU) training.

The core is a library: `from ascendctl import load_inventory, run_command` works in a
script or notebook. Names are imported lazily so `ascendctl --version` stays fast and
Paramiko and Rich load only when needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_inventory": "inventory",
    "parse_inventory": "inventory",
    "Inventory": "inventory",
    "Node": "inventory",
    "run_command": "execute",
    "ExecReport": "execute",
    "fanout": "fanout",
    "NodeGroup": "group",
    "TransportFactory": "transport",
    "Transport": "transport",
    "CommandResult": "models",
    "NodeResult": "models",
    "NodeResults": "models",
    "NodeStatus": "models",
    "AscendctlError": "errors",
    "ExitCode": "errors",
    "fold": "nodeset",
    "render_hostfile": "render",
    "render_rank_table": "render",
    "build_rank_table": "render",
    "check_rank_table": "render",
    "check_rank_table_file": "render",
    "render_env": "render",
    "env_snippet": "environment",
    "node_environment": "environment",
    "cluster_endpoint": "network",
    "resolve_endpoints": "network",
    "RankTableResult": "render",
    "discover_devices": "devices",
    "device_sections": "devices",
    "launch_job": "jobs",
    "LaunchOptions": "jobs",
    "LaunchPlan": "jobs",
    "build_plan": "jobs",
    "render_plan": "jobs",
    "stop_job": "jobs",
    "dry_run": "jobs",
    "list_jobs": "jobs",
    "load_job": "jobs",
    "JobRecord": "jobs",
    "run_preflight": "preflight",
    "PreflightReport": "preflight",
    "select_checks": "checks",
    "ALL_CHECKS": "checks",
    "select_nodes": "selection",
    "collect_bundle": "collect",
    "CollectOptions": "collect",
    "CollectReport": "collect",
    "unpack_tar_stream": "collect",
    "compare_topologies": "summaries",
    "summarize_msprof": "summaries",
    "summarize_bundle": "summaries",
    "triage": "triage",
    "TriageReport": "triage",
    "Finding": "triage",
    "SIGNATURES": "signatures",
    "take_stacks": "stacks",
    "StacksReport": "stacks",
}

if TYPE_CHECKING:  # the real names for type checkers (py.typed); at run time they load lazily below
    from .checks import ALL_CHECKS, select_checks
    from .collect import CollectOptions, CollectReport, collect_bundle, unpack_tar_stream
    from .devices import device_sections, discover_devices
    from .environment import env_snippet, node_environment
    from .errors import AscendctlError, ExitCode
    from .execute import ExecReport, run_command
    from .fanout import fanout
    from .group import NodeGroup
    from .inventory import Inventory, Node, load_inventory, parse_inventory
    from .jobs import JobRecord, LaunchOptions, LaunchPlan, build_plan, dry_run, launch_job, list_jobs, load_job, render_plan, stop_job
    from .models import CommandResult, NodeResult, NodeResults, NodeStatus
    from .network import cluster_endpoint, resolve_endpoints
    from .nodeset import fold
    from .preflight import PreflightReport, run_preflight
    from .render import RankTableResult, build_rank_table, check_rank_table, check_rank_table_file, render_env, render_hostfile, render_rank_table
    from .selection import select_nodes
    from .signatures import SIGNATURES
    from .stacks import StacksReport, take_stacks
    from .summaries import compare_topologies, summarize_bundle, summarize_msprof
    from .transport import Transport, TransportFactory
    from .triage import Finding, TriageReport, triage

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ascendctl' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
