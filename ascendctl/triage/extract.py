"""From candidate lines to findings: which signature, which node/rank/device/pid, which peer, which exit.

Owns attribution (file paths, line prefixes, pid and local-rank maps learned from context lines),
launcher reports (torchrun's whole ChildFailedError report, msrun, DeepSpeed, srun, mpirun), peer
extraction from communication errors, and last progress (step) per rank from file tails.
Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Iterable

from ascendctl.launchers import MSRUN
from ascendctl.ranktable import RankPlace
from ascendctl.triage.signatures import CATALOG_IDS, HOROVOD_OPS, SIGNATURES, TORCH_NPU_CODE_IDS, Category
from ascendctl.triage.model import SIGNAL_WORDS, Finding, signal_of
from ascendctl.triage.times import parse_time, split_stamp

if TYPE_CHECKING:
    from ascendctl.triage.signatures import Signature
    from ascendctl.triage.model import Source

MAX_TEXT = 400
KEEP_PER_KEY = 5  # findings kept per (node, rank, signature); the rest are only counted
LISTED = 100  # unreadable or skipped inputs named one by one; past that they are counted
INERT_KEPT = 4096  # candidate lines remembered as changing nothing (then forgotten all at once)
NOT_NODE_DIRS = {"plog", "debug", "run", "process_log", "launcher", "log", "logs", "device_log", "slog", "ascend", "workers"}

_RANK_RXS = (
    re.compile(r"\[rank(\d+)\]:"),
    re.compile(r"\[(\d+)\] is setting up NCCL communicator"),
    re.compile(r"^\[(?:rank|trainer|worker)(\d+)\]:"),
    re.compile(r"RankID:\s*(\d+)"),
    re.compile(r"\[(?:PG \S+ (?:\([^)]*\) )?)?Rank (\d+)\]"),
    re.compile(r"\b(?:userRank|rankId|rank_id|localRank|rank)\[(\d+)\]"),
    re.compile(r"\bRank (\d+)\b(?! Skipping)"),
    re.compile(r"\brank[ =:](\d+)\b(?!/)"),
)
_LOCAL_PREFIX_RX = re.compile(r"^\[default(\d+)\]:")
_DEVICE_RXS = (
    re.compile(r"\bDevice:\s*(\d+)"),
    re.compile(r"\((?:NPU|GPU|CUDA|XPU) (\d+);"),
    re.compile(r"\bdevice(?:LogicId|Id|_id)?[\[=:]\s*(\d+)\b"),
    re.compile(r"\bdevice\((?:chipId:)?(\d+)"),
    re.compile(r"\blogicDevi?d?:?\[?(\d+)"),
    re.compile(r"\bdevid=(\d+)"),
)
_PID_RX = re.compile(r"^\[?[A-Z]+\]? ?[A-Z_]+\((\d+)[,:]|\[PID: ?(\d+)\]|\bPID:\s*(\d+)")
_PEER_RANK_RXS = (
    re.compile(r"retr(?:ie|ei)ving ncclUniqueId from \[(\d+)\]"),  # torch <= 1.13 spelled it "retreiving"
    re.compile(r"[Rr]ank (\d+) (?:failed to pass|did not call) (?:monitored)?[Bb]arrier"),
    re.compile(r"Cluster Exception Location\[IP/ID\]:\[[^/\]]*/(\d+)\]"),
    re.compile(r"crimer rank \[[^/\]]*/(\d+)\]"),
    re.compile(r"[Rr]emote[ _]?[Rr]ank\W{0,4}(\d+)"),
    re.compile(r"^[^|]*\|\s*[\w.:]+\((\d+)\)\s*\|.*\|\s*(?:time out|no connect)\s*\|"),
    re.compile(r"\bdst_rank\[(\d+)\]"),
    re.compile(r"[Tt]he node:? (\d+) is timed? ?out"),
)
# A monitor's own list of the ranks that never arrived (torch's monitored barrier, on rank 0: "Rank 2 failed to pass
# monitoredBarrier in 30000 ms", with wait_all_ranks "Ranks 1, 3 failed to pass ..."). The other ranks' "waiting for
# send/recv from rank 0. Please check rank 0 logs for faulty rank" names the monitor, not a culprit: it is no pointer.
# torch's desync report (TORCH_NCCL_DESYNC_DEBUG) lists the lagging ranks the same way: "[7] finished collective #182, but
# didn't join collective #183", "[3, 5] joined but didn't finish collective #40".
_ABSENT_RX = re.compile(r"\bRanks? (\d+(?:\s*,\s*\d+)*) (?:failed to pass|did not call) (?:monitored)?[Bb]arrier|"
                        r"^\W*\[(\d+(?:\s*,\s*\d+)*)\] (?:finished collective #\d+, but didn't join|joined but didn't finish) "
                        r"collective|"
                        # Horovod's stall inspector: "<tensor> [missing ranks: 1, 3]" (operations.cc), or under "Missing
                        # ranks:" one line per rank, "0: [<tensor>, ...]" (stall_inspector.cc)
                        r"\[missing ranks: (\d+(?:\s*,\s*\d+)*)\]|^\W*(\d+): \[[^\]]*\b" + HOROVOD_OPS + "|"
                        # MindSpore's scheduler (meta_server_node.cc: whose heartbeats stopped; its node ids are msrun's
                        # ranks) and msrun's summary of its log (process_entity/_api.py: "Time out nodes are ['3']")
                        r"Timed out node list is: (?:\[const vector\])?\{(\d+(?:\s*,\s*\d+)*)\}|"
                        r"\b[Tt]he node:? (\d+) is timed out\b|Time out nodes are \[('\d+'(?:\s*,\s*'\d+')*)\]")
_MONITOR_RX = re.compile(r"waiting for send/recv from rank (\d+)")
_ADDR = r"(?:\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z][\w-]*(?:\.[\w-]+)*)"
_PEER_ADDR_RXS = (
    re.compile(r"Cluster Exception Location\[IP/ID\]:\[(" + _ADDR + r")/"),
    re.compile(r"by peer \[(" + _ADDR + r")\]"),  # gloo: Connection closed by peer [10.0.0.2]:1234
    re.compile(r"Read error \[(" + _ADDR + r")\]"),
    re.compile(r"(?:from|remote) peer (" + _ADDR + r")<\d+>"),  # NCCL: Got completion from peer 10.0.0.2<1234>
    re.compile(r"\bpeer (" + _ADDR + r")<\d+>"),
    re.compile(r"[Rr]emote[ _]?(?:[Ii][Pp]|[Aa]ddr(?:ess)?)\W{0,4}(" + _ADDR + r")"),
    re.compile(r"failed to connect to \[?(" + _ADDR + r")\]?:\d+"),
    re.compile(r"[Cc]onnect(?:ion)? to \[?(" + _ADDR + r")\]?:\d+ (?:failed|refused|timed out)"),
)
_CONTEXT_RX = re.compile(
    r"hcom init by file success.*?rank\[(?P<r1>\d+)\].*?device\[(?P<d1>\d+)\]"
    r"|SetupAgent rankNum\[\d+\], rank\[(?P<r2>\d+)\].*?logicDevId\[(?P<d2>\d+)\]"
    r"|Entry-HcclCommInitRootInfo\w*:ranks\[\d+\], rank\[(?P<r3>\d+)\].*?deviceLogicId\[(?P<d3>\d+)\]"
    r"|\[LocalRank Key Info\]userRank\[(?P<r4>\d+)\].*?devicePhyId\[(?P<d4>\d+)\]"
    r"|This node \d+ rank id: (?P<r5>\d+)"
)
# A communication timeout logged at a benign level by CANN/MindSpore/HCCL (`[WARNING] DISTRIBUTED(...)`) or at glog
# INFO is a retry, not a failure: MindSpore warns "Topology build timed out., retry(3/60)" at every normal start.
# torch's own warnings still count (`[W socket.cpp] ... waitForInput ... timed out` is how a store wait ends), and
# launcher reports and stops are read from any line.
_BENIGN_LEVEL_RX = re.compile(r"^\s*(?:\[(?:WARNING|INFO|DEBUG|EVENT|TRACE)\] ?[A-Z_]+\(|I\d{4} \d\d:\d\d:\d\d\.\d+ |"
                              r"\[I\d{4} \d\d:\d\d:\d\d|\[I )")
# CANN / torch_npu error headers: "[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST ..."; the
# lines after it (EJ0001: ..., EI0006: ...) say no rank of their own but belong to it
_BLOCK_RX = re.compile(r"\(PID:\s*(\d+), Device:\s*(-?\d+), RankID:\s*(-?\d+)\)")
BLOCK_LINES = 30
# torch.multiprocessing.spawn: "-- Process 1 terminated with the following error:" then that process's traceback
_SPAWN_RX = re.compile(r"-- Process (\d+) terminated with the following error")
SPAWN_LINES = 300
CANN_TRACEBACK_LINES = 10  # lines under a CANN error heading that may still be its TraceBack (the layers below it)
# mpirun/prterun: "mpirun detected that one or more processes exited with non-zero status ... The first process to do so
# was:" then these two lines (Open MPI's help-errmgr-base.txt; PRRTE's help-prted.txt)
_MPI_PROCESS_RX = re.compile(r"^\s*Process name:\s*\[.*,(\d+)\]\s*$")
_MPI_EXIT_RX = re.compile(r"^\s*Exit code:\s*(-?\d+)\s*$")
_TORCHRUN_FIELD_RX = re.compile(r"^\s*(time|host|rank|exitcode|traceback|error_file)\s*: (.*)$")
_FILE_RANK_RX = re.compile(r"(?:^|[^a-z])(?:rank|worker|default)[_-]?(\d+)(?:\D|$)", re.IGNORECASE)
_FILE_DEVICE_RX = re.compile(r"(?:^|[^a-z])(?:device|dev|npu)[_-]?(\d+)(?:\D|$)", re.IGNORECASE)
_FILE_PID_RX = re.compile(r"\b(?:plog|device)-(\d+)_\d+")
# torchrun --log-dir: <dir>/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log and error.json
_ELASTIC_RX = re.compile(r"^attempt_\d+$")
PROGRESS_RX = re.compile(
    r"\b(?:global[_ ]step|step|iteration|iter|Step|Iteration|STEP|ITERATION)\b\s*[:=#]?\s*\[?\s*(\d+)(?:\s*/\s*\d+)?", )
_NUM = r"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
# the spellings of signatures' fp16.loss_scale_halving (DeepSpeed's "Reducing dynamic loss scale from X to Y", Apex's,
# Megatron's, Colossal-AI's "Overflow occurs, the loss scale is adjusted to Y"): the value each step fell to
_LOSS_SCALE_RX = re.compile(r"(?:reducing|Reducing|reduced|Reduced|decreas\w*|setting) (?:the )?(?:dynamic )?loss scale"
                            rf"(?: from \S+)? to:? ?(?P<to>{_NUM})|[Aa]ttempted loss scale: (?P<from>\S+?),? reducing to "
                            rf"(?P<to2>{_NUM})|Overflow occurs, the loss scale is adjusted to (?P<to3>{_NUM})")
# NCCL's own log prefix: "<host>:<pid>:<tid> [<cuda device>] NCCL WARN ..."
_NCCL_PREFIX_RX = re.compile(r"(?:^|[\s:>\]])(?P<host>[\w.-]*[\w-]):(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] (?:\S+ )?NCCL ")
HALVINGS_TO_COLLAPSE = 8  # a loss scale halved this many times in a row, every step, is a collapse
# Python tracebacks (issue #26), read frame by frame per (file, rank prefix): a frame line, the header, a source line
# the program's own argument parsing: argparse, transformers' HfArgumentParser, a framework's `_parse_args`
_PARSE_FUNC_RX = re.compile(r"_?parse_(?:known_)?args(?:_into_dataclasses|_dict|_yaml_file|_json_file)?$")
_FRAME_RX = re.compile(r'^\s*File "(?P<path>[^"]*)", line (?P<line>\d+),? in (?P<func>\S+)')
TRACEBACK_HEADER = "Traceback (most recent call last)"
# the source line of a frame that calls a collective or a barrier: the rank was inside that call when the traceback was
# cut right after it (the callee's frames are missing)
_CALL_RX = re.compile(r"^\s+(?:\w+\s*=\s*)?(?:torch\.distributed|dist)\.(?:barrier|monitored_barrier|all_reduce|all_gather\w*|"
                      r"reduce_scatter\w*|broadcast\w*|all_to_all\w*|gather\w*|scatter\w*|reduce|send|recv)\(")
_LOCAL_FALSE_RX = re.compile(r"main_process_first\(.*\blocal\s*=\s*False\b")
# torch.distributed's own exception types, raised by c10d when communication fails
# (DistError and its subclasses), or, in torch before 2.1, the socket's own errno text as a RuntimeError (the store
# client's std::system_error: "Connection reset by peer", "Broken pipe")
_DIST_ERROR_RX = re.compile(r"^(?:[A-Za-z_]\w*\.)*Dist(?:Backend|Store|Network)?Error\b|"
                            r"^RuntimeError: (?:Connection reset by peer|Broken pipe|Connection refused)\s*$")
_WAIT_IDS = ("main_first.wait", "main_first.local_wait", "torch.collective_wait")


def _wait_rows() -> dict[str, re.Pattern[str]]:
    return {sig.id: sig.regex for sig in SIGNATURES if sig.id in _WAIT_IDS}


_WAIT_RXS = _wait_rows()


@dataclass(slots=True)
class _Trace:
    """One rank's traceback being read: is its innermost frame so far a wait, and which main process it waits for."""

    rank: int | None
    local: int | None
    pid: int | None
    host: str | None = None  # the machine a multi-host runner's prefix names (pdsh/clush `host: `)
    waiting: bool = False
    wait_line: int = 0
    wait_text: str = ""
    main: str | None = None  # main_first.wait / main_first.local_wait: entering main_process_first's barrier
    prev_func: str = ""
    local_false: bool = False  # the `with ...main_process_first(local=False)` line was seen


def match_line(text: str) -> Signature | None:
    """The first signature of the table that matches this line (and whose condition, if any, holds), if any."""
    for sig in SIGNATURES:
        m = sig.regex.search(text)
        if m is not None and (sig.holds is None or sig.holds(m)):
            return sig
    return None


NAMING_DEPTH = 2  # folders above a file whose names may say its rank or device


def attribute_path(rel: PurePosixPath, *, bundle: bool) -> tuple[str | None, int | None, int | None, int | None]:
    """Node, rank, device and pid implied by a path inside a bundle or directory."""
    node, rank, _, device, pid = attribute_path_full(rel, bundle=bundle)
    return node, rank, device, pid


def attribute_path_full(rel: PurePosixPath, *, bundle: bool) -> tuple[str | None, int | None, int | None, int | None, int | None]:
    """Node, rank, local rank, device and pid implied by a path (torchrun's per-rank layout gives a local rank)."""
    parts = list(rel.parts)
    node = None
    if bundle and len(parts) >= 2 and parts[0].lower() not in NOT_NODE_DIRS and not _FILE_DEVICE_RX.fullmatch(parts[0]):
        node = parts[0]
        parts = parts[1:]
    rank = device = pid = local = None
    for i, part in enumerate(parts[:-1]):
        if _ELASTIC_RX.match(part) and i + 1 < len(parts) - 1 and parts[i + 1].isdigit():
            local = int(parts[i + 1])
    # rank and device names are read from the file's name and the two folders above it (`rank_3/plog/x.log`), never
    # from the folders a user's run happens to live in (`/data/exp_rank_0/logs/h02/launcher.log` is no rank 0)
    for part in reversed(parts[-1 - NAMING_DEPTH:]):
        if (m := _FILE_PID_RX.search(part)) is not None:  # plog-<pid>_<ts>, device-<pid>_<ts>: a pid, not a device
            pid = int(m.group(1)) if pid is None else pid
            continue
        if rank is None and (m := _FILE_RANK_RX.search(part)):
            rank = int(m.group(1))
        if device is None and (m := _FILE_DEVICE_RX.search(part)):
            device = int(m.group(1))
    return node, rank, local, device, pid


def device_scope(node: str | None, file: str) -> tuple[str, str]:
    """Where a device number is unique: its node, or for a file of no known node that file (a paste may hold several
    nodes, each with its own device 6)."""
    return ("node", node) if node is not None else ("file", file)


def _first_int(rxs: Iterable[re.Pattern[str]], text: str) -> int | None:
    for rx in rxs:
        m = rx.search(text)
        if m:
            for group in m.groups():
                if group is not None:
                    return int(group)
    return None


def _first_str(rxs: Iterable[re.Pattern[str]], text: str) -> str | None:
    for rx in rxs:
        m = rx.search(text)
        if m:
            return m.group(1)
    return None


def _line_pid(text: str) -> int | None:
    m = _PID_RX.search(text)
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


@dataclass(slots=True)
class Progress:
    """The last training step a rank logged, from the tail of its log."""

    step: int
    time: str | None
    file: str
    line_text: str


@dataclass(frozen=True, slots=True)
class InitEntry:
    """A rank's entry into HCCL's communicator init (INFO-level plog: `Entry-HcclCommInitRootInfoInner:ranks[4], rank[3]`):
    HCCL's fault guide compares these times to find the rank that came late while the others timed out waiting."""

    time: str | None
    file: str
    line: int
    text: str


@dataclass(slots=True)
class Extraction:
    """Mutable accumulator of one triage run (private; the result is a frozen TriageReport)."""

    findings: list[Finding] = field(default_factory=list)
    kept: Counter[tuple[str | None, int | None, str]] = field(default_factory=Counter)
    suppressed: int = 0
    pid_ranks: dict[tuple[str | None, int], tuple[int | None, int | None]] = field(default_factory=dict)
    # the ranks each device was paired with by context lines (HCCL init), per node (or per file of no known node)
    device_ranks: dict[tuple[tuple[str, str], int], set[int]] = field(default_factory=dict)
    local_ranks: dict[tuple[str | None, int], int] = field(default_factory=dict)  # (node, local rank) -> global rank
    rank_homes: dict[int, set[str]] = field(default_factory=dict)  # global rank -> the nodes a launcher said it started it on
    progress: dict[tuple[str | None, int | None, int | None], Progress] = field(default_factory=dict)  # (node, rank, local)
    # when each rank entered HCCL's communicator init (its first Entry-HcclCommInitRootInfo* line), per (node, rank)
    init_entries: dict[tuple[str | None, int], InitEntry] = field(default_factory=dict)
    scales: dict[tuple[str | None, int | None, str], list[tuple[float, Finding]]] = field(default_factory=dict)
    files: int = 0
    bytes_read: int = 0
    notes: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # inputs that could not be read: the verdict is incomplete
    skipped: list[str] = field(default_factory=list)  # inputs deliberately not read (FIFOs, devices, links, unsafe names)
    unreadable_more: int = 0  # past LISTED, counted only
    skipped_more: int = 0
    job: dict[str, object] | None = None
    # the files of `ascendctl stacks` captures (`stacks/<stamp>/`): (node, capture folder, name, text, size, path)
    stack_files: list[tuple[str, str, str, str, int, str]] = field(default_factory=list)
    addresses: dict[str, str] = field(default_factory=dict)  # address or host name -> node
    # rank tables that came with the logs (the job's RANK_TABLE_FILE): each rank's server, host address and device
    rank_places: list[RankPlace] = field(default_factory=list)
    order: int = 0
    # Candidate lines that changed nothing (no signature, no context): what a line does depends on its text alone until
    # it matches, so a line seen again costs a lookup. A flood of one line (1 MB of gzip holds 50 million) stays cheap.
    inert: set[str] = field(default_factory=set)
    # tracebacks being read, per (file, rank prefix, local rank prefix)
    traces: dict[tuple[str, int | None, int | None, str | None], _Trace] = field(default_factory=dict)

    def cannot_read(self, what: str) -> None:
        """An input (file, archive, member) that could not be read: `path: why`."""
        if len(self.unreadable) < LISTED:
            self.unreadable.append(what)
        else:
            self.unreadable_more += 1

    def skip(self, what: str) -> None:
        """An input not read on purpose (it would block, never end, or lead outside): `path: why`."""
        if len(self.skipped) < LISTED:
            self.skipped.append(what)
        else:
            self.skipped_more += 1

    def listed(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(unreadable, skipped) as the report lists them, with a count of those past LISTED."""
        def with_more(items: list[str], more: int) -> tuple[str, ...]:
            return (*items, f"... and {more} more") if more else tuple(items)
        return with_more(self.unreadable, self.unreadable_more), with_more(self.skipped, self.skipped_more)

    def add(self, finding: Finding) -> None:
        key = (finding.node, finding.rank if finding.rank is not None else finding.local_rank, finding.signature)
        self.kept[key] += 1
        if self.kept[key] > KEEP_PER_KEY and finding.role != "report":
            self.suppressed += 1
            return
        self.findings.append(finding)

    # -------------------------------------------------------------------------------------- lines

    def line(self, src: Source, number: int, raw: str) -> None:
        """One candidate line of a file (the prefilter already saw a trigger in it)."""
        if (self.traces or 'File "' in raw or TRACEBACK_HEADER in raw) and self._traceback(src, number, raw):
            return
        if raw in self.inert:
            return
        stamp, text = split_stamp(raw)
        prefixes = strip_prefixes(text)
        body = prefixes.body
        if self._torchrun_line(src, number, body, stamp) or self._mpi_first_line(src, number, body, stamp):
            return
        local = prefixes.local
        m = _CONTEXT_RX.search(text)
        if m is not None:
            self._context(src, text, m, local)
            if m["r3"] is not None:
                self.init_entries.setdefault((src.node, int(m["r3"])),
                                             InitEntry(parse_time(text) or stamp, src.file, number, text.strip()[:MAX_TEXT]))
            return
        start = MSRUN.read_line(text)
        if start is not None:  # msrun: "Start worker process with rank id:3": that rank runs on this node
            if src.node is not None:
                self.rank_homes.setdefault(start.rank, set()).add(src.node)
            return
        spawn = _SPAWN_RX.search(text)
        if spawn is not None:
            src.block = (number, int(spawn.group(1)), None, None, SPAWN_LINES)
            return
        block = _BLOCK_RX.search(text)
        if block is not None:
            rank_id, device_id = int(block.group(3)), int(block.group(2))
            src.block = (number, rank_id if rank_id >= 0 else None, device_id if device_id >= 0 else None, int(block.group(1)),
                         BLOCK_LINES)
            self._header_closes_message(src, number, src.block)
        sig = match_line(body)
        if sig is None or sig.role == "error" and sig.category == Category.COMM_TIMEOUT and _BENIGN_LEVEL_RX.match(body):
            if block is None:  # a block header set the file's state: not inert
                self._inert(raw)
            return
        groups = sig.regex.search(body)
        assert groups is not None
        pid = prefixes.pid or _line_pid(body) or src.pid
        peer_rank = peer_addr = None
        absent: tuple[int, ...] = ()
        monitor = None
        if sig.category == Category.COMM_TIMEOUT:
            monitor = _first_int((_MONITOR_RX,), text)
            listed = _ABSENT_RX.search(text)
            if listed is not None:
                absent = tuple(sorted({int(r) for r in re.findall(r"\d+", next(g for g in listed.groups() if g))}))
            peer_rank = _first_int(_PEER_RANK_RXS, text)
            if peer_rank is not None and peer_rank >= 4294967295:
                peer_rank = None
            peer_addr = _first_str(_PEER_ADDR_RXS, text)
        rank = prefixes.rank if prefixes.rank is not None else _first_int(_RANK_RXS, body)
        if rank is not None and rank == peer_rank and prefixes.rank is None:
            rank = None  # "a possible crash on rank 0": the line names its peer, not itself
        device = _first_int(_DEVICE_RXS, text)
        if local is None:
            local = src.local_rank
        if rank is None and local is not None:
            rank = self.local_ranks.get((src.node, local))
        if rank is None and pid is not None and (src.node, pid) in self.pid_ranks:
            rank, dev = self.pid_ranks[(src.node, pid)]
            device = device if device is not None else dev
        if rank is None and src.block is not None and 0 < number - src.block[0] <= src.block[4]:
            rank = src.block[1]
            device = device if device is not None else src.block[2]
            pid = pid if pid is not None else src.block[3]
        if rank is not None and local is not None:
            self.local_ranks.setdefault((src.node, local), rank)
        named = sig.regex.groupindex
        sig_pid = int(groups["pid"]) if "pid" in named and groups["pid"] else None
        code = int(groups["code"]) if "code" in named and groups["code"] else None
        signal = signal_of(code)
        if "signal" in named and groups["signal"]:
            signal = groups["signal"]
        elif "signal2" in named and groups["signal2"]:
            signal = groups["signal2"]
        elif "sig" in named and groups["sig"]:
            signal = signal_of(-int(groups["sig"]))
        elif "sig2" in named and groups["sig2"]:
            signal = signal_of(-int(groups["sig2"]))
        elif "signal_word" in named and groups["signal_word"]:
            signal = SIGNAL_WORDS[groups["signal_word"]]
        node = src.node or (self.addresses.get(prefixes.ip) if prefixes.ip else None) or prefixes.ip or prefixes.host
        nccl = _NCCL_PREFIX_RX.search(body)
        if nccl is not None:
            node = node or nccl["host"]
            pid = pid if pid is not None and pid != src.pid else int(nccl["pid"])
            device = device if device is not None else int(nccl["dev"])
        node = node or next((groups[g] for g in ("host", "host2", "host3") if g in named and groups[g]), None)
        if sig.id in ("srun.task_exit", "srun.oom"):  # srun's task ids are the ranks (SLURM_PROCID)
            task = groups["task"]
            rank = int(task) if task.isdigit() else None
        if sig.id == "mpirun.exit" and groups["rank"]:
            rank = int(groups["rank"])
        if sig.id in ("torchrun.child_failed", "msrun.worker_exit", "deepspeed.exit") and sig_pid is not None:
            # these lines name a process of the launcher, not the rank of the line's prefix
            rank = None
            if (src.node, sig_pid) in self.pid_ranks:
                rank = self.pid_ranks[(src.node, sig_pid)][0]
            if sig.id == "torchrun.child_failed" and groups["local_rank"]:
                local = int(groups["local_rank"])
                rank = self.local_ranks.get((src.node, local), rank)
        if sig.id == "launcher.stop_signal" and sig_pid is not None:
            rank = self.pid_ranks.get((src.node, sig_pid), (None, None))[0]
        own_time = parse_time(text)
        time, source = (own_time, "line") if own_time else (stamp, "stamp") if stamp else (None, "none")
        if own_time and own_time.startswith("0000") and stamp:
            time, source = stamp[:4] + own_time[4:], "line"
        finding = Finding(
            category=sig.category, signature=sig.id, node=node, rank=rank if rank is not None else src.rank,
            device=device if device is not None else src.device, time=time, file=src.file, line=number,
            text=text.strip()[:MAX_TEXT], pid=sig_pid if sig_pid is not None else pid, role=sig.role, local_rank=local,
            peer_rank=peer_rank, peer_addr=peer_addr, exit_code=code, signal=signal, time_source=source, kind=sig.kind,
            absent=absent, monitor=monitor,
        )
        if sig.id == "fp16.loss_scale_halving":
            self._scale(finding, text)
            return
        self._refine_heading(finding)
        self.add(finding)

    def _refine_heading(self, finding: Finding) -> None:
        """CANN reports an error as a heading with its code (`EZ1001: ... LaunchAicore failed.`) then, under
        `TraceBack (most recent call last):`, the messages of the layers below it (`Cannot find bin of op ...`): a
        line there that a hand-written row knows says what the code only wraps, so the heading becomes generic
        evidence (used when nothing more specific is found). torch_npu ends an exception's message with its own code
        (`RuntimeError: Failed to find function aclrtX` then `[ERROR] ... ERR00008 PTA resource not found`): that code's
        category, from torch_npu's catalog, says more than the bare exception line, which becomes generic."""
        if not self.findings or finding.role != "error":
            return
        last = self.findings[-1]
        if (last.role != "error" or last.file != finding.file or not 0 < finding.line - last.line <= CANN_TRACEBACK_LINES
                or last.category == finding.category):
            return
        if finding.signature in TORCH_NPU_CODE_IDS:
            if last.signature == "python.exception" and last.rank == finding.rank:
                self.findings[-1] = replace(last, role="generic")
        elif finding.signature not in CATALOG_IDS and last.signature in CATALOG_IDS and not (
                last.signature in TORCH_NPU_CODE_IDS and finding.signature == "python.exception"):
            # (a bare exception after torch_npu's code is another exception's: the code closed the message before it)
            self.findings[-1] = replace(last, role="generic")

    def _header_closes_message(self, src: Source, number: int, block: tuple[int, int | None, int | None, int | None, int]) -> None:
        """torch_npu ends an exception's message with its header (`RuntimeError: Tensors must be contiguous` then
        `[ERROR] ... (PID:23232, Device:0, RankID:0) ERR02002 DIST invalid type`): the finding of the line right above
        the header, which said no rank, is that rank's."""
        if not self.findings:
            return
        last = self.findings[-1]
        if last.file != src.file or not 0 < number - last.line <= 2:
            return
        if last.rank is None and last.local_rank is None and block[1] is not None:
            self.findings[-1] = replace(last, rank=block[1], device=last.device if last.device is not None else block[2],
                                        pid=last.pid if last.pid is not None else block[3])
        elif last.rank is not None and last.pid is None and (block[1] is None or block[1] == last.rank):
            # `[rank1]: ... error code is 507014` then `(PID:360, Device:1, RankID:-1)`: the process is the rank's
            self.findings[-1] = replace(last, device=last.device if last.device is not None else block[2], pid=block[3])

    def _inert(self, raw: str) -> None:
        if len(self.inert) >= INERT_KEPT:
            self.inert.clear()
        self.inert.add(raw)

    def _context(self, src: Source, text: str, m: re.Match[str], local: int | None) -> None:
        ctx_rank = next(int(g) for g in (m["r1"], m["r2"], m["r3"], m["r4"], m["r5"]) if g is not None)
        dev_text = next((g for g in (m["d1"], m["d2"], m["d3"], m["d4"]) if g is not None), None)
        ctx_device = int(dev_text) if dev_text is not None else None
        ctx_pid = _line_pid(text) or src.pid
        if ctx_pid is None or ctx_pid == src.pid:
            src.rank, src.device = ctx_rank, ctx_device if ctx_device is not None else src.device
        if ctx_pid is not None:
            self.pid_ranks[(src.node, ctx_pid)] = (ctx_rank, ctx_device)
        if ctx_device is not None:
            self.device_ranks.setdefault((device_scope(src.node, src.file), ctx_device), set()).add(ctx_rank)
        if local is not None:
            self.local_ranks.setdefault((src.node, local), ctx_rank)

    def _scale(self, finding: Finding, text: str) -> None:
        """Loss-scale reductions, kept per rank to find a scale halved every step down to nothing."""
        m = _LOSS_SCALE_RX.search(text)
        if m is None:
            return
        value = float(m.group("to") or m.group("to2") or m.group("to3"))
        if value <= 1.0:  # a dynamic loss scale at 1 or below: every step overflows
            self.add(replace(finding, signature="fp16.loss_scale_collapse", role="error",
                             text=f"loss scale reduced to {value:g}: {finding.text}"[:MAX_TEXT]))
            return
        self.scales.setdefault((finding.node, finding.rank, finding.file), []).append((value, finding))

    # ------------------------------------------------------------------------------ tracebacks

    def _traceback(self, src: Source, number: int, raw: str) -> bool:
        """Follow a rank's traceback (issue #26). True when the line is consumed: a frame line, or an exception that is
        how a wait ended (a DistError raised inside a collective) rather than the rank's own failure."""
        stamp, text = split_stamp(raw)
        prefixes = strip_prefixes(text)
        body = prefixes.body
        key = (src.file, prefixes.rank, prefixes.local, prefixes.host)
        frame = _FRAME_RX.match(body)
        if frame is not None:
            trace = self.traces.get(key)
            if trace is None:  # a paste that starts inside a traceback
                trace = self.traces[key] = _Trace(prefixes.rank, prefixes.local, prefixes.pid, prefixes.host)
            self._frame(trace, number, body, frame)
            return True
        if TRACEBACK_HEADER in body:
            self._end_trace(src, key, None, number, "", stamp)  # a new traceback: the one before it was cut
            self.traces[key] = _Trace(prefixes.rank, prefixes.local, prefixes.pid, prefixes.host)
            return False
        trace = self.traces.get(key)
        if trace is None:
            return False
        if body[:1].isspace():  # a frame's source line
            if _CALL_RX.match(body) and not trace.waiting:
                trace.waiting, trace.wait_line, trace.wait_text = True, number, body.strip()
            if _LOCAL_FALSE_RX.search(body):
                trace.local_false = True
            return False
        return self._end_trace(src, key, match_line(body), number, body, stamp)

    def _frame(self, trace: _Trace, number: int, body: str, frame: re.Match[str]) -> None:
        main = next((sid for sid in _WAIT_IDS[:2] if _WAIT_RXS[sid].search(body)), None)
        if main is not None:
            if trace.prev_func != "__enter__":
                trace.main = None  # on __exit__ the main process is the one waiting, for the others: nobody named
            elif main == "main_first.local_wait" and trace.local_false and "/transformers/" in frame["path"]:
                trace.main = "main_first.wait"  # TrainingArguments.main_process_first(local=False): global rank 0
            else:
                trace.main = main
            trace.local_false = False
        trace.waiting = main is not None or bool(_WAIT_RXS["torch.collective_wait"].search(body))
        if trace.waiting:
            trace.wait_line, trace.wait_text = number, body.strip()
        trace.prev_func = frame["func"]

    def _end_trace(self, src: Source, key: tuple[str, int | None, int | None, str | None], sig: Signature | None, number: int,
                   body: str, stamp: str | None) -> bool:
        """A traceback ends (its exception line `body` matched `sig`, or it was cut). A rank whose innermost frames wait
        in a collective gets a communication finding, unless what it raised there is its own error."""
        trace = self.traces.pop(key, None)
        if trace is not None and sig is not None and sig.id == "python.exception" and _PARSE_FUNC_RX.match(trace.prev_func):
            # raised by the program's own argument parsing (its innermost frame): the job's arguments, not its work
            self._traced(src, trace, Category.LAUNCH, "args.rejected", number, body.strip(), stamp, said=body.strip())
            return True
        if trace is None or not trace.waiting:
            return False
        consumed = False
        if sig is None or sig.role in ("generic", "report"):
            pass  # cut, or a wrapper's generic line (torch_npu's "ACL stream synchronize failed"): the wait stands
        elif sig.role == "error" and sig.category == Category.COMM_TIMEOUT:
            if trace.main is None:
                return False  # the exception line says it already
        elif sig.id == "python.exception" and _DIST_ERROR_RX.match(body):
            consumed = True  # DistBackendError/DistStoreError/DistNetworkError raised by the wait itself
        else:
            return False  # a real exception raised in the call (bad arguments, a device error): the rank's own
        said = body.strip() if consumed else ""
        text = f"waiting in {trace.wait_text}" + (f": {said}" if said else "")
        signature = trace.main or "torch.collective_wait"
        self._traced(src, trace, Category.COMM_TIMEOUT, signature, number if consumed or not trace.wait_line else trace.wait_line,
                     text, stamp if consumed else None, said=said, peer_rank=0 if signature == "main_first.wait" else None)
        return consumed

    def _traced(self, src: Source, trace: _Trace, category: Category, signature: str, number: int, text: str,
                stamp: str | None, *, said: str = "", peer_rank: int | None = None) -> None:
        """A finding a whole traceback says (where it waits, what raised it), for the rank its prefix or pid names."""
        rank, local, pid = trace.rank, trace.local if trace.local is not None else src.local_rank, trace.pid or src.pid
        node = src.node or trace.host
        if rank is None and local is not None:
            rank = self.local_ranks.get((node, local))
        if rank is None and pid is not None and (node, pid) in self.pid_ranks:
            rank = self.pid_ranks[(node, pid)][0]
        time = (parse_time(said or text) or stamp) if stamp is not None or said else None
        self.add(Finding(category, signature, node, rank if rank is not None else src.rank, src.device, time, src.file,
                         number, text[:MAX_TEXT], pid=pid, role="error", local_rank=local, peer_rank=peer_rank,
                         time_source="line" if time else "none"))

    def flush_traces(self, src: Source) -> None:
        """The end of a file: its open tracebacks were cut there."""
        for key in [k for k in self.traces if k[0] == src.file]:
            self._end_trace(src, key, None, 0, "", None)

    # ------------------------------------------------------------------------- torchrun's report

    def _torchrun_line(self, src: Source, number: int, text: str, stamp: str | None) -> bool:
        """torchrun's ChildFailedError report: every entry of `Failures:` and `Root Cause (first observed failure):`."""
        if "Root Cause (first observed failure)" in text:
            self.flush_torchrun(src)
            src.torchrun_root = True
            return True
        if text.strip() == "Failures:":
            self.flush_torchrun(src)
            src.torchrun_root = False
            return True
        m = _TORCHRUN_FIELD_RX.match(text)
        if m is None:
            return False
        key, value = m.group(1), m.group(2).strip()
        if key == "time":
            self.flush_torchrun(src)
            src.torchrun_at = number
        src.torchrun[key] = value
        if stamp and "stamp" not in src.torchrun:
            src.torchrun["stamp"] = stamp
        return True

    def _mpi_first_line(self, src: Source, number: int, text: str, stamp: str | None) -> bool:
        """mpirun's (and prterun's) report of the first process that exited non-zero, its name and its code on two lines:
        "Process name: [[50371,1],0]" (Open MPI's [[job,step],rank]; PRRTE's [prterun-host-1234@1,0]), "Exit code: 1"."""
        m = _MPI_PROCESS_RX.match(text)
        if m is not None:
            src.mpi_first = (number, int(m.group(1)))
            return True
        if src.mpi_first is None:
            return False
        at, rank = src.mpi_first
        if number - at > 2:  # the exit code never came: a cut report
            src.mpi_first = None
            return False
        code = _MPI_EXIT_RX.match(text)
        if code is None:
            return False
        src.mpi_first = None
        exit_code = int(code.group(1))
        self.add(Finding(Category.UNKNOWN, "mpirun.first_exit", src.node, rank, None, stamp, src.file, at,
                         f"mpirun: the first process to exit non-zero was rank {rank} (exit code {exit_code})", role="report",
                         exit_code=exit_code, signal=signal_of(exit_code), time_source="stamp" if stamp else "none"))
        return True

    def flush_torchrun(self, src: Source) -> None:
        self.flush_traces(src)  # called at the end of every file (and where a torchrun report begins)
        entry, src.torchrun = src.torchrun, {}
        if "exitcode" not in entry:
            return
        m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", entry["exitcode"])
        code = int(m.group(1)) if m else None
        pid = int(m.group(2)) if m and m.group(2) else None
        rm = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", entry.get("rank", ""))
        rank = int(rm.group(1)) if rm else None
        local = int(rm.group(2)) if rm and rm.group(2) else None
        traceback = entry.get("traceback", "")
        signal = signal_of(code)
        sm = re.search(r"Signal (\d+)", traceback)
        if sm:
            signal = signal_of(-int(sm.group(1)))
        host = entry.get("host") or None
        node = src.node if src.node is not None else host
        if host and src.node and host != src.node:
            self.addresses.setdefault(host, src.node)
        if rank is not None and local is not None:
            self.local_ranks.setdefault((node, local), rank)
        if pid is not None and rank is not None:
            self.pid_ranks[(node, pid)] = (rank, None)
        label = "root cause" if src.torchrun_root else "failure"
        text = f"torchrun {label}: host {host} rank {rank} exitcode {code} (pid {pid}) {traceback}".strip()
        when = parse_time(entry.get("time", "").replace("_", " ", 1)) if entry.get("time") else None
        source = "report"
        if when is None and entry.get("stamp"):
            when, source = entry["stamp"], "stamp"
        self.add(Finding(Category.UNKNOWN, "torchrun.root_cause" if src.torchrun_root else "torchrun.failure", node, rank, None,
                         when, src.file, src.torchrun_at, text[:MAX_TEXT], pid=pid, role="report", local_rank=local,
                         exit_code=code, signal=signal, time_source=source))

    # -------------------------------------------------------------------------------- progress

    def tail(self, src: Source, data: bytes) -> None:
        """The last bytes of a file: the last training step each rank in it logged."""
        text = data.decode("utf-8", "replace")
        last: dict[tuple[str | None, int | None, int | None], tuple[int, str | None, str]] = {}  # first-met order kept
        for raw in text.splitlines()[-2000:]:
            stamp, line = split_stamp(raw)
            m = PROGRESS_RX.search(line)
            if m is None or "rror" in line or "xception" in line:
                continue
            local = _local_prefix(line)
            rank = _first_int(_RANK_RXS[:2], line)
            if local is None:
                local = src.local_rank
            if rank is None:
                rank = src.rank
            last[(src.node, rank, local if rank is None else None)] = (int(m.group(1)), stamp, line)
        for key, (step, stamp, line) in last.items():  # a time is parsed only for the line that stays
            self.progress[key] = Progress(step, parse_time(line) or stamp, src.file, line.strip()[:MAX_TEXT])


# Prefixes runners put in front of a process's lines; signatures are matched on what follows them.
_PREFIX_RXS = (
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?: "),  # mpirun --timestamp-output
    re.compile(r"^\[\d+,(?P<mrank>\d+)\]<std(?:out|err)>:"),  # mpirun --tag-output: [job,rank]<stdout>:
    # srun --label: "3: [rank3]: ..." (not Horovod's "0: [<tensor>, ...]" under "Missing ranks:")
    re.compile(r"^(?P<task>\d{1,5}): (?=\[(?![^\]]*\bHorovod[A-Z])|\S+(?:Error|Exception)\b|\s)"),
    re.compile(r"^\[default(?P<local>\d+)\]:"),  # torchrun --tee
    re.compile(r"^\[rank(?P<rank>\d+)\]:\s?"),  # torch's own rank prefix
    re.compile(r"^\((?:[\w.-]+?[ _](?:rank=(?P<arank>\d+) |TP(?P<tp>\d+) )?)?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\d.]+))?\)\s*"),  # Ray / vLLM actors
    re.compile(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w./-]+:\d+\] "),  # vLLM logger
    re.compile(r"^[\w.-]+ \[std(?:out|err)\] "),  # multi-node runners: "<job>.<host> [stderr] "
    # pdsh / clush / DeepSpeed's multi-node runner: "worker-1: Traceback ...", "c000001: FileNotFoundError: ...": a host
    # name in lower case with a digit (or an address; never a code such as EH9999), then what a program prints (a bracket, an exception, a traceback, indentation)
    re.compile(r"^(?!(?:rank|default|local_rank|worker_rank|device|cuda|npu|gpu)\d+:)"
               r"(?P<host>[a-z][\w-]*\d[\w.-]*|\d{1,3}(?:\.\d{1,3}){3}): "
               r"(?=\[|\s|Traceback |(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b)"),
    # syslog / journalctl (short and short-iso): "Aug 26 15:27:32 <host> kernel: ..." names the machine that logged it
    re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?) "
               r"(?P<host>[A-Za-z0-9][\w.-]*) (?=kernel:|[\w.@/-]+\[\d+\]: )"),
)


@dataclass(frozen=True, slots=True)
class Prefixes:
    """What the stripped prefixes said about the line."""

    body: str
    rank: int | None = None
    local: int | None = None
    pid: int | None = None
    ip: str | None = None
    host: str | None = None  # the machine a syslog line names


def strip_prefixes(text: str) -> Prefixes:
    """Remove runner prefixes (torchrun, torch, Ray/vLLM actors, vLLM logger, multi-node runners), keeping what they say."""
    rank = local = pid = None
    ip = host = None
    body = text
    for _ in range(6):
        for rx in _PREFIX_RXS:
            m = rx.match(body)
            if m is not None and m.end() > 0:
                g = m.groupdict()
                if g.get("local") is not None and local is None:
                    local = int(g["local"])
                for key in ("rank", "arank", "tp", "mrank", "task"):
                    if g.get(key) is not None and rank is None:
                        rank = int(g[key])
                if g.get("pid") is not None:
                    pid = int(g["pid"])
                ip = ip or g.get("ip")
                host = host or g.get("host")
                body = body[m.end():]
                break
        else:
            break
    return Prefixes(body, rank, local, pid, ip, host)


def _local_prefix(text: str) -> int | None:
    m = _LOCAL_PREFIX_RX.match(text)
    return int(m.group(1)) if m else None
