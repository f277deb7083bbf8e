"""ascendctl: cluster launcher and ops CLI for multi-node Ascend NPU (and GPU) training.

The core is a library: `from ascendctl import load_inventory, run_command` works in a
script or notebook. Names are imported lazily so `ascendctl --version` stays fast and
Paramiko and Rich load only when needed.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

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
    "device_ip_probe_cmd": "devices",
    "launch_job": "launch",
    "LaunchOptions": "launch",
    "LaunchPlan": "launch",
    "build_plan": "launch",
    "render_plan": "launch",
    "stop_job": "launch",
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
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ascendctl' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
