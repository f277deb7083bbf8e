"""The error-code catalog (ascendctl/triage/data/ascend_codes.json, built by scripts/ascend_catalog.py from the
emitters' own catalogs): it loads, every entry names its source, every code maps to a category, and lines written
as the emitters print them are classified to the catalog's category (issue #26)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ascendctl.triage import triage
from ascendctl.triage.extract import match_line
from ascendctl.triage.signatures import CATALOG_PATH, CATALOG_SIGNATURES, ROLES, SIGNATURES, Category, load_catalog

REPO = Path(__file__).resolve().parent.parent
CATALOG = load_catalog()
GROUPS: dict[str, dict[str, Any]] = CATALOG["groups"]
ENTRIES: list[dict[str, Any]] = CATALOG["entries"]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ascend_catalog", REPO / "scripts" / "ascend_catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_catalog_loads_and_every_entry_has_a_source() -> None:
    assert len(ENTRIES) >= 100
    for key, src in CATALOG["sources"].items():
        assert src["url"].startswith("https://") and src["what"], key
    for e in ENTRIES:
        assert e["code"] and e["message"] and e["emitter"], e
        assert e["source"] in CATALOG["sources"], e
        assert e["group"] in GROUPS, e
    codes = [(e["code"], e["group"]) for e in ENTRIES]
    assert len(codes) == len(set(codes))


def test_every_group_maps_to_a_valid_category_and_role() -> None:
    for gid, group in GROUPS.items():
        assert Category(group["category"]) is not Category.UNKNOWN, gid
        assert group["role"] in ROLES and group["meaning"] and group["hint"], gid
        assert group["kind"] in ("", "device", "host", "fabric"), gid
        assert (group["kind"] in ("device", "host")) == (group["category"] == "OOM"), gid
        assert group["kind"] != "fabric" or group["category"] in ("COMM_TIMEOUT", "HARDWARE"), gid
    ids = {s.id for s in SIGNATURES}
    assert {s.id for s in CATALOG_SIGNATURES} <= ids
    assert {gid for gid in GROUPS if any(e["group"] == gid for e in ENTRIES)} <= ids


def test_index_lists_every_entry_with_its_source_url(tmp_path: Path) -> None:
    index = (CATALOG_PATH.parent / "INDEX.md").read_text(encoding="utf-8")
    for e in ENTRIES:
        assert f"| {e['code']} |" in index, e["code"]
    for src in CATALOG["sources"].values():
        assert src["url"] in index
    shutil.copy(CATALOG_PATH, tmp_path / "ascend_codes.json")  # the committed INDEX.md is what the generator writes
    assert _generator().main(["--index-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "INDEX.md").read_text(encoding="utf-8") == index


def _fill(message: str) -> str:
    return message.replace("%s", "3")


def _lines(e: dict[str, Any]) -> list[str]:
    """The entry as its emitter prints it (formats from the emitters' sources and docs, not from our logs)."""
    form = GROUPS[e["group"]]["form"]
    code, message = e["code"], _fill(e["message"])
    if form == "cann":
        return [f"{code}: 2025-12-01-10:00:00.000.000 {message}",  # classic
                f"[PID: 4021] 2025-12-01-10:00:00.000.000 {e['title']}({code}): {message}",  # CANN 8.5+
                f"(EngineCore_DP0 pid=553) {code}: [PID: 553] 2025-12-01-10:00:00.000.000 {message}"]  # relayed
    if form == "acl" and e.get("field") == "reason":
        return [f"EE9999: 2025-12-01-10:00:00.000.000 rtStreamSynchronize execution failed, reason=[{message}]"]
    if form == "acl":
        return [f"EH9999: 2025-12-01-10:00:00.000.000 wait for compute device to finish failed, runtime result = {code}.",
                f"RuntimeError: synchronize:torch_npu/csrc/core/npu/NPUStream.cpp:256 NPU function error: "
                f"AclrtSynchronizeStreamWithTimeout(stream), error code is {code}"]
    if form == "acl_base":  # AscendCL's own codes: the runtime's "ret = N", a wrapper's "error code is N", ONNX Runtime's
        # CANN provider (cann_call.cc: "CANN failure %d: %s ; NPU=%d ; hostname=%s ; expr=%s"), the name alone
        return [f"[ERROR] ASCENDCL(4021,python):2025-12-01-10:00:00.000.000 aclInit failed, ret = {code}",
                f"RuntimeError: NPU function error: aclInit, error code is {code}",
                f"CANN failure {code}: {e['title']} ; NPU=0 ; hostname=node01 ; expr=aclrtSetDevice(0);",
                f"Call acl api failed: {e['title']}"]
    if form == "ibv_wc":  # rdma-core's examples: "Failed status %s (%d) for wr_id %d"
        return [f"Failed status {message} (12) for wr_id 1", f"poll cq failed: wc.status={code}"]
    if form == "ibv_event":  # NCCL net_ib: "NET/IB : %s:%d async fatal event: %s"
        return [f"node01:1234:5678 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event: {message}", f"async event {code}"]
    if form == "ibv_call":  # NCCL ibvwrap: "Call to " name " failed with error %s"
        return [f"node01:1234:5678 [0] NCCL WARN Call to {code} failed with error Cannot allocate memory"]
    if form == "torch_npu":  # torch_npu's _format_error_msg / formatErrorCode; HCCLUtils adds a "."; the first release
        # printed the code alone at the end of the message
        return [f"[ERROR] 2025-12-01-10:00:00 (PID:4242, Device:0, RankID:3) {code} {e['submodule']} {message}",
                f"[rank3]: [ERROR] 2025-12-01-10:00:00 (PID:4242, Device:3, RankID:-1) {code} {e['submodule']} {message}.",
                f"[rank3]: {code}"]
    if form == "npu_event":  # the device's event log, in the three forms MindCluster's knowledge base reads
        return [f"[EVENT] TDT(4717,tsdaemon):2023-10-31-16:41:39.406.087 [tsdaemon.cpp:1811][RunSpecialProcess][tid:4717] "
                f"[TsdEVENT] Event id={code.lower()}.", f"event_id=0x{code[2:]}", f"event_id:  [{code.lower()}]"]
    raise AssertionError(form)


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e['group']}:{e['code']}" for e in ENTRIES])
def test_each_code_as_its_emitter_prints_it_gets_the_catalog_category(entry: dict[str, Any]) -> None:
    want = Category(GROUPS[entry["group"]]["category"])
    for line in _lines(entry):
        sig = match_line(line)
        assert sig is not None and sig.category is want, (line, sig and sig.id)


@pytest.mark.parametrize("line,category", [
    # HCCL socket and notify timeouts, rootInfo detection (CANN catalog EI0006, EI0002, EI0015)
    ("EI0006: 2024-03-01-10:00:00.000.000 Getting socket times out. Reason: 1. The remote does not initiate a connect "
     "request.", Category.COMM_TIMEOUT),
    ("[ERROR] HCCL(3081,python3):2025-06-10-12:00:00.000.000 [task_exception_handler.cc:866] [3081][TaskException] "
     "Task run failed, EI0002", Category.COMM_TIMEOUT),
    ("[PID: 237] 2026-10-09-08:38:04.978.003 Communication_Error_Ranktable_Detect(EI0015): Failed to collect cluster "
     "information of the communicator based on rootInfo detection. Reason: No rank in the communicator can connect to "
     "the root node within the timeout period.", Category.COMM_TIMEOUT),
    # EE9999 wrapping the runtime's task timeout (aclError 107020), as number and as reason text
    ("EE9999: 2024-07-03-11:28:40.450.757 wait for compute device to finish failed, runtime result = 107020.",
     Category.COMM_TIMEOUT),
    ("EE9999: 2024-07-03-11:28:40.450.757 rtStreamSynchronize execution failed, reason=[task timeout]",
     Category.COMM_TIMEOUT),
    # HCCP: the training process before is still there (EJ0001); the device's port is down (EJ0002)
    ("EJ0001: 2024-03-01-10:30:00.000.000 Failed to initialize the HCCP process. Reason: Maybe the last training process "
     "is running.", Category.LAUNCH),
    ("EJ0002: 2024-03-01-10:30:00.000.000 The network port is down.Suggest: check the port of device 3",
     Category.HARDWARE),
    # EL0004 relayed through a serving engine
    ("(EngineCore_DP0 pid=553) EL0004: [PID: 553] 2025-09-17-04:55:13.065.712 Failed to allocate memory.", Category.OOM),
    # operator errors: the program's (EZ), not the device's
    ("EZ0001: 2025-01-01-10:00:00.000.000 OP[MatMulV2] 1th input has incorrect shape[: [16, 32]], it should be[: [32, 16]].",
     Category.EXCEPTION),
    ("EZ9999: 2025-01-01-10:00:00.000.000 Inner Error! The kernel config of op[FlashAttentionScore] is invalid.",
     Category.EXCEPTION),
    # HCCL init on a device id the node does not have
    ("EI0014: 2025-01-01-10:00:00.000.000 The ranktable information check failed, Reason:[device id 9 is out of range].",
     Category.LAUNCH),
    ("[ERROR] RUNTIME(1201,python):2025-12-01-10:00:00.000.000 rtSetDevice execute failed, runtime result = 107001.",
     Category.LAUNCH),
    # fabric: completion errors (status 12, vendor err 129) stay communication errors; the NIC's own faults are hardware
    ("node03:1234:5678 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<54321> with status=12 opcode=0 len=0 "
     "vendor err 129 (Recv)", Category.COMM_TIMEOUT),
    ("node03:1234:5678 [3] NCCL WARN NET/IB: Got completion from peer 10.0.0.2 with status=transport retry counter "
     "exceeded(12) opcode=RECV(128) vendor_err=129 hca mlx5_0", Category.COMM_TIMEOUT),
    # ... but a queue pair or memory registration that fails is, by NCCL's own troubleshooting guide, most often the
    # locked-memory limit: a launch setting (ibv.pinned_memory); opening the device or querying its port is the NIC's
    ("node03:1234:5678 [3] NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory errno 12",
     Category.LAUNCH),
    ("hai-a100-3:3778851:3779883 [4] ibvwrap.c:130 NCCL WARN Call to ibv_reg_mr failed", Category.LAUNCH),
    ("node03:1234:5678 [3] NCCL WARN Call to ibv_open_device failed", Category.HARDWARE),
    ("node03:1234:5678 [3] NCCL WARN Call to ibv_query_port failed with error No such device", Category.HARDWARE),
    ("node03:1234:5678 [3] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: port error(10)", Category.HARDWARE),
    ("[Mon Jan  1 11:59:00 2024] ice 0000:5e:00.0 ens1f0: NIC Link is Down", Category.HARDWARE),
])
def test_emitter_format_lines_get_the_operators_category(line: str, category: Category) -> None:
    sig = match_line(line)
    assert sig is not None and sig.category is category, (line, sig and sig.id)


def test_a_wrapped_return_code_is_weaker_than_the_runtimes_own_line() -> None:
    # torch_npu reports the ACL return code first; CANN's own lines after it say what failed
    wrapped = match_line("RuntimeError: npuSynchronizeDevice:torch_npu/csrc/core/npu/NPUFunctions.cpp:467 NPU function "
                         "error: AclrtSynchronizeDeviceWithTimeout, error code is 507013")
    own = match_line("EE9999: 2025-12-01-10:00:00.000.000 alloc device memory failed, runtime result = 207001")
    assert wrapped is not None and wrapped.role == "generic" and wrapped.category is Category.HARDWARE
    assert own is not None and own.role == "error" and own.category is Category.OOM


def test_a_task_timeout_wrapped_in_an_inner_error_is_a_communication_timeout(tmp_path: Path) -> None:
    log = tmp_path / "worker-1.log"
    log.write_text("EH9999: 2024-07-03-11:28:40.450.757  wait for compute device to finish failed, runtime result = "
                   "107020.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]\n"
                   "EH9999: Inner Error!\n", encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.COMM_TIMEOUT


_GE_CODE = re.compile(r"E[1-9AB]\d{4}")


def _ge_family(e: dict[str, Any]) -> bool:
    """An entry of the Graph Engine's family (GE_RULES), not of the hand-made GROUP_OF."""
    return e["source"] == "ge-error-registry" or (e["source"] == "cann-error-codes" and bool(_GE_CODE.fullmatch(e["code"])))


def test_generator_maps_only_what_its_table_names() -> None:
    gen = _generator()
    mapped = set(gen.GROUP_OF) | set(gen.ACL_GROUP_OF)
    for e in ENTRIES:
        if _ge_family(e):  # by the rule on the code's prefix and the class the catalog gives it
            assert e["code"] not in gen.GROUP_OF and gen.ge_group(e["code"], e["title"]) == e["group"], e
        elif e["source"] in ("cann-error-codes", "cann-doc-ei0009") or e["source"].startswith("hcomm-"):
            assert gen.GROUP_OF[e["code"]] == e["group"], e
        elif e["source"] in ("cann-rt-error-codes", "cann-rt-reasons"):
            assert gen.ACL_GROUP_OF[e["title"]] == e["group"], e
        elif e["source"] == "acl-base-codes":
            assert gen.ACL_BASE_GROUP_OF[e["title"]] == e["group"], e
    assert all(g in GROUPS for g in set(gen.GROUP_OF.values()) | set(gen.ACL_GROUP_OF.values()))
    assert all(g in GROUPS for *_, g in gen.GE_RULES)
    assert mapped  # the mapping table is the generator's, the data file only records its result
    json.dumps(CATALOG)  # plain data


def _upstream_row(e: dict[str, Any]) -> dict[str, Any]:
    return {"errClass": "GE Errors", "errTitle": e["title"], "ErrCode": e["code"], "ErrMessage": e["message"],
            "Arglist": "", "suggestion": {"Possible Cause": "N/A", "Solution": "N/A"}}


def _torch_npu(e: dict[str, Any]) -> bool:
    return e["source"] == "torch-npu-error-codes"


def test_the_committed_json_is_what_the_generator_writes_from_ges_catalogs(tmp_path: Path) -> None:
    # The upstream files are not in the repository (see the script's docstring): they are rebuilt here in their own
    # formats from the committed GE-family rows, with rows the script must leave out (a warning, a code of another
    # emitter); the script must give back exactly those rows, and with the other rows the committed file, byte for byte.
    gen = _generator()
    ge = [e for e in ENTRIES if _ge_family(e)]
    tnpu = [e for e in ENTRIES if _torch_npu(e)]
    rest = [e for e in ENTRIES if not _ge_family(e) and not _torch_npu(e)]
    assert ENTRIES == rest + ge + tnpu  # the GE family, then torch_npu's codes are written last
    registry = {"error_info_list": [_upstream_row(e) for e in ge if e["source"] == "ge-error-registry"]
                + [_upstream_row({"code": "W11001", "title": "Performance_Not_Optimal_Operator", "message": "Op %s ..."})]}
    (tmp_path / "error_registry.cc").write_text(
        '#include <string>\nnamespace {\nconst std::string ge_error_code = R"(\n' + json.dumps(registry, indent=2)
        + '\n)";\nREG_FORMAT_ERROR_MSG(ge_error_code.c_str(), ge_error_code.size());\n}  // namespace\n', encoding="utf-8")
    cann = {"error_info_list": [_upstream_row(e) for e in ge if e["source"] == "cann-error-codes"]
            + [_upstream_row({"code": "EK0001", "title": "Invalid_Argument", "message": "Value %s for parameter %s is invalid."}),
               _upstream_row({"code": "EZ0001", "title": "Invalid_Input_Shape", "message": "OP[%s] %sth input ..."})]}
    (tmp_path / "error_code.json").write_text(json.dumps(cann), encoding="utf-8")
    got = gen.ge_entries(tmp_path / "error_registry.cc", tmp_path / "error_code.json")
    assert got == ge
    assert gen.render(gen.build(rest + got + tnpu)) == CATALOG_PATH.read_text(encoding="utf-8")
    assert gen.build(rest + got)["groups"] == GROUPS and gen.build([])["sources"] == CATALOG["sources"]


def test_ge_family_rules_follow_the_codes_documented_class() -> None:
    gen = _generator()
    assert gen.ge_group("E19999", "Inner_Error") == "cann.catalog.generic"  # the ErrorManager's inner wrapper
    assert gen.ge_group("E90001", "Inner_Error_Compile_Fail") == "cann.catalog.generic"
    assert gen.ge_group("E10001", "Invalid_Argument") == "cann.catalog.ge_setup"  # an option of GE/ATC
    assert gen.ge_group("E40020", "Environment_Error_Import_Python_Module_Failed") == "cann.catalog.ge_setup"
    assert gen.ge_group("E10501", "Not_Supported_Operator") == "cann.catalog.ge_setup"  # ASCEND_OPP_PATH, the OPP
    assert gen.ge_group("E20001", "Compilation_Error") == "cann.catalog.program"
    assert gen.ge_group("E50003", "Not_Supported_Data_Type") == "cann.catalog.program"  # an operator's own check
    assert gen.ge_group("E30005", "Device_Connection_Failure") == "cann.catalog.device"
    by_code = {e["code"]: e for e in ENTRIES}
    assert not any(code.startswith("W") for code in by_code)  # warnings are no failure
    assert GROUPS["cann.catalog.ge_setup"]["category"] == "LAUNCH"


@pytest.mark.parametrize("line,signature,category", [
    # hicann/runtime's ErrorManager::GetErrorMessage: "[PID: N] <time> <errTitle>(<code>): <message>"
    ("[PID: 4021] 2025-12-01-10:00:00.000.000 Invalid_Argument(E10001): Value [abc] for parameter [ge.exec.precision_mode] "
     "is invalid. Reason: it must be one of force_fp16, allow_mix_precision", "cann.catalog.ge_setup", Category.LAUNCH),
    ("[PID: 4021] 2025-12-01-10:00:00.000.000 Environment_Error_Import_Python_Module_Failed(E40020): Failed to import "
     "Python module [tbe.common.utils]. Reason: No module named 'decorator'.", "cann.catalog.ge_setup", Category.LAUNCH),
    # the older classic form, with FE's older message (fe_error_code.h of hicann/ge)
    ("E20001: 2024-05-01-10:00:00.000.000 Failed to compile Op [MatMul_12]. (optype: [MatMulV2])", "cann.catalog.program",
     Category.EXCEPTION),
    # ErrorManager::AssembleInnerErrorMessage and OutputErrMessage: the inner wrapper, generic
    ("E19999: Internal error!", "cann.catalog.generic", Category.EXCEPTION),
    ("E19999[PID: 4021] 2025-12-01-10:00:00.000.000 Inner_Error(E19999):  Call OptimizeGraph failed."
     "[FUNC:Optimize][FILE:graph_optimize.cc][LINE:120]", "cann.catalog.generic", Category.EXCEPTION),
    ("E29999: Internal error!", "cann.inner_error", Category.EXCEPTION),  # FE's inner code, not in a catalog
])
def test_ge_code_lines_as_the_error_manager_prints_them(line: str, signature: str, category: Category) -> None:
    sig = match_line(line)
    assert sig is not None and (sig.id, sig.category) == (signature, category), (line, sig and sig.id)
    assert (sig.role == "generic") == ("9999" in line)


def test_a_ge_code_never_seen_in_the_corpus_gets_its_category_with_the_evidence_line(tmp_path: Path) -> None:
    # E40020 (TE fusion could not import a Python module) is in no log of tests/data: only the catalog knows it
    (tmp_path / "train.log").write_text(
        "[INFO] start training\n"
        "[PID: 4021] 2025-12-01-10:00:00.000.000 Environment_Error_Import_Python_Module_Failed(E40020): Failed to import "
        "Python module [tbe.common.utils]. Reason: No module named 'decorator'.\n"
        "        Possible Cause: Some required Python modules are not installed.\n"
        "        Solution: Check that all required components are properly installed.\n", encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.LAUNCH
    assert report.first_failure is not None and report.first_failure.signature == "cann.catalog.ge_setup"
    assert "E40020" in report.first_failure.text and report.first_failure.line == 2


def test_ges_inner_wrapper_code_yields_to_a_more_specific_line(tmp_path: Path) -> None:
    # E19999 (the ErrorManager's inner error) says only that something failed inside; GE's own code later in the same
    # process's log says what: an option of the session (E10001), a setup error
    (tmp_path / "train.log").write_text(
        "E19999: Internal error!\n"
        "E19999[PID: 4021] 2025-12-01-10:00:00.000.000 Inner_Error(E19999):  Call InitGraph failed."
        "[FUNC:Init][FILE:ge_api.cc][LINE:300]\n"
        "TraceBack (most recent call last):\n"
        "[PID: 4021] 2025-12-01-10:00:01.000.000 Invalid_Argument(E10001): Value [abc] for parameter "
        "[ge.exec.precision_mode] is invalid. Reason: it must be one of force_fp16, allow_mix_precision\n", encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.LAUNCH
    assert report.first_failure is not None and "E10001" in report.first_failure.text
    wrapper = [f for f in report.findings if "E19999" in f.text]
    assert wrapper and all(f.role == "generic" for f in wrapper)


def test_an_unattributed_cann_error_joins_the_one_rank_whose_only_line_wraps_it(tmp_path: Path) -> None:
    # torch_npu names the rank and the ACL return code; CANN's own lines after it name only a pid: the same process
    (tmp_path / "serve.log").write_text(
        "[rank5]:[E101 10:00:10.000000000 compiler_depend.ts:429] operator():compiler_depend.ts:128 NPU function error: "
        "call aclnnMatmul failed, error code is 207001\n"
        "[ERROR] 2025-10-01-10:00:10 (PID:4242, Device:5, RankID:-1) ERR00100 PTA call acl api failed\n"
        "EL0004: [PID: 4242] 2025-10-01-10:00:09.000.000 Failed to allocate memory.\n", encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.OOM
    assert report.first_failure is not None and report.first_failure.rank == 5


def test_an_unattributed_cann_error_of_another_process_does_not_join_a_rank(tmp_path: Path) -> None:
    # the rank's wrapper line and its header name pid 360; CANN's own lines name pid 359: another process's error
    (tmp_path / "serve.log").write_text(
        "EH9999[PID: 359] 2025-12-29-13:22:34.258.612 (EH9999):  wait for compute device to finish failed, runtime "
        "result = 507014.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:162]\n"
        "[rank1]:[E1229 13:22:34.496173985 compiler_depend.ts:444] operator():compiler_depend.ts:34 NPU function error: "
        "call aclnnRmsNorm failed, error code is 507014\n"
        "[ERROR] 2025-12-29-13:22:34 (PID:360, Device:1, RankID:-1) ERR00100 PTA call acl api failed\n", encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.EXCEPTION
    assert report.first_failure is not None and report.first_failure.rank is None
    assert report.first_failure.signature == "acl.rt.kernel"


@pytest.mark.parametrize("line", [
    "EH9999[PID: 324] 2025-12-12-12:10:10.649.300 (EH9999):  wait for compute device to finish failed, runtime result = "
    "507014.[FUNC:ReportCallError]",
    "rtDeviceSynchronizeWithTimeout execute failed, reason=[aicore timeout][FUNC:FuncErrorReason]",
    "rtStreamSynchronize execute failed, reason=[vector core timeout]",
])
def test_a_core_execution_timeout_is_the_kernels_failure_not_a_collectives(line: str) -> None:
    # aclError: ACL_ERROR_RT_AICORE_TIMEOUT / VECTOR_CORE_TIMEOUT / AICPU_TIMEOUT: a kernel that never finished on its
    # core; a collective waiting for a peer is a task, stream, event or FFTS+ timeout (107020, 507046-507048)
    sig = match_line(line)
    assert sig is not None and sig.id == "acl.rt.kernel" and sig.category is Category.EXCEPTION, (line, sig and sig.id)
    task = match_line("rtStreamSynchronize execute failed, reason=[task timeout]")
    assert task is not None and task.category is Category.COMM_TIMEOUT


def _torch_npu_source(entries: list[dict[str, Any]]) -> str:
    """torch_npu/utils/_error_code.py in its own form, rebuilt from catalog rows: the submodules and error types they
    name (with success, which is no error), a helper per submodule that has every type, and the one pair the file
    formats itself."""
    subs = {e["submodule"]: int(e["code"][3:5]) for e in entries}
    types = {e["title"]: (int(e["code"][5:]), e["message"]) for e in entries}
    count = {sub: sum(e["submodule"] == sub for e in entries) for sub in subs}
    helpers = [sub for sub in subs if count[sub] == len(types)]
    own = [(e["submodule"], e["title"]) for e in entries if e["submodule"] not in helpers]
    return "\n".join([
        "import os", "from enum import Enum", "", "", "class _SubModuleID(Enum):",
        *(f"    {sub} = {number}" for sub, number in subs.items()), "", "",
        "class ErrCode(Enum):", '    SUCCESS = (0, "success")',
        *(f'    {name} = ({number}, "{message}")' for name, (number, message) in types.items()), "",
        "    @property", "    def code(self):", "        return self.value[0]", "", "",
        "def _format_error_msg(submodule, error_code):",
        '    error_msg = "\\n[ERROR] {time} (PID:{pid}, Device:{device}, RankID:{rank}) {error_code} {submodule_name} '
        '{error_code_msg}"',
        '    return error_msg.format(time="", pid=os.getpid(), device=-1, rank=-1,',
        '        error_code="ERR{:0>2d}{:0>3d}".format(submodule.value, error_code.code, ),',
        "        submodule_name=submodule.name, error_code_msg=error_code.value[1])", "",
        *(f"\n\ndef {sub.lower()}_error(error: ErrCode) -> str:\n    return _format_error_msg(_SubModuleID.{sub}, error)"
          for sub in helpers), "",
        "def handle_exception():",
        *(f"    print(_format_error_msg(_SubModuleID.{sub}, ErrCode.{name}).lstrip())" for sub, name in own), ""])


def test_the_committed_json_is_what_the_generator_writes_from_torch_npus_catalog(tmp_path: Path) -> None:
    # the upstream file (Ascend/pytorch torch_npu/utils/_error_code.py, see SOURCES) rebuilt from the committed rows: the
    # script must give back exactly those rows, and with the other rows the committed file, byte for byte
    gen = _generator()
    tnpu = [e for e in ENTRIES if _torch_npu(e)]
    rest = [e for e in ENTRIES if not _torch_npu(e)]
    assert ENTRIES == rest + tnpu and len(tnpu) == 81  # 5 submodules x 16 error types, and UNKNOWN's EXCEPT
    (tmp_path / "_error_code.py").write_text(_torch_npu_source(tnpu), encoding="utf-8")
    got = gen.torch_npu_entries(tmp_path / "_error_code.py")
    assert got == tnpu
    assert gen.render(gen.build(rest + got)) == CATALOG_PATH.read_text(encoding="utf-8")
    # an error type the script's table does not map stops it: a new type needs a decision, not a default
    (tmp_path / "new.py").write_text(_torch_npu_source(tnpu).replace('    SUCCESS = (0, "success")',
                                                                      '    SUCCESS = (0, "success")\n    RETRY = (13, "retry error")'))
    with pytest.raises(SystemExit, match="RETRY"):
        gen.torch_npu_entries(tmp_path / "new.py")


def test_torch_npu_codes_follow_the_rule_on_their_documented_meaning() -> None:
    gen = _generator()
    tnpu = [e for e in ENTRIES if _torch_npu(e)]
    for e in tnpu:
        assert e["group"] == gen.TORCH_NPU_GROUP_OF[e["title"]], e  # by the error type, the same for every submodule
        assert re.fullmatch(r"ERR\d{5}", e["code"]) and e["emitter"] == f"torch_npu ({e['submodule']})", e
    by_code = {e["code"]: (e["submodule"], e["title"], e["group"]) for e in tnpu}
    assert by_code["ERR02011"] == ("DIST", "TIMEOUT", "torch_npu.catalog.comm")
    assert by_code["ERR02200"] == ("DIST", "HCCL", "torch_npu.catalog.comm")
    assert by_code["ERR01002"] == ("OPS", "TYPE", "torch_npu.catalog.program")  # an operator's input dtype
    assert by_code["ERR00007"] == ("PTA", "NOT_SUPPORT", "torch_npu.catalog.program")
    assert by_code["ERR00008"] == ("PTA", "NOT_FOUND", "torch_npu.catalog.setup")  # a CANN function, set_env.sh
    assert by_code["ERR04012"] == ("PROF", "PERMISSION", "torch_npu.catalog.setup")
    assert by_code["ERR00100"] == ("PTA", "ACL", "torch_npu.catalog.generic")  # the wrapped CANN code says more
    assert by_code["ERR00006"] == ("PTA", "MEMORY", "torch_npu.catalog.generic")  # "memory error": not exhaustion
    assert by_code["ERR02005"] == ("DIST", "INTERNAL", "torch_npu.catalog.generic")
    assert by_code["ERR99999"] == ("UNKNOWN", "EXCEPT", "torch_npu.catalog.generic")  # another component's exception
    assert {(g, GROUPS[g]["category"], GROUPS[g]["role"]) for g in set(gen.TORCH_NPU_GROUP_OF.values())} == {
        ("torch_npu.catalog.comm", "COMM_TIMEOUT", "error"), ("torch_npu.catalog.program", "EXCEPTION", "error"),
        ("torch_npu.catalog.setup", "LAUNCH", "error"), ("torch_npu.catalog.generic", "EXCEPTION", "generic")}


@pytest.mark.parametrize("line,signature,category", [
    # torch_npu's own line, as _format_error_msg / formatErrorCode print it
    ("[ERROR] 2025-03-01-10:00:00 (PID:4242, Device:3, RankID:3) ERR02011 DIST timeout error", "torch_npu.catalog.comm",
     Category.COMM_TIMEOUT),
    ("[rank3]: [ERROR] 2025-03-01-10:00:00 (PID:4242, Device:3, RankID:3) ERR00008 PTA resource not found",
     "torch_npu.catalog.setup", Category.LAUNCH),
    ("[ERROR] 2025-03-01-10:00:00 (PID:4242, Device:0, RankID:-1) ERR01007 OPS feature not supported",
     "torch_npu.catalog.program", Category.EXCEPTION),
    ("[ERROR] 2025-03-01-10:00:00 (PID:4242, Device:0, RankID:-1) ERR00006 PTA memory error", "torch_npu.catalog.generic",
     Category.EXCEPTION),
    ("[ERROR] 2025-03-01-10:00:00 (PID:4242, Device:0, RankID:-1) ERR99999 UNKNOWN application exception",  # typo fixed
     "torch_npu.catalog.generic", Category.EXCEPTION),
    ("ERR02011", "torch_npu.catalog.comm", Category.COMM_TIMEOUT),  # the first release: the code alone
    # HCCLUtils' "ERR02200 DIST call hccl api failed.": the hand-written HCCL row still names it, as before
    ("[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.", "hccl.op_failed",
     Category.COMM_TIMEOUT),
    # a code newer than the catalog: torch_npu's error, generic
    ("[ERROR] 2025-03-01-10:00:00 (PID:4242, Device:0, RankID:-1) ERR05005 NEWMOD internal error", "torch_npu.error",
     Category.EXCEPTION),
])
def test_torch_npu_code_lines_as_it_prints_them(line: str, signature: str, category: Category) -> None:
    sig = match_line(line)
    assert sig is not None and (sig.id, sig.category) == (signature, category), (line, sig and sig.id)
    assert (sig.role == "generic") == (signature in ("torch_npu.catalog.generic", "torch_npu.error"))


def test_a_torch_npu_code_never_seen_in_the_corpus_gives_the_exception_it_closes_its_category(tmp_path: Path) -> None:
    # ERR00008 (PTA resource not found) is in no log of the tuned and dev splits: only torch_npu's catalog knows it. The
    # code closes the exception's message, so the bare RuntimeError line above it yields to the code's category
    (tmp_path / "train.log").write_text(
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/home/user/train.py", line 12, in <module>\n'
        "[rank3]:     torch_npu.npu.set_device(3)\n"
        "[rank3]: RuntimeError: Failed to find function aclrtGetDeviceResLimit, maybe your hdk version is too low, please "
        "upgrade it.\n"
        "[rank3]: [ERROR] 2025-03-01-10:00:00 (PID:4242, Device:3, RankID:3) ERR00008 PTA resource not found\n",
        encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.LAUNCH
    assert report.first_failure is not None and report.first_failure.signature == "torch_npu.catalog.setup"
    assert report.first_failure.rank == 3 and report.first_failure.line == 5
    assert [f.role for f in report.findings if f.signature == "python.exception"] == ["generic"]


def test_torch_npus_wrapper_code_yields_to_a_more_specific_line(tmp_path: Path) -> None:
    # ERR00100 (PTA call acl api failed) only says that an ACL call failed; CANN's own code below it says what: HCCL's
    # socket timeout (EI0006)
    (tmp_path / "train.log").write_text(
        "[rank2]: RuntimeError: npuSynchronizeDevice:torch_npu/csrc/core/npu/NPUFunctions.cpp:467 NPU function error: "
        "AclrtSynchronizeDeviceWithTimeout, error code is 507899\n"
        "[rank2]: [ERROR] 2025-03-01-10:00:00 (PID:4242, Device:2, RankID:2) ERR00100 PTA call acl api failed\n"
        "[rank2]: EI0006: [PID: 4242] 2025-03-01-09:59:59.000.000 Getting socket times out. Reason: 1. The remote does "
        "not initiate a connect request.\n", encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.COMM_TIMEOUT
    own = [f for f in report.findings if f.role == "error"]
    assert own and all("EI0006" in f.text and f.category is Category.COMM_TIMEOUT for f in own)
    wrapper = [f for f in report.findings if "ERR00100" in f.text]
    assert wrapper and all(f.role == "generic" and f.signature == "torch_npu.catalog.generic" for f in wrapper)


def _acl_base(e: dict[str, Any]) -> bool:
    return e["source"] == "acl-base-codes"


def test_the_committed_json_is_what_the_generator_writes_from_acl_base_h(tmp_path: Path) -> None:
    # hicann/runtime's acl_base_rt.h (which acl_base.h includes) and the aclError reference, rebuilt in their own
    # formats from the committed rows with success and a runtime code already in the catalog (left out); the earlier rows
    # are unchanged, the new ones follow the runtime's
    gen = _generator()
    base = [e for e in ENTRIES if _acl_base(e)]
    rest = [e for e in ENTRIES if not _acl_base(e)]
    last_rt = max(i for i, e in enumerate(ENTRIES) if e["source"] in ("cann-rt-error-codes", "cann-rt-reasons"))
    assert ENTRIES == rest[:last_rt + 1] + base + rest[last_rt + 1:] and len(base) == 69
    decls = [("ACL_ERROR_NONE", "0"), ("ACL_SUCCESS", "0"), *((e["title"], e["code"]) for e in base),
             ("ACL_ERROR_RT_TASK_TIMEOUT", "107020")]
    (tmp_path / "acl_base_rt.h").write_text(
        "#ifndef INC_EXTERNAL_ACL_ACL_BASE_RT_H_\ntypedef int aclError;\n"
        + "".join(f"static const int {name} = {number};\n" for name, number in decls) + "#endif\n", encoding="utf-8")
    (tmp_path / "aclError.md").write_text(
        "| 返回码 | 含义 | 可能原因及解决方法 |\n| --- | --- | --- |\n| static const int ACL_SUCCESS = 0; | 执行成功。 | - |\n"
        + "".join(f"| static const int {e['title']} = {e['code']};<br>须知：... | {e['message']} | ... |\n" for e in base),
        encoding="utf-8")
    taken = {e["code"] for e in rest if e["source"] == "cann-rt-error-codes"} | {"ACL_ERROR_RT_TASK_TIMEOUT"}
    got = gen.acl_base_entries(tmp_path / "acl_base_rt.h", tmp_path / "aclError.md", taken)
    assert got == base
    assert gen.render(gen.build(rest[:last_rt + 1] + got + rest[last_rt + 1:])) == CATALOG_PATH.read_text(encoding="utf-8")
    # no number or name of the runtime's rows comes back, and a code the table does not map stops the script
    assert not {e["code"] for e in got} & {e["code"] for e in rest} and not {e["title"] for e in got} & {e["title"] for e in rest}
    (tmp_path / "new.h").write_text((tmp_path / "acl_base_rt.h").read_text(encoding="utf-8")
                                    + "static const int ACL_ERROR_NEW_THING = 100046;\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="ACL_ERROR_NEW_THING"):
        gen.acl_base_entries(tmp_path / "new.h", tmp_path / "aclError.md", taken)


def test_acl_base_codes_follow_the_rule_on_their_documented_cause() -> None:
    group = {e["title"]: e["group"] for e in ENTRIES if _acl_base(e)}
    # initialisation, files, models, configuration, environment, device: the job's setup
    for name in ("ACL_ERROR_UNINITIALIZE", "ACL_ERROR_REPEAT_INITIALIZE", "ACL_ERROR_INVALID_FILE", "ACL_ERROR_PARSE_MODEL",
                 "ACL_ERROR_INVALID_DUMP_CONFIG", "ACL_ERROR_INVALID_OPP_PATH", "ACL_ERROR_COMPILING_STUB_MODE",
                 "ACL_ERROR_INVALID_DEVICE"):
        assert group[name] == "acl.base.setup", name
    # what the program passed or the order of its calls
    for name in ("ACL_ERROR_INVALID_PARAM", "ACL_ERROR_OP_INPUT_NOT_MATCH", "ACL_ERROR_UNSUPPORTED_DATA_TYPE",
                 "ACL_ERROR_REPEAT_FINALIZE", "ACL_ERROR_API_NOT_SUPPORT", "ACL_ERROR_RESOURCE_NOT_MATCH",
                 "ACL_ERROR_INVALID_RESOURCE_HANDLE", "ACL_ERROR_PROF_NOT_RUN"):
        assert group[name] == "acl.base.program", name
    assert group["ACL_ERROR_BAD_ALLOC"] == "acl.base.oom" and GROUPS["acl.base.oom"]["kind"] == "device"
    # every 5000xx code wraps a lower error: generic
    five = {name for name, g in group.items() if g == "acl.base.generic"}
    assert {e["title"] for e in ENTRIES if _acl_base(e) and e["code"].startswith("5")} <= five
    assert GROUPS["acl.base.generic"]["role"] == "generic"
    assert all(len(e["code"]) == 6 and e["code"][:3] not in ("107", "207", "507") for e in ENTRIES if _acl_base(e))


@pytest.mark.parametrize("line,signature,category", [
    ("CANN failure 100002: ACL_ERROR_REPEAT_INITIALIZE ; NPU=0 ; hostname=node01 ; expr=aclInit(nullptr);",
     "acl.base.setup", Category.LAUNCH),
    ("[ERROR] ASCENDCL(4021,python):2025-12-01-10:00:00.000.000 aclInit failed, ret = 100001", "acl.base.setup",
     Category.LAUNCH),
    ("RuntimeError: NPU function error: aclrtMalloc, error code is 200000", "acl.base.oom.wrapped", Category.OOM),
    ("aclmdlExecute failed: ACL_ERROR_INVALID_PARAM", "acl.base.program", Category.EXCEPTION),
    # the runtime's own numbers keep their rows
    ("CANN failure 507013: ACL_ERROR_RT_DEVICE_MEM_ERROR ; NPU=0", "acl.rt.hardware.wrapped", Category.HARDWARE),
])
def test_acl_base_code_lines_as_their_emitters_print_them(line: str, signature: str, category: Category) -> None:
    sig = match_line(line)
    assert sig is not None and sig.id == signature and sig.category is category, (line, sig and sig.id)


def test_an_acl_failure_wrapper_code_yields_to_a_more_specific_line(tmp_path: Path) -> None:
    # ACL_ERROR_FAILURE (500001) only says that ACL failed inside; HCCL's own code in the same log says what
    (tmp_path / "train.log").write_text(
        "CANN failure 500001: ACL_ERROR_FAILURE ; NPU=0 ; hostname=node01 ; expr=aclrtSynchronizeStream(stream);\n"
        "EI0006: [PID: 4242] 2025-03-01-09:59:59.000.000 Getting socket times out. Reason: 1. The remote does "
        "not initiate a connect request.\n", encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.COMM_TIMEOUT
    wrapper = [f for f in report.findings if "500001" in f.text]
    assert wrapper and all(f.role == "generic" and f.signature == "acl.base.generic" for f in wrapper)


def _npu_event(e: dict[str, Any]) -> bool:
    return e["source"] == "mindcluster-kg"


def _kb_entity(e: dict[str, Any], cls: str, source: str = "NPU_OS") -> dict[str, Any]:
    """A fault event as MindCluster's kg-config.json holds it (its own patterns for the event's id)."""
    module = e["emitter"].removeprefix("NPU health management (").removesuffix(")")
    low = e["code"][2:].lower()
    return {"attribute": {"class": cls, "component": "NPU", "module": module, "cause_en": e["title"],
                          "description_en": e["message"], "suggestion_en": ["..."]},
            "rule": [], "source_file": source,
            "regex": {"in": [["Node Type=0x70;", "Sensor Type=0xc;", "event_state=1)"], [f"Event id=0x{low}"],
                             [f"event_id:  [0x{low}]"], [f"event_id=0x{low}"]]}}


def test_the_committed_json_is_what_the_generator_writes_from_mindclusters_fault_events(tmp_path: Path) -> None:
    # MindCluster's kg-config.json rebuilt from the committed rows, with entities the script must leave out: a BMC's
    # event (not a log triage reads), an event the host kernel names in words, a class that names the user beside the
    # software, a knowledge-base entry that is no event id
    gen = _generator()
    events = [e for e in ENTRIES if _npu_event(e)]
    assert len(events) >= 150 and all(re.fullmatch(r"0x[0-9A-F]{8}", e["code"]) for e in events)
    kb = {e["code"]: _kb_entity(e, {"npu.event.program": "User"}.get(e["group"], "Hardware")) for e in events}
    some = events[0]
    kb["0x82000001"] = _kb_entity({**some, "code": "0x82000001"}, "Hardware", "NodeDLog | BMCLogDumpLog")
    kb["0x40F84E00"] = {**_kb_entity({**some, "code": "0x40F84E00"}, "Hardware", "OS"),
                        "regex": {"in": [["[ERROR] [drv_soft_fault]", "Heartbeat lost", "(device="]]}}
    kb["0x8C2FA001"] = _kb_entity({**some, "code": "0x8C2FA001"}, "Software/User")
    kb["AISW_CANN_HCCL_004"] = {**_kb_entity(some, "Software"), "regex": {"in": ["topo exchange server get socket timeout"]}}
    kb["0x8C2FA009"] = _kb_entity({**some, "code": "0x8C2FA009"}, "Hardware")  # a finished reset: nothing to do
    kb["0x8C2FA009"]["attribute"]["suggestion_en"] = ["1. No operation is required."]
    (tmp_path / "kg-config.json").write_text(json.dumps({"knowledge-repository": kb}), encoding="utf-8")
    got = gen.npu_event_entries(tmp_path / "kg-config.json")
    assert got == events
    rest = [e for e in ENTRIES if not _npu_event(e)]
    at = next(i for i, e in enumerate(ENTRIES) if _npu_event(e))
    assert gen.render(gen.build(rest[:at] + got + rest[at:])) == CATALOG_PATH.read_text(encoding="utf-8")


def test_npu_fault_events_follow_the_class_and_module_the_knowledge_base_gives_them() -> None:
    gen = _generator()
    assert gen.npu_event_group("Hardware", "HBM") == "npu.event.hardware"
    assert gen.npu_event_group("Software/Hardware", "TS") == "npu.event.hardware"  # the TS firmware's heartbeat
    assert gen.npu_event_group("Software", "PROCESS") == "npu.event.hardware"  # a device-side daemon: the device's
    assert gen.npu_event_group("Hardware", "PORT") == "npu.event.fabric"  # a RoCE port's link went down
    assert gen.npu_event_group("Software/Hardware", "HCCS") == "npu.event.fabric"
    assert gen.npu_event_group("User", "AIC") == "npu.event.program"  # the AI Core saw bad input
    assert gen.npu_event_group("Software/User", "OS") is None
    by_code = {e["code"]: e["group"] for e in ENTRIES if _npu_event(e)}
    assert by_code["0x80E01801"] == "npu.event.hardware"  # HBM multi-bit ECC
    assert by_code["0x81078603"] == "npu.event.fabric"  # network port link Up -> Down
    assert "0x40F84E00" not in by_code  # named in words by the host's kernel: the device_fault row reads it
    assert "0x8C2FA009" not in by_code  # "Chip initialization startup completed": the knowledge base says do nothing


def test_a_fault_event_in_one_nodes_device_log_names_that_node_not_the_ranks_that_timed_out(tmp_path: Path) -> None:
    # node n2's device event log reports its HBM's multi-bit ECC error; every rank then timed out in a collective
    for node, rank in (("n1", 0), ("n2", 1)):
        (tmp_path / node).mkdir()
        (tmp_path / node / "rank.log").write_text(
            f"[ERROR] HCCL(4242,python):2025-03-01-10:05:00.000.{rank:03d} [task_exception_handler.cc:100][4242]"
            f"[TaskExceptionHandler][Callback]Task run failed, base information is streamID:[2], taskID[7], "
            f"taskType[Notify Wait], tag[AllReduce], rank[{rank}]\n", encoding="utf-8")
    (tmp_path / "n2" / "event_0.log").write_text(
        "[EVENT] DRV(1234,dmp_daemon):2025-03-01-10:01:10.000.000 [ras.c:88] event_id=0x80E01801 HBM multi-bit ECC\n",
        encoding="utf-8")
    report = triage([str(tmp_path)])
    assert report.category is Category.HARDWARE and report.culprit_node == "n2", report.reason
    assert report.first_failure is not None and report.first_failure.signature == "npu.event.hardware"
    assert "0x80E01801: Multi-bit ECC errors when accessing the HBM" in report.reason  # the knowledge base's cause
