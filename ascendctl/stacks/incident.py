"""A stacks capture read back from its files: `<node dir>/stacks/<stamp>/` as collect keeps it in a bundle. Pure.

`stacks_node.sh` leaves, per capture and node, `ranks.txt` (pid, rank, local rank, launcher and how each rank
answered) and each rank's `rank-<rank>.<pid>.txt` (the hook's header line, then faulthandler's dump), with py-spy's
`.py-spy.json` beside it where the node has py-spy. triage reads these from a bundle (or a job's directory) and
judges them as `ascendctl stacks` judged them live: same parsing (stacks/parse.py), same classes and verdict
(stacks/merge.py). Must not import typer or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from ascendctl.stacks.merge import WAIT_PATTERNS, build_classes, build_tree, judge
from ascendctl.stacks.model import RANK_STATUSES, RankStack, StackClass, StacksVerdict
from ascendctl.stacks.parse import FILE_SUFFIXES, FileAnswer, RankAnswer, rank_stack

RANKS_TABLE = "ranks.txt"  # a capture's table of the ranks it found on the node
# a capture's folder: its UTC stamp, and `-N` when a second capture came in the same second
CAPTURE_FOLDER = re.compile(r"^\d{8}-\d{6}Z(?:-\d{1,4})?$")
_MEMBER = re.compile(r"^rank-(?P<rank>\d{1,7})\.(?P<pid>\d{1,10})(?P<suffix>\.txt|\.py-spy\.json(?:\.err)?)$")
_KINDS = {suffix: kind for kind, suffix in FILE_SUFFIXES.items()}
MAX_FILE_BYTES = 256 * 1024  # of each file read back (a faulthandler dump is at most 100 threads x 100 frames)


def capture_member(parts: Sequence[str]) -> tuple[str, str] | None:
    """(capture folder, file name) when a path's last parts are `stacks/<stamp>/<a capture's file>`; else None."""
    if len(parts) < 3 or parts[-3] != "stacks" or not CAPTURE_FOLDER.match(parts[-2]):
        return None
    name = parts[-1]
    return (parts[-2], name) if name == RANKS_TABLE or _MEMBER.match(name) else None


@dataclass
class CaptureFiles:
    """One node's files of one capture, as they are read (any order)."""

    table: str | None = None
    files: dict[tuple[int, int], list[FileAnswer]] = field(default_factory=dict)  # (rank, pid) -> its files
    paths: dict[tuple[int, int], list[str]] = field(default_factory=dict)  # where each was read

    def add(self, name: str, text: str, size: int, path: str) -> None:
        """One file of the capture: the ranks table, or a rank's dump (`size`: its whole size, more when cut)."""
        if name == RANKS_TABLE:
            self.table = text
            return
        m = _MEMBER.match(name)
        if m is None:
            return
        key = (int(m.group("rank")), int(m.group("pid")))
        self.files.setdefault(key, []).append(FileAnswer(_KINDS[m.group("suffix")], size, text))
        self.paths.setdefault(key, []).append(path)


@dataclass(frozen=True)
class CaptureJudgement:
    """A capture read back: every rank's stack, the classes, the verdict, and where the files were."""

    folder: str
    ranks: tuple[RankStack, ...]
    classes: tuple[StackClass, ...]
    verdict: StacksVerdict
    unanswered: tuple[tuple[str, int, str], ...]  # (node, rank, status) of ranks that wrote no stack

    @property
    def suspects(self) -> tuple[StackClass, ...]:
        return tuple(c for c in self.classes if c.suspect)

    def to_dict(self) -> dict[str, Any]:
        """What triage keeps of it (`triage --json`'s `stacks`, the HTML report's section): verdict, classes, tree."""
        return {"capture": self.folder, "verdict": self.verdict.to_dict(), "classes": [c.to_dict() for c in self.classes],
                "tree": build_tree(self.ranks).to_dict(),
                "unanswered": [{"node": n, "rank": r, "status": s} for n, r, s in self.unanswered]}


def _table(text: str | None) -> list[RankAnswer]:
    """ranks.txt's rows (`pid rank local_rank launcher status`); rows out of shape are left out."""
    rows = []
    for line in (text or "").splitlines()[1:]:
        words = line.split()
        if len(words) == 5 and words[0].isdigit() and words[1].isdigit() and words[4] in RANK_STATUSES:
            rows.append(RankAnswer(int(words[0]), int(words[1]), int(words[2]) if words[2].isdigit() else None,
                                   words[3], words[4]))
    return rows


def judge_capture(folder: str, nodes: dict[str, CaptureFiles], *,
                  patterns: Sequence[str] = WAIT_PATTERNS) -> CaptureJudgement:
    """One capture's files on every node, judged as `ascendctl stacks` judged them when it took them."""
    ranks: list[RankStack] = []
    unanswered: list[tuple[str, int, str]] = []
    for node, capture in sorted(nodes.items()):
        table = {(row.rank, row.pid): row for row in _table(capture.table)}
        for key in sorted(set(table) | set(capture.files)):
            row = table.get(key)
            answer = RankAnswer(key[1], key[0], row.local_rank if row else None, row.launcher if row else "?",
                                row.status if row else "dumped", list(capture.files.get(key, [])))
            stack = replace(rank_stack(node, answer, incident=None, shown_bytes=MAX_FILE_BYTES),
                            files=tuple(capture.paths.get(key, [])))  # where they were read, not the node's paths
            if stack.main is None:
                unanswered.append((node, stack.rank, stack.status))
            ranks.append(stack)
    gone = [(node, (rank,)) for node, rank, status in unanswered if status == "exited"]
    classes, verdict = judge(build_classes(ranks, patterns), gone)
    return CaptureJudgement(folder, tuple(sorted(ranks, key=lambda r: r.rank)), classes, verdict, tuple(unanswered))


def newest_capture(files: Iterable[tuple[str, str, str, str, int, str]],
                   *, patterns: Sequence[str] = WAIT_PATTERNS) -> CaptureJudgement | None:
    """The newest capture among (node, capture folder, file name, text, size, path) items, judged; None without any.

    Captures are named by their UTC stamp, so the newest is the last by name: the one taken before the job was
    stopped (by hand, or by `launch --hang-timeout`), while it hung."""
    by_folder: dict[str, dict[str, CaptureFiles]] = {}
    for node, folder, name, text, size, path in files:
        by_folder.setdefault(folder, {}).setdefault(node, CaptureFiles()).add(name, text, size, path)
    if not by_folder:
        return None
    newest = max(by_folder, key=_folder_order)
    return judge_capture(newest, by_folder[newest], patterns=patterns)


def _folder_order(folder: str) -> tuple[str, int]:
    stamp, _, n = folder.partition("Z")
    return (stamp, int(n[1:]) if n[1:].isdigit() else 1)


__all__ = ["CAPTURE_FOLDER", "MAX_FILE_BYTES", "RANKS_TABLE", "CaptureFiles", "CaptureJudgement", "capture_member",
           "judge_capture", "newest_capture"]
