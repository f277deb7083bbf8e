"""Which checkpoint a relaunched job resumes from (`launch --restarts N --checkpoint-dir DIR`). Pure.

A node scans DIR (sh/checkpoint_scan.sh: each entry twice, seconds apart, with its size and the completion markers
it holds; never reading a checkpoint's data) and this module picks the newest complete one:
- a name that says it is temporary (`.tmp`, `.part`, `.partial`, `.incomplete`, `tmp*`, hidden) is being written;
- an entry whose size changed between the two passes is still being written; an empty one was cut short;
- where the frameworks write a marker when a checkpoint is whole (torch DCP `.metadata`, HF Trainer
  `trainer_state.json`, safetensors' `model.safetensors.index.json`, DeepSpeed's `latest`/`zero_to_fp32.py`) and
  other checkpoint folders in DIR have one, a folder without it was cut short;
- a pointer file the framework keeps (Megatron's `latest_checkpointed_iteration.txt`, DeepSpeed's `latest`) names
  the newest complete one when the entry it names is there and complete;
- otherwise the newest by time of the complete ones. Every entry skipped newer than the choice is named, with why.
Must not import typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RESUME_ENV = "ASCENDCTL_RESUME_FROM"
SCAN_WAIT = 2  # seconds between the scan's two passes
_TEMPORARY = re.compile(r"(?i)(\.tmp|\.temp|\.part|\.partial|\.incomplete|\.lock|\.writing)$|^(tmp|\.)")


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the checkpoint directory as the node saw it in both passes."""

    name: str
    folder: bool
    mtime: int
    kib: tuple[int, int]  # first pass, second pass
    markers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """The checkpoint chosen (None: none complete), and the newer entries skipped with why."""

    path: str | None
    skipped: tuple[tuple[str, str], ...] = ()
    problem: str | None = None  # the directory could not be scanned


def parse_scan(text: str) -> tuple[list[Entry], dict[str, str]]:
    """checkpoint_scan.sh's output: the entries seen in both passes, and the pointer files' texts; ValueError when
    the output is not whole."""
    lines = text.splitlines()
    if lines and lines[0] == "nodir":
        raise ValueError("no such directory on the node")
    if not lines or lines[-1] != "done":
        raise ValueError("the node's scan ended early")
    first: dict[str, tuple[bool, int, int, tuple[str, ...]]] = {}
    second: dict[str, int] = {}
    latest: dict[str, str] = {}
    for line in lines[:-1]:
        fields = line.split("\t")
        if fields[0] == "entry" and len(fields) == 7 and fields[3].isdigit() and fields[4].isdigit():
            _, pass_, kind, mtime, kib, markers, name = fields
            if pass_ == "1":
                first[name] = (kind == "d", int(mtime), int(kib), tuple(m for m in markers.split(",") if m))
            else:
                second[name] = int(kib)
        elif fields[0] == "latest" and len(fields) == 3:
            latest[fields[1]] = fields[2].strip()
    entries = [Entry(name, folder, mtime, (kib, second[name]), markers)
               for name, (folder, mtime, kib, markers) in first.items() if name in second]
    return entries, latest


def choose(directory: str, entries: list[Entry], latest: dict[str, str]) -> ResumePoint:
    """The newest complete checkpoint of `entries` (see the module's rules)."""
    marked_kinds = {m for e in entries if e.folder for m in e.markers if m not in ("latest",)}
    why_not: dict[str, str] = {}
    for e in entries:
        if _TEMPORARY.search(e.name):
            why_not[e.name] = "a temporary name: being written"
        elif e.kib[0] != e.kib[1]:
            why_not[e.name] = f"still being written (its size changed from {e.kib[0]} to {e.kib[1]} KiB in {SCAN_WAIT} s)"
        elif e.kib[1] == 0:
            why_not[e.name] = "empty: cut short"
        elif e.folder and marked_kinds and not e.markers:
            why_not[e.name] = f"no {' or '.join(sorted(marked_kinds))} in it, as the others have: cut short"
    complete = [e for e in entries if e.name not in why_not and (e.folder or not _pointer(e.name))]
    chosen: Entry | None = None
    for pointer in ("latest_checkpointed_iteration.txt", "latest"):
        named = latest.get(pointer)
        if named:
            candidates = [e for e in complete if e.name == named or e.name.endswith(f"_{named.zfill(7)}")]
            if candidates:
                chosen = candidates[0]
                break
    if chosen is None and complete:
        chosen = max(complete, key=lambda e: (e.mtime, e.name))
    newer = [(e.name, why_not[e.name]) for e in sorted(entries, key=lambda e: (e.mtime, e.name))
             if e.name in why_not and (chosen is None or (e.mtime, e.name) >= (chosen.mtime, chosen.name))]
    return ResumePoint(f"{directory.rstrip('/')}/{chosen.name}" if chosen else None, tuple(newer))


def _pointer(name: str) -> bool:
    return name in ("latest", "latest_checkpointed_iteration.txt")


def resume_point(directory: str, scan_output: str) -> ResumePoint:
    """The choice from a node's scan; a scan that failed is a ResumePoint with its problem (the attempt runs without)."""
    try:
        entries, latest = parse_scan(scan_output)
    except ValueError as exc:
        return ResumePoint(None, problem=f"{directory}: {exc}")
    return choose(directory, entries, latest)


__all__ = ["RESUME_ENV", "SCAN_WAIT", "Entry", "ResumePoint", "choose", "parse_scan", "resume_point"]
