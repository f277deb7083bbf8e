"""Build triage's error-code catalog from the emitters' own catalogs, not from the logs we have (issue #26).

Reads the upstream files named below (checked-out copies: nothing is downloaded) and writes
ascendctl/triage/data/ascend_codes.json (codes, the group each maps to, the source of each) and
ascendctl/triage/data/INDEX.md (one row per code with its source URL). `ascendctl.triage.signatures` turns
each group into one signature row at import time.

    .venv/bin/python scripts/ascend_catalog.py --cann-error-codes runtime/src/dfx/error_manager/error_code.json \\
        --rt-error-codes runtime/include/external/acl/error_codes/rt_error_codes.h \\
        --rt-errcode-manage runtime/src/runtime/core/src/common/errcode_manage.cc \\
        --verbs-enum-strs rdma-core/libibverbs/enum_strs.c --nccl-ibvwrap nccl/src/misc/ibvwrap.cc \\
        --ge-error-codes ge/base/common/error_registry/error_registry.cc \\
        --torch-npu-error-codes pytorch/torch_npu/utils/_error_code.py \\
        --acl-base-codes runtime/include/external/acl/acl_base_rt.h --acl-error-doc runtime/docs/zh/api_ref/25-01_aclError.md \\
        --mindcluster-kg mind-cluster/component/ascend-faultdiag/src/ascend_fd/configuration/kg-config.json
    .venv/bin/python scripts/ascend_catalog.py --index-only     # rewrite INDEX.md from the JSON

Which code goes to which group (and so which triage Category) is decided here, in GROUP_OF: a code the
table does not name is left out of the catalog. The Graph Engine's family of codes (E1xxxx of GE/ATC, from
hicann/ge's error registry; E2xxxx-EBxxxx of the fusion engine, AI CPU, TE fusion, the operators' own checks and
the operator compilers, from CANN's error_code.json) is too large for a list: GE_RULES maps each of those codes
by its prefix and the error class the catalog itself gives it (errTitle), never by a log. torch_npu's own codes
(`ERR<submodule:02><error type:03> <SUBMODULE> <text>`, from Ascend/pytorch's torch_npu/utils/_error_code.py) are one
entry per code its helpers can print, mapped by the error type's documented meaning (TORCH_NPU_GROUP_OF). AscendCL's
own return codes (ACL_ERROR_* of acl_base.h, declared in acl_base_rt.h: 1000xx/1480xx, 2000xx, 300000, 5000xx) are
mapped one by one by the cause CANN's aclError reference gives each (ACL_BASE_GROUP_OF); a new code stops the script
until it is mapped. The NPU's health-management fault events (their 0x8xxxxxxx ids in the device's event log) come from
MindCluster's fault knowledge base (Ascend/mind-cluster's ascend-faultdiag kg-config.json), mapped by the class and module
it gives each (npu_event_group). The upstream commits are recorded in SOURCES; bump them with the files.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "ascendctl" / "triage" / "data"

RUNTIME = "https://github.com/hicann/runtime/blob/681ef7610df13c8128982901142a2c869ddbb53e"
HCOMM = "https://github.com/hicann/hcomm/blob/84a35f54d92e43fd35074eb6dfebb181b0828b0c"
RDMA = "https://github.com/linux-rdma/rdma-core/blob/691953d8d502f54088f776c5ba2aeed0a5ac945d"
NCCL = "https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027"
GE = "https://github.com/hicann/ge/blob/ffdcbc9f7496c17a98c1d12762c61ed608ef3503"
TORCH_NPU = "https://github.com/Ascend/pytorch/blob/9e73e708ab9350d203475609f36f8a43f6a0c2ab"
MIND_CLUSTER = "https://github.com/Ascend/mind-cluster/blob/22bb3d987bc0208c3eb7395e222b661276133c58"

SOURCES: dict[str, dict[str, str]] = {
    "cann-error-codes": {
        "url": f"{RUNTIME}/src/dfx/error_manager/error_code.json",
        "what": "CANN's error-code catalog (error_manager/error_code.json, installed as runtime/conf/error_manager/"
                "error_code.json): EE RTS, EH ACL, EI HCCL, EJ HCCP, EL driver, EZ operator/AclNN codes",
    },
    "cann-rt-error-codes": {
        "url": f"{RUNTIME}/include/external/acl/error_codes/rt_error_codes.h",
        "what": "the runtime's aclError numbers (ACL_ERROR_RT_*: 107xxx, 207xxx, 507xxx); explained in "
                f"{RUNTIME}/docs/zh/api_ref/25-01_aclError.md",
    },
    "acl-base-codes": {
        "url": f"{RUNTIME}/include/external/acl/acl_base_rt.h",
        "what": "AscendCL's own return codes (ACL_ERROR_*: 1000xx and 1480xx the environment or the program's logic, "
                "2000xx resources and unsupported calls, 300000 storage, 5000xx internal errors of ACL, GE, runtime, "
                "driver), declared in acl_base_rt.h, which acl/acl_base.h includes; the meaning of each (the message "
                f"here) and its cause from {RUNTIME}/docs/zh/api_ref/25-01_aclError.md"},
    "cann-doc-ei0009": {"url": "https://www.hiascend.com/document/detail/zh/canncommercial/900/maintenref/troubleshooting/"
                               "atlaserrorcode_15_0381.html",
                        "what": "CANN 9.0 error-code reference page of EI0009 (absent from the runtime's catalog); older "
                                "releases' page says to look at the peer NPU, this one at the port link"},
    "cann-rt-reasons": {
        "url": f"{RUNTIME}/src/runtime/core/src/common/errcode_manage.cc",
        "what": "the runtime's table of inner errors: the aclError number and the reason text it prints "
                "(`<api> execution failed, reason=task timeout`, `ErrCode=107020, desc=[task timeout]`)"},
    "hcomm-ei0018": {"url": f"{HCOMM}/docs/en/error_codes/EI0018-Execution_Error_UB_CQE.md",
                     "what": "HCCL's own error-code page (hcomm), a code newer than the runtime's catalog"},
    "hcomm-ei0019": {"url": "https://github.com/hicann/hcomm/blob/534bd4ec9a0908c493548c94f5bd584688ce1bf1/docs/en/"
                            "error_codes/EI0019-Communication_Error_Bind_IP_Port.md",
                     "what": "HCCL's own error-code page (hcomm), a code newer than the runtime's catalog"},
    "hcomm-ei0020": {"url": "https://github.com/hicann/hcomm/blob/a23a418b73c3714f1c86d158f7c48c3f3ccd97e9/docs/en/"
                            "error_codes/EI0020-Communication_Error_Bind_IP_Port.md",
                     "what": "HCCL's own error-code page (hcomm), a code newer than the runtime's catalog"},
    "ibv-wc-status": {"url": f"{RDMA}/libibverbs/enum_strs.c",
                      "what": "ibv_wc_status_str(): the text of each work-completion status (status 12 = "
                              "IBV_WC_RETRY_EXC_ERR, 'transport retry counter exceeded')"},
    "ibv-event-type": {"url": f"{RDMA}/libibverbs/enum_strs.c",
                       "what": "ibv_event_type_str(): the text of each asynchronous event of an RDMA device"},
    "nccl-ibvwrap": {"url": f"{NCCL}/src/misc/ibvwrap.cc",
                     "what": "NCCL's verbs wrappers: `Call to <verb> failed ...` for each verb NCCL calls"},
    "nccl-troubleshooting": {"url": f"{NCCL}/docs/userguide/source/troubleshooting/networking_troubleshooting.rst",
                             "what": "NCCL's troubleshooting guide (\"Troubleshooting NCCL errors\"): `Call to ibv_create_qp "
                                     "failed` and `Call to ibv_reg_mr failed` are commonly the locked-memory limit (pinned "
                                     "memory), solved by `memlock unlimited` in limits.conf or the job launcher's limits"},
    "ge-error-registry": {
        "url": f"{GE}/base/common/error_registry/error_registry.cc",
        "what": "the Graph Engine's error-code catalog (the JSON its error registry registers with the ErrorManager): "
                "E1xxxx GE/ATC codes (arguments and options, model files, operators, E19999 inner error); explained "
                f"one page a code under {GE}/docs/en/user_guides/error_codes"},
    "mindcluster-kg": {
        "url": f"{MIND_CLUSTER}/component/ascend-faultdiag/src/ascend_fd/configuration/kg-config.json",
        "what": "MindCluster's fault knowledge base (ascend-faultdiag's kg-config.json): the NPU's health-management "
                "fault events (their 0x8xxxxxxx ids as the device's event log prints them, `Event id=0x...`, "
                "`event_id=0x...`), each with the class Huawei gives it (Hardware, Network, Software, User), its module "
                "and its cause; the CANN troubleshooting guide sends an AI Core error's reader to these ids first "
                "(slog/dev-os-N/run/event/event_*.log)"},
    "torch-npu-error-codes": {
        "url": f"{TORCH_NPU}/torch_npu/utils/_error_code.py",
        "what": "torch_npu's error codes: its submodules (_SubModuleID: PTA 0, OPS 1, DIST 2, GRAPH 3, PROF 4, UNKNOWN 99), "
                "its error types and their texts (ErrCode) and the line it prints, `[ERROR] <time> (PID:<pid>, "
                "Device:<device>, RankID:<rank>) ERR<submodule:02><type:03> <SUBMODULE> <text>` (the C++ side, "
                "torch_npu/csrc/core/npu/NPUException.h and .cpp, prints the same codes and texts; the first release, "
                "Ascend/pytorch@2f47d73c2a4f43253c6707c4e3071dc47b1585be, printed the code alone); each type explained in "
                f"{TORCH_NPU}/docs/zh/user_guide/troubleshooting/error_code_description/error_code_information.md"},
}

_HINT_TIMEOUT = "@timeout"  # the table's own timeout hint (signatures._HINT_TIMEOUT)
_HINT_HW = "@hardware"

GROUPS: dict[str, dict[str, str]] = {
    "cann.catalog.comm": {
        "category": "COMM_TIMEOUT", "role": "error", "kind": "", "form": "cann",
        "meaning": "HCCL or the runtime reported a communication error with a peer (a timeout, a failed transfer, a "
                   "rank that never joined): CANN error-code catalog",
        "hint": _HINT_TIMEOUT},
    "cann.catalog.oom": {
        "category": "OOM", "role": "error", "kind": "device", "form": "cann",
        "meaning": "CANN could not allocate device memory or resources (CANN error-code catalog)",
        "hint": "@oom"},
    "cann.catalog.host_oom": {
        "category": "OOM", "role": "error", "kind": "host", "form": "cann",
        "meaning": "the runtime or ACL could not allocate host memory (CANN error-code catalog)",
        "hint": "@host_oom"},
    "cann.catalog.config": {
        "category": "LAUNCH", "role": "error", "kind": "", "form": "cann",
        "meaning": "CANN rejected the configuration or environment it was started with (rank table, HCCL_* variable, "
                   "versions, ports, IPs, a device id, a device another process holds): CANN error-code catalog",
        "hint": "fix what the message names (rank table, HCCL_*/ASCEND_* variables, package versions, ports, device "
                "visibility, a stale process holding the device) and relaunch; `ascendctl preflight` checks most of them"},
    "cann.catalog.device": {
        "category": "HARDWARE", "role": "error", "kind": "", "form": "cann",
        "meaning": "the driver or HCCP reported the NPU or its network port absent or down (CANN error-code catalog)",
        "hint": "drain the node; check `npu-smi info -t health`, `hccn_tool -i DEVICE -link -g` and `-optical -g`, the "
                "cable and the switch port"},
    "cann.catalog.program": {
        "category": "EXCEPTION", "role": "error", "kind": "", "form": "cann",
        "meaning": "an operator or collective rejected what the program gave it (input shape, dtype, attribute, an "
                   "unsupported operator, arguments that differ between ranks): CANN error-code catalog",
        "hint": "read the operator and the values the message names; rerun that rank with ASCEND_LAUNCH_BLOCKING=1 to "
                "find the call"},
    "cann.catalog.generic": {
        "category": "EXCEPTION", "role": "generic", "kind": "", "form": "cann",
        "meaning": "the runtime, ACL or driver rejected a call (invalid argument, unsupported, resource): says little "
                   "by itself (CANN error-code catalog)",
        "hint": "read the lines around it for the call that failed and the error before it"},
    "acl.rt.comm_timeout": {
        "category": "COMM_TIMEOUT", "role": "error", "kind": "", "form": "acl",
        "meaning": "the runtime returned a task, stream or event timeout (on a cluster usually a collective that "
                   "waited past HCCL_EXEC_TIMEOUT for a peer): aclError catalog",
        "hint": _HINT_TIMEOUT},
    "acl.rt.oom": {
        "category": "OOM", "role": "error", "kind": "device", "form": "acl",
        "meaning": "the runtime returned a device memory allocation failure (aclError catalog)", "hint": "@oom"},
    "acl.rt.hardware": {
        "category": "HARDWARE", "role": "error", "kind": "", "form": "acl",
        "meaning": "the runtime returned a device fault (lost heartbeat, DMA, HBM/ECC, link or port error): aclError "
                   "catalog",
        "hint": _HINT_HW},
    "acl.rt.device_id": {
        "category": "LAUNCH", "role": "error", "kind": "", "form": "acl",
        "meaning": "the runtime returned an invalid device id or a device it could not set up (aclError catalog)",
        "hint": "check nproc/slots against the node's devices, ASCEND_RT_VISIBLE_DEVICES, and stale processes "
                "(`ascendctl preflight --only npu_count,npu_stale_procs`)"},
    "acl.rt.kernel": {
        "category": "EXCEPTION", "role": "error", "kind": "", "form": "acl",
        "meaning": "a kernel failed on the NPU (AI Core, vector core or AI CPU exception, trap or execution timeout): "
                   "aclError catalog",
        "hint": "rerun that rank with ASCEND_LAUNCH_BLOCKING=1 to find the failing operator"},
    "ibv.wc_error": {
        "category": "COMM_TIMEOUT", "role": "error", "kind": "fabric", "form": "ibv_wc",
        "meaning": "an RDMA work completion failed (retry counter exceeded, flushed, remote error): the peer exited or "
                   "the path to it dropped packets (ibverbs status catalog)",
        "hint": _HINT_TIMEOUT},
    "ibv.device_event": {
        "category": "HARDWARE", "role": "error", "kind": "fabric", "form": "ibv_event",
        "meaning": "the RDMA NIC raised a fatal asynchronous event (local catastrophic error, port error): ibverbs "
                   "event catalog",
        "hint": "drain the node; check the NIC with `ibv_devinfo` / `ibstat` (port state), its firmware and the cable"},
    "ibv.pinned_memory": {
        # NCCL's own guide: these two calls fail when the process may not pin enough memory (ulimit -l, a container's or
        # Slurm's limits): a setting of the launch, the same on every rank of the node; ahead of ibv.setup_failed
        "category": "LAUNCH", "role": "error", "kind": "", "form": "ibv_call", "place": "first",
        "meaning": "NCCL could not register memory or create a queue pair on the RDMA NIC: most often the locked-memory "
                   "limit (NCCL's troubleshooting guide)",
        "hint": "raise the locked-memory limit where the ranks start (`ulimit -l` must say unlimited: `* soft/hard memlock "
                "unlimited` in limits.conf, docker `--ulimit memlock=-1`, Slurm's PropagateResourceLimits); if it already "
                "is, check the node's NIC (`ibv_devinfo`) and the peer-memory module (nvidia_peermem)"},
    "ibv.setup_failed": {
        # first in the table: NCCL's "Call to ibv_reg_mr failed with error Cannot allocate memory" is the NIC's
        # memory registration (locked-memory limit, peer-memory module), not the host running out of memory
        "category": "HARDWARE", "role": "error", "kind": "fabric", "form": "ibv_call", "place": "first",
        "meaning": "the node's RDMA NIC could not set up the data path (a verbs call to open the device, register "
                   "memory or create a queue pair failed): NCCL's verbs wrappers",
        "hint": "check this node's NIC (`ibv_devinfo`, port state), the locked-memory limit (`ulimit -l`) and the "
                "peer-memory module (nvidia_peermem); NCCL_IB_HCA / NCCL_IB_GID_INDEX select the NIC and GID"},
    "cann.catalog.ge_setup": {
        "category": "LAUNCH", "role": "error", "kind": "", "form": "cann",
        "meaning": "the Graph Engine, ATC or the operator compiler rejected the job's setup: an argument or option, a "
                   "configuration file or environment variable, a model or file it could not open or parse, the Python "
                   "environment, an operator not registered in the installed operator package (GE/ATC error catalog)",
        "hint": "fix what the message names (the option or variable, the file's path and permissions, the model, "
                "ASCEND_OPP_PATH and the installed CANN packages, the Python environment: source set_env.sh) and relaunch"},
    # torch_npu's codes end the message of the exception they close: placed late, after the hand-written rows that read
    # the call a code wraps (HCCL's result codes, torch_npu's failed initialisation), before its wrapper line's row
    "torch_npu.catalog.comm": {
        "category": "COMM_TIMEOUT", "role": "error", "kind": "", "form": "torch_npu", "place": "late",
        "meaning": "torch_npu reported a timeout (its catalog: unexpected communication link state, or operations that "
                   "differ between nodes) or a failed HCCL call: torch_npu's error-code catalog",
        "hint": _HINT_TIMEOUT},
    "torch_npu.catalog.program": {
        "category": "EXCEPTION", "role": "error", "kind": "", "form": "torch_npu", "place": "late",
        "meaning": "torch_npu rejected what the program gave it: an invalid parameter, type or value (dtype, shape, "
                   "dimension), or a feature it does not support (torch_npu's error-code catalog)",
        "hint": "read the message above the code (the argument, dtype, value or feature it names) and this rank's "
                "traceback; use a supported call or dtype instead"},
    "torch_npu.catalog.setup": {
        "category": "LAUNCH", "role": "error", "kind": "", "form": "torch_npu", "place": "late",
        "meaning": "torch_npu could not find or use what the job's environment must provide: a file or a function of "
                   "the installed CANN (resource not found), a resource that is unavailable (no NPU, a configuration "
                   "file), the permissions of a file or directory (torch_npu's error-code catalog)",
        "hint": "fix what the message above the code names (source CANN's set_env.sh, CANN and driver versions that match "
                "torch_npu, ASCEND_RT_VISIBLE_DEVICES, the file's path and permissions) and relaunch"},
    "torch_npu.catalog.generic": {
        "category": "EXCEPTION", "role": "generic", "kind": "", "form": "torch_npu", "place": "late",
        "meaning": "torch_npu reported that a call it wraps failed (an ACL or GE API), an internal, pointer, memory or "
                   "system-call error, or an exception of the application: says little by itself (torch_npu's "
                   "error-code catalog)",
        "hint": "read the lines around it: CANN's error code (EExxxx, EIxxxx, `error code is N`) or the exception "
                "before it says what failed"},    # AscendCL's own return codes (acl_base.h): the number where the runtime's forms print it, a wrapper's "error code is
    # N" / ONNX Runtime's "CANN failure N: <name>" (weak), and the ACL_ERROR_* name itself; placed late, after the
    # hand-written rows that read the call a code wraps (torch_npu's failed initialisation: "Initialize:... error code
    # is 500001")
    "acl.base.setup": {
        "category": "LAUNCH", "role": "error", "kind": "", "form": "acl_base", "place": "late",
        "meaning": "AscendCL rejected the job's setup: initialised twice or not at all, a configuration, model or "
                   "operator file it could not read or parse, the dump/profiling/operator-queue configuration, "
                   "ASCEND_OPP_PATH, a stub library on the library path, a device that is not there (aclError catalog)",
        "hint": "fix what the message names (aclInit called once per process and before any other call, the file or "
                "model path and its version, ASCEND_OPP_PATH and LD_LIBRARY_PATH: source set_env.sh, the device id) "
                "and relaunch"},
    "acl.base.program": {
        "category": "EXCEPTION", "role": "error", "kind": "", "form": "acl_base", "place": "late",
        "meaning": "AscendCL rejected what the program passed or the order of its calls: an invalid parameter, model "
                   "or queue id, an operator's type, input, output, attribute, dtype or format, an unsupported API, a "
                   "stream or context that does not match or was destroyed, a subscription or registration twice or "
                   "missing (aclError catalog)",
        "hint": "read the call and the value the message names and this rank's traceback; rerun it with "
                "ASCEND_LAUNCH_BLOCKING=1 to find the call"},
    "acl.base.oom": {
        "category": "OOM", "role": "error", "kind": "device", "form": "acl_base", "place": "late",
        "meaning": "AscendCL could not allocate memory (ACL_ERROR_BAD_ALLOC): aclError catalog", "hint": "@oom"},
    "acl.base.generic": {
        "category": "EXCEPTION", "role": "generic", "kind": "", "form": "acl_base", "place": "late",
        "meaning": "AscendCL reported an internal error or the failure of a module it wraps (GE, runtime, driver, "
                   "profiling), an unsupported feature or a storage limit: says little by itself (aclError catalog)",
        "hint": "read the lines around it: CANN's own code (EExxxx, EIxxxx, a runtime result) or the call before it "
                "says what failed"},
    # the NPU's health-management fault events (MindCluster's fault knowledge base): the device's own report of a fault in
    # one of its modules; placed first: an event id is the device speaking, whatever else the line holds
    "npu.event.hardware": {
        "category": "HARDWARE", "role": "error", "kind": "", "form": "npu_event", "place": "first",
        "meaning": "the NPU's health management reported a fault of the device (ECC/HBM, a bus, a module, its power, "
                   "temperature or a device-side process): MindCluster's fault knowledge base",
        "hint": _HINT_HW},
    "npu.event.fabric": {
        "category": "HARDWARE", "role": "error", "kind": "fabric", "form": "npu_event", "place": "first",
        "meaning": "the NPU's health management reported a fault of its network port, NIC, RoCE engine or chip-to-chip "
                   "link (HCCS): MindCluster's fault knowledge base",
        "hint": "@fabric"},
    "npu.event.program": {
        "category": "EXCEPTION", "role": "error", "kind": "", "form": "npu_event", "place": "first",
        "meaning": "the NPU's health management reported an input error an AI Core or vector core detected (what the "
                   "program gave the operator): MindCluster's fault knowledge base",
        "hint": "rerun that rank with ASCEND_LAUNCH_BLOCKING=1 to find the failing operator and check its inputs"},
}

# CANN codes -> group. A code not listed here is not in the catalog (profiling, dump, compiler codes).
GROUP_OF: dict[str, str] = {
    **dict.fromkeys(["EI0002", "EI0006", "EI0009", "EI0012", "EI0013", "EI0015", "EI0018", "EE1002"], "cann.catalog.comm"),
    **dict.fromkeys(["EI0007", "EI0011", "EL0004"], "cann.catalog.oom"),
    **dict.fromkeys(["EE1013", "EH0010"], "cann.catalog.host_oom"),
    **dict.fromkeys(["EI0001", "EI0003", "EI0004", "EI0008", "EI0010", "EI0014", "EI0016", "EI0017", "EI0019",
                     "EI0020", "EJ0001", "EJ0003", "EJ0004", "EL0002", "EL0005", "EL0007", "EE1015", "EE2002"],
                    "cann.catalog.config"),
    **dict.fromkeys(["EJ0002", "EL0001"], "cann.catalog.device"),
    **dict.fromkeys(["EI0005", "EL0015", "EZ0001", "EZ0002", "EZ0003", "EZ0004", "EZ0005", "EZ0006", "EZ0007", "EZ0501",
                     "EZ1001", "EZ2001", "EZ3002", "EZ3003", "EZ9010"], "cann.catalog.program"),
    **dict.fromkeys(["EE1001", "EE1003", "EE1004", "EE1005", "EE1006", "EE1007", "EE1009", "EE1010", "EE1011", "EE1012",
                     "EE1014", "EE1016", "EE1017", "EE1018", "EE1019", "EE1020", "EE1021", "EE1022", "EE1023",
                     "EH0001", "EH0002", "EH0003", "EH0004", "EH0005", "EH0006", "EH0007", "EH0008", "EH0009", "EH0011",
                     "EH0012", "EH0013", "EH0014", "EL0003", "EL0006", "EL0008", "EL0009", "EL0010", "EL0011", "EL0014",
                     "EZ9903"], "cann.catalog.generic"),
}
# The Graph Engine's family -> group: the first rule whose code prefix and errTitle (the catalog's own class of the
# error, e.g. Invalid_Argument, Config_Error, Compilation_Error, Inner_Error_Tiling_Fail) both match, by re.match. A code
# of the family no rule takes is left out (none is, today: the last rule takes every setup error of E1-E4 and E8).
GE_FAMILY = re.compile(r"E[1-9AB]\d{4}")  # E1 GE/ATC, E2 FE, E3 AI CPU, E4 TE fusion, E5-E7 operators, E8 OPP, E9/EA/EB compilers
GE_RULES: tuple[tuple[str, str, str], ...] = (
    # the ErrorManager's inner codes (IsInnerErrorCode: digits 3-6 are 9999, as EE9999/EZ9999) and every code the
    # catalog files as an inner error (a compile, tiling or device-process internal): they wrap or trail the error
    # that says what failed, so they are generic and yield to a more specific line
    (r"E.9999", "", "cann.catalog.generic"),
    ("", "Inner_Error", "cann.catalog.generic"),
    # AI CPU: a catch-all "The argument is invalid." (as EE1001/EL0003, generic)
    ("E3", "Invalid_Argument", "cann.catalog.generic"),
    # AI CPU: the device lost (missing heartbeats, channel down) or its process binary damaged by an ECC error
    ("E3", "Device_Connection_Failure|NN_Process_Bin_Error", "cann.catalog.device"),
    # model files and their parsers (Caffe, TensorFlow, ONNX), before the operators' rule (E76002, ONNX parser)
    ("", r"Invalid_Argument_(Model|OM_Model|Caffe|TensorFlow|ONNX)|ONNX_Model", "cann.catalog.ge_setup"),
    # an operator that rejected what the program gave it: the operators' own checks (E5-E7: input shape, dtype,
    # format, attribute, tiling), a kernel that did not finish on its core (as ACL_ERROR_RT_AICPU_TIMEOUT), an operator
    # or graph fusion pass that failed to compile (the catalog: an invalid argument or the operator's own logic),
    # operator-level arguments of a graph or single-op call
    ("E[5-7]", "", "cann.catalog.program"),
    ("", "Execution_Error", "cann.catalog.program"),
    ("", r"Compilation_Error(?!_Load)", "cann.catalog.program"),
    ("E1", r"Invalid_Argument_(Operator_(Input|Output|Compilation)|Tensor_Attribute|API_Call)", "cann.catalog.program"),
    # the rest of GE/ATC, FE, AI CPU, TE fusion and the operator package: the job's setup (an argument or option, a
    # configuration file or environment variable, a file or path, the Python environment, an operator or plugin not
    # registered, a package that fails verification, a process limit)
    ("E[1-48]", "", "cann.catalog.ge_setup"),
)
GE_EMITTER = {"E1": "Graph Engine (GE/ATC)", "E2": "Graph Engine (fusion engine)", "E3": "AI CPU",
              "E4": "operator compiler (TE fusion)", "E5": "operator (parameter check)",
              "E6": "operator (parameter check, tiling)", "E7": "operator (parameter check)",
              "E8": "operator package (OPP)", "E9": "operator compiler", "EA": "operator compiler",
              "EB": "operator compiler (TBE pass)"}
# Codes of HCCL newer than the runtime's catalog: (code, title, message, source).
EXTRA_CANN = [
    ("EI0009", "Communication_Error_Initialize_Transport", "Device %s transport init error. Reason: %s.", "cann-doc-ei0009"),
    ("EI0018", "Execution_Error_UB_CQE", "An error CQE occurred during operator execution. Local information: server %s, "
     "device ID %s, device IP %s. Peer information: server %s, device ID %s, device IP %s.", "hcomm-ei0018"),
    ("EI0019", "Communication_Error_Bind_IP_Port", "Failed to enable listening for the host network adapter socket. "
     "Reason: %s", "hcomm-ei0019"),
    ("EI0020", "Communication_Error_Bind_IP_Port", "Failed to enable listening for the NPU network adapter socket. "
     "Reason: %s", "hcomm-ei0020"),
]
EMITTER = {"EE": "CANN runtime (RTS)", "EH": "AscendCL", "EI": "HCCL", "EJ": "HCCP", "EL": "driver", "EZ": "operator/AclNN"}

ACL_GROUP_OF: dict[str, str] = {
    **dict.fromkeys(["ACL_ERROR_RT_WAIT_TIMEOUT", "ACL_ERROR_RT_TASK_TIMEOUT", "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT",
                     "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", "ACL_ERROR_RT_FFTS_PLUS_TIMEOUT", "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR",
                     "ACL_ERROR_RT_COMM_OP_RETRY_FAIL"], "acl.rt.comm_timeout"),
    **dict.fromkeys(["ACL_ERROR_RT_MEMORY_ALLOCATION", "ACL_ERROR_RT_DEVICE_OOM"], "acl.rt.oom"),
    **dict.fromkeys(["ACL_ERROR_RT_LOST_HEARTBEAT", "ACL_ERROR_RT_SYS_DMA", "ACL_ERROR_RT_DEVICE_MEM_ERROR",
                     "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR", "ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR", "ACL_ERROR_RT_LINK_ERROR",
                     "ACL_ERROR_RT_L3_PORT_ERROR"], "acl.rt.hardware"),
    **dict.fromkeys(["ACL_ERROR_RT_INVALID_DEVICEID", "ACL_ERROR_RT_DEV_SETUP_ERROR"], "acl.rt.device_id"),
    # a kernel that faulted, trapped or never finished on its core (AI Core, AI CPU, vector core "execution timeout"): the
    # kernel's own failure; a collective that waited too long for a peer is a task, stream, event or FFTS+ timeout above
    **dict.fromkeys(["ACL_ERROR_RT_AICORE_TIMEOUT", "ACL_ERROR_RT_AICPU_TIMEOUT", "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT",
                     "ACL_ERROR_RT_AICORE_EXCEPTION", "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", "ACL_ERROR_RT_AICPU_EXCEPTION",
                     "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", "ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION",
                     "ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW", "ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW",
                     "ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW", "ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW"],
                    "acl.rt.kernel"),
}
# torch_npu's error types -> group, by the meaning torch_npu's error-code page gives each (error_code_information.md,
# "ERR**<type>": possible cause and solution), the same for every submodule; a type not named here stops the script
# (a new type needs a decision), SUCCESS is no error.
TORCH_NPU_GROUP_OF: dict[str, str] = {
    # ERR**011: "unexpected situations occur during the communication link; the operations on different nodes are
    # inconsistent"; ERR**200: a call of HCCL's API failed (the collective or the communicator)
    **dict.fromkeys(["TIMEOUT", "HCCL"], "torch_npu.catalog.comm"),
    # ERR**001-003: the input parameters, a parameter's dtype, the input's value, shape or dimension are not as expected;
    # ERR**007: a feature (an interface, an operator, a dtype) torch_npu does not support: "use other similar functions"
    **dict.fromkeys(["PARAM", "TYPE", "VALUE", "NOT_SUPPORT"], "torch_npu.catalog.program"),
    # ERR**008: "some files are not found: check if the execution environment is configured correctly"; ERR**009: "some
    # required resources are unavailable"; ERR**012: "the permissions of the file or directory have some problems"
    **dict.fromkeys(["NOT_FOUND", "UNAVAIL", "PERMISSION"], "torch_npu.catalog.setup"),
    # ERR**100/300: an ACL or GE API call failed: "check CANN-related errors in logs and find the CANN error code"; ERR**004,
    # 005, 010: an invalid pointer, an internal error, a failed system call: "submit an issue"; ERR**006: "exceptions in
    # memory usage", not the device's memory exhausted (an allocator's own "out of memory" line says that); ERR99999:
    # "the code of the application or a third-party library throws an exception" (the traceback says which)
    **dict.fromkeys(["PTR", "INTERNAL", "MEMORY", "SYSCALL", "ACL", "GE", "EXCEPT"], "torch_npu.catalog.generic"),
}
TORCH_NPU_SKIP = {"SUCCESS", "SUC"}
# AscendCL's own codes (acl_base.h) -> group, by the cause CANN's aclError reference (25-01_aclError.md) gives each; a code
# not named here stops the script (a new code needs a decision), ACL_SUCCESS/ACL_ERROR_NONE are no error.
ACL_BASE_GROUP_OF: dict[str, str] = {
    # the environment or the job's setup (the reference: "check whether aclInit was called / called twice", "whether the
    # file exists and can be read", "the model may not match this version: rebuild it", "the dump/profiling/operator
    # queue configuration", "ASCEND_OPP_PATH", "the library path is the compile stub's", "whether the device exists")
    **dict.fromkeys(["ACL_ERROR_UNINITIALIZE", "ACL_ERROR_REPEAT_INITIALIZE", "ACL_ERROR_INVALID_FILE",
                     "ACL_ERROR_WRITE_FILE", "ACL_ERROR_INVALID_FILE_SIZE", "ACL_ERROR_PARSE_FILE",
                     "ACL_ERROR_FILE_MISSING_ATTR", "ACL_ERROR_FILE_ATTR_INVALID", "ACL_ERROR_INVALID_DUMP_CONFIG",
                     "ACL_ERROR_INVALID_PROFILING_CONFIG", "ACL_ERROR_DESERIALIZE_MODEL", "ACL_ERROR_PARSE_MODEL",
                     "ACL_ERROR_READ_MODEL_FAILURE", "ACL_ERROR_MODEL_SIZE_INVALID", "ACL_ERROR_MODEL_MISSING_ATTR",
                     "ACL_ERROR_OP_LOAD_FAILED", "ACL_ERROR_COMPILING_STUB_MODE", "ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG",
                     "ACL_ERROR_INVALID_OPP_PATH", "ACL_ERROR_INVALID_DEVICE", "ACL_ERROR_PROF_MODULES_UNSUPPORTED"],
                    "acl.base.setup"),
    # the program's arguments or the order of its calls (the reference: "check the API's input values", "the model's or
    # the operator's inputs, outputs, attributes, type, format", "the call order", "called twice", "the Stream or
    # Context passed", "whether the API is supported", "the address must be aligned")
    **dict.fromkeys(["ACL_ERROR_INVALID_PARAM", "ACL_ERROR_INVALID_MODEL_ID", "ACL_ERROR_MODEL_INPUT_NOT_MATCH",
                     "ACL_ERROR_MODEL_OUTPUT_NOT_MATCH", "ACL_ERROR_MODEL_NOT_DYNAMIC", "ACL_ERROR_OP_TYPE_NOT_MATCH",
                     "ACL_ERROR_OP_INPUT_NOT_MATCH", "ACL_ERROR_OP_OUTPUT_NOT_MATCH", "ACL_ERROR_OP_ATTR_NOT_MATCH",
                     "ACL_ERROR_OP_NOT_FOUND", "ACL_ERROR_UNSUPPORTED_DATA_TYPE", "ACL_ERROR_FORMAT_NOT_MATCH",
                     "ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED", "ACL_ERROR_KERNEL_NOT_FOUND",
                     "ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED", "ACL_ERROR_KERNEL_ALREADY_REGISTERED",
                     "ACL_ERROR_INVALID_QUEUE_ID", "ACL_ERROR_REPEAT_SUBSCRIBE", "ACL_ERROR_STREAM_NOT_SUBSCRIBE",
                     "ACL_ERROR_THREAD_NOT_SUBSCRIBE", "ACL_ERROR_WAIT_CALLBACK_TIMEOUT", "ACL_ERROR_REPEAT_FINALIZE",
                     "ACL_ERROR_NOT_STATIC_AIPP", "ACL_ERROR_GROUP_NOT_SET", "ACL_ERROR_GROUP_NOT_CREATE",
                     "ACL_ERROR_PROF_ALREADY_RUN", "ACL_ERROR_PROF_NOT_RUN", "ACL_ERROR_DUMP_ALREADY_RUN",
                     "ACL_ERROR_DUMP_NOT_RUN", "ACL_ERROR_PROF_REPEAT_SUBSCRIBE", "ACL_ERROR_PROF_API_CONFLICT",
                     "ACL_ERROR_OP_UNSUPPORTED_DYNAMIC", "ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED",
                     "ACL_ERROR_UNSUPPORTED_JPEG", "ACL_ERROR_INVALID_BUNDLE_MODEL_ID", "ACL_ERROR_API_NOT_SUPPORT",
                     "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED", "ACL_ERROR_RESOURCE_NOT_MATCH",
                     "ACL_ERROR_INVALID_RESOURCE_HANDLE"], "acl.base.program"),
    # "failed to allocate memory: check the memory left on the hardware"
    "ACL_ERROR_BAD_ALLOC": "acl.base.oom",
    # the reference's rule 4/5 (5XXXXX: an inner error of ACL or of the module it wraps, "contact support"): the wrapped
    # code or the lines around say more; an unsupported feature ("contact support"); the storage limit (3XXXXX, a
    # business error: storage, not device memory)
    **dict.fromkeys(["ACL_ERROR_INTERNAL_ERROR", "ACL_ERROR_FAILURE", "ACL_ERROR_GE_FAILURE", "ACL_ERROR_RT_FAILURE",
                     "ACL_ERROR_DRV_FAILURE", "ACL_ERROR_PROFILING_FAILURE", "ACL_ERROR_FEATURE_UNSUPPORTED",
                     "ACL_ERROR_STORAGE_OVER_LIMIT"], "acl.base.generic"),
}
ACL_BASE_SKIP = {"ACL_SUCCESS", "ACL_ERROR_NONE"}
# ibv_wc_status values that are failures (all but IBV_WC_SUCCESS and the tag-matching rendezvous notice).
WC_SKIP = {"IBV_WC_SUCCESS", "IBV_WC_TM_RNDV_INCOMPLETE"}
EVENT_FATAL = {"IBV_EVENT_DEVICE_FATAL", "IBV_EVENT_PORT_ERR"}
# The verbs that build the data path; a failed destroy/dealloc happens at teardown, after whatever failed first.
SETUP_VERBS = {"ibv_open_device", "ibv_alloc_pd", "ibv_create_cq", "ibv_create_qp", "ibv_modify_qp", "ibv_reg_mr",
               "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "ibv_query_port", "ibv_query_gid"}
# ... of which NCCL's troubleshooting guide (SOURCES["nccl-troubleshooting"]) names these two as failing for the
# locked-memory limit: ibv.pinned_memory, not the NIC
PINNED_MEMORY_VERBS = {"ibv_create_qp", "ibv_reg_mr"}


def cann_entries(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = [(e["ErrCode"], e.get("errTitle", ""), e.get("ErrMessage", ""), "cann-error-codes") for e in data["error_info_list"]]
    seen = {code for code, *_ in rows}
    rows += [row for row in EXTRA_CANN if row[0] not in seen]
    out = []
    for code, title, message, source in rows:
        group = GROUP_OF.get(code)
        if group is None:
            continue
        out.append({"code": code, "emitter": EMITTER[code[:2]], "title": title.strip(),
                    "message": " ".join(message.split()), "group": group, "source": source})
    missing = set(GROUP_OF) - {e["code"] for e in out}
    if missing:
        sys.exit(f"codes mapped here but absent from the upstream catalog: {sorted(missing)}")
    return out


def ge_group(code: str, title: str) -> str | None:
    """The group GE_RULES gives a code of the Graph Engine's family (None: left out)."""
    for prefix, klass, group in GE_RULES:
        if re.match(prefix, code) and re.match(klass, title):
            return group
    return None


def _ge_registry(path: Path) -> list[dict[str, Any]]:
    """The catalog of hicann/ge's error registry: the JSON in its raw string literal (or a plain JSON file)."""
    text = path.read_text(encoding="utf-8")
    literal = re.search(r'R"\((.*?)\)"', text, re.S)
    data = json.loads(literal[1] if literal else text)
    rows: list[dict[str, Any]] = data["error_info_list"]
    return rows


def ge_entries(registry: Path, cann: Path) -> list[dict[str, Any]]:
    """The Graph Engine's family: E1 codes from GE's registry, E2-EB codes from CANN's catalog; warnings (Wxxxxx) and
    codes of other emitters are not in it."""
    rows = [(e, "ge-error-registry") for e in _ge_registry(registry)]
    rows += [(e, "cann-error-codes") for e in json.loads(cann.read_text(encoding="utf-8"))["error_info_list"]
             if not e["ErrCode"].startswith("E1")]
    out = []
    for e, source in rows:
        code, title = e["ErrCode"], e.get("errTitle", "").strip()
        if not GE_FAMILY.fullmatch(code):
            continue
        group = ge_group(code, title)
        if group is None:
            continue
        out.append({"code": code, "emitter": GE_EMITTER[code[:2]], "title": title,
                    "message": " ".join(e.get("ErrMessage", "").split()), "group": group, "source": source})
    if not any(e["source"] == "ge-error-registry" for e in out):
        sys.exit(f"{registry}: no GE error code found")
    return out


def acl_entries(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    found = {m[1]: (m[2], m[3].strip()) for m in re.finditer(r"#define\s+(\w+)\s+(\d{6})\s*//\s*(.*)", text)}
    out = []
    for name, group in ACL_GROUP_OF.items():
        if name not in found:
            sys.exit(f"{name} is not in {path}")
        number, comment = found[name]
        out.append({"code": number, "emitter": "CANN runtime (aclError)", "title": name, "message": comment,
                    "group": group, "source": "cann-rt-error-codes"})
    return out


def reason_entries(path: Path) -> list[dict[str, Any]]:
    """The reason texts of the runtime's inner errors whose aclError number the catalog maps."""
    text = path.read_text(encoding="utf-8")
    out = []
    for inner, name, reason in re.findall(r"rtErrMap_\[(\w+)\]\s*=\s*\{(\w+),\s*\"([^\"]+)\"\}", text):
        group = ACL_GROUP_OF.get(name)
        if group is not None:
            out.append({"code": inner, "emitter": "CANN runtime (reason)", "title": name, "message": reason,
                        "group": group, "source": "cann-rt-reasons", "field": "reason"})
    if not out:
        sys.exit(f"{path}: no rtErrMap_ entry found")
    return out


def acl_base_entries(header: Path, doc: Path, taken: frozenset[str] | set[str] = frozenset()) -> list[dict[str, Any]]:
    """AscendCL's own codes: every ACL_ERROR_* the header declares (but success and codes already in the catalog,
    `taken`: numbers or names), with the meaning the aclError reference gives it."""
    found = {m[1]: m[2] for m in re.finditer(r"^static\s+(?:const\s+)?(?:int\s+)?(ACL_\w+)\s*=\s*(\d+)\s*;",
                                             header.read_text(encoding="utf-8"), re.M)}
    meaning = {m[1]: m[2].strip() for m in re.finditer(r"^\|\s*static\s[^|]*?\b(ACL_\w+)\s*=\s*\d+;[^|]*\|\s*([^|]*?)\s*\|",
                                                       doc.read_text(encoding="utf-8"), re.M)}
    if not found or not meaning:
        sys.exit(f"{header} / {doc}: no ACL_ERROR_* code found")
    codes = {name: number for name, number in found.items() if name not in ACL_BASE_SKIP and number not in taken
             and name not in taken}
    unmapped = set(codes) - set(ACL_BASE_GROUP_OF)
    if unmapped:
        sys.exit(f"{header}: codes ACL_BASE_GROUP_OF does not map: {sorted(unmapped)}")
    missing = set(ACL_BASE_GROUP_OF) - set(codes)
    if missing:
        sys.exit(f"codes mapped here but absent from {header} (or already in the catalog): {sorted(missing)}")
    return [{"code": number, "emitter": "AscendCL (aclError)", "title": name, "message": meaning.get(name, ""),
             "group": ACL_BASE_GROUP_OF[name], "source": "acl-base-codes"} for name, number in codes.items()]


def _c_table(text: str, function: str) -> dict[str, str]:
    body = text.split(f"{function}(", 1)[1].split("};", 1)[0]
    return {m[1]: m[2] for m in re.finditer(r"\[(IBV_\w+)\]\s*=\s*\"([^\"]*)\"", body)}


def verbs_entries(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    out = []
    for name, message in _c_table(text, "ibv_wc_status_str").items():
        if name not in WC_SKIP:
            out.append({"code": name, "emitter": "ibverbs (work completion)", "title": name, "message": message,
                        "group": "ibv.wc_error", "source": "ibv-wc-status"})
    for name, message in _c_table(text, "ibv_event_type_str").items():
        if name in EVENT_FATAL:
            out.append({"code": name, "emitter": "ibverbs (async event)", "title": name, "message": message,
                        "group": "ibv.device_event", "source": "ibv-event-type"})
    return out


def nccl_entries(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if 'WARN("Call to " name " failed' not in text:
        sys.exit(f"{path}: NCCL's `Call to <verb> failed` message not found")
    verbs = sorted(set(re.findall(r"\"(ibv_\w+)\"", text)) & SETUP_VERBS)
    return [{"code": verb, "emitter": "NCCL (verbs wrapper)", "title": verb, "message": f"Call to {verb} failed",
             "group": "ibv.pinned_memory" if verb in PINNED_MEMORY_VERBS else "ibv.setup_failed",
             "source": "nccl-troubleshooting" if verb in PINNED_MEMORY_VERBS else "nccl-ibvwrap"} for verb in verbs]


def _py_enum(text: str, name: str) -> str:
    """The body of `class <name>(Enum):` of a Python source: its indented lines."""
    m = re.search(rf"^class {name}\(Enum\):\n((?:[ \t]+.*\n|[ \t]*\n)+)", text, re.M)
    if m is None:
        sys.exit(f"class {name}(Enum) not found")
    return m[1]


def torch_npu_entries(path: Path) -> list[dict[str, Any]]:
    """torch_npu's codes: every error type (but success) with every submodule that has a helper (pta_error, ...), and
    the pairs the file formats itself (UNKNOWN with EXCEPT: an exception raised by another component)."""
    text = path.read_text(encoding="utf-8")
    if '"ERR{:0>2d}{:0>3d}"' not in text or "{error_code} {submodule_name} {error_code_msg}" not in text:
        sys.exit(f"{path}: torch_npu's `ERR<submodule><type> <SUBMODULE> <text>` format not found")
    submodules = {m[1]: int(m[2]) for m in re.finditer(r"^\s+(\w+) = (\d+)\s*$", _py_enum(text, "_?SubModuleID"), re.M)}
    types = {m[1]: (int(m[2]), m[3]) for m in re.finditer(r'^\s+(\w+) = \((\d+), "([^"]*)"\)', _py_enum(text, "ErrCode"), re.M)}
    helpers = re.findall(r"def \w+_error\(error: ErrCode\) -> str:\s*return _format_error_msg\(_?SubModuleID\.(\w+), error\)",
                         text)
    if not submodules or not types or not helpers:
        sys.exit(f"{path}: torch_npu's submodules, error types or helpers not found")
    unmapped = set(types) - set(TORCH_NPU_GROUP_OF) - TORCH_NPU_SKIP
    if unmapped:
        sys.exit(f"{path}: error types TORCH_NPU_GROUP_OF does not map: {sorted(unmapped)}")
    pairs = [(sub, kind) for sub in helpers for kind in types if kind not in TORCH_NPU_SKIP]
    pairs += [p for p in re.findall(r"_format_error_msg\(_?SubModuleID\.(\w+), ErrCode\.(\w+)\)", text) if p not in pairs]
    out = []
    for sub, kind in pairs:
        number, message = types[kind]
        out.append({"code": f"ERR{submodules[sub]:02d}{number:03d}", "emitter": f"torch_npu ({sub})", "title": kind,
                    "message": message, "submodule": sub, "group": TORCH_NPU_GROUP_OF[kind],
                    "source": "torch-npu-error-codes"})
    return out


# MindCluster's fault events: where the device's event log comes from (the knowledge base's `source_file`), which modules
# are the NPU's network side, and the classes that name the program rather than the device
NPU_EVENT_SOURCES = frozenset({"NPU_OS", "NPU_Host", "NPU_History", "NPU_Device", "OS"})
NPU_FABRIC_MODULES = frozenset({"PORT", "NIC", "NIC_DISP", "ROCE", "HCCS", "HCCS_PORT", "UB", "UB_PORT", "RoH", "RoH_PORT"})
_EVENT_ID_RX = re.compile(r"0x[0-9A-Fa-f]{8}")


def npu_event_group(cls: str, module: str) -> str | None:
    """The group of a fault event by the class and module the knowledge base gives it (None: left out).

    Hardware, Network and Software/Hardware events are the device's (a device-side process or firmware module that
    lost its heartbeat is the device too: the operator resets or drains it); User alone is the program's input; a
    class that names the user beside the software (a memory threshold on the device's OS) says neither. An event whose
    first suggested step is "No operation is required" is left out (npu_event_entries)."""
    if "Hardware" in cls or cls in ("Network", "Software"):
        return "npu.event.fabric" if module in NPU_FABRIC_MODULES else "npu.event.hardware"
    if cls == "User":
        return "npu.event.program"
    return None


def npu_event_entries(path: Path) -> list[dict[str, Any]]:
    """MindCluster's fault knowledge base: every NPU fault event the device's event log names by its id."""
    kb = json.loads(path.read_text(encoding="utf-8"))["knowledge-repository"]
    out = []
    for code, entity in kb.items():
        if not _EVENT_ID_RX.fullmatch(code) or entity.get("source_file") not in NPU_EVENT_SOURCES:
            continue
        keywords = json.dumps(entity.get("regex", {}).get("in", [])).lower()
        if f"=0x{code[2:].lower()}" not in keywords:  # an event the log names otherwise (the host kernel's words)
            continue
        attribute = entity["attribute"]
        group = npu_event_group(attribute.get("class", ""), attribute.get("module", ""))
        first_step = re.sub(r"^\s*1\.\s*", "", (attribute.get("suggestion_en") or [""])[0])
        if group is None or first_step.lower().startswith("no operation is required"):
            continue  # an event the knowledge base itself says needs nothing done (a finished reset, a bus notice)
        out.append({"code": code.upper().replace("0X", "0x"), "emitter": f"NPU health management ({attribute['module']})",
                    "title": " ".join(attribute["cause_en"].split()), "message": " ".join(attribute["description_en"].split()),
                    "group": group, "source": "mindcluster-kg"})
    return out


def write_index(catalog: dict[str, Any], path: Path) -> None:
    lines = ["# Error-code catalog: sources", "",
             "Generated by `scripts/ascend_catalog.py` with `ascend_codes.json`; do not edit by hand. Every signature "
             "of the `cann.catalog.*`, `acl.rt.*`, `acl.base.*`, `ibv.*`, `npu.event.*` and `torch_npu.catalog.*` rows of "
             "`ascendctl/triage/signatures.py` comes from a row below, and every row from the emitter's own catalog "
             "(never from a log).", "", "## Sources", ""]
    for key, src in catalog["sources"].items():
        lines.append(f"- `{key}`: {src['what']}. <{src['url']}>")
    lines += ["", "## Entries", "", "| code | emitter | meaning (upstream text) | group | category | source |",
              "|---|---|---|---|---|---|"]
    for e in catalog["entries"]:
        group = catalog["groups"][e["group"]]
        message = e["message"].replace("|", "\\|")
        lines.append(f"| {e['code']} | {e['emitter']} | {e['title']}: {message} | `{e['group']}` | {group['category']} | "
                     f"[{e['source']}]({catalog['sources'][e['source']]['url']}) |")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def build(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The catalog of these entries, as ascend_codes.json holds it."""
    return {"about": "generated by scripts/ascend_catalog.py from the emitters' own catalogs; see INDEX.md",
            "sources": SOURCES, "groups": GROUPS, "entries": entries}


def render(catalog: dict[str, Any]) -> str:
    """The text of ascend_codes.json."""
    return json.dumps(catalog, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cann-error-codes", type=Path, help="hicann/runtime src/dfx/error_manager/error_code.json")
    ap.add_argument("--rt-error-codes", type=Path, help="hicann/runtime include/external/acl/error_codes/rt_error_codes.h")
    ap.add_argument("--rt-errcode-manage", type=Path, help="hicann/runtime src/runtime/core/src/common/errcode_manage.cc")
    ap.add_argument("--verbs-enum-strs", type=Path, help="rdma-core libibverbs/enum_strs.c")
    ap.add_argument("--nccl-ibvwrap", type=Path, help="NVIDIA/nccl src/misc/ibvwrap.cc")
    ap.add_argument("--ge-error-codes", type=Path, help="hicann/ge base/common/error_registry/error_registry.cc (its "
                    "E2-EB family is read from --cann-error-codes)")
    ap.add_argument("--torch-npu-error-codes", type=Path, help="Ascend/pytorch torch_npu/utils/_error_code.py")
    ap.add_argument("--acl-base-codes", type=Path, help="hicann/runtime include/external/acl/acl_base_rt.h (acl_base.h's codes)")
    ap.add_argument("--acl-error-doc", type=Path, help="hicann/runtime docs/zh/api_ref/25-01_aclError.md (each code's meaning)")
    ap.add_argument("--mindcluster-kg", type=Path, help="Ascend/mind-cluster component/ascend-faultdiag/src/ascend_fd/"
                    "configuration/kg-config.json (the NPU's fault events)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT.relative_to(REPO)})")
    ap.add_argument("--index-only", action="store_true", help="rewrite INDEX.md from the existing JSON")
    args = ap.parse_args(argv)
    target = args.out / "ascend_codes.json"
    if args.index_only:
        write_index(json.loads(target.read_text(encoding="utf-8")), args.out / "INDEX.md")
        return 0
    inputs = (args.cann_error_codes, args.rt_error_codes, args.rt_errcode_manage, args.verbs_enum_strs, args.nccl_ibvwrap,
              args.ge_error_codes, args.torch_npu_error_codes, args.acl_base_codes, args.acl_error_doc, args.mindcluster_kg)
    if not all(inputs):
        ap.error("give every upstream file (or --index-only)")
    acl = [*acl_entries(args.rt_error_codes), *reason_entries(args.rt_errcode_manage)]
    taken = {e["code"] for e in acl} | {e["title"] for e in acl}
    entries = [*cann_entries(args.cann_error_codes), *acl, *acl_base_entries(args.acl_base_codes, args.acl_error_doc, taken),
               *verbs_entries(args.verbs_enum_strs), *nccl_entries(args.nccl_ibvwrap), *npu_event_entries(args.mindcluster_kg),
               *ge_entries(args.ge_error_codes, args.cann_error_codes), *torch_npu_entries(args.torch_npu_error_codes)]
    catalog = build(entries)
    args.out.mkdir(parents=True, exist_ok=True)
    target.write_text(render(catalog), encoding="utf-8")
    write_index(catalog, args.out / "INDEX.md")
    print(f"{len(entries)} entries, {len(GROUPS)} groups -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
