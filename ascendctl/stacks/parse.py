"""Reading stacks back: faulthandler's text, py-spy's `dump --json`, and stacks_node.sh's framed answer. Pure.

faulthandler (CPython 3.6-3.13) prints, per thread, `Thread 0x... (most recent call first):` (`Current thread` for the
one that ran the handler) and `  File "x.py", line N in func` lines, innermost first; `  ...` when it stopped at 100
frames, `...` at 100 threads, `<no Python frame>` for a thread without one. py-spy's JSON is a list of threads, each
`{thread_id, thread_name, frames: [{name, filename, line, module}]}`, innermost first; native frames (--native) have a
`module` (their shared object). Must not import typer or rich.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ascendctl.stacks.model import Dump, Frame, RankStack, ThreadStack

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])? \(most recent call first\):$")
_STACK = re.compile(r"^Stack \(most recent call first\):$")  # all_threads=False
_FRAME = re.compile(r'^  File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<func>.*)$')
_HEADER = re.compile(r"^# ascendctl-stacks (.*)$")
_BOOTSTRAP = ("threading.py", "_bootstrap")  # the outermost frame of every thread that `threading` started


def parse_faulthandler(text: str) -> Dump:
    """A faulthandler dump (and the stacks hook's header line, if any) as threads, outermost frame first."""
    header: dict[str, str] = {}
    threads: list[ThreadStack] = []
    ident: int | None = None
    current = truncated = False
    frames: list[Frame] | None = None

    def close() -> None:
        if frames is not None:
            threads.append(ThreadStack(ident, tuple(reversed(frames)), current=current, truncated=truncated))

    for line in text.splitlines():
        if (m := _HEADER.match(line)) is not None:
            header.update(word.partition("=")[::2] for word in m.group(1).split() if "=" in word)
        elif (m := _THREAD.match(line)) is not None or _STACK.match(line):
            close()
            ident = int(m.group(2), 16) if m is not None else None
            current = m is None or m.group(1) == "Current thread"
            truncated, frames = False, []
        elif frames is not None and (m := _FRAME.match(line)) is not None:
            number = m.group("line")
            frames.append(Frame(m.group("file"), int(number) if number.isdigit() else None, m.group("func")))
        elif frames is not None and line.strip() == "...":
            truncated = True
    close()
    return Dump(tuple(threads), _main_thread(threads, _ident(header.get("main_thread"))), header)


def parse_py_spy(text: str) -> Dump:
    """`py-spy dump --json` as threads, outermost frame first; ValueError when it is not such a document."""
    data: Any = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("py-spy --json: expected a list of threads")
    threads: list[ThreadStack] = []
    main: int | None = None
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("frames"), list):
            raise ValueError("py-spy --json: a thread without frames")
        frames = []
        for raw in item["frames"]:
            name, filename, line = str(raw.get("name", "?")), str(raw.get("filename", "?")), raw.get("line")
            native = raw.get("module") is not None or (filename == "?" and name.startswith("0x"))
            frames.append(Frame(filename, line if isinstance(line, int) and line > 0 else None, name, native))
        ident = item.get("thread_id")
        if item.get("thread_name") == "MainThread":
            main = len(threads)
        threads.append(ThreadStack(ident if isinstance(ident, int) else None, tuple(reversed(frames)),
                                   name=item.get("thread_name") if isinstance(item.get("thread_name"), str) else None))
    return Dump(tuple(threads), main if main is not None else _main_thread(threads, None))


def _ident(text: str | None) -> int | None:
    try:
        return int(text, 16) if text else None
    except ValueError:
        return None


def _main_thread(threads: list[ThreadStack], ident: int | None) -> int | None:
    """The main thread: the one the hook named; else the thread not started by `threading` (its outermost frame is the
    script's, not threading's _bootstrap), preferring `<module>`. None when it is not in the dump: faulthandler writes
    at most 100 threads, newest first, so a rank with thousands of threads may have its main thread cut off, and
    another thread judged in its place would give a wrong verdict."""
    if not threads:
        return None
    if ident is not None:
        for index, thread in enumerate(threads):
            if thread.ident == ident:
                return index
        return None

    def started_by_threading(thread: ThreadStack) -> bool:
        first = next((f for f in thread.frames if not f.native), None)
        return first is not None and first.file.endswith(_BOOTSTRAP[0]) and first.function.startswith(_BOOTSTRAP[1])

    candidates = [i for i, t in enumerate(threads) if t.frames and not started_by_threading(t)]
    for index in candidates:
        if threads[index].frames[0].function == "<module>":
            return index
    if candidates:
        return candidates[0]
    return None


# The files of one capture, in `<node dir>/stacks/<stamp>/`, by kind (stacks_node.sh writes them, collect keeps them)
FILE_SUFFIXES = {"faulthandler": ".txt", "py-spy": ".py-spy.json", "py-spy-error": ".py-spy.json.err"}


@dataclass
class FileAnswer:
    kind: str  # faulthandler | py-spy | py-spy-error
    size: int  # the file's size on the node (more than `text` holds when it was cut)
    text: str


@dataclass
class RankAnswer:
    pid: int
    rank: int
    local_rank: int | None
    launcher: str
    status: str
    files: list[FileAnswer] = field(default_factory=list)


@dataclass
class NodeAnswer:
    """stacks_node.sh's output, unframed."""

    incident: str | None
    signalled: float | None
    py_spy: bool
    ranks: list[RankAnswer]


def parse_node_answer(text: str, nonce: str) -> NodeAnswer:
    """stacks_node.sh's framed output; ValueError when it is not whole (no `done` frame) or out of shape."""
    frame = re.compile(rf"^@@{re.escape(nonce)} (.*)@@$")
    answer: NodeAnswer | None = None
    body: list[str] | None = None
    current: FileAnswer | None = None
    done = False
    for line in text.split("\n"):
        m = frame.match(line)
        if body is not None and current is not None:
            if m is not None and m.group(1) == "end":
                current.text = "\n".join(body)  # the newline the script prints after the file ends the last line
                body = current = None
            else:
                body.append(line)
            continue
        if m is None:
            continue
        words = m.group(1).split()
        if words[0] == "node" and len(words) == 4:
            answer = NodeAnswer(None if words[1] == "-" else words[1], _float(words[2]), words[3] == "yes", [])
        elif words[0] == "rank" and len(words) == 6 and answer is not None and words[1].isdigit() and words[2].isdigit():
            answer.ranks.append(RankAnswer(int(words[1]), int(words[2]), int(words[3]) if words[3].isdigit() else None,
                                           words[4], words[5]))
        elif words[0] == "file" and len(words) == 4 and answer is not None and answer.ranks and words[3].isdigit():
            current = FileAnswer(words[2], int(words[3]), "")
            answer.ranks[-1].files.append(current)
            body = []
        elif words[0] == "done":
            done = True
    if answer is None or not done:
        raise ValueError("stacks_node.sh's answer is incomplete: " + (text.strip()[-200:] or "(nothing)"))
    return answer


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def rank_stack(node: str, answer: RankAnswer, *, incident: str | None, shown_bytes: int) -> RankStack:
    """One rank's answer as a RankStack: its faulthandler dump where there is one, else py-spy's; what went wrong on the
    way as notes. `incident`: the capture's folder (the files' paths are named under it); `shown_bytes`: the cut of
    each file's text (a file larger than that was read in part, and a note says so)."""
    notes: list[str] = []
    files: list[str] = []
    dump = spy = None
    for item in answer.files:
        if incident:
            files.append(f"{incident}/rank-{answer.rank}.{answer.pid}{FILE_SUFFIXES.get(item.kind, '')}")
        if len(item.text.encode()) < item.size:
            notes.append(f"{item.kind}: shown cut at {shown_bytes} bytes of {item.size} (the whole file is on the node)")
        if item.kind == "faulthandler":
            dump = parse_faulthandler(item.text)
        elif item.kind == "py-spy":
            try:
                spy = parse_py_spy(item.text)
            except ValueError as exc:
                notes.append(f"py-spy: unreadable answer ({exc})")
        elif item.kind == "py-spy-error":
            notes.append("py-spy: " + (item.text.strip().splitlines() or ["failed"])[-1][:300])
    chosen, source = (dump, "faulthandler") if dump is not None and dump.threads else (spy, "py-spy")
    if chosen is None or not chosen.threads:
        chosen = None
    elif chosen.main_thread is None:
        notes.append(f"{source}: its main thread is not among the {len(chosen.threads)} threads dumped (faulthandler writes "
                     "at most 100, newest first): not judged; py-spy on the node shows every thread")
    local = answer.local_rank
    if local is None and dump is not None and dump.header.get("local_rank", "").isdigit():
        local = int(dump.header["local_rank"])  # the hook's header says it where the node's table did not
    return RankStack(answer.rank, node, answer.pid, local, answer.launcher, answer.status,
                     source if chosen else None, chosen.threads if chosen else (), chosen.main_thread if chosen else None,
                     tuple(files), tuple(notes))
