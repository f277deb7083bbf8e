"""ascendctl: cluster launcher and ops CLI for multi-node Ascend NPU (and GPU) training.

The core is a library: `from ascendctl import load_inventory, run_command` works in a
script or notebook. Names are imported lazily so `ascendctl --version` stays fast and
Paramiko and Rich load only when needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ascendctl.version import __version__

_EXPORTS = {
    "load_inventory": "inventory.load",
    "parse_inventory": "inventory.load",
    "Inventory": "inventory.load",
    "Node": "inventory.load",
    "run_command": "execute",
    "ExecReport": "execute",
    "fanout": "remote.fanout",
    "NodeGroup": "remote.group",
    "TransportFactory": "remote.transport.factory",
    "Transport": "remote.transport.base",
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
    "env_snippet": "jobs.environment",
    "node_environment": "jobs.environment",
    "cluster_endpoint": "facts.endpoint",
    "resolve_endpoints": "facts.endpoint",
    "RankTableResult": "render",
    "discover_devices": "facts.devices",
    "device_sections": "facts.devices",
    "launch_job": "jobs.service",
    "LaunchOptions": "jobs.plan",
    "LaunchPlan": "jobs.plan",
    "build_plan": "jobs.plan",
    "render_plan": "jobs.plan",
    "stop_job": "jobs.service",
    "dry_run": "jobs.service",
    "list_jobs": "jobs.record",
    "load_job": "jobs.record",
    "JobRecord": "jobs.record",
    "run_preflight": "preflight.run",
    "PreflightReport": "preflight.result",
    "select_checks": "preflight.checks.registry",
    "ALL_CHECKS": "preflight.checks.registry",
    "select_nodes": "inventory.selection",
    "collect_bundle": "bundle.collect",
    "CollectOptions": "bundle.collect",
    "CollectReport": "bundle.collect",
    "unpack_tar_stream": "bundle.archive",
    "compare_topologies": "bundle.summaries",
    "summarize_msprof": "bundle.summaries",
    "summarize_bundle": "bundle.summaries",
    "triage": "triage",
    "TriageReport": "triage.model",
    "Finding": "triage.model",
    "SIGNATURES": "triage.signatures",
    "take_stacks": "stacks.capture",
    "StacksReport": "stacks.model",
}

if TYPE_CHECKING:  # the real names for type checkers (py.typed); at run time they load lazily below
    from .preflight.checks.registry import ALL_CHECKS, select_checks
    from .bundle.archive import unpack_tar_stream
    from .bundle.collect import CollectOptions, CollectReport, collect_bundle
    from .facts.devices import device_sections, discover_devices
    from .jobs.environment import env_snippet, node_environment
    from .errors import AscendctlError, ExitCode
    from .execute import ExecReport, run_command
    from .remote.fanout import fanout
    from .remote.group import NodeGroup
    from .inventory.load import Inventory, Node, load_inventory, parse_inventory
    from .jobs.record import JobRecord, list_jobs, load_job
    from .jobs.plan import LaunchOptions, LaunchPlan, build_plan, render_plan
    from .jobs.service import dry_run, launch_job, stop_job
    from .models import CommandResult, NodeResult, NodeResults, NodeStatus
    from .facts.endpoint import cluster_endpoint, resolve_endpoints
    from .nodeset import fold
    from .preflight.result import PreflightReport
    from .preflight.run import run_preflight
    from .render import RankTableResult, build_rank_table, check_rank_table, check_rank_table_file, render_env, render_hostfile, render_rank_table
    from .inventory.selection import select_nodes
    from .triage.signatures import SIGNATURES
    from .stacks.capture import take_stacks
    from .stacks.model import StacksReport
    from .bundle.summaries import compare_topologies, summarize_bundle, summarize_msprof
    from .remote.transport.base import Transport
    from .remote.transport.factory import TransportFactory
    from .triage import triage
    from .triage.model import Finding, TriageReport

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ascendctl' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
