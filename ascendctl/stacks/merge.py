"""Merge every rank's main-thread stack into one prefix tree, group the ranks into classes, and name the suspect. Pure.

As LLNL's STAT does: the tree starts at the outermost frame and each edge carries the ranks that pass through it
(`ranks 0-3,5`); ranks whose main threads have the same frames form an equivalence class. A class whose stack holds a
collective, barrier or store wait (WAIT_PATTERNS, over `file:function`) is waiting on the others; when some classes
wait and others do not, the ones that do not are the suspects (the smallest first). When every rank waits, or all are
in the same place, or none waits, there is no suspect, and the verdict says so. Must not import typer or rich.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

from ascendctl.nodeset import fold
from ascendctl.stacks.model import StackClass, TreeNode, StacksVerdict, ranks_label

if TYPE_CHECKING:
    from ascendctl.stacks.model import Frame, RankStack

# Regular expressions over `file:function` of a frame: a stack holding such a frame waits on other ranks.
WAIT_PATTERNS: tuple[str, ...] = (
    # torch.distributed's collectives, barriers, point-to-point, init and store calls (the c10d Python API)
    r"torch/distributed/(distributed_c10d|c10d_logger|rendezvous|_functional_collectives(_impl)?)\.py:",
    r"torch/distributed/elastic/(rendezvous|utils/store)",
    # the waits of torch's wrappers (FSDP, DTensor, pipelining) around them
    r"torch/distributed/.*\.py:(all_reduce|all_gather\w*|reduce_scatter\w*|broadcast\w*|all_to_all\w*|barrier|"
    r"monitored_barrier|send|recv|isend|irecv|batch_isend_irecv|wait\w*|_store_based_barrier)$",
    r"torch_npu/distributed/",  # HCCL through torch_npu
    r"deepspeed/comm/",
    r"mindspore/(communication|mint/distributed)/|mindspore/ops/operations/comm_ops\.py:",
    # MindSpore runs ops asynchronously (PyNative): a rank waits for its collective where it next reads a result back,
    # a host sync (seen on real msrun jobs: `AllReduce()(x).asnumpy()` waits in Tensor.asnumpy). A rank stuck in device
    # work waits there too: it then joins the waiting classes (no suspect) rather than being accused.
    r"mindspore/common/tensor\.py:(asnumpy|item|tolist|__str__|__repr__)$",
    r"mindspore/(runtime|hal)/(stream|event)\.py:synchronize$",
    # native frames (py-spy --native): c10d, gloo, NCCL, HCCL
    r":(c10d::|gloo::|nccl[A-Z_]|ncclKernel|hccl|Hccl|HCCL)",
)


def wait_frame(frames: Sequence[Frame], patterns: Sequence[str] = WAIT_PATTERNS) -> Frame | None:
    """The frame of `frames` that makes them a collective, barrier or store wait (the innermost Python one matching,
    `all_reduce` rather than its logging wrapper; else the innermost native one); None when there is none."""
    compiled = [re.compile(p) for p in patterns]
    found = [f for f in frames if any(p.search(f"{f.file}:{f.function}") for p in compiled)]
    python = [f for f in found if not f.native]
    return (python or found)[-1] if found else None


def _key(frame: Frame) -> tuple[str, int | None, str]:
    return frame.file, frame.line, frame.function


def build_tree(ranks: Sequence[RankStack]) -> TreeNode:
    """The prefix tree of the ranks' main-thread stacks, outermost frame first; children in order of first rank."""
    stacks = {r.rank: r.main.frames for r in ranks if r.main is not None}

    def grow(frame: Frame | None, members: list[int], depth: int) -> TreeNode:
        groups: dict[tuple[str, int | None, str], list[int]] = {}
        firsts: dict[tuple[str, int | None, str], Frame] = {}
        for rank in members:
            frames = stacks[rank]
            if depth < len(frames):
                key = _key(frames[depth])
                groups.setdefault(key, []).append(rank)
                firsts.setdefault(key, frames[depth])
        children = tuple(grow(firsts[key], group, depth + 1)
                         for key, group in sorted(groups.items(), key=lambda item: min(item[1])))
        return TreeNode(frame, tuple(sorted(members)), children)

    return grow(None, sorted(stacks), 0)


def build_classes(ranks: Sequence[RankStack], patterns: Sequence[str] = WAIT_PATTERNS) -> tuple[StackClass, ...]:
    """Equivalence classes of the main-thread stacks: smallest first (STAT's order: the odd ones out), then by rank."""
    groups: dict[tuple[tuple[str, int | None, str], ...], list[RankStack]] = {}
    for rank in ranks:
        if rank.main is not None:
            groups.setdefault(tuple(_key(f) for f in rank.main.frames), []).append(rank)
    classes = []
    for members in groups.values():
        frames = members[0].main.frames if members[0].main is not None else ()
        nodes = tuple(dict.fromkeys(r.node for r in sorted(members, key=lambda r: r.rank)))
        classes.append(StackClass(tuple(sorted(r.rank for r in members)), nodes, frames, wait_frame(frames, patterns)))
    return tuple(sorted(classes, key=lambda c: (len(c.ranks), c.ranks)))


def judge(classes: Sequence[StackClass], missing: Sequence[tuple[str, tuple[int, ...]]] = ()) -> tuple[tuple[StackClass, ...], StacksVerdict]:
    """The classes with their suspects marked, and the verdict in words."""
    absent = ""
    if missing:
        gone = sorted(r for _, ranks in missing for r in ranks)
        absent = f"; {ranks_label(gone)} did not answer (no process of the job on {fold([n for n, _ in missing])})"
    if not classes:
        return tuple(classes), StacksVerdict("no_stacks", "no rank's stack was taken" + absent)
    waiting = [c for c in classes if c.waiting is not None]
    idle = [c for c in classes if c.waiting is None]
    total = sum(len(c.ranks) for c in classes)
    if waiting and idle:
        marked = tuple(StackClass(c.ranks, c.nodes, c.frames, c.waiting, suspect=c.waiting is None) for c in classes)
        parts = [f"{c.label} on {fold(list(c.nodes))} is not in a collective, barrier or store wait: "
                 f"{c.innermost.where if c.innermost else '(no Python frame)'}" for c in idle]
        others = sum(len(c.ranks) for c in waiting)
        where = ", ".join(dict.fromkeys(c.waiting.function for c in waiting if c.waiting is not None))
        message = "; ".join(parts) + f" (the other {others} rank{'s' if others != 1 else ''} wait in {where})" + absent
        return marked, StacksVerdict("suspect", message, tuple(sorted(r for c in idle for r in c.ranks)))
    if len(classes) == 1:
        only = classes[0]
        where = only.innermost.where if only.innermost else "(no Python frame)"
        if only.waiting is not None:
            return tuple(classes), StacksVerdict("same_place", f"all {total} ranks wait in the same place ({where}): no rank stands "
                                           "out; a rank outside these, or the network, holds them" + absent)
        return tuple(classes), StacksVerdict("same_place", f"all {total} ranks are in the same place ({where}): no suspect" + absent)
    if waiting:
        return tuple(classes), StacksVerdict("all_waiting", f"every rank waits in a collective, barrier or store wait, in "
                                       f"{len(classes)} different places: no suspect (mismatched collectives? compare the "
                                       "classes)" + absent)
    return tuple(classes), StacksVerdict("busy", "no rank waits in a collective, barrier or store wait: the ranks look busy, "
                                   "not hung: no suspect" + absent)
