"""The merged tree of a stacks capture as text lines: what `ascendctl stacks` prints and the HTML report shows. Pure.

Also reads a tree back from its JSON form (`TreeNode.to_dict`), as `triage --json` keeps it, for the report of a
triage document. Must not import typer or rich.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ascendctl.stacks.model import Frame, TreeNode, ranks_label

_PACKAGES = re.compile(r"^.*/(?:site|dist)-packages/")


def short(frame: Frame) -> str:
    """`file:line in function`, an installed package's file from its package directory on."""
    return _PACKAGES.sub("", frame.where)


def tree_lines(root: TreeNode) -> list[str]:
    """The merged tree as text: each branch labelled with its ranks, then the frames its ranks share."""
    lines: list[str] = []

    def emit(node: TreeNode, lead: str, rest: str) -> None:
        frames = [node.frame] if node.frame is not None else []
        while len(node.children) == 1 and node.children[0].ranks == node.ranks:  # the same ranks go on: one block
            node = node.children[0]
            if node.frame is not None:
                frames.append(node.frame)
        lines.append(lead + ranks_label(node.ranks))
        lines.extend(f"{rest}  {short(frame)}" for frame in frames)
        ending = sorted(set(node.ranks) - {r for child in node.children for r in child.ranks})
        if ending and node.children:
            lines.append(f"{rest}  ({ranks_label(ending)}: innermost frame above)")
        for index, child in enumerate(node.children):
            last = index == len(node.children) - 1
            emit(child, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  "))

    if root.ranks:
        emit(root, "", "")
    return lines


def frame_from_dict(data: Mapping[str, Any]) -> Frame:
    """A frame back from `Frame.to_dict`; KeyError/TypeError/ValueError on anything else."""
    line = data.get("line")
    if line is not None and not isinstance(line, int):
        raise TypeError("a frame's line must be a number")
    return Frame(str(data["file"]), line, str(data["function"]), bool(data.get("native", False)))


def tree_from_dict(data: Mapping[str, Any], depth: int = 0) -> TreeNode:
    """A merged tree back from `TreeNode.to_dict`; KeyError/TypeError/ValueError on anything else."""
    if depth > 1000:
        raise ValueError("a stacks tree deeper than 1000 frames")
    frame = data.get("frame")
    return TreeNode(frame_from_dict(frame) if frame is not None else None, tuple(int(r) for r in data["ranks"]),
                    tuple(tree_from_dict(c, depth + 1) for c in data.get("children", ())))


__all__ = ["frame_from_dict", "short", "tree_from_dict", "tree_lines"]
