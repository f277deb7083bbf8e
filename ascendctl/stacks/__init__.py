"""`ascendctl stacks`: every rank's Python stack of a running job, merged, with the stuck rank named (issue #27).

- hook.py           where `launch` ships the hook (pyhook/sitecustomize.py, first on PYTHONPATH) and the signal it uses
- sitecustomize.py  the hook itself: data shipped to the nodes, run by the job's own Python, never imported here
- parse.py          faulthandler's text, py-spy's JSON and stacks_node.sh's framed answer (pure)
- merge.py          the prefix tree with rank sets, the equivalence classes, the suspect (pure)
- capture.py        take_stacks: sh/stacks_node.sh on every node at once, over the job's nodes (jobs.reach.job_inventory)
- model.py          the frozen records and their JSON (schemas/stacks.schema.json)

Must not import typer or rich; nothing here imports ascendctl.jobs.service at import time (jobs imports hook.py).
"""

from __future__ import annotations

from ascendctl.stacks.capture import DEFAULT_WAIT, job_stacks, take_stacks
from ascendctl.stacks.merge import WAIT_PATTERNS, build_classes, build_tree, judge, wait_frame
from ascendctl.stacks.model import Dump, Frame, NodeCapture, RankStack, StackClass, StacksReport, ThreadStack, TreeNode, StacksVerdict
from ascendctl.stacks.parse import parse_faulthandler, parse_py_spy

__all__ = [
    "DEFAULT_WAIT", "Dump", "Frame", "NodeCapture", "RankStack", "StackClass", "StacksReport", "ThreadStack", "TreeNode",
    "StacksVerdict", "WAIT_PATTERNS", "build_classes", "build_tree", "job_stacks", "judge", "parse_faulthandler", "parse_py_spy",
    "take_stacks", "wait_frame",
]
