"""The triage signature table: one row per known failure line (id, category, role, pattern, meaning, hint).

Signatures are data. `ascendctl.triage` owns the reading, the facts and the verdict; this module
owns only the table and the literal triggers used to prefilter lines before any regex runs. Part of the
table is generated: the `cann.catalog.*`, `acl.rt.*`, `acl.base.*`, `ibv.*`, `npu.event.*` and `torch_npu.catalog.*` rows
are built at import from data/ascend_codes.json, which scripts/ascend_catalog.py makes from the emitters' own error
catalogs (and the NPU's fault events from MindCluster's fault knowledge base).
Pure; must not import typer or rich.

Roles say what a matched line is evidence of:
  error    the rank's own failure (OOM, NaN, hardware, launch, exception), or, for COMM_TIMEOUT,
           a communication error (a symptom that may point at a peer)
  generic  an error of the rank that says little (CANN inner error, torch_npu ERR code): used
           only when nothing more specific is found
  report   a launcher's exit report (torchrun, msrun, DeepSpeed, mpirun, srun): who ended and how
  stop     the process was stopped by its launcher or from outside (SIGTERM, kill all workers)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable


class Category(str, Enum):
    """What kind of failure a finding (or a verdict) is."""

    COMM_TIMEOUT = "COMM_TIMEOUT"
    OOM = "OOM"
    NAN = "NAN"
    HARDWARE = "HARDWARE"
    LAUNCH = "LAUNCH"
    EXCEPTION = "EXCEPTION"
    HANG = "HANG"  # from every rank's stack (`stacks`, taken before a stop): a rank not in the collective the others wait in
    UNKNOWN = "UNKNOWN"


ROLES = ("error", "generic", "report", "stop")


@dataclass(frozen=True, slots=True)
class Signature:
    """One known failure line: `pattern` is searched in a line that contains one of `anchors`."""

    id: str
    category: Category
    pattern: str
    meaning: str
    hint: str
    anchors: tuple[str, ...]
    flags: int = 0
    role: str = "error"  # error | generic | report | stop (module docstring)
    kind: str = ""  # OOM: "device" or "host"; COMM_TIMEOUT/HARDWARE: "fabric" (a NIC, link or RDMA transport fault)
    # a setup every rank of a node (or the job) shares (a missing module or program, a device setting, a variable the
    # launcher did not set, two ranks on one device): the node is where it started, never the rank that printed first
    node_wide: bool = False
    # a summary its emitter prints when the step ends (slurmstepd's OOM-kill count): where it stands in a log says
    # nothing of when it happened, so an untimed one is not taken for later than the errors above it
    at_end: bool = False
    # a condition on the match beyond the pattern (numbers a regex cannot compare); the line is no finding without it
    holds: Callable[[re.Match[str]], bool] | None = field(default=None, repr=False, compare=False)
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"{self.id}: unknown role {self.role!r}")
        object.__setattr__(self, "regex", re.compile(self.pattern, self.flags))

    @property
    def report(self) -> bool:
        """Weak evidence: a launcher's report, a stop, or a generic error (never a root cause by itself)."""
        return self.role != "error"


I = re.IGNORECASE
_T = Category.COMM_TIMEOUT
_O = Category.OOM
_N = Category.NAN
_H = Category.HARDWARE
_L = Category.LAUNCH
_E = Category.EXCEPTION
_U = Category.UNKNOWN

# the op part of a Horovod tensor's name (HorovodAllreduce_grads_0): how a line names a Horovod collective
HOROVOD_OPS = r"Horovod(?:Allreduce|Allgather|Broadcast|Alltoall|ReduceScatter|Reducescatter|Join)_"
_HINT_TIMEOUT = ("a collective or connection timed out: look first at the rank that failed before it; then check MTU and "
                 "firewall between nodes, and raise HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT only if ranks are just slow")
_HINT_OOM = "device memory ran out: enable recompute, lower micro_batch_num or the batch size, or shard more (ZeRO/TP)"
_HINT_HOST_OOM = "the kernel OOM killer ended the process: lower dataloader workers / host memory use, or raise the memory limit"
_HINT_NAN = "loss or gradients went NaN/Inf: check the mixed-precision config (bf16 vs fp16), the loss scale, and the learning rate"
_HINT_EXIT_REPORT = "the first rank to exit is not always the cause: check the others' first errors"
_HINT_HW = "hardware fault: drain the node, check `npu-smi info -t health` / `hccn_tool -link -g` (or nvidia-smi -q), and RMA"
# a NIC, link or RDMA transport fault (kind "fabric"): the next step is the link, not the program or the timeouts
_HINT_FABRIC = ("a NIC or link fault: check the port's link state and error counters (`hccn_tool -i DEVICE -link -g`, "
                "`-net_health -g`; `ibstat`, `ibv_devinfo`, `ethtool -S`), the cable and the switch port; drain the node if it "
                "repeats (`ascendctl nodes quarantine`)")
_HINT_FABRIC_PEER = ("an RDMA completion failed: either the peer's process ended first (look at its log) or the link between "
                     "the two failed: check the link state of both ports (`hccn_tool -i DEVICE -link -g`, `ibstat`) and the "
                     "switch port's error counters")
_HINT_PORT = "a port is already in use: kill stale processes from an earlier run or change MASTER_PORT / HCCL_IF_BASE_PORT"
_HINT_RANKTABLE = "the rank table does not match the machines: regenerate it with `ascendctl render ranktable` and check it"

_NAN_ANCHORS = (": nan", "=nan", "is nan", "NaN", "NAN", ": inf", "=inf", ": Inf", "=Inf", ": -inf", "is inf", "loss nan")

# how the device's event log names an NPU fault event before its id ("Event id=0x80e01801", "event_id:  [0x...")
NPU_EVENT_PREFIX = r"[Ee]vent[ _]id *[:=] *\[?0x"

# The prefilter: a line is looked at only if one of these (regex fragments, case-sensitive) occurs in it.
# Every signature pattern and every context line must contain one; tests/test_triage_signatures.py checks it.
TRIGGERS: tuple[str, ...] = (
    "rror", r"E[0-9A-Z]\d{4}", r"ERR\d", "imeout", "imed out", "ime out", "imes out", "timing out", "TIMEOUT", "emory",
    "found Inf", r"is -?inf\b", "aicore", "Aicore", "aivector error", "aicpu error", "aiv error", "aic error", "AICPU execution", "CUDA error", "device-side assert", "CUBLAS_STATUS",
    "cuDNN error", "Connection closed by peer", "Connection reset", "traceback :", r"[:=(\[] ?[-+]?nan\b",
    r"is [-+]?nan\b", "nan values", "nan iterations: *[1-9]", "NaN", "NAN", r"[:=] ?-?[Ii]nf\b", "finite",
    "xception", "ailed", "ailure", "oom[-_]", "verflow", "educing", "educed", "ecreas", "lready", "eartbeat",
    "eart beat", "LOST", "ECC", "HBM", "hbm ", "NVRM", "AER: ", "Segmentation", "SIGSEGV", "SIGABRT", "Fatal Python",
    "core dumped", "terminate called", "cqe", "CQE", "NET/IB", "IBV_", "ibv_", "retry counter", "ink (is )?[Dd]own",
    "link_status", "[Rr]ank_?[Tt]able", "RANK_TABLE", "stablish", "no connect", "NOTIFY WAIT", "not ready",
    "DEVICE_DOWN", "bad_alloc", "specific port", "bind", "not found", "No such file", "can't open", "atchdog",
    "endezvous", "FullMesh", "aborted", "hcom init", "SetupAgent", "CommInitRootInfo", "LocalRank Key", "RankID",
    "exitcode", "      :", "ParameterConflict", "ncclInvalid", "between ranks", "ordinal", "Duplicate GPU", "No CUDA GPUs", "VISIBLE_DEVICES",
    "nvalid device", "device id", "SetDevice", "set device", "busy", "occupied", "occupying", "EADDRINUSE", "closing signal", "death signal",
    "kill all other workers", "CANCELLED AT", "DUE TO", "KeyboardInterrupt", "exits with return code", "Killing subprocess",
    "srun: error", "Task launch for", "store based barrier", "built in", "CANN failure", "ACL_ERROR_", "is not implemented", "noticed that process rank", "Primary job", "non-zero exit status", "SIGBUS", "ismatch", "across ranks",
    "rank id", "setting loss scale to", "Killed", "已杀死", "Cannot find bin", "op store", "Cannot parse json",
    "Unsupported device target", "WORKER_NUM", "SERVER_NUM", "MS_SCHED_", r"batch size: *\d+ [|] loss scale", r"[Ll]oss [-+]?nan\b", "LOSS NAN", "HCCP process", "last training process",
    "tsd client wait", "': nan", "': inf", "': -inf", "oom-killer", "oom-kill", "oom_kill", "memory allocation of",
    "out of memory", "total mem size", "Failed to CUDA", "running low on memory", "Memory on the node", "KeyError: ",
    "expected, but not set", "monitoredBarrier", "waiting for send/recv", "failed to pass", "did not call",
    "didn't join collective", "didn't finish collective", "missing ranks", "subset of ranks", "Horovod[A-Z]", "init failed", "init rdma failed", "EJ0002", "network port is down", "retrieving ncclUniqueId", "retreiving ncclUniqueId",
    "[A-Z][A-Za-z]*(Error|Exception) *$", "TimeoutError", "lost heartbeat", "GPU is lost", "device handle for GPU",
    "fallen off the bus", "Got async event", "stream synchroni", "aclrtSynchronizeStream", "Socket Timeout",
    "is killed by signal", "hit an exception", "method failed", "encountered an?", "hit a fatal", "Got async error event",
    "ynchronize timeout", "sync timeout", "detected by watchdog", "dump signal", "memory pressure", "last time period",
    r"/[A-Za-z0-9_.@-]+ *[:=] *[-+]?nan *$", "Cannot re-initialize", "both on", "terminated with the following error",
    # the emitters' own loss-scale/NaN and gloo messages (issue #26; the rows below cite them): fairseq's minimum loss
    # scale and NaN detector, Lightning's loss check, gloo's transport errors ("[.../gloo/transport/tcp/pair.cc:544] ...")
    "loss scale reached", "Nan/Inf", "nan/inf", "detected in output of", "training_step` is", "gloo/transport/",
    "gloo/rendezvous/",
    # srun's OOM report, a loopback peer, Horovod's shutdown, ACL's op compiler, Paddle's errors, DeepSpeed's scaler frame
    "Out Of Memory", r"127\.0\.1\.1", "Horovod has been shut down", "init env failed", "AclSetCompileopt", "Out of memory error on",
    r"\[Hint: ", "meets grpc error", r"loss_scaler\.update_scale\(", "Process name:", "Exit code:", r" -> 3\b",
    "internal error - please report", "ncclUnhandledCudaError", "failed to extend /dev/shm", "shared memory segment",
    "Some specified arguments are not used", "Recv unmatched ack", "is/are busy or unavailable",
    "during the SDMA transfer", "ECC error", "RAS alarm handling", "ssh: connect to host", "ssh: Could not resolve",
    "ssh exited with exit code 255",
    # the runtime's aclError numbers as the catalog rows read them ("runtime result = 107020", "ret[207001]")
    "runtime result", r"(result|ret) ?(= ?|\[)[125]07\d{3}", "ErrCode=", "cpu_thread_cnt", "OOM when allocating",
    # the NPU's health-management fault events as its event log prints them ("Event id=0x80e01801", "event_id=0x...")
    NPU_EVENT_PREFIX,
    # Python tracebacks (issue #26): every frame line, the header, and the source lines that call a barrier, a
    # collective or main_process_first, so extract.py can tell which call a rank was in when its traceback ends there
    'File "', r"Traceback \(most recent call last\)", r"main_process_first\(",
    r"(dist|distributed)\.(barrier|monitored_barrier|all_reduce|all_gather|reduce_scatter|broadcast|all_to_all|gather|"
    r"scatter|reduce|send|recv)",
)


def trigger_pattern() -> str:
    """One alternation of every trigger, for the chunk-level prefilter."""
    return "|".join(f"(?:{t})" for t in TRIGGERS)


# A bare code in either the classic form ("EI0006:") or the CANN 8.5+ form ("Name(EI0006):").
def _code(codes: str) -> str:
    return rf"(?:\b(?:{codes}):|\((?:{codes})\):)"


# ---------------------------------------------------------------- the emitters' own catalogs (issue #26)
# ascendctl/triage/data/ascend_codes.json is generated by scripts/ascend_catalog.py from CANN's error-code catalog, the
# Graph Engine's (hicann/ge's error registry: E1xxxx; the E2-EB compiler and operator codes of CANN's catalog), the
# runtime's aclError numbers, ibverbs' status and event strings, NCCL's verbs wrappers and torch_npu's own ERRxxxxx codes
# (sources: data/INDEX.md). Each group of codes becomes one row, placed after the hand-written rows (which win on a line
# both match) and before the crash and generic rows; a group's `place` may put it first (ahead of every hand-written row)
# or late (torch_npu's codes: after the rows that read the call a code wraps, before the wrapper and exception rows).
CATALOG_PATH = Path(__file__).resolve().parent / "data" / "ascend_codes.json"
_CATALOG_HINTS = {"@timeout": _HINT_TIMEOUT, "@hardware": _HINT_HW, "@oom": _HINT_OOM, "@host_oom": _HINT_HOST_OOM,
                  "@fabric": _HINT_FABRIC}
_CATALOG_TEXT_MIN = 30  # a catalog message is matched as text only from this long (shorter ones say too little)
_TRIGGER_RX = re.compile(trigger_pattern())


def load_catalog(path: Path = CATALOG_PATH) -> dict[str, Any]:
    """The catalog as generated: `sources`, `groups` (category, role, kind, form, meaning, hint) and `entries`."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _catalog_text(message: str) -> str | None:
    """The first sentence of a message before its first placeholder, when it is long and the prefilter sees it."""
    head = re.split(r"\.\s|\.(?=[A-Z])|,\s*Reason|:\s|[(\[]", message.split("%s", 1)[0], maxsplit=1)[0].rstrip(" .:")
    if len(head) < _CATALOG_TEXT_MIN or not _TRIGGER_RX.search(head):
        return None
    return head


def _catalog_pattern(form: str, entries: list[dict[str, Any]],
                     shared: frozenset[str] = frozenset()) -> tuple[str, tuple[str, ...]]:
    """The regex and the prefilter anchors of one group of catalog entries (`shared`: message texts that codes of
    other groups print too, which name no group by themselves)."""
    codes = sorted({e["code"] for e in entries})
    alt = "|".join(re.escape(c) for c in codes)
    if form == "cann":  # the code in any form ("EI0006:", "Name(EI0006):", "... EI0006"), or the message itself
        texts = sorted({t for e in entries if (t := _catalog_text(e["message"])) and t not in shared})
        return "|".join([rf"\b(?:{alt})\b", *(re.escape(t) for t in texts)]), (*codes, *texts)
    numbers = "|".join(sorted({e["code"] for e in entries if e.get("field") != "reason"}))  # aclError forms only
    if form == "acl":  # the runtime's own line: "runtime result = 107020", "ret[207001]", "ErrCode=507035, desc=[...]",
        # "rtStreamSynchronize execution failed, reason=[task timeout]"
        reasons = "|".join(sorted(re.escape(e["message"]) for e in entries if e.get("field") == "reason"))
        return (rf"(?:\bresult\s*=|\bret(?:Code)?\s*(?:=|\[)|\bErrCode=)\s*(?:{numbers})\b|"
                rf"(?:\breason=|\bdesc=)\[?(?:{reasons})\b", ("runtime result", "ailed", "ErrCode="))
    if form == "acl_base":  # AscendCL's own codes (acl_base.h): the number as the runtime's forms print it ("aclInit failed,
        # ret = 100002") or the ACL_ERROR_* name itself (ONNX Runtime's "CANN failure 100002: ACL_ERROR_REPEAT_INITIALIZE")
        names = "|".join(sorted(re.escape(e["title"]) for e in entries))
        return (rf"(?:\bresult\s*=|\bret(?:Code)?\s*(?:=|\[)|\bErrCode=)\s*(?:{numbers})\b|\b(?:{names})\b",
                ("runtime result", "ailed", "ErrCode=", "ACL_ERROR_"))
    if form == "acl_wrapped":  # torch_npu's "NPU function error: ..., error code is 507035": CANN's detail follows it;
        # ONNX Runtime's CANN provider (cann_call.cc): "CANN failure 507013: <name> ; NPU=0 ; hostname=... ; expr=..."
        return (rf"[Ee]rror ?[Cc]ode(?: is|\s*[=:])?\s*\[?(?:{numbers})\b|\bCANN failure (?:{numbers})\b",
                ("error code", "rror", "CANN failure"))
    if form == "ibv_wc":  # the status' enum name; its ibv_wc_status_str text as rdma-core's examples ("Failed status %s
        # (%d)") and NCCL ("with status=%s(%d)") print it; the longer texts anywhere
        every = "|".join(sorted(re.escape(e["message"]) for e in entries))
        texts = sorted({e["message"] for e in entries if len(e["message"]) >= 19 and _TRIGGER_RX.search(e["message"])})
        return (rf"\b(?:{alt})\b|(?:Failed status |\bstatus=)(?:{every}) ?\(\d+\)|" + "|".join(re.escape(t) for t in texts),
                ("IBV_WC_", "Failed status", *texts))
    if form == "ibv_event":  # the event's enum name, or its ibv_event_type_str text in an async event report
        events = "|".join(re.escape(e["message"]) for e in entries)
        return rf"\b(?:{alt})\b|async (?:fatal )?event\b.{{0,100}}?(?:{events})", ("IBV_EVENT_", *(e["message"] for e in entries))
    if form == "ibv_call":  # NCCL: "Call to ibv_reg_mr failed with error ..."; others: "ibv_create_qp() failed"
        return rf"\b(?:{alt})(?:\(\))? failed\b", ("ibv_",)
    if form == "torch_npu":  # "[ERROR] <time> (PID:1, Device:0, RankID:0) ERR02011 DIST timeout error": the code with its
        # submodule's name; torch_npu's first release printed the code alone, at the end of the message ("...\nERR02011")
        named = "|".join(sorted(f"{re.escape(e['code'])} {re.escape(e['submodule'])}" for e in entries))
        return rf"\b(?:{named})\b|\b(?:{alt})\s*$", tuple(sorted({e["code"][:5] for e in entries}))
    if form == "npu_event":  # the device's event log: "[TsdEVENT] Event id=0x8c17a005.", "event_id=0x80e01801",
        # "event_id:  [0x80e01801]" (MindCluster's own patterns for each event)
        ids = "|".join(sorted(re.escape(e["code"][2:].lower()) for e in entries))
        return rf"\b{NPU_EVENT_PREFIX}(?i:{ids})\b", ("Event id=0x", "event_id=0x", "event_id:  [0x")
    raise ValueError(f"unknown catalog form {form!r}")


def _catalog_signatures(catalog: dict[str, Any], place: str = "") -> tuple[Signature, ...]:
    """One row per group of the catalog whose `place` is this one ("first": ahead of every hand-written row)."""
    rows = []
    groups_of: dict[str, set[str]] = {}
    for e in catalog["entries"]:
        if (text := _catalog_text(e["message"])) is not None:
            groups_of.setdefault(text, set()).add(e["group"])
    shared = frozenset(text for text, groups in groups_of.items() if len(groups) > 1)
    for gid, group in catalog["groups"].items():
        entries = [e for e in catalog["entries"] if e["group"] == gid]
        if not entries or group.get("place", "") != place:
            continue
        hint = _CATALOG_HINTS.get(group["hint"], group["hint"])
        pattern, anchors = _catalog_pattern(group["form"], entries, shared)
        rows.append(Signature(gid, Category(group["category"]), pattern, group["meaning"], hint, anchors,
                              role=group["role"], kind=group["kind"]))
        if group["form"] in ("acl", "acl_base"):  # the same numbers as a wrapper reports them: weak, the detail lines say more
            pattern, anchors = _catalog_pattern("acl_wrapped", entries)
            rows.append(Signature(f"{gid}.wrapped", Category(group["category"]), pattern,
                                  f"{group['meaning']}, as a wrapper (torch_npu) reports the return code; CANN's own "
                                  "error lines after it say more", hint, anchors, role="generic", kind=group["kind"]))
    return tuple(rows)


_CATALOG = load_catalog()
CATALOG_FIRST = _catalog_signatures(_CATALOG, "first")
CATALOG_REST = _catalog_signatures(_CATALOG)
CATALOG_LATE = _catalog_signatures(_CATALOG, "late")
CATALOG_SIGNATURES = CATALOG_FIRST + CATALOG_REST + CATALOG_LATE
CATALOG_IDS = frozenset(sig.id for sig in CATALOG_SIGNATURES)
# torch_npu's ERRxxxxx rows: the code ends the message of the exception it closes (extract.py refines that line by it)
TORCH_NPU_CODE_IDS = frozenset(gid for gid, group in _CATALOG["groups"].items() if group["form"] == "torch_npu")


# Order matters: the first signature whose pattern matches a line names it.
SIGNATURES: tuple[Signature, ...] = (
    *CATALOG_FIRST,  # catalog rows that must precede a broader hand-written row (their group says why)
    # ---------------------------------------------------------------- OOM
    # MindSpore's start-up pool allocation failing because another program holds the card reads like an OOM; its
    # own message says which (ascend_memory_manager.cc: "Device N may be other processes occupying this card")
    Signature("launch.device_held", _L, r"(?:other|another) process(?:es)? (?:is |are )?occupying (?:this|the) (?:card|device)",
              "the device is held by another process (the allocation at start-up failed because of it)",
              "find and end the process that holds the device (`ascendctl preflight --only npu_stale_procs`, npu-smi info)",
              ("occupying this", "occupying the")),
    Signature("device.oom", _O, r"\b(?:CUDA|NPU|XPU|MLU|HIP) out of memory\. Tried to allocate",
              "the accelerator ran out of memory", _HINT_OOM, ("out of memory. Tried",), kind="device"),
    # the node's address follows in the same line ("... at node (ID: <id>, IP: <ip>) over the last time period")
    Signature("ray.node_oom", _O, r"(?:Task was killed due to the node running low on memory|"
              r"killed due to memory pressure \(OOM\)|Memory on the (?=node \()|"
              r"(?=node \((?:ID: \w+, )?IP: [\w.:-]+(?:, ID: \w+)?\) (?:where the (?:task|actor)|over the last time period)))"
              r"(?:.*?\bnode \((?:ID: \w+, )?IP: (?P<host>[\w.:-]+))?",
              "Ray's memory monitor killed a worker because the node ran out of host memory", _HINT_HOST_OOM,
              ("running low on memory", "Memory on the node (IP", "killed due to memory pressure", "over the last time period"),
              kind="host"),
    Signature("nccl.cuda_oom", _O, r"(?:NCCL WARN )?Cuda failure (?:\d+ )?'out of memory'|NCCL WARN Failed to CUDA (?:calloc|malloc)",
              "NCCL could not allocate device memory", _HINT_OOM, ("Cuda failure", "Failed to CUDA"), kind="device"),
    Signature("cann.runtime_oom", _O, r"driver error:out of memory|halMemAlloc failed|DevMemAllocManaged failed|"
              r"Device malloc failed|is more than total mem size",
              "the NPU runtime could not allocate device memory", _HINT_OOM,
              ("out of memory", "halMemAlloc failed", "DevMemAllocManaged failed", "Device malloc failed", "total mem size"),
              kind="device"),
    Signature("torch.oom_error", _O, r"\bOutOfMemoryError\b", "torch raised OutOfMemoryError", _HINT_OOM, ("OutOfMemoryError",), kind="device"),
    Signature("cann.oom_code", _O, _code("EL0004|EI0011|EE1001") + r".*?(?:memory|Memory)",
              "CANN could not allocate device memory", _HINT_OOM, ("EL0004", "EI0011", "EE1001"), kind="device"),
    Signature("cann.oom_code_bare", _O, _code("EL0004|EI0011"), "CANN memory allocation failure code", _HINT_OOM, ("EL0004", "EI0011"), kind="device"),
    # ---------------------------------------------------------------- MindSpore's own runtime messages (issue #26)
    # Read from MindSpore's source at https://github.com/mindspore-ai/mindspore/commit/a05ce58802d47fba782ecef8d971e05a078727c1
    # (master, 2025-07-05; "ms@a05ce58: <path>:<line>" below names the file and line at that commit). MS_LOG(EXCEPTION)
    # both logs the message ("[ERROR] <MODULE>(pid,...):<time> [file:line] func] <message>") and raises it as a Python
    # RuntimeError, whose last traceback line is "RuntimeError: <message>"; a "#umsg#Title:#umsg#" prefix is printed
    # as a "- Title:" heading of its own, so the message's own words start a line. The rows sit here, ahead of the
    # generic rows (python.exception would otherwise name them all EXCEPTION).
    # Device memory: ms@a05ce58: plugin/res_manager/ascend/mem_manager/ascend_two_pointer_mem_adapter.cc:118,150
    # ("Out of Memory!!! Request memory size"), .../ascend_memory_adapter.cc:309 ("Malloc device memory failed, size[..]"),
    # backend/ge_backend/runtime/actor/actor_common.h:140 and runtime/device/kernel_runtime.cc:427 ("Device(id:N) memory
    # isn't enough and alloc failed"), backend/ge_backend/executor/ge_memory_manager.cc:80 ("Out of memory, Alloc GE
    # memory failed"), ge_graph_executor.cc:978 ("Memory pool not enough, graph:"), ge_memory_allocator.cc:334
    # ("AllocFeatureMemory error, memory not enough") (all under mindspore/ccsrc/). "Memory not enough: current free
    # memory size[..]" (memory/mem_pool/abstract_dynamic_mem_pool.cc:913 WARNING, mem_dynamic_allocator.cc:618 INFO) is
    # the pool failing to grow before it looks elsewhere or eager-frees: mindspore.oom_pool_short, generic.
    Signature("mindspore.oom", _O,
              r"Out of Memory!!!|[Mm]emory isn't enough|Malloc device memory failed|Out of memory, Alloc GE memory failed|"
              r"Memory pool not enough, graph:|AllocFeatureMemory error, memory not enough",
              "MindSpore could not allocate device memory", _HINT_OOM,
              ("Out of Memory!!!", "emory isn't enough", "Malloc device memory failed", "Alloc GE memory failed",
               "Memory pool not enough", "AllocFeatureMemory error"), kind="device"),
    # ms@a05ce58: mindspore/ccsrc/memory/mem_pool/abstract_dynamic_mem_pool.cc:913, mem_dynamic_allocator.cc:561,618 (its
    # ERROR at :538, "... is more than total mem size", is cann.runtime_oom's)
    Signature("mindspore.oom_pool_short", _O,
              r"Memory not enough: current free memory size\[|AllocDeviceMemByEagerFree failed",
              "MindSpore's memory pool could not grow by the size asked (it may still find memory elsewhere; an "
              "'Out of Memory'/'memory isn't enough' error follows when it does not)", _HINT_OOM,
              ("Memory not enough", "AllocDeviceMemByEagerFree failed"), kind="device", role="generic"),
    # Host memory: the CPU backend's and the offload pool's host blocks (a std::vector that could not grow):
    # ms@a05ce58: mindspore/ccsrc/plugin/res_manager/cpu/cpu_mem_manager/cpu_memory_manager.cc:32,96,
    # mindspore/ccsrc/runtime/device/res_manager/auto_mem_offload.cc:36 ("Malloc memory failed: size N")
    Signature("mindspore.host_oom", _O, r"Malloc memory failed: size \d+",
              "MindSpore could not allocate host memory (CPU backend or offload pool)", _HINT_HOST_OOM,
              ("Malloc memory failed",), kind="host"),
    # UCE (uncorrectable memory error) and HBM multi-bit ECC, as MindSpore names the runtime's 507053
    # (ACL_ERROR_RT_DEVICE_MEM_ERROR) and 507054 (ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR):
    # ms@a05ce58: mindspore/core/include/utils/ms_exception.h:206,208 ("UCEError error occurs when execute,
    # error_code=507053"), mindspore/core/utils/ms_exception.cc:51,78,
    # mindspore/ccsrc/plugin/res_manager/ascend/ascend_device_address/ascend_device_address.cc:402 ("UCEError occurs
    # when execute."), mindspore/ccsrc/plugin/res_manager/ascend/symbol_interface/symbol_utils.h:32-54,
    # mindspore/python/mindspore/train/model.py:151 ("Caught UCEError of type HBM_MULTI_BIT_ECC_ERROR but can not repair")
    Signature("mindspore.uce", _H, r"\bUCEError (?:error )?occurs when execute|\bUCEError of type HBM_MULTI_BIT_ECC_ERROR",
              "the NPU reported an uncorrectable memory error (UCE) or an HBM multi-bit ECC error", _HINT_HW,
              ("UCEError",)),
    # HCCEError: the runtime's 507904 (ACL_ERROR_RT_COMM_OP_RETRY_FAIL), a communication operator that failed after its
    # retries: ms@a05ce58: mindspore/core/utils/ms_exception.cc:78, mindspore/core/include/utils/ms_exception.h:210,
    # mindspore/ccsrc/plugin/res_manager/ascend/symbol_interface/symbol_utils.h:38-50
    Signature("mindspore.hcce", _T, r"\bHCCEError (?:error )?occurs when execute",
              "a communication operator failed after its retries (HCCEError, runtime code 507904)", _HINT_TIMEOUT,
              ("HCCEError",)),
    # ForceStopError: the fault-tolerance controller (MindIO TFT) stopped this rank's device tasks (runtime code 107022,
    # ACL_ERROR_RT_DEVICE_TASK_ABORT) because a fault happened elsewhere: ms@a05ce58: mindspore/core/utils/ms_exception.cc:87,
    # mindspore/core/include/utils/ms_exception.h:218, mindspore/ccsrc/runtime/hardware/device_context_manager.cc:509,
    # mindspore/ccsrc/plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc:155
    Signature("mindspore.force_stop", _U, r"\bForceStopError (?:error )?occurs",
              "MindSpore's fault tolerance (MindIO TFT) stopped this rank's device tasks after a fault elsewhere",
              "find the rank whose fault made the controller stop the others (a UCEError, HCCEError or another error)",
              ("ForceStopError",), role="stop"),
    # The runtime's task-exception callback names the failed task's code and, in parentheses, MindSpore's text for it:
    # ms@a05ce58: mindspore/ccsrc/plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc:159 ("Run Task failed,
    # task_id: N, stream_id: N, tid: N, device_id: N, retcode: N (<text>)") and its table (lines 33-99): "ts lost
    # heartbeat" (ACL_ERROR_RT_LOST_HEARTBEAT) is the device's task scheduler gone; 507053/507054 are the UCE codes
    # above (not in the table: "Return error code unknown")
    Signature("mindspore.task_device_fault", _H,
              r"Run Task failed, task_id: \d+, .*retcode: (?:50705[34]\b|\d+ \(ts lost heartbeat\))",
              "a device task failed because the NPU lost its heartbeat or hit an uncorrectable memory error", _HINT_HW,
              ("Run Task failed",)),
    Signature("mindspore.task_kernel_fault", _E, r"Run Task failed, task_id: \d+, .*retcode: \d+ "
              r"\((?:aicore exception|aicore trap exception|aicpu exception)\)",
              "a kernel failed on the device (a bug or bad input, not a network problem)",
              "rerun that rank with ASCEND_LAUNCH_BLOCKING=1 to find the failing operator", ("Run Task failed",)),
    Signature("mindspore.task_failed", _E, r"Run Task failed, task_id: \d+",
              "a device task failed (the code and CANN's error lines around it say why)",
              "read CANN's error lines (EZ/EE/EI codes) around it and the plog of this device", ("Run Task failed",),
              role="generic"),
    # Communicator setup: ms@a05ce58: mindspore/ccsrc/distributed/collective/collective_manager.cc:134 (the device
    # communicator's init outlived its timeout, HCCL_CONNECT_TIMEOUT/MS's comm_init_timeout, and the process exits:
    # "Execute function: init_device_comm_group_func to initialize communicator for group G timeout, this node id: N
    # exit process"); only the init function (finalize_comm_lib_func times out while a job is already ending)
    Signature("mindspore.comm_init_timeout", _T,
              r"Execute function: init_device_comm_group_func\b.*? timeout, this node id",
              "initialising the HCCL/NCCL communicator timed out (a peer never joined, or links could not be built)",
              _HINT_TIMEOUT, (" timeout, this node id",)),
    # ...and its failures, whose cause is in the error lines before them: collective_manager.cc:111,408,1034,1123,1190;
    # mindspore/ccsrc/plugin/res_manager/ascend/collective/ascend_collective_comm_lib.cc:149 ("Hcom init failed."),182;
    # mindspore/ccsrc/pipeline/jit/ps/pipeline.cc:852 ("InitHccl failed.")
    Signature("mindspore.comm_init_failed", _T,
              r"Failed to execute function: init_device_comm_group_func\b|Failed to create comm group on device side for|"
              r"Failed to wait for communicator of \S+ init done|Communicator of group \S+ inited: failed|"
              r"Failed to init communicator asynchronizely for group|Ascend collective communication initialization failed|"
              r"\bHcom init failed\b|\bInitHccl failed\b",
              "MindSpore could not set up a communicator (HCCL/NCCL); the error lines before it say why",
              "read this rank's error lines before it (HCCL/CANN codes, a peer that timed out) and the plog",
              ("Failed to execute function", "Failed to create comm group", "Failed to wait for communicator", "inited: failed",
               "Failed to init communicator", "communication initialization failed", "Hcom init failed", "InitHccl failed"),
              role="generic"),
    # The cluster (msrun's scheduler and its workers, "dynamic cluster"): a worker hears from the scheduler that a node
    # is gone, or loses the scheduler: ms@a05ce58: mindspore/ccsrc/distributed/cluster/topology/compute_graph_node.cc:286
    # (heartbeat send failed: it retries), 320 ("The state of the cluster is error, total nodes num: N, abnormal nodes
    # num: N"); the scheduler's own "The node: N is timed out" rows are msrun.node_timeout
    Signature("mindspore.cluster_abnormal", _T,
              r"The state of the cluster is error, total nodes num: \d+, abnormal nodes num: [1-9]",
              "the msrun scheduler reports a node of the cluster as abnormal (timed out or exited): this rank is its victim",
              _HINT_TIMEOUT, ("The state of the cluster is error",)),
    Signature("mindspore.scheduler_heartbeat", _T, r"Failed to send heartbeat message to meta server node",
              "a worker could not send its heartbeat to the msrun scheduler (it retries; the scheduler may have exited)",
              _HINT_TIMEOUT, ("Failed to send heartbeat",), role="generic"),
    # ms@a05ce58: mindspore/ccsrc/distributed/init.cc:45,56: the cluster or the collectives were never built; MindSpore
    # itself lists launch causes (too few workers spawned, MS_SCHED_PORT taken, MS_SCHED_HOST/PORT differ) besides a
    # worker that failed to start: generic, the rows that name a cause (a node timed out, a port taken) win
    Signature("mindspore.cluster_init_failed", _L,
              r"Failed to initialize (?:distributed job cluster|collective communication) because some processes in the "
              r"cluster are not successfully spawned",
              "MindSpore's cluster never formed: some processes were not spawned, or could not reach the scheduler",
              "check that msrun's --worker_num/--local_worker_num match the processes started, that --master_addr/"
              "--master_port are the same on every node and the port is free, and the first error of each worker log",
              ("Failed to initialize distributed", "Failed to initialize collective"), role="generic"),
    # The scheduler refused a worker's registration: ms@a05ce58: compute_graph_node.cc:225 ("Failed to register the
    # compute graph node: N. Reason: ..."), meta_server_node.cc:266 (repeated node: a stale scheduler on the port, or an
    # extra node), 668-671 (rank id taken, or more nodes than --worker_num)
    Signature("mindspore.register_rejected", _L, r"Failed to register the compute graph node: \S+\. Reason:",
              "the msrun scheduler rejected this node (a stale scheduler on the port, an extra node, or a rank id taken)",
              "kill leftover scheduler/worker processes (`netstat -anp | grep <master_port>`) or change --master_port; "
              "check --worker_num against the processes started", ("Failed to register the compute graph node",)),
    # Launch settings every rank of a node shares: ms@a05ce58: mindspore/ccsrc/plugin/res_manager/ascend/collective/
    # ascend_collective_comm_lib.cc:114,120,126,133 (rank table variables, RANK_ID); mindspore/ccsrc/distributed/cluster/
    # cluster_context.cc:260,265,270,277,282,294,298 (MS_ROLE, MS_WORKER_NUM, MS_SERVER_NUM, MS_SCHED_HOST, MS_SCHED_PORT;
    # TRY_AND_CATCH_WITH_EXCEPTION, mindspore/core/include/utils/ms_utils.h:58, prefixes "Caught exception of <what>. ");
    # mindspore/ccsrc/include/backend/distributed/constants.h:37 (kDetailedFailureReason);
    # mindspore/ccsrc/distributed/collective/collective_manager.cc:197,842; mindspore/python/mindspore/communication/
    # management.py:82,193,207 (RANK_ID, backend for the device); mindspore/python/mindspore/context.py:559 (device_id)
    Signature("mindspore.launch_env", _L,
              r"The environment variable 'MINDSPORE_HCCL_CONFIG_PATH' or 'RANK_TABLE_FILE' is not set|"
              r"Invalid environment variable 'MINDSPORE_HCCL_CONFIG_PATH' or 'RANK_TABLE_FILE'|"
              r"Error: Invalid environment variable 'RANK_ID', it should not be empty|"
              r"Error: Environment variables RANK_ID has not been exported|"
              r"Please set env '(?:WORKER|SERVER)_NUM' to a number greater than 0|"
              r"The environment variable MS_(?:WORKER_NUM|SERVER_NUM|SCHED_PORT) is invalid|\bMS_SCHED_HOST is empty\b|"
              r"Error: Role name '[^']*' is invalid|"
              r"Error: Maybe you are trying to call 'mindspore\.communication\.init\(\)' without using 'mpirun'|"
              r"but the deive id is not imported when set env 'RANK_TABLE_FILE'|"
              r"Ranktable startup method doesn't support pynative mode|"
              r"Error: For 'init', the argument 'backend_name' should be '\w+' to init '\w+'|"
              r"Error: For 'context\.set_context', the argument 'device_id' must be in range",
              "MindSpore's distributed launch settings are missing or wrong (rank table, RANK_ID, MS_* variables of "
              "msrun's dynamic cluster, the backend for the device, device_id)",
              "start the job with msrun (or `ascendctl launch`), which sets MS_ROLE/MS_WORKER_NUM/MS_SCHED_HOST/"
              "MS_SCHED_PORT; with a rank table, export RANK_TABLE_FILE (an existing path), RANK_ID and DEVICE_ID",
              ("or 'RANK_TABLE_FILE' is not set", "or 'RANK_TABLE_FILE'", "Error: Invalid environment variable 'RANK_ID'",
               "Error: Environment variables RANK_ID", "WORKER_NUM", "SERVER_NUM", "MS_SCHED_", "Error: Role name '",
               "Error: Maybe you are trying", "env 'RANK_TABLE_FILE'", "Ranktable startup method",
               "Error: For 'init', the argument 'backend_name'", "Error: For 'context.set_context', the argument 'device_id'"),
              node_wide=True),
    # ms@a05ce58: mindspore/python/mindspore/communication/management.py:118 (the hccl wheel of the CANN install is missing)
    Signature("mindspore.hccl_missing", _L, r"Error: \"hccl\" wheel was not installed correctly",
              "the CANN \"hccl\" Python package MindSpore needs for distributed training on Ascend is missing",
              "install CANN's hccl wheel (it ships with the toolkit) into the job's Python, and source set_env.sh",
              ("Error: \"hccl\" wheel",), node_wide=True),
    # ms@a05ce58: mindspore/ccsrc/minddata/dataset/engine/ir/datasetops/dataset_node.cc:665 (DatasetNode::ValidateParams):
    # a dataset's workers must number at most the machine's CPU threads
    Signature("mindspore.dataset_workers", _L,
              r"'s num_workers=\d+, this value is not within the required range of \[1, cpu_thread_cnt=\d+\]",
              "a MindSpore dataset asks for more parallel workers than the node has CPU threads",
              "lower num_parallel_workers (ds.config.set_num_parallel_workers, a dataset's num_workers) to at most the "
              "node's CPU threads", ("cpu_thread_cnt",), node_wide=True),
    # TensorFlow's allocators (tensorflow/core/framework/op_kernel.cc, bfc_allocator.cc): "OOM when allocating tensor with
    # shape[2,1023,50257] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc"; on the
    # host's allocator ("device:CPU:0 by allocator cpu") it is host memory
    Signature("tensorflow.host_oom", _O, r"\bOOM when allocating tensor\b.*\bdevice:CPU:\d+ by allocator (?:cpu|mklcpu)\b",
              "TensorFlow could not allocate a tensor in host memory", _HINT_HOST_OOM, ("OOM when allocating",), kind="host"),
    Signature("tensorflow.oom", _O, r"\bOOM when allocating tensor\b",
              "TensorFlow could not allocate a tensor on the device", _HINT_OOM, ("OOM when allocating",), kind="device"),
    Signature("kernel.oom_kill", _O,
              r"(?:Memory cgroup out of memory|Out of memory): Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]*)\)",
              "the Linux OOM killer killed a process", _HINT_HOST_OOM, ("out of memory: Kill", "Out of memory: Kill"), kind="host"),
    Signature("kernel.oom_invoked", _O, r"\binvoked oom-killer: |\boom_kill_process\b",
              "the Linux OOM killer ran (host or cgroup memory exhausted); the line naming the killed process follows",
              _HINT_HOST_OOM, ("invoked oom-killer", "oom_kill_process"), kind="host", role="generic"),
    Signature("slurm.oom_kill", _O, r"Detected \d+ oom[-_]kill events?",
              "Slurm saw the kernel OOM killer end a process of the job step (cgroup memory limit)", _HINT_HOST_OOM,
              ("oom-kill event", "oom_kill event"), kind="host", at_end=True),  # slurmstepd, as the step ends
    Signature("kernel.oom_kill_record", _O, r"\boom-kill:.*?\btask=(?P<comm>[^,]*),pid=(?P<pid>\d+)",
              "the Linux OOM killer picked a process", _HINT_HOST_OOM, ("oom-kill:",), kind="host"),
    Signature("kernel.oom_reaper", _O, r"oom_reaper: reaped process (?P<pid>\d+) \((?P<comm>[^)]*)\)",
              "the Linux OOM reaper freed a killed process", _HINT_HOST_OOM, ("oom_reaper:",), kind="host"),
    # torch's DataLoader on a worker's SIGBUS (torch/csrc/DataLoader.cpp: "ERROR: Unexpected bus error encountered in
    # worker. This might be caused by insufficient shared memory (shm)."; "DataLoader worker (pid N) is killed by signal:
    # Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory
    # limit."): /dev/shm of where the ranks run is too small (a container's 64 MB default), every rank of the node alike
    Signature("dataloader.shm", _L, r"Unexpected bus error encountered in worker|"
              r"DataLoader worker \(pids?\(?s?\)? ?[\d, ]+\) is killed by signal: Bus error|"
              r"dataloader's workers are out of shared memory",
              "a DataLoader worker died of SIGBUS: its shared memory (/dev/shm) ran out", "give the job more /dev/shm "
              "(docker --shm-size=8g or --ipc=host, a Kubernetes emptyDir medium Memory) or use fewer DataLoader workers",
              ("bus error encountered", "is killed by signal", "out of shared memory"), node_wide=True),
    Signature("dataloader.killed", _O, r"DataLoader worker \(pid \d+\) is killed by signal: Killed",
              "a DataLoader worker was SIGKILLed (on Linux almost always the kernel OOM killer: host memory)", _HINT_HOST_OOM,
              ("is killed by signal",), kind="host"),
    Signature("host.memoryerror", _O, r"^\s*(?:\S+:\s*)?MemoryError\b|std::bad_alloc\b|Cannot allocate memory|memory allocation of \d+ bytes failed|"
              r"cudaHostAlloc failed.{0,40}out of memory",
              "the host process could not allocate memory", _HINT_HOST_OOM, ("MemoryError", "bad_alloc", "Cannot allocate memory", "memory allocation of", "cudaHostAlloc failed"),
              kind="host"),
    # ---------------------------------------------------------------- NaN / overflow
    # The loss scalers' own words (issue #26). An overflow that halves a large scale and skips one step is routine (the
    # halving row, generic: extract.py counts a run of them); a scale at its minimum, or the run stopped for it, is NAN.
    # DeepSpeed (https://github.com/microsoft/DeepSpeed/blob/38327e07f6cd39b63418f60cedd1651b0be3e7c3/deepspeed/runtime/
    # fp16/loss_scaler.py#L174-L190, DynamicLossScaler.update_scale, used by ZeRO 1/2/3): "Current loss scale already at
    # minimum - cannot decrease scale anymore. Exiting run." (raised), "[deepspeed] OVERFLOW! Rank 0 Skipping step.
    # Attempted loss scale: 65536, reducing to 32768" and "..., but hysteresis is 2. Reducing hysteresis to 1" (routine);
    # fp16/fused_optimizer.py#L174 and unfused_optimizer.py#L160 ("[deepspeed] fp16 dynamic loss scale overflow! Skipping
    # step. Attempted loss scale: 1024.0, reducing to 512.0"), fused_optimizer.py#L392-L393 and unfused_optimizer.py#L283
    # ("Reducing dynamic loss scale from 1024.0 to 512.0"): those clamp at min_loss_scale without raising, so a scale that
    # stays where it was ("Attempted loss scale: 128.0, reducing to 128.0") is at its minimum.
    # NVIDIA Apex amp (https://github.com/NVIDIA/apex/blob/e13873debc4699d39c6861074b9a3b2a02327f92/apex/amp/handle.py#L138,
    # the last commit with amp): "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0"; no
    # floor by default, so it goes below 1 ("... to 6.103515625e-05": extract.py reads the value).
    # Colossal-AI (https://github.com/hpcaitech/ColossalAI/blob/4f9953be335ef371b3848719ddafe596c01ecd37/colossalai/amp/
    # naive_amp/grad_scaler/dynamic_grad_scaler.py#L90): "Overflow occurs, the loss scale is adjusted to 32768.0" (clamped
    # at min_scale, 1 by default); its growth message ("No overflow for consecutive 1000 steps, the loss scale is adjusted
    # to ...") is no reduction.
    # DeepSpeed's DynamicLossScaler.update_scale raises nothing but "Current loss scale already at minimum" (microsoft/
    # DeepSpeed at 38327e07f6cd: deepspeed/runtime/fp16/loss_scaler.py#L170-L176); ZeRO's _update_scale calls it
    # (stage_1_and_2.py#L2077, stage3.py#L2464): a traceback through that call is the scale at its minimum, even when the
    # exception's own line was cut off
    Signature("deepspeed.loss_scale_min_raised", _N, r"^\s+self\.loss_scaler\.update_scale\(has_overflow\)\s*$",
              "DeepSpeed's loss scaler raised from update_scale: the fp16 loss scale was already at its minimum", _HINT_NAN,
              ("loss_scaler.update_scale(",)),
    Signature("deepspeed.loss_scale_min", _N, r"Current loss scale already at minimum|loss scale (?:is )?already at (?:its )?minimum",
              "the fp16 loss scale collapsed to its minimum", _HINT_NAN, ("already at minimum", "already at its minimum")),
    # fairseq (https://github.com/facebookresearch/fairseq/blob/3d262bb25690e4eb2e7d3c1309b1e9c406ca4b99/fairseq/optim/
    # dynamic_loss_scaler.py#L61-L67, amp_optimizer.py#L59-L63): FloatingPointError("Minimum loss scale reached (0.0001).
    # Your loss is probably exploding. Try lowering the learning rate, ...") / "AMP: Minimum loss scale reached (...)"
    Signature("fp16.min_loss_scale_reached", _N, r"Minimum loss scale reached \([^)]*\)",
              "the loss scale reached its minimum and the run stopped (fairseq: the loss is probably exploding)", _HINT_NAN,
              ("loss scale reached",)),
    Signature("fp16.loss_scale_collapse", _N,
              r"(?:[Rr]educing|[Rr]educed|[Dd]ecreas\w*)(?: the)?(?: dynamic)? loss scale (?:from \S+ )?"
              r"to (?:1|1\.0+|0\.\d+|0)\b(?!\.\d*[1-9])|"
              r"Attempted loss scale: \S+, reducing to (?:1|1\.0+|0\.\d+)\b(?!\.\d*[1-9])|"
              r"Overflow occurs, the loss scale is adjusted to (?:1|1\.0+|0\.\d+)\b(?!\.\d*[1-9])",
              "the fp16 loss scale fell to 1 or below (every step overflows)", _HINT_NAN,
              ("reducing loss scale", "reducing to", "decrease", "Reducing dynamic loss scale", "Overflow occurs")),
    # a scale "reduced" to the value it had: the scaler is clamped at its min_loss_scale and still overflows
    Signature("fp16.loss_scale_floor", _N,
              r"Attempted loss scale: (?P<attempted>\d+(?:\.\d+)?), reducing to (?P<to>\d+(?:\.\d+)?)\b",
              "the fp16 loss scale is held at its minimum (min_loss_scale) and the step still overflows", _HINT_NAN,
              ("reducing to",), holds=lambda m: float(m["attempted"]) == float(m["to"])),
    Signature("fp16.loss_scale_halving", _N,
              r"(?:[Rr]educing|[Rr]educed|[Dd]ecreas\w*|setting) (?:the )?(?:dynamic )?loss scale(?: from \S+)? to:? ?\d|"
              r"[Aa]ttempted loss scale: \S+,? reducing to \d|Overflow occurs, the loss scale is adjusted to \d",
              "the fp16 loss scale was reduced (an overflow step; a collapse only when it halves at every step)", _HINT_NAN,
              ("educing", "educed", "ecreas", "setting loss scale to", "Overflow occurs"), role="generic"),
    # Megatron-LM's checks before the data-parallel reduction (https://github.com/NVIDIA/Megatron-LM/blob/
    # d98e8a64ddf34856e74b24714e3bedb2f5a39553/megatron/core/distributed/param_and_grad_buffer.py#L358-L366: "found NaN in
    # local grad norm for bucket #0 in backward pass before data-parallel communication collective", raised by
    # rerun_state_machine.py#L528-L534 as "Rank 3, node n, device 3, iteration 1201: Unexpected result nan
    # (message='...')"; before the rerun state machine an AssertionError "Rank 3: found NaN in local grad norm in backward
    # pass before data-parallel communication collective. Device: 3, node: n", commit e39f9f697229969f4e02a7d6e7507d207b510649);
    # Megatron-FSDP (.../megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py#L4773:
    # "[Megatron-FSDP](check_for_nan_in_grad=True) Detected NaN or Inf in wgrad: ...")
    Signature("megatron.nan_grad", _N,
              r"found NaN in local grad norm|found (?:NaN|Inf) in (?:local )?grad|Detected NaN or Inf in wgrad",
              "Megatron found NaN in the gradient norm", _HINT_NAN, ("found NaN", "found Inf", "Detected NaN")),
    # ... and in the loss (pretrain_gpt.py#L264-L270 at the same commit: "found NaN in local forward loss calculation",
    # as above; the assert of commit e39f9f697229969f4e02a7d6e7507d207b510649: "Rank 3: found NaN in local forward loss
    # calculation. Device: 3, node: n"; the Inf check of megatron/elastification/pretrain_hybrid_flex.py#L304)
    Signature("megatron.nan_loss", _N, r"found (?:NaN|Inf) in local forward loss",
              "Megatron found NaN/Inf in this rank's loss before the data-parallel reduction", _HINT_NAN,
              ("found NaN", "found Inf")),
    # Megatron's training_log prints each loss only when its average over the interval is > 0, between the batch size
    # and the loss scale: a line with nothing between them lost its loss to NaN (or to 0). An interval whose
    # iterations were all skipped (fp16 overflow) prints no loss either, so a line counting skipped ones is not this.
    Signature("megatron.loss_not_positive", _N,
              r"global batch size: *\d+ \| loss scale: (?!.*number of skipped iterations: *[1-9])",
              "Megatron's iteration line has no loss: its average was NaN or not positive (Megatron prints a loss only "
              "when it is > 0)", _HINT_NAN, ("batch size: 64 | loss scale",)),
    Signature("megatron.nan_iterations", _N, r"number of nan iterations:\s*[1-9]", "Megatron counted NaN iterations", _HINT_NAN,
              ("nan iterations: 1",)),
    Signature("loss.nan", _N,
              r"\b(?:lm |train |training |total |avg |mean )?loss(?:es)?\b['\"]?\s*(?:[:=]|is)?\s*\[?\s*(?:tensor\()?[-+]?(?:nan|inf)\b",
              "the loss is NaN or Inf", _HINT_NAN, _NAN_ANCHORS, I),
    Signature("metrics.nan", _N, r"^\s*\{.*'(?:loss|learning_rate|epoch|lr)'.*'[\w/.@-]+': [-+]?(?:nan|inf)[,}]|"
              r"^\s*[\w.@-]+(?:/[\w.@-]+)+\s*[:=]\s*[-+]?nan\s*$",
              "a metric of the training log (rewards, logps, loss) is NaN or Inf", _HINT_NAN, ("': nan", "': inf", "': -inf")),
    Signature("grad_norm.nan", _N, r"\bgrad(?:ient)?[ _]norm\b['\"]?\s*[:=]\s*\[?\s*[-+]?(?:nan|inf)\b",
              "the gradient norm is NaN or Inf", _HINT_NAN, _NAN_ANCHORS, I),
    Signature("torch.anomaly_nan", _N, r"returned nan values in its \d+\w* output|Function '\w+' returned nan",
              "torch anomaly detection found NaN in backward", _HINT_NAN, ("returned nan values",)),
    Signature("loss.not_finite", _N, r"\b(?:loss|Loss) (?:is|became|has become) (?:NaN|nan|not finite|non-finite|infinite)|"
              r"Non-finite (?:loss|gradient)|non-finite loss",
              "the loss stopped being finite", _HINT_NAN, ("NaN", "is nan", "not finite", "non-finite", "infinite", "Non-finite")),
    # fairseq (https://github.com/facebookresearch/fairseq/blob/3d262bb25690e4eb2e7d3c1309b1e9c406ca4b99/fairseq/trainer.py#L970:
    # FloatingPointError("gradients are Nan/Inf"); its NanDetector, fairseq/nan_detector.py#L45 and #L73-L74, then
    # reruns the step: "Detected nan/inf grad norm, dumping norms...", "NaN detected in output of <module>, shape: ...,
    # forward" / "Inf detected in output of ...")
    Signature("fairseq.nan", _N,
              r"gradients are Nan/Inf|Detected nan/inf grad norm|\b(?:NaN|Inf) detected in output of \S+, shape:",
              "fairseq found NaN/Inf in the gradients (its NanDetector names the first module whose output is not finite)",
              _HINT_NAN, ("Nan/Inf", "nan/inf", "detected in output of")),
    # PyTorch Lightning (https://github.com/Lightning-AI/pytorch-lightning/blob/7f0c3436cd3f6ad3753125672024fc415cbcb414/
    # src/lightning/pytorch/loops/utilities.py#L47, Trainer(detect_anomaly=True): ValueError("The loss returned in
    # `training_step` is nan."); src/lightning/pytorch/callbacks/early_stopping.py#L253-L254, EarlyStopping(check_finite=
    # True): "Monitored metric val_loss = nan is not finite. Previous best value was 0.123. Signaling Trainer to stop.")
    Signature("lightning.not_finite", _N, r"The loss returned in `training_step` is\b|"
              r"Monitored metric \S+ = \S+ is not finite\. Previous best value was",
              "Lightning stopped the run: the loss (or the monitored metric) is NaN or Inf", _HINT_NAN,
              ("training_step` is", "is not finite")),
    Signature("mindspore.overflow_stop", _N, r"overflow is True, loss scale is (?:1|1\.0)\b|"
              r"(?:[Oo]verflow|NaN) (?:detected|occurred).{0,40}(?:[Ss]top|[Tt]erminat|[Aa]bort)",
              "MindSpore kept overflowing with the loss scale at its minimum", _HINT_NAN,
              ("overflow is True", "verflow detected", "verflow occurred", "NaN detected", "NaN occurred")),
    # ---------------------------------------------------------------- hardware
    Signature("nvidia.xid", _H, r"\bNVRM: Xid \((?:PCI:)?[^)]*\): (?P<xid>\d+)", "the NVIDIA driver reported an Xid error", _HINT_HW,
              ("NVRM: Xid",)),
    Signature("ecc.error", _H,
              r"\b(?:uncorrectable|Uncorrectable|UNCORRECTABLE|double[- ]bit|multi[- ]bit|DBE)\b.{0,40}\bECC\b|\bECC\b.{0,40}"
              r"\b(?:uncorrectable|Uncorrectable|UNCORRECTABLE|error|errors) (?:detected|occurred)|ECC page retirement|"
              r"\bHBM\b.{0,30}(?:ECC|multi-bit|error)|ecc error",
              "an ECC memory error was reported", _HINT_HW, ("ECC", "ecc error", "HBM")),
    Signature("pcie.aer", _H, r"AER: (?:Uncorrected|Corrected|Multiple Uncorrected) \(?(?:Fatal|Non-Fatal)?|PCIe Bus Error",
              "a PCIe AER error was reported", _HINT_HW, ("AER: ", "PCIe Bus Error")),
    Signature("apei.hardware_error", _H, r"\[Hardware Error\]: (?:Hardware error from|event severity: (?:fatal|recoverable))|"
              # the kernel's EDAC driver on an uncorrected memory error (MindCluster's fault knowledge base, Comp_OS_HW_Mem_03:
              # "EDAC MC0: 1 UE memory scrubbing error"); corrected (CE) ones are not failures
              r"\bEDAC MC\d*: \d+ UE\b",
              "the firmware or the kernel reported a hardware error", _HINT_HW, ("[Hardware Error]", " UE memory")),
    Signature("ascend.device_fault", _H,
              r"receive ts exception msg|device (?:heartbeat|heart beat) (?:lost|timeout)|DEVICE_DOWN|"
              r"there is a (?:fftsplus )?sdma error|ProcessSdmaErrorInfo|hbm (?:multi-bit|ecc)|"
              # the runtime's own tables (hicann/runtime at 681ef76: src/runtime/core/src/device/device_error_proc.cc
              # cqeErrorMapInfo_, the SDMA completion statuses it files as memory faults, 0x7-0xA; device_error_core_proc.cc,
              # the AI Core error registers' errorStr, whose ECC entries say "See the RAS alarm handling")
              r"a (?:DDRC|COMPERR|COMPDATAERR) error occurs during the SDMA transfer|an ECC error occurs during the SDMA transfer|"
              r"errorStr: [^.]*\b(?:multi-bit|\d-bit) ECC error|See the RAS alarm handling|"
              r"Device\[\d+\] lost heartbeat|reason=lost heartbeat|GPU is lost|"
              # the driver on the host, in the kernel log (MindCluster's fault knowledge base, event 0x40F84E00: the
              # inter-board heartbeat, class Hardware): "[drv_soft_fault] ... Heartbeat lost! (device=1; ..."
              r"\[drv_soft_fault\].*\bHeartbeat lost! \(device=|"
              r"Unable to determine the device handle for GPU|fallen off the bus",
              "the NPU reported a device-level fault", _HINT_HW,
              ("ts exception", "heartbeat lost", "heartbeat timeout", "heart beat", "DEVICE_DOWN", "sdma error", "SdmaErrorInfo",
               "hbm ", "lost heartbeat", "GPU is lost", "device handle for GPU", "fallen off the bus", "during the SDMA transfer",
               "ECC error", "RAS alarm handling", "Heartbeat lost!")),
    Signature("nccl.ib_async_event", _H,
              r"NET/IB ?: (?:\S+ )?Got async (?:error )?event ?: (?:port error|local catastrophic error|device fatal)",
              "the node's InfiniBand/RoCE NIC raised a fatal event (port error, catastrophic error)", _HINT_FABRIC,
              ("Got async event", "Got async error event"), kind="fabric"),
    Signature("nccl.ib_completion", _T, r"NET/IB ?: .*(?:Got completion|completion) .*(?:error|status=\d*[1-9])|"
              r"\bibv_poll_cq\b.*(?:error|failed)|transport retry counter exceeded|IBV_WC_RETRY_EXC_ERR|"
              r"local protection error|remote access error",
              "an InfiniBand/RoCE completion failed (peer exited, or link down)", _HINT_FABRIC_PEER,
              ("NET/IB", "ibv_poll_cq", "retry counter", "IBV_WC", "protection error", "remote access error"), kind="fabric"),
    Signature("hccl.roce_cqe", _T, r"error cqe status|cqe err(?:or)? status\[|ROCE CQE|_CQE\(EI0013\)|\bEI0013:",
              "a RoCE completion error (peer exited, or link down)", _HINT_FABRIC_PEER, ("cqe", "CQE", "EI0013"), kind="fabric"),
    Signature("hccp.nic_init", _H, r"\bra (?:rdev|rdma|nic) init(?: rdma)? failed|\bEJ0002\b|[Tt]he network port is down",
              "HCCP could not bring up the NPU's network port (RoCE device init failed, EJ0002 port down): the device NIC or "
              "its link, before any peer was involved",
              "check the device port: `hccn_tool -i DEVICE -link -g` (link state), `-net_health -g`, `-ip -g` (its address in "
              "/etc/hccn.conf), the cable and the switch port; then `ascendctl preflight --only hccn_link,device_ips`",
              ("init failed", "init rdma failed", "EJ0002", "network port is down"), kind="fabric"),
    Signature("link.down", _H, r"\bNIC Link is Down\b|\blink (?:is )?down\b|link_status.*DOWN|Link down",
              "a network link went down", _HINT_FABRIC, ("Link is Down", "link down", "link is down", "link_status", "Link down"),
              kind="fabric"),
    # ---------------------------------------------------------------- launch
    Signature("port.in_use", _L, r"Address already in use|\bbind failed\b|bind\(\) failed|[Ff]ailed to bind(?! stream)|"
              r"specific port\[\d+\] fail|have already been bound|EADDRINUSE|failed to listen on any local network address|"
              + _code("EI0019"),
              "a port the job needs is taken", _HINT_PORT,
              ("already in use", "bind failed", "bind() failed", "ailed to bind", "specific port", "already been bound", "EI0019",
               "EADDRINUSE", "failed to listen on any")),
    Signature("launch.env_missing", _L, r"KeyError: b?'(?:RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_WORLD_SIZE)'|"
              r"environment variable (?:RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_RANK) expected, but not set",
              "the process was started without the distributed environment (RANK, WORLD_SIZE, MASTER_ADDR) a launcher sets",
              "start it with torchrun/msrun/deepspeed (or `ascendctl launch`), not with plain python",
              ("KeyError: ", "expected, but not set"), node_wide=True),
    Signature("python.module_not_found", _L, r"\bModuleNotFoundError: No module named|\bImportError: cannot import name|"
              r"\bImportError: \S+\.so[.\d]*: cannot open|Cannot re-initialize (?:CUDA|NPU) in forked subprocess|"
              r"error while loading shared libraries: \S+: cannot open shared object file",
              "a Python module or shared library is missing on this node",
              "install the same environment on every node (`ascendctl preflight` compares versions)",
              ("ModuleNotFoundError", "ImportError", "error while loading shared libraries", "Cannot re-initialize"), node_wide=True),
    # the CANN install lacks an operator's kernel or its config: the op binary package is missing or its version does
    # not match (aclnn's 561003 "find kernel error: the operator binary package may not be installed", 561107 no
    # ASCEND_OPP_PATH, 561108 a kernel config json it cannot load; GE's "not found in this op store")
    Signature("cann.op_kernel_missing", _L, r"Cannot find bin(?:ary)? (?:of|for) op\b|is not found in this op store|"
              r"Cannot parse json for config file \S*/kernel/config/|Failed to parse kernel in \S+\.json|"
              r"error code is 56(?:1003|1107|1108)\b|\bsupport for Ascend\w* is not implemented",
              "the CANN install lacks an operator's kernel or its config (the op package is missing or of another version)",
              "install the CANN kernels package that matches the toolkit and the chip (opp / Ascend-cann-kernels), source "
              "set_env.sh, and check ASCEND_OPP_PATH; then the versions on every node (`ascendctl preflight --only versions`)",
              ("Cannot find bin", "op store", "Cannot parse json", "Failed to parse kernel", "error code is 561",
               "is not implemented")),
    # MindSpore's message when its Ascend backend cannot load (libge_runner.so and friends missing)
    Signature("mindspore.backend_missing", _L, r"Unsupported device target (?:Ascend|GPU)\b",
              "MindSpore could not load the device backend the job asked for (its libraries are missing on this node)",
              "install the MindSpore package built for this device and the CANN/CUDA it needs, and source its environment",
              ("Unsupported device target",)),
    Signature("launch.duplicate_device", _L, r"Duplicate GPU detected|both on (?:CUDA|NPU) device",
              "two ranks were given the same device (a launch configuration error both ranks take part in)",
              "give each rank its own device: check nproc per node, CUDA/ASCEND_RT_VISIBLE_DEVICES and LOCAL_RANK handling",
              ("Duplicate GPU", "both on"), node_wide=True),
    # NCCL's ncclInvalidUsage, as NCCL (ncclGetErrorString: "invalid usage") and torch (NCCLUtils' detail string:
    # "ncclInvalidUsage: This usually reflects invalid usage of NCCL library") print it: raised before any transfer, by
    # a setup NCCL refuses; the usual one is two ranks on one device (NCCL says "Duplicate GPU detected" under
    # NCCL_DEBUG=WARN), also mismatched or repeated communicator setup
    Signature("nccl.invalid_usage", _L, r"\bncclInvalidUsage\b|NCCL error.{0,200}?\binvalid usage\b",
              "NCCL refused how it was set up (ncclInvalidUsage): most often two ranks on one device",
              "give each rank its own device (nproc per node, CUDA_VISIBLE_DEVICES, LOCAL_RANK -> device) and match the "
              "world size to the GPUs launched; NCCL_DEBUG=WARN names the exact misuse", ("ncclInvalidUsage", "NCCL error"),
              node_wide=True),
    Signature("launch.device_ordinal", _L,
              r"invalid device ordinal|No CUDA GPUs are available|"
              r"(?:CUDA|ASCEND_RT|ASCEND)_VISIBLE_DEVICES.{0,60}(?:invalid|out of range|not match|error)|"
              r"[Ii]nvalid device ?(?:ID|id|Id)\b|device id[^,.]{0,30} (?:is )?(?:invalid|out of range)|"
              r"(?:rtSetDevice|aclrtSetDevice|SetDevice|set device)\w*(?: execute)? failed|"
              r"[Dd]evice (?:\d+ )?is (?:busy|occupied|already (?:in use|occupied))|"
              r"occupied by (?:an)?other process|Device or resource busy",
              "the job asked for a device this node does not have, or one another process holds",
              "check nproc/slots against the node's devices, CUDA/ASCEND_RT_VISIBLE_DEVICES, and stale processes "
              "(`ascendctl preflight --only npu_count,npu_stale_procs`)",
              ("device ordinal", "Duplicate GPU", "No CUDA GPUs", "VISIBLE_DEVICES", "nvalid device", "device id",
               "SetDevice", "set device", "is busy", "is occupied", "already in use", "already occupied", "occupied by",
               "resource busy"), node_wide=True),
    Signature("hccp.init_failed", _L, r"Failed to initialize the HCCP process|Maybe the last training process is running|"
              r"tsd client wait response fail|[Dd]evice is occupied by (?:another|an? other) process",
              "the NPU is still held by an earlier process (HCCP could not start on it)",
              "kill the leftover training processes on that node (`ascendctl preflight --only npu_stale_procs` finds them) "
              "and relaunch", ("HCCP process", "last training process", "tsd client wait", "occupied by")),
    Signature("ranktable.invalid", _L, r"\[RanktableCheck\]|\[RanktableConfig\]|rank_?table.{0,40}(?:invalid|not a valid|error|fail)|"
              r"in the ranktable is inconsistent|RANK_TABLE_FILE.{0,40}(?:invalid|not exist|error)|"
              # MindCluster's fault knowledge base (AISW_CANN_HCCL_007, _009): HCCL could not find or parse the rank table (the
              # prefilter sees the second through the file's name, rank_table*.json)
              r"\[HcomLoadRanktableFile\]get file\[.*\] real path error|\] to json fail\. please check json file|"
              + _code("EI0001|EI0003|EI0004|EI0008|EI0010|EI0014|EJ0003"),
              "the rank table or the HCCL configuration is invalid", _HINT_RANKTABLE,
              ("Ranktable", "rank_table", "ranktable", "RANK_TABLE", "EI0001", "EI0003", "EI0004", "EI0008", "EI0010", "EI0014",
               "EJ0003"), node_wide=True),  # the rank table and HCCL's settings are the job's (or the node's), not a rank's
    # HCCL's op-retry connection (HCCL_OP_RETRY_ENABLE): its own error text ("2. Somebody may have already listen on those
    # ports, so we connect to wrong server and we will meet 'Recv unmatched ack' error", OpRetryConnection::Init) and the
    # HCCL user guide's page on the feature: HCCL's default ports (60000-60015) are taken by another process
    Signature("hccl.opretry_port_taken", _L, r"\[OpRetryConnection\]\[RecvAckTag\] Recv unmatched ack",
              "HCCL's op-retry connection reached a wrong server: its default ports (60000-60015) are used by another process",
              "reserve HCCL's ports (`sysctl -w net.ipv4.ip_local_reserved_ports=60000-60015`) or move them with "
              "HCCL_IF_BASE_PORT (and reserve those)", ("Recv unmatched ack",), node_wide=True),
    # CUDA's cudaErrorDevicesUnavailable (46), its text from cudaGetErrorString: every device the process may use is busy
    # or unavailable (CUDA runtime API reference: exclusive-process or prohibited compute mode, or another process holding
    # it): ranks that share a GPU, or one that is taken
    Signature("cuda.devices_unavailable", _L, r"CUDA-capable device\(s\) is/are busy or unavailable",
              "the GPU this rank asked for is busy or unavailable (exclusive-process compute mode, another process on it, "
              "or several ranks on one device)",
              "give each rank its own device (LOCAL_RANK / SLURM_LOCALID -> cuda:N, map_location in torch.load) and check "
              "`nvidia-smi` for the compute mode and processes already on the GPU", ("is/are busy or unavailable",),
              node_wide=True),
    Signature("args.invalid", _L, r"error: unrecognized arguments:|error: the following arguments are required:|"
              r"error: argument \S+: invalid",
              "the job was started with wrong arguments", "check the launch command line",
              ("error: unrecognized", "error: the following", "error: argument")),
    # An exception the program's own argument parsing raised (extract.py names it so when a traceback's innermost frame is
    # argparse's or transformers' parse_args, parse_args_into_dataclasses, a framework's _parse_args); transformers'
    # HfArgumentParser says it itself (src/transformers/hf_argparser.py: "Some specified arguments are not used by the
    # HfArgumentParser: [...]"): the job's arguments, the same on every rank, never a fault of one
    Signature("args.rejected", _L, r"Some specified arguments are not used by the HfArgumentParser",
              "the program rejected the arguments it was started with (its argument parsing raised)",
              "check the arguments the launch passes to the script: names, values, options the installed version does "
              "not know", ("Some specified arguments are not used",), node_wide=True),
    # The launcher could not start the job on a node over ssh (mpirun/prterun, pdsh under DeepSpeed's runner, clush):
    # OpenSSH's own message (sshconnect.c: "ssh: connect to host %s port %s: %s"; ssh.c: "ssh: Could not resolve hostname
    # %s: %s") and pdsh's report of it ("pdsh@%s: %s: ssh exited with exit code 255"): the node named never ran a rank
    Signature("launch.ssh_unreachable", _L,
              r"ssh: connect to host (?:(?P<host>[\w.-]+)|\S+) port \d+: (?:Connection refused|No route to host|"
              r"Connection timed out|Network is unreachable)|ssh: Could not resolve hostname (?P<host2>[\w.-]+)|"
              r"pdsh@[\w.-]+: (?P<host3>[\w.-]+): ssh exited with exit code 255",
              "the launcher could not reach a node over ssh to start the job there",
              "check that sshd runs and accepts the launching user's key on that node (port, firewall, host name "
              "resolution): `ssh <node> true` from the launching host, or `ascendctl preflight --only ssh`",
              ("ssh: connect to host", "ssh: Could not resolve", "ssh exited with exit code 255"), node_wide=True),
    Signature("exec.not_found", _L, r": command not found$|: not found$|No such file or directory: '[^']*python|"
              r"can't open file '[^']*': \[Errno 2\]|\[Errno 2\] No such file or directory: '[^']*\.py'",
              "the launcher could not find the program", "check the script path and the interpreter on every node",
              ("command not found", "not found", "No such file", "can't open file"), node_wide=True),
    # ---------------------------------------------------------------- communication timeouts (symptoms)
    Signature("hccl.socket_timeout", _T, _code(r"EI0006") + r"|Getting socket times out|get socket timeout",
              "HCCL timed out building a socket to a peer", _HINT_TIMEOUT, ("EI0006", "socket times out", "get socket timeout")),
    Signature("hccl.notify_wait_timeout", _T, _code(r"EI0002") + r"|notify wait timeout|hccl fftsplus task timeout|"
              r"\[TaskExecStage\]\[Timeout\]|Task run failed.*NOTIFY WAIT",
              "an HCCL collective waited past HCCL_EXEC_TIMEOUT", _HINT_TIMEOUT,
              ("EI0002", "notify wait timeout", "fftsplus task timeout", "[Timeout]", "NOTIFY WAIT")),
    # the runtime's own report of a device-side wait that timed out (hicann/runtime at 681ef76,
    # src/runtime/core/src/device/device_error_proc.cc, ProcessStarsWaitTimeoutErrorInfo: "notify wait timeout occurred
    # during task execution" is read by the row above; "event wait timeout occurred during task execution")
    Signature("runtime.event_wait_timeout", _T, r"\bevent wait timeout occurred during task execution",
              "a stream on the device waited on an event past its timeout (the runtime's report; in a distributed job "
              "the event a collective or another rank's work records)", _HINT_TIMEOUT,
              ("event wait timeout occurred",)),
    Signature("hccl.inconsistent_args", _E, _code(r"EI0005") + r"|inconsistent between ranks|\[ParameterConflict\]",
              "ranks called a collective with different arguments (a program bug the others then wait on)",
              "compare the collective calls (op, count, dtype, group) of the ranks named in the line",
              ("EI0005", "inconsistent between ranks", "ParameterConflict")),
    Signature("hccl.code_timeout", _T, _code(r"EI0012|EI0015"),
              "HCCL reported a cluster communication error", _HINT_TIMEOUT,
              ("EI0012", "EI0015")),
    Signature("hccl.heartbeat_lost", _T, r"Heartbeat Lost|status\[LOST\]|heartbeat lost|Cluster Exception Location",
              "a rank stopped answering HCCL heartbeats", _HINT_TIMEOUT, ("Heartbeat Lost", "LOST", "Exception Location")),
    Signature("hccl.link_timeout", _T,
              r"wait socket establish timeout|connected p2p timeout|topo exchange (?:server|agent) get socket timeout|"
              r"LinksEstablishCompleted\] is failed|Transport init error|CONNECT TIMEOUT DETECT|dispatch timeout|"
              r"\|\s*\S+\(\d+\)\s*\|.*\|\s*(?:time out|no connect)\s*\||"
              # MindCluster's fault knowledge base (AISW_CANN_ERRMSG_Custom_05): HCCL's wait for the peer's P2P enable
              r"Wait timeout for get P2P status",
              "HCCL could not finish link setup with a peer", _HINT_TIMEOUT,
              ("establish timeout", "p2p timeout", "get socket timeout", "LinksEstablishCompleted", "Transport init error",
               "CONNECT TIMEOUT", "dispatch timeout", "time out |", "no connect |", "Wait timeout for get P2P")),
    Signature("torch.monitored_barrier", _T, r"failed to pass monitoredBarrier|received errors while waiting for send/recv from "
              r"rank \d+|[Rr]ank \d+ (?:failed to pass|did not call) (?:monitored)?[Bb]arrier",
              "a rank waited at a (monitored) barrier for a peer that never arrived; the line names it", _HINT_TIMEOUT,
              ("monitoredBarrier", "waiting for send/recv", "failed to pass", "did not call")),
    # Horovod's stall inspector (horovod/common/stall_inspector.cc, operations.cc before 0.20): a collective waited past
    # HOROVOD_STALL_CHECK_TIME_SECONDS for ranks that never submitted their tensor, and names them
    # Horovod's SHUT_DOWN_ERROR (horovod/common/common.h): what every other rank raises once one rank's exception (or
    # exit) has shut Horovod down; the rank that raised first is elsewhere in the log, or is the process mpirun names
    Signature("horovod.shut_down", _T, r"Horovod has been shut down\. This was caused by an exception on one of the ranks",
              "Horovod was shut down under this rank by another rank's exception or exit (this rank is a victim)",
              _HINT_TIMEOUT, ("Horovod has been shut down",)),
    Signature("horovod.stall", _T, r"\[missing ranks: \d+(?:\s*,\s*\d+)*\]|submitted to be reduced, gathered or broadcasted by "
              r"subset of ranks|^\W*\d+: \[[^\]]*\b" + HOROVOD_OPS,
              "Horovod's stall inspector: a collective waited for ranks that never submitted their tensor; it names them",
              _HINT_TIMEOUT, ("missing ranks", "subset of ranks", "HorovodAllreduce_", "HorovodAllgather_", "HorovodBroadcast_",
                              "HorovodAlltoall_", "HorovodReduceScatter_", "HorovodReducescatter_", "HorovodJoin_")),
    Signature("torch.desync_report", _T, r"didn't join collective #\d+|joined but didn't finish collective #\d+",
              "torch's desync report (TORCH_NCCL_DESYNC_DEBUG) names the ranks that lagged behind the collective that timed out",
              _HINT_TIMEOUT, ("didn't join collective", "didn't finish collective")),
    Signature("nccl.watchdog_timeout", _T, r"Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out|"
              r"ProcessGroupNCCL's watchdog got stuck|Some NCCL operations have failed or timed out|"
              r"failure detected by watchdog|\(either an error or timeout\) detected by watchdog|"
              r"[Rr]eceived a dump signal due to a collective timeout|"
              # ProcessGroupNCCL's watchdog, after the timeout: "Timeout at NCCL work: 19, last enqueued NCCL work: 19,
              # last completed NCCL work: 18." (a rank whose other timeout lines were cut still says it timed out)
              r"\bTimeout at NCCL work: \d+",
              "a NCCL collective hit the torch watchdog timeout", _HINT_TIMEOUT,
              ("Watchdog caught", "before timing out", "watchdog got stuck", "failed or timed out", "detected by watchdog",
               "dump signal due to a collective timeout", "Timeout at NCCL work")),
    # NCCL's own result code ncclUnhandledCudaError (NVIDIA/nccl at 5067397c: src/init.cc ncclGetErrorString, "unhandled
    # cuda error (run with NCCL_DEBUG=INFO for details)"; src/include/checks.h CUDACHECK: "Cuda failure '%s'") is a CUDA
    # call inside NCCL that failed: the device or the program (an earlier kernel's illegal access, an invalid argument,
    # memory), not the network; the CUDA error's own text says which (nccl.cuda_oom, device rows), so this one is generic
    # NCCL's shared-memory segments (NVIDIA/nccl at 5067397c: src/os/linux.cc, "Error: failed to extend %s to %ld bytes",
    # "Error while creating shared memory segment %s (size %ld)"): its runtime guide says /dev/shm is too small (a
    # container's 64 MB default: docker --shm-size): a setting of where the ranks run, every rank of the node alike
    Signature("nccl.shm_exhausted", _L, r"failed to extend /dev/shm/\S+ to \d+ bytes|Error while (?:creating|attaching to) "
              r"shared memory segment /dev/shm/",
              "NCCL could not create its shared-memory segment in /dev/shm (too small, e.g. a container's 64 MB default)",
              "give the job more /dev/shm (docker --shm-size=1g or more, a Kubernetes emptyDir medium Memory), and check "
              "that nothing else fills it", ("failed to extend /dev/shm", "shared memory segment"), node_wide=True),
    Signature("nccl.cuda_error", _E, r"unhandled cuda error|\bncclUnhandledCudaError\b",
              "a CUDA call inside NCCL failed (NCCL's ncclUnhandledCudaError): the device or the program, not the network",
              "read the CUDA error NCCL names (`Cuda failure '...'`, NCCL_DEBUG=INFO) and the rank's first error; an "
              "illegal memory access or an Xid in the kernel log points at the program or the GPU",
              ("unhandled cuda error", "ncclUnhandledCudaError"), role="generic"),
    # NCCL's error propagation (NVIDIA/nccl at 5067397c: src/include/checks.h NCCLCHECK, `INFO_LOC(NCCL_ALL, "-> %d", RES)`:
    # "NCCL INFO bootstrap.cc:554 -> 3") prints the ncclResult_t each caller returns; 3 is ncclInternalError ("internal
    # error - please report this issue to the NCCL developers", src/init.cc ncclGetErrorString): NCCL's own defect or a
    # protocol mismatch (a bootstrap message of the wrong size: NCCL versions that differ between nodes), not the network
    Signature("nccl.internal_error", _E, r"NCCL INFO \S+:\d+ -> 3(?:\s|$)|internal error - please report this issue to the NCCL",
              "NCCL returned an internal error (ncclInternalError): a defect of the NCCL version, or nodes whose NCCL "
              "versions differ", "compare the NCCL version every node loads (NCCL_DEBUG=VERSION); try the NCCL release the "
              "framework was built with, or a newer one", (" -> 3", "internal error - please report"), role="generic"),
    Signature("torch.dist_backend_error", _T, r"\bDistBackendError\b", "torch.distributed raised DistBackendError", _HINT_TIMEOUT,
              ("DistBackendError",)),
    # gloo's own transport and store errors (https://github.com/facebookincubator/gloo/blob/
    # cc441984208d0b54b4fc614301f41e82e951e5cd/gloo/transport/tcp/pair.cc#L314-L544: "Write timeout", "writev <peer>: <errno
    # text>", "Read timeout", "Read error <peer>: <errno text>", "Connection closed by peer <peer>", #L201 "Socket
    # unexpectedly closed", #L797 "Socket closed"; tcp/pair.h#L311 "Connect timeout"; tcp/buffer.cc#L72,#L113 and
    # ibverbs/buffer.cc#L94-L172 "Read/Write/Send timeout"; tcp/helpers.h#L184-L208 and tcp/error.cc "timed out connecting:
    # SO_ERROR: Connection refused, remote=[...]", "getsockopt: ..."; tcp/unbound_buffer.cc#L76-L81 "Application timeout
    # caused pair closure", "Timed out waiting 1800000ms for recv operation to complete"; rendezvous/hash_store.cc#L55,
    # file_store.cc#L152 "Wait timeout for key(s): [...]"), each behind GLOO_ERROR_MSG's "[<file>:<line>] " (common/error.h
    # #L16-L17), the file as torch builds it ("../third_party/gloo/gloo/transport/tcp/pair.cc"); torch's ProcessGroupGloo
    # wraps setup failures as "Gloo connectFullMesh failed with ...". A peer that closed or reset the connection, or a
    # wait past the timeout: the collective broke. gloo's invariant checks ("[enforce fail at .../pair.cc:446]
    # op.preamble.length <= op.nbytes") are a program's mismatch, not this row.
    # 127.0.1.1 is the address Debian and Ubuntu give the machine's own hostname in /etc/hosts: a rank that connects to it
    # (or is reached at it) resolved a peer's or its own hostname to loopback, so no other node can ever reach it. The
    # launch's network setting (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME / HCCL_SOCKET_IFNAME, MASTER_ADDR, /etc/hosts),
    # the same on every rank of the node, not a fault of the running job
    Signature("net.loopback_hostname", _L,
              r"(?:connect|Connection refused|Connection reset|failed to connect|Connection closed|connectFullMesh)"
              r"[^\n]{0,120}\b127\.0\.1\.1\b|\b127\.0\.1\.1\b[^\n]{0,120}(?:Connection refused|Connection reset|timed out)",
              "a rank connected to 127.0.1.1, the loopback address a hostname gets in /etc/hosts: the job's nodes were named "
              "by addresses no other node can reach",
              "set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (HCCL_SOCKET_IFNAME, HCCL_IF_IP on Ascend) to the cluster NIC, give "
              "MASTER_ADDR as that NIC's address, or make each node's hostname resolve to it (not 127.0.1.1) in /etc/hosts",
              ("127.0.1.1",), node_wide=True),
    Signature("gloo.timeout", _T, r"Gloo connectFullMesh failed|Timed out waiting \d+ms for (?:recv|send) operation|"
              r"Application timeout caused pair closure|\[gloo\].*(?:Timed out|timeout)|"
              r"gloo/(?:transport|rendezvous)/[\w/]+\.(?:cc|h):\d+\] (?:Connection closed by peer|Read error|Read timeout|"
              r"Write timeout|Send timeout|Connect timeout|Socket closed|Socket unexpectedly closed|writev |timed out connecting|"
              r"SO_ERROR|getsockopt|short read|short write|Wait timeout for key)|"
              r"gloo/transport/tcp/pair\.cc.*(?:Connection closed by peer|Connection reset|timed out)",
              "a gloo connection or collective failed: a peer closed or reset the connection, or it timed out", _HINT_TIMEOUT,
              ("connectFullMesh", "Timed out waiting", "Application timeout", "gloo/transport/", "gloo/rendezvous/",
               "Connection closed by peer", "Connection reset")),
    # torch's store-based barrier (distributed_c10d._store_based_barrier) counts the processes that joined a group's key:
    # more than the world size means processes of another job, or a world size the launch got wrong, share the store.
    # Ahead of rendezvous.timeout: an overfull barrier can end in its timeout ("Timed out initializing process group in
    # store based barrier on rank 0, for key: ... (world_size=8, num_workers_joined=16, ...)", distributed_c10d.py), and
    # at the default log level that line is all a log shows of it
    Signature("c10d.barrier_overfull", _L, r"store based barrier\b.*?\(world_size=(?P<world>\d+), "
              r"(?:worker_count|num_workers_joined)=(?P<joined>\d+)",
              "more processes joined the process group's store barrier than its world size: another job shares the "
              "master address and port, or the launch's world size is wrong",
              "check that no other job uses this MASTER_ADDR:MASTER_PORT, and that nnodes x nproc_per_node (or the "
              "model-parallel sizes) match the world size", ("store based barrier",),
              holds=lambda m: int(m["joined"]) > int(m["world"])),
    Signature("rendezvous.timeout", _T, r"RendezvousTimeoutError|[Rr]endezvous (?:timed out|timeout)|"
              r"Timed out initializing process group|DistStoreError: .*(?:[Tt]imeout|[Tt]imed out)|RendezvousClosedError|"
              r"TCPStore.*(?:timed out|Timed out)|socket timed out after|The client socket has timed out|"
              r"waitForInput: socket .{0,200}timed out|waitForInput: poll for socket .{0,200}likely a timeout|connect\(\) timed out|"
              r"got error: Socket Timeout|"
              # c10d's client retrying the store ("will retry" until its timeout): the rendezvous has not completed
              r"The server socket on \S+ has timed out, will retry|"
              # torch's NCCL init: any store error while fetching the unique id from rank 0 ("Broken pipe", "Connection
              # reset"): the store or rank 0 went away ("may indicate a possible application crash on rank 0")
              r"retr(?:ie|ei)ving ncclUniqueId from \[\d+\] via c10d key-value store.{0,200}got error|"
              r"Stream synchronize timeout|stream sync timeout",
              "ranks did not all join the rendezvous in time", _HINT_TIMEOUT,
              ("Rendezvous", "endezvous", "Timed out initializing", "DistStoreError", "socket timed out", "RendezvousClosedError",
               "socket has timed out", "retrieving ncclUniqueId", "retreiving ncclUniqueId", "likely a timeout")),
    # c10d's store client could not reach the store (https://github.com/pytorch/pytorch/blob/
    # 8cf1b8e3942565c8bdcc7ba98f02f626ebdda5d1/torch/csrc/distributed/c10d/socket.cpp, SocketConnectOp: "The client socket
    # has failed to connect to any network address of (node01, 29500). The client socket has failed to connect to
    # [node01]:29500 (errno: 113 - No route to host)." for an error it does not retry; a refused or reset connection is
    # retried until "The client socket has timed out after ...", rendezvous.timeout's); torchelastic's c10d rendezvous
    # backend (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py at
    # 858f73b0f90bb8c540fbd8fadb2877ed07f22e00: RendezvousConnectionError("The connection to the C10d store has failed.
    # See inner exception for details.")). No row took an unreachable master for a launch error: like a rendezvous that
    # never completes, this is COMM_TIMEOUT (a store address in use stays port.in_use's LAUNCH). Not matched: the
    # per-address warning before it ("[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500
    # (errno: 99 - Cannot assign requested address)."), printed by healthy runs that then connect by another address, and
    # the agent's keep-alive warning ("... due to an error of type RendezvousConnectionError."), which says only that the
    # store's host went away.
    Signature("c10d.store_unreachable", _T,
              r"The client socket has failed to connect to any network address of \(|"
              r"\bRendezvousConnectionError(?::|\s*$)|The connection to the C10d store has failed",
              "this rank could not reach the c10d store (MASTER_ADDR:MASTER_PORT or the rendezvous endpoint): the host "
              "that serves it is down, unreachable, or never started it",
              "check that MASTER_ADDR resolves and is reachable from every node on MASTER_PORT (firewall, the interface's "
              "address), and that the rank or agent hosting the store started; then look at the first error of that host",
              ("ailed to connect to", "RendezvousConnectionError", "C10d store has failed")),
    # ... or lost its connection to it: torch's tcputil (torch/csrc/distributed/c10d/Utils.hpp at
    # edeed37857e025510b6a193a9cc1fe0dbc53303f, SYSCHECK, sendBytes/recvBytes) raises DistNetworkError with the socket
    # error's text ("Connection reset by peer", "Broken pipe", "Socket Timeout"): the store's host (rank 0 or the agent)
    # went away, or the network between them failed. A DistNetworkError that says more (a port in use, a connect
    # timeout) is named by the rows above. torch before 2.1 raised the bare text as a RuntimeError ("RuntimeError:
    # Connection reset by peer"), too bare for a row: extract.py takes it for the wait when a collective's traceback ends in it.
    Signature("c10d.store_connection_lost", _T, r"\bDistNetworkError\b",
              "this rank lost its connection to the c10d store (its host went away, or the network between them failed)",
              _HINT_TIMEOUT, ("DistNetworkError",)),
    Signature("nccl.system_error", _T, r"unhandled system error|NCCL error.*remote process exited|ncclRemoteError|"
              r"NCCL communicator was aborted",
              "NCCL lost a peer or hit a system error", _HINT_TIMEOUT,
              ("unhandled system error", "NCCL error", "ncclRemoteError", "was aborted")),
    Signature("msrun.node_timeout", _T,
              r"[Tt]he node:? (?P<culprit>\d+) is timed? ?out|[Nn]ode (?P<culprit2>\S+) is timed out|timed out node|"
              r"Failed to connect to the (?:meta server|scheduler)|Cluster is not ready|[Tt]opology build timed out|"
              r"(?:[Ss]cheduler|meta server).{0,60}(?:timed out|time out|timeout)|"
              # msrun's own summary of the scheduler's log (mindspore/parallel/cluster/process_entity/_api.py, _analyze_log)
              r"Time out nodes are \[",
              "the msrun/MindSpore scheduler saw a node time out (it names the first to time out, not always the culprit)",
              _HINT_TIMEOUT, ("is timed out", "is timeout", "is time out", "timed out node", "Failed to connect to the",
                              "Cluster is not ready", "build timed out", "Time out nodes are")),
    # MindSpore's kernel launch of a communication operator failed ("Launch kernel failed, name:Default/AllReduce-op0",
    # the runtime's message; the op names are MindSpore's communication primitives, mindspore/ops/operations/comm_ops.py):
    # the collective this rank was in broke, as when a peer stopped or the scheduler aborted the cluster; a rank's own
    # cause is a line of its own (an HCCL code, an exception before it)
    Signature("mindspore.comm_kernel_failed", _T,
              r"Launch kernel failed, (?:kernel )?name: ?(?:\S*/)?(?:Hcom|Dist)?(?:AllReduce|AllGather\w*|ReduceScatter\w*|"
              r"Broadcast|Alltoall\w*|AlltoAll\w*|AllToAll\w*|NeighborExchange\w*|Send|Receive|Barrier|Reduce|"
              r"CollectiveScatter|CollectiveGather|BatchISendIRecv)(?:-op\d+|\b)",
              "a communication operator's kernel failed on this rank: its collective broke (a peer stopped, or the "
              "cluster was aborted)", _HINT_TIMEOUT, ("Launch kernel failed",)),
    # A rank's traceback whose innermost frames are a torch.distributed collective, barrier or store wait (or a wrapper
    # that only calls one): that rank was WAITING for its peers when it ended (issue #26). extract.py reads tracebacks
    # frame by frame and emits these rows itself (a frame line is never matched alone): when the traceback ends in such
    # a frame, cut off or with an exception that is not the rank's own (a DistError, a generic wrapper line). A real
    # exception raised inside the rank's own code (ValueError in a collate function) stays that rank's EXCEPTION.
    # Sources: torch/distributed/distributed_c10d.py (the collectives, barrier, _store_based_barrier) and
    # torch/distributed/c10d_logger.py (`_exception_logger`/`_time_logger`: `wrapper` calls only the c10d API it wraps);
    # accelerate/state.py (`wait_for_everyone` -> torch.distributed.barrier(); `_goes_first`).
    Signature("torch.collective_wait", _T,
              r'File "[^"]*/distributed/c10d_logger\.py", line \d+,? in wrapper\b|'
              r'File "[^"]*/distributed/distributed_c10d\.py", line \d+,? in (?:barrier|monitored_barrier|'
              r"_store_based_barrier|all_reduce|all_reduce_coalesced|all_gather|all_gather_into_tensor|_all_gather_base|"
              r"all_gather_object|all_gather_coalesced|reduce|reduce_scatter|reduce_scatter_tensor|_reduce_scatter_base|"
              r"broadcast|broadcast_object_list|gather|gather_object|scatter|scatter_object_list|all_to_all|"
              r"all_to_all_single|send|recv|send_object_list|recv_object_list)\b|"
              r'File "[^"]*/accelerate/(?:state|accelerator)\.py", line \d+,? in (?:wait_for_everyone|_goes_first)\b',
              "a rank's traceback ends inside a torch.distributed collective, barrier or store wait: it was waiting for "
              "its peers (a victim), not failing on its own",
              "find the rank the others waited for: one that logged nothing (busy tokenizing, saving, evaluating) or "
              "failed first", ('File "',)),
    # HF `main_process_first`: every non-main process waits in dist.barrier() on entering the `with` block while the
    # main process works; the main process joins that barrier only when it leaves the block. accelerate's
    # PartialState.main_process_first uses `is_main_process` (global rank 0); `local_main_process_first` and
    # transformers' TrainingArguments.main_process_first(local=True, the default) use the main process of each node
    # (local rank 0 of every node; one node: rank 0); transformers with local=False uses global rank 0. Only the
    # `__enter__` path names the main process (on `__exit__` it is the main process that waits for the others).
    Signature("main_first.wait", _T,
              r'File "[^"]*/accelerate/(?:state|accelerator)\.py", line \d+,? in main_process_first\b',
              "a non-main rank waited in main_process_first's barrier for the main process (global rank 0) to finish "
              "its work (tokenizing, caching a dataset)",
              "look at what rank 0 was doing: a long dataset map or tokenization outlasts the process group timeout; "
              "raise the timeout (ddp_timeout / InitProcessGroupKwargs) or preprocess once before the distributed job",
              ('File "',)),
    Signature("main_first.local_wait", _T,
              r'File "[^"]*/transformers/training_args\.py", line \d+,? in main_process_first\b|'
              r'File "[^"]*/accelerate/(?:state|accelerator)\.py", line \d+,? in local_main_process_first\b',
              "a non-main rank waited in main_process_first's barrier for the main process of each node (local rank 0) to "
              "finish its work (tokenizing, caching a dataset)",
              "look at what local rank 0 was doing (rank 0 on one node): a long dataset map or tokenization outlasts the "
              "process group timeout; raise ddp_timeout or preprocess once before the distributed job",
              ('File "',)),
    # ---------------------------------------------------------------- launcher reports and stops (weak: they may blame a victim)
    Signature("msrun.worker_exit", _U, r"(?:Worker|Scheduler) process (?P<pid>\d+) exit with exception\. Error code: (?P<code>-?\d+)",
              "msrun saw a process exit with an error", "look at that process' own log for the first error",
              ("exit with exception",), role="report"),
    Signature("torchrun.child_failed", _U, r"\bChildFailedError\b|\bfailed \(exitcode: (?P<code>-?\d+)\) local_rank(?:: "
              r"(?P<local_rank>\d+) \(pid: (?P<pid>\d+)\))?",
              "torchrun saw a worker fail", _HINT_EXIT_REPORT,
              ("ChildFailedError", "exitcode: "), role="report"),
    Signature("deepspeed.exit", _U, r"exits with return code = (?P<code>-?\d+)|Killing subprocess (?P<pid>\d+)",
              "the DeepSpeed launcher saw a worker exit", _HINT_EXIT_REPORT,
              ("exits with return code", "Killing subprocess"), role="report"),
    # a shell running the job reports a child the kernel killed (bash's job report, in English or a translation):
    # "run.sh: line 30: 23195 Killed   python train.py", "run.sh: 行 30: 23195 已杀死"
    Signature("shell.killed", _U, r"(?:\bline|行) \d+: +(?P<pid>\d+) +(?P<signal_word>Killed|已杀死)(?:\s|$)",
              "the shell that ran the job reports it was killed (SIGKILL)",
              _HINT_EXIT_REPORT,
              ("Killed", "已杀死"), role="report"),
    # torch built without the backend the job asked for (distributed_c10d.py: "Distributed package doesn't have NCCL built
    # in"): NCCL on an NPU or CPU host, MPI on a wheel: the launch's backend setting, not the program's logic
    Signature("torch.backend_missing", _L, r"Distributed package doesn't have \w+ built in",
              "torch was built without the distributed backend the job asked for",
              "use the backend this device and build provide (hccl with torch_npu, gloo on CPU, nccl on CUDA) in the "
              "script or the launcher's config (DeepSpeed: dist_backend)", ("built in",)),
    # srun could not start the step's tasks on a node (src/api/step_launch.c: "Task launch for %ps failed on node %s: %s"):
    # the job never ran there (credential expired, munge, prolog, node state)
    Signature("srun.task_launch_failed", _L, r"Task launch for \S+ failed on node (?P<host>[\w.-]+): ",
              "Slurm could not launch the job step's tasks on that node: the job never started there",
              "check the node's slurmd and munge (clock skew expires credentials), its prolog and `scontrol show node`",
              ("Task launch for",)),
    # srun's own report of tasks the kernel OOM-killed (SchedMD/slurm src/plugins/launch/slurm/launch_slurm.c, _task_finish:
    # `error("%s: %s %s: Out Of Memory", hosts, task_str, tasks)` when a task's status is SIG_OOM): host memory on that node
    Signature("srun.oom", _O, r"srun: error: (?P<host>[\w.-]+): tasks? (?P<task>[\d,-]+): Out Of Memory\b",
              "Slurm reports tasks of the step on that node killed for memory (the cgroup's or the node's limit)",
              _HINT_HOST_OOM, ("Out Of Memory",), kind="host"),
    Signature("srun.task_exit", _U, r"srun: error: (?P<host>[\w.-]+): tasks? (?P<task>[\d,-]+): (?:Exited with exit code (?P<code>\d+)|"
              r"(?P<signal_word>Killed|Terminated|Aborted|Segmentation fault))",
              "Slurm saw a task end badly", "the first task to end is not always the cause: check the others' first errors",
              ("srun: error:",), role="report"),
    Signature("mpirun.exit", _U, r"(?:mpirun|prterun) noticed that process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node "
              r"(?P<host>\S+) exited on signal (?P<sig>\d+)|Primary job\s+terminated normally, but \d+ process returned",
              "mpirun saw a rank end badly", "the first rank to end is not always the cause: check the others' first errors",
              ("noticed that process rank", "Primary job"), role="report"),
    Signature("launcher.stop_signal", _U, r"Sending process (?P<pid>\d+) closing signal (?P<signal>SIG[A-Z]+)|"
              r"There's worker exits with exception, kill all other workers",
              "a launcher stopped one of its workers (a victim of another worker's failure, or of a stop from outside)",
              "find the rank that failed before the stop", ("closing signal", "kill all other workers"), role="stop"),
    Signature("job.stopped", _U, r"\bSignalException: Process \d+ got signal: (?P<sig>\d+)|"
              r"Received (?:Signals\.)?(?:(?P<signal2>SIG[A-Z]+)|(?P<sig2>\d+)) death signal|"
              r"CANCELLED AT .{0,40}(?:DUE TO TIME LIMIT|\*\*\*)|DUE TO (?:TIME LIMIT|PREEMPTION|NODE FAILURE)|"
              r"^\s*(?:\[rank\d+\]:\s*)?KeyboardInterrupt\s*$",
              "the launcher or the job was stopped from outside (a signal, a cancellation, a time limit, Ctrl-C)",
              "find who stopped it: the scheduler (time limit, preemption), a user, ascendctl's teardown after another failure",
              ("SignalException", "death signal", "CANCELLED AT", "DUE TO", "KeyboardInterrupt"), role="stop"),
    Signature("launcher.job_failed", _U, r"Distributed job exited with exception|returned non-zero exit status \d+|"
              r"ProcessExitedException: process \d+ terminated with exit code",
              "the launcher or a wrapper reports that the job failed", "look for the first error of a rank before this line",
              ("job exited with exception", "non-zero exit status", "ProcessExitedException"), role="report"),
    # ---------------------------------------------------------------- the emitters' catalogs (above)
    *CATALOG_REST,
    # ---------------------------------------------------------------- crashes and program errors
    Signature("process.segfault", _E, r"Segmentation fault|\bSIGSEGV\b|Fatal Python error|core dumped|\bSIGABRT\b|"
              r"\bSIGBUS\b|Bus error",
              "a process crashed", "read the traceback just before this line on the same rank",
              ("Segmentation fault", "SIGSEGV", "Fatal Python error", "core dumped", "SIGABRT", "SIGBUS", "Bus error")),
    Signature("process.uncaught_abort", _E, r"terminate called after throwing|(?:ACL|acl) ?stream synchroni[sz]e failed|"
              r"aclrtSynchronizeStream\w* failed",
              "a C++ exception or a failed stream sync ended the process (usually how an earlier error, often a "
              "communication timeout, surfaced)", "read the lines before it on the same rank for the error it carries",
              ("terminate called", "stream synchroni", "aclrtSynchronizeStream"), role="generic"),
    # the NPU runtime's words for a kernel that failed (AI Core, vector core, AI CPU): an operator's fault, as the
    # aclError catalog files them (507015 aicore / 507018 aicpu exception), not the device's
    Signature("device.runtime_error", _E, r"CUDA error: (?!out of memory)[a-z]|illegal memory access|device-side assert triggered|"
              r"CUBLAS_STATUS_[A-Z_]+|cuDNN error: CUDNN_STATUS|Aicore kernel execute failed|Kernel task happen error|"
              r"there is an? (?:aicore|aivector|aicpu|aiv|aic) error|exception of fftsplus (?:aicore|aivector|aicpu|aiv|aic) error|"
              r"exception occurred during AICPU execution",
              "a kernel failed on the device (a bug or bad input, not a network problem)",
              "rerun that rank with CUDA_LAUNCH_BLOCKING=1 / ASCEND_LAUNCH_BLOCKING=1 to find the failing operator",
              ("CUDA error: ", "illegal memory access", "device-side assert", "CUBLAS_STATUS_", "cuDNN error",
               "Aicore kernel execute failed", "Kernel task happen error", "aicore error", "aivector error", "aicpu error",
               "aiv error", "aic error", "during AICPU execution")),
    Signature("collective.mismatch", _E, r"Detected mismatch between collectives on ranks|"
              r"(?:[Mm]ismatch|inconsistent) (?:between|across) ranks|collective.{0,40}(?:sequence|shape) mismatch",
              "ranks called different collectives (a program bug the others then wait on)",
              "compare the collective calls (op, count, dtype, group) of the ranks named in the line",
              ("mismatch between collectives", "between ranks", "across ranks", "ismatch")),
    # the ErrorManager's inner codes: any whose digits 3-6 are 9999 (IsInnerErrorCode), GE's E19999/E29999 too
    Signature("cann.inner_error", _E, r"\bE[0-9A-Z]9999:|\(E[0-9A-Z]9999\):", "CANN reported an inner error",
              "read the lines after it for the failing module; collect the plog of this device",
              ("EE9999", "EI9999", "EL9999", "E29999"), role="generic"),
    # HCCL's own result codes (HcclResult, include/hccl/hccl_types.h of hicann/hcomm), as torch_npu reports a failed
    # call ("HCCL function error: <call>(...), error code is N"): 1 parameter, 2 empty pointer, 5 not supported,
    # 6 not found, 10 cannot open a file, when the call sets up a communicator, are its configuration
    Signature("hccl.init_config", _L, r"HCCL function error: (?:Hccl|hccl)(?:CommInit\w*|GetRootInfo\w*|CreateSubComm\w*)\(.*"
              r"error code is (?:1|2|5|6|10)\b",
              "HCCL could not set up a communicator with the configuration it was given (HcclResult: parameter error, "
              "empty pointer, not supported, not found or a file it could not open)",
              "check the job's HCCL setup: rank table or root info, world size and rank, the devices given to each rank, "
              "HCCL_* variables, and whether the feature is supported on this chip", ("HCCL function error",), node_wide=True),
    Signature("hccl.result_memory", _O, r"HCCL function error: .*error code is (?:3|24)\b",
              "HCCL could not allocate memory (HcclResult 3 memory error / 24 out of memory)", _HINT_OOM,
              ("HCCL function error",), kind="device"),
    Signature("hccl.op_failed", _T, r"function error: Hccl\w+|\bHccl\w+ failed|HCCL function error|"
              r"call hccl api failed",
              "an HCCL operation failed (a peer is gone, or a link broke)", _HINT_TIMEOUT,
              ("function error: Hccl", "failed", "HCCL function error", "hccl api failed")),
    Signature("worker.exception_report", _E, r"WorkerProc hit an exception|Invocation of \w+ method failed|"
              r"Scheduler hit an exception|(?:EngineCore|Worker) (?:encountered|hit) an? (?:fatal )?(?:error|exception)",
              "a serving/training framework reports that a worker raised (the traceback follows)",
              "read the traceback after this line", ("hit an exception", "method failed", "encountered a", "encountered an",
                                                     "hit a fatal"), role="generic"),
    # ACL's operator compiler never initialised: OpCompileProcessor::Init failed (its SetOption: the SoC name or the native
    # compile strategy, i.e. the CANN install and the Python packages its compiler imports), and every later call refuses
    # with ACL_ERROR_FAILURE (500001) and "[Init][Env]init env failed!" (hicann/ge at ffdcbc9f7496c17a98c1d12762c61ed608ef3503:
    # api/acl/acl_op_compiler/single_op/compile/op_compile_processor.cpp; aclSetCompileopt, op_compiler.cpp, fails only
    # there with 500001): torch_npu's set_device/init reports it as "AclSetCompileopt(...), error code is 500001"
    Signature("acl.op_compile_env", _L, r"\[Init\]\[Env\]init env failed|\bAclSetCompileopt\([^)]*\)\S*,? error code is 500001\b",
              "CANN's operator compiler could not initialise on this node (ACL_ERROR_FAILURE from its op-compile setup)",
              "check the CANN install this node's job sees (set_env.sh sourced, the toolkit matching the driver and torch_npu) "
              "and the Python packages CANN's compiler needs in the job's environment (numpy < 2 for CANN 8.x, decorator, "
              "sympy, cffi, protobuf, attrs, pyyaml, psutil, scipy)", ("init env failed", "AclSetCompileopt"), node_wide=True),
    # torch_npu names the C++ function whose check failed before the file: "Initialize:" is the device's start-up
    # (NpuSysCtrl::Initialize, reached through _npu_init), so the process never had a working NPU
    Signature("torch_npu.init_failed", _L, r"\bInitialize:\S+ NPU function error\b",
              "torch_npu could not initialise the NPU (the process never had a working device)",
              "check the device and the CANN install the job sees: `npu-smi info`, ASCEND_RT_VISIBLE_DEVICES, that "
              "set_env.sh was sourced, and the plog (~/ascend/log) for the call that failed", ("NPU function error",)),
    # ---------------------------------------------------------------- torch_npu's ERRxxxxx codes (its own catalog)
    *CATALOG_LATE,
    # a code torch_npu's catalog (as generated) does not list: a newer submodule or error type
    Signature("torch_npu.error", _E, r"\bERR\d{5} [A-Z][A-Z_]*\b", "torch_npu raised an error (a code its catalog here "
              "does not list)", "read the traceback of this rank", tuple(f"ERR{d}" for d in range(10)), role="generic"),
    Signature("torch_npu.wrapper", _E, r"(?:Error|Exception): (?:\[ERROR\]|.*\b(?:NPU|ACL|HCCL|acl\w*) function error\b|"
              r".*HCCL error in:)",
              "torch_npu wrapped a CANN/HCCL error; the lines after it (ERRxxxxx, EIxxxx) say what failed",
              "read the error code lines that follow it", ("Error: ", "Exception: "), role="generic"),
    Signature("exception.timed_out", _T, r"(?:Error|Exception): (?!.*DataLoader).*(?:[Tt]imed out|[Tt]ime ?out\b|TIMEOUT)|"
              r"^(?:[A-Za-z_]\w*\.)*TimeoutError\b",
              "an exception raised because something timed out waiting for a peer or a store", _HINT_TIMEOUT,
              ("Error: ", "Exception: ", "TimeoutError")),
    # ---------------------------------------------------------------- generic (last: every specific row wins)
    # PaddlePaddle's own errors (PaddlePaddle/Paddle, paddle/phi/core/memory/allocation/*_allocator.cc,
    # custom_allocator.cc: ResourceExhausted("Out of memory error on %s %d. ...") for GPU, XPU and custom devices such as
    # the NPU; its enforce messages end in a hint line with Paddle's own source location, "[Hint: Expected ..., but
    # received ...] (at /paddle/paddle/phi/...)", under the "Error Message Summary:" of an EnforceNotMet)
    Signature("paddle.oom", _O, r"\bOut of memory error on (?:GPU|XPU|[A-Za-z_]+) \d+\b",
              "PaddlePaddle could not allocate device memory", _HINT_OOM, ("Out of memory error on",), kind="device"),
    Signature("paddle.enforce", _E, r"^\s*\[Hint: .*\]\s*\(?at \(?\S*/paddle/(?:fluid|phi|common)/\S+:\d+\)",
              "a PaddlePaddle operator or runtime check failed (its error summary names the check)",
              "read the error summary above this hint (the failing operator and its inputs)", ("[Hint: ",)),
    # Paddle's parameter-server RPC client (paddle/fluid/operators/distributed/grpc/grpc_client.cc: "... meets grpc error,
    # error_code:4 error_message:Deadline Exceeded"): the server did not answer in time
    Signature("paddle.grpc_error", _T, r"\bmeets grpc error, error_code:\d+",
              "a PaddlePaddle RPC to a parameter server (or trainer) failed: the peer did not answer", _HINT_TIMEOUT,
              ("meets grpc error",)),
    Signature("python.exception", _E,
              r"^(?:\[(?:rank|default|trainer|worker)\d+\]:\s*)*(?:[A-Za-z_]\w*\.)*"
              r"(?!SignalException\b|ChildFailedError\b|CalledProcessError\b)[A-Z]\w*(?:Error|Exception)(?::\s+\S|\s*$)",
              "a rank raised a Python exception (the last line of its traceback)",
              "read this rank's traceback: it raised before the other ranks timed out or were stopped",
              ("Error: ", "Exception: ")),
)


# Lines that carry no failure but attribute a file or a pid to a rank/device, or belong to a launcher report.
CONTEXT_ANCHORS: tuple[str, ...] = (
    "hcom init", "SetupAgent", "Entry-HcclCommInitRootInfo", "LocalRank Key Info", "RankID:",
    "ChildFailedError", "Root Cause (first observed failure)", "Failures:", "  time      :", "  host      :", "  rank      :",
    "  exitcode  :", "  traceback :", "exitcode: ", "rank id",
)


def all_anchors() -> tuple[str, ...]:
    """Every literal the prefilter searches for, longest first, without duplicates."""
    seen: dict[str, None] = {}
    for sig in SIGNATURES:
        for anchor in sig.anchors:
            seen.setdefault(anchor, None)
    for anchor in CONTEXT_ANCHORS:
        seen.setdefault(anchor, None)
    return tuple(sorted(seen, key=len, reverse=True))


_BY_ID: dict[str, Signature] = {sig.id: sig for sig in SIGNATURES}


def by_id(signature_id: str) -> Signature:
    """Look one signature up by its id (KeyError when unknown)."""
    return _BY_ID[signature_id]


# the NPU's fault events by id (lowercase hex, no 0x): the cause MindCluster's knowledge base gives each, for the verdict
NPU_EVENT_CAUSES: dict[str, str] = {e["code"][2:].lower(): f"{e['code']}: {e['title']}" for e in _CATALOG["entries"]
                                    if _CATALOG["groups"][e["group"]]["form"] == "npu_event"}
_NPU_EVENT_ID_RX = re.compile(NPU_EVENT_PREFIX + r"([0-9A-Fa-f]{8})\b")


def meaning_of(signature_id: str, text: str = "") -> str:
    """What a finding's signature means, in words (with its line's `text`: an NPU fault event's own cause too); a
    finding the engine made itself (no table row) keeps its id."""
    sig = _BY_ID.get(signature_id)
    if sig is None:
        return signature_id
    if signature_id.startswith("npu.event.") and (m := _NPU_EVENT_ID_RX.search(text)) is not None:
        cause = NPU_EVENT_CAUSES.get(m.group(1).lower())
        if cause is not None:
            return f"{sig.meaning}; {cause}"
    return sig.meaning


def hint_of(signature_id: str) -> str | None:
    """The next step a signature suggests; None for a finding the engine made itself."""
    sig = _BY_ID.get(signature_id)
    return sig.hint if sig is not None else None


def is_at_end(signature_id: str) -> bool:
    """Whether the signature is a summary printed as a step ends (`Signature.at_end`): its place is no time."""
    sig = _BY_ID.get(signature_id)
    return sig is not None and sig.at_end


def is_node_wide(signature_id: str) -> bool:
    """Whether the signature is a setup every rank of a node shares (`Signature.node_wide`)."""
    sig = _BY_ID.get(signature_id)
    return sig is not None and sig.node_wide
