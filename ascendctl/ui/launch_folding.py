"""Launch output folded across nodes on a job of more than FOLD_NODES_ABOVE nodes: what the nodes a teardown stops
print, and the `--dry-run` plan.

At 1,000 nodes one failure made every stopped torchrun print its ~25-line traceback (25,000 lines saying one thing),
and `--dry-run` printed 1,000 blocks that differed in a rank and an address. Lines (blocks) that differ only in what is
each node's own are shown once, with the folded set of the nodes and their count; every line stays in each node's
launcher.log, and `--json` documents are never folded. Part of ui/: it prints through the sanitising paths of ui.
"""

from __future__ import annotations

import re
import shlex
import threading
from typing import TYPE_CHECKING, Callable

from ascendctl.jobs.plan import render_plan
from ascendctl.nodeset import fold, fold_numbers, group_by
from ascendctl.ui import FOLD_NODES_ABOVE, write_out

if TYPE_CHECKING:
    from ascendctl.jobs.plan import LaunchPlan, NodePlan

TEARDOWN_LINES_SHOWN = 50  # distinct lines of the stopped nodes' output shown (once each); the rest are counted
_NUMBERS = re.compile(r"0[xX][0-9a-fA-F]+|\d+")
_NUMBER_FLAG = re.compile(r"(?<!\S)(--[\w-]+)=(\d+)(?!\S)")  # `--node-rank=3`, a word of a command line


def line_shape(line: str, node: str) -> str:
    """`line` without what differs from node to node: the node's own name, and every number (ranks, local ranks, pids,
    addresses, ports, times, hex addresses). Two nodes' lines of one shape fold into one."""
    return _NUMBERS.sub("#", line.replace(node, "<node>") if node else line)


class LaunchOutput:
    """The line and notice sinks of an attached `launch`. On more than FOLD_NODES_ABOVE nodes, once the teardown
    begins (the first failure, or a stop signal), the lines of every node it stops are held back (the failing node's
    are still shown as they come) and `close()` shows each line shape once: `[n[0002-0999]] (998) Traceback ...`, with
    the text (and numbers) of the first node that printed it, after a notice counting them. Thread-safe."""

    def __init__(self, names: list[str], show_line: Callable[[str, str], None], show_notice: Callable[[str], None], *,
                 to_stderr: bool = False) -> None:
        self._show_line = show_line
        self._show_notice = show_notice
        self._to_stderr = to_stderr
        self._fold = len(names) > FOLD_NODES_ABOVE
        self._lock = threading.Lock()
        self._stopping = False
        self._failed: str | None = None  # the node whose failure began the teardown: its lines are never folded
        # (shape, n): the n-th line of that shape on a node (a second traceback stays a second one) -> (first text, nodes)
        self._groups: dict[tuple[str, int], tuple[str, list[str]]] = {}
        self._seen: dict[str, dict[str, int]] = {}  # node -> shape -> lines of it put in a group
        self._held: dict[str, int] = {}  # node -> its lines held back
        self._untold: dict[str, int] = {}  # node -> its lines past TEARDOWN_LINES_SHOWN shapes (counted only)

    def line(self, node: str, line: str) -> None:
        """One line a node printed: shown now, or held back for `close()` when its node is being stopped."""
        if self._fold:
            with self._lock:
                if self._stopping and node != self._failed:
                    self._hold(node, line)
                    return
        self._show_line(node, line)

    def notice(self, message: str) -> None:
        """A progress notice (shown)."""
        self._show_notice(message)

    def teardown(self, failed: str | None) -> None:
        """The teardown begins (the supervise loop says so), for the failure of node `failed` (None: a stop signal,
        which stops every node): from here the lines of the nodes it stops are folded."""
        with self._lock:
            if not self._stopping:
                self._stopping, self._failed = True, failed

    def _hold(self, node: str, line: str) -> None:
        self._held[node] = self._held.get(node, 0) + 1
        shape = line_shape(line, node)
        seen = self._seen.setdefault(node, {})
        key = (shape, seen.get(shape, 0))
        group = self._groups.get(key)
        if group is None:
            if len(self._groups) >= TEARDOWN_LINES_SHOWN:
                self._untold[node] = self._untold.get(node, 0) + 1
                return
            group = self._groups[key] = (line, [])
        seen[shape] = key[1] + 1
        group[1].append(node)

    def close(self) -> None:
        """Show what was held back, folded (nothing when nothing was)."""
        with self._lock:
            groups, held, untold = self._groups, self._held, self._untold
            self._groups, self._held, self._untold, self._seen = {}, {}, {}, {}
        if not held:
            return
        self._show_notice(f"{fold(held)}: {sum(held.values()):,} lines from the {len(held)} nodes the teardown stopped, "
                          "folded: each line once, with the nodes that printed it alike (numbers aside; shown as the "
                          "first of them printed it); every line is in each node's launcher.log")
        width = max(len(fold(names)) for _, names in groups.values()) + 2 if groups else 0
        for text, names in groups.values():
            write_out(f"{f'[{fold(names)}]'.ljust(width)} ({len(names)}) {text}\n", to_stderr=self._to_stderr)
        if untold:
            self._show_notice(f"{fold(untold)}: {sum(untold.values()):,} more lines not shown (past "
                              f"{TEARDOWN_LINES_SHOWN} distinct lines), in each node's launcher.log")


def plan_text(plan: LaunchPlan) -> str:
    """The dry-run text: `render_plan`'s, byte for byte, up to FOLD_NODES_ABOVE nodes; past them one block for the
    nodes whose blocks differ only in the node's name, node rank, host and cluster address (`<node>`, `<rank>`,
    `<host>`, `<address>` stand for them), with the folded node set and ranks."""
    full = render_plan(plan)
    if len(plan.nodes) <= FOLD_NODES_ABOVE:
        return full
    text = full.split("\n")
    starts, at = [], 1
    for n in plan.nodes:  # each node's block: from its `[name] node rank R, ` line, after a blank line
        prefix = f"[{n.name}] node rank {n.rank}, "
        while at < len(text) and not (text[at - 1] == "" and text[at].startswith(prefix)):
            at += 1
        if at == len(text):
            return full  # not the layout expected: shown unfolded rather than wrong
        starts.append(at)
    ends = [start - 1 for start in starts[1:]] + [len(text) - 1]  # each before the next one's blank line; the last ""
    blocks = {n.name: text[start:end] for n, start, end in zip(plan.nodes, starts, ends)}
    address_names = _on_every_node(plan, lambda n: {name for name, value in n.environment.values if value == n.endpoint.ip})
    rank_flags = _on_every_node(plan, lambda n: {flag for flag, value in _NUMBER_FLAG.findall(n.command) if value == str(n.rank)})
    shapes = group_by(plan.nodes, key=lambda n: _block_shape(n, blocks[n.name], address_names, rank_flags) or (n.name,),
                      name=lambda n: n.name)
    lines = text[:starts[0] - 1]  # the plan's own lines
    lines.append(f"{len(plan.nodes)} nodes in {len(shapes)} block{'s' if len(shapes) > 1 else ''}: a block holds the "
                 "nodes that differ only in <node>, <rank> (node rank), <host> and <address> (cluster address); "
                 "`--dry-run --json` has every node's own")
    ranks = {n.name: n.rank for n in plan.nodes}
    for shape, names in shapes:
        if len(names) == 1 or len(shape) == 1:
            lines += ["", *blocks[names[0]]]
            continue
        lines += ["", f"[{fold(names)}] ({len(names)} nodes, node ranks {fold_numbers(ranks[x] for x in names)}) {shape[0]}",
                  *shape[1:]]
    return "\n".join(lines) + "\n"


def _on_every_node(plan: LaunchPlan, found: Callable[[NodePlan], set[str]]) -> set[str]:
    sets = [found(n) for n in plan.nodes]
    return set.intersection(*sets) if sets else set()


def _block_shape(n: NodePlan, block: list[str], address_names: set[str], rank_flags: set[str]) -> tuple[str, ...] | None:
    """A node's dry-run block with its own values replaced by placeholders (None if the block is not as expected)."""
    first = f"[{n.name}] node rank {n.rank}, host {n.host}, "
    address = f"  cluster address: {n.endpoint.ip} via "
    if len(block) < 2 or not block[0].startswith(first) or not block[1].startswith(address):
        return None
    own_dir = n.dir[:-len(n.name)] + "<node>" if n.dir.endswith("/" + n.name) else n.dir
    lines = [f"node rank <rank>, host <host>, {block[0][len(first):]}",
             f"  cluster address: <address> via {block[1][len(address):]}"]
    quoted, rank = shlex.quote(n.endpoint.ip), str(n.rank)

    def own_rank(match: re.Match[str]) -> str:
        return f"{match[1]}=<rank>" if match[1] in rank_flags and match[2] == rank else match[0]

    for line in block[2:]:
        name = line[2:].split("=", 1)[0]
        if name in address_names and line == f"  {name}={quoted}":
            line = f"  {name}=<address>"
        elif rank_flags and "=" + rank in line:
            line = _NUMBER_FLAG.sub(own_rank, line)
        lines.append(line)
    return tuple(line.replace(n.dir + "/", own_dir + "/") for line in lines)
