"""MindSpore's own runtime messages (issue #26): each line below is the exact text MindSpore's source prints, with its
format arguments filled in, checked against the category (and row) its meaning calls for.

Source: https://github.com/mindspore-ai/mindspore/commit/a05ce58802d47fba782ecef8d971e05a078727c1 (master, 2025-07-05);
the path after each group is where the message is made at that commit (signatures.py cites the lines). MS_LOG(EXCEPTION)
logs "[ERROR] <MODULE>(pid,tid,python):<time> [file:line] func] <message>" and raises "RuntimeError: <message>".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascendctl.triage import match_line, triage
from ascendctl.triage.signatures import Category, by_id, trigger_pattern

TRIGGER = re.compile(trigger_pattern())
_E = "[ERROR] DEVICE(3521,ffff8b7ff1e0,python):2025-07-05-10:00:00.123.456 [{src}] {func}] "
_D = "[ERROR] DISTRIBUTED(3521,ffff8b7ff1e0,python):2025-07-05-10:00:00.123.456 [{src}] {func}] "
_W = "[WARNING] PRE_ACT(3521,ffff8b7ff1e0,python):2025-07-05-10:00:00.123.456 [{src}] {func}] "


def _err(src: str, func: str, msg: str, head: str = _E) -> str:
    return head.format(src=src, func=func) + msg


# (line, expected signature, category, role)
LINES: list[tuple[str, str, Category, str]] = [
    # ---- device memory (ccsrc/plugin/res_manager/ascend/mem_manager/ascend_two_pointer_mem_adapter.cc, ascend_memory_adapter.cc,
    # backend/ge_backend/runtime/actor/actor_common.h, backend/ge_backend/executor/ge_memory_manager.cc, ge_graph_executor.cc,
    # ge_memory_allocator.cc, runtime/device/kernel_runtime.cc)
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/mem_manager/ascend_two_pointer_mem_adapter.cc:118", "MallocStaticDevMem",
          "Out of Memory!!! Request memory size: 1073741824B, Memory Statistic:"), "mindspore.oom", Category.OOM, "error"),
    ("RuntimeError: Malloc device memory failed, size[2147483648], ret[207001], Device 0 Available MOC size:65452113920 "
     "free size:1048576", "mindspore.oom", Category.OOM, "error"),
    ("Device(id:0) memory isn't enough and alloc failed, kernel name: Default/network-WithLossCell/MatMul-op12, alloc size: "
     "2147483648B.", "mindspore.oom", Category.OOM, "error"),
    ("Device memory isn't enough and alloc failed, alloc size:2147483648", "mindspore.oom", Category.OOM, "error"),
    ("RuntimeError: Out of memory, Alloc GE memory failed, size: 1073741824", "mindspore.oom", Category.OOM, "error"),
    ("RuntimeError: Memory pool not enough, graph: kernel_graph_0", "mindspore.oom", Category.OOM, "error"),
    ("RuntimeError: AllocFeatureMemory error, memory not enough, memory size: 1073741824", "mindspore.oom", Category.OOM,
     "error"),
    # the pool could not grow (memory/mem_pool/abstract_dynamic_mem_pool.cc, mem_dynamic_allocator.cc): it may recover
    (_err("mindspore/ccsrc/memory/mem_pool/abstract_dynamic_mem_pool.cc:913", "CalMemBlockAllocSize",
          "Memory not enough: current free memory size[1048576] is smaller than required size[2147483648].", _W),
     "mindspore.oom_pool_short", Category.OOM, "generic"),
    (_err("mindspore/ccsrc/memory/mem_pool/mem_dynamic_allocator.cc:561", "AddMemBlockAndMemBufByEagerFree",
          "AllocDeviceMemByEagerFree failed, alloc_size : 0."), "mindspore.oom_pool_short", Category.OOM, "generic"),
    # ---- host memory (plugin/res_manager/cpu/cpu_mem_manager/cpu_memory_manager.cc,
    # runtime/device/res_manager/auto_mem_offload.cc)
    ("RuntimeError: Malloc memory failed: size 17179869184", "mindspore.host_oom", Category.OOM, "error"),
    # ---- UCE / HBM multi-bit ECC (core/include/utils/ms_exception.h, core/utils/ms_exception.cc,
    # plugin/res_manager/ascend/ascend_device_address/ascend_device_address.cc, python/mindspore/train/model.py)
    (_err("mindspore/core/utils/ms_exception.cc:51", "ProcessUceError",
          "UCEError error occurs when execute, error_code=507054"), "mindspore.uce", Category.HARDWARE, "error"),
    ("RuntimeError: UCEError error occurs when execute, error_code=507053.", "mindspore.uce", Category.HARDWARE, "error"),
    ("RuntimeError: UCEError occurs when execute.", "mindspore.uce", Category.HARDWARE, "error"),
    ("[ERROR] ME(3521:281473045114880,MainProcess):2025-07-05-10:00:00.123.000 [mindspore/train/model.py:151] Caught UCEError of "
     "type HBM_MULTI_BIT_ECC_ERROR but can not repair, hbm_error_time=67672363666, optimize_start=67672000000, "
     "optimizer_end=67672100000", "mindspore.uce", Category.HARDWARE, "error"),
    # ---- HCCEError: 507904, a communication op that failed after its retries (core/utils/ms_exception.cc)
    (_err("mindspore/core/utils/ms_exception.cc:78", "ProcessApiUceError",
          "HCCEError error occurs when execute, error_code=507904."), "mindspore.hcce", Category.COMM_TIMEOUT, "error"),
    # ---- ForceStopError: stopped by MindIO TFT after a fault elsewhere (core/utils/ms_exception.cc,
    # runtime/hardware/device_context_manager.cc, runtime/graph_scheduler/graph_scheduler.cc)
    (_err("mindspore/core/utils/ms_exception.cc:87", "ProcessApiUceError", "ForceStopError error occurs when execute"),
     "mindspore.force_stop", Category.UNKNOWN, "stop"),
    ("RuntimeError: ForceStopError occurs when execute.", "mindspore.force_stop", Category.UNKNOWN, "stop"),
    # ---- the task-exception callback (plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc)
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc:159", "TaskExceptionCallback",
          "Run Task failed, task_id: 12, stream_id: 3, tid: 4567, device_id: 0, retcode: 507010 (ts lost heartbeat)"),
     "mindspore.task_device_fault", Category.HARDWARE, "error"),
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc:159", "TaskExceptionCallback",
          "Run Task failed, task_id: 12, stream_id: 3, tid: 4567, device_id: 0, retcode: 507054 (Return error code unknown, "
          "ret code: 507054)"), "mindspore.task_device_fault", Category.HARDWARE, "error"),
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc:159", "TaskExceptionCallback",
          "Run Task failed, task_id: 12, stream_id: 3, tid: 4567, device_id: 0, retcode: 507015 (aicore exception)"),
     "mindspore.task_kernel_fault", Category.EXCEPTION, "error"),
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc:159", "TaskExceptionCallback",
          "Run Task failed, task_id: 12, stream_id: 3, tid: 4567, device_id: 0, retcode: 507018 (aicpu exception)"),
     "mindspore.task_kernel_fault", Category.EXCEPTION, "error"),
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/hal_manager/ascend_err_manager.cc:159", "TaskExceptionCallback",
          "Run Task failed, task_id: 12, stream_id: 3, tid: 4567, device_id: 0, retcode: 507011 ( model execute failed)"),
     "mindspore.task_failed", Category.EXCEPTION, "generic"),
    # ---- communicator setup (distributed/collective/collective_manager.cc, plugin/res_manager/ascend/collective/
    # ascend_collective_comm_lib.cc, pipeline/jit/ps/pipeline.cc)
    (_err("mindspore/ccsrc/distributed/collective/collective_manager.cc:134", "operator()",
          "Execute function: init_device_comm_group_func to initialize communicator for group hccl_world_group timeout, this "
          "node id: 3 exit process", _D), "mindspore.comm_init_timeout", Category.COMM_TIMEOUT, "error"),
    (_err("mindspore/ccsrc/distributed/collective/collective_manager.cc:111", "operator()",
          "Failed to execute function: init_device_comm_group_func to initialize communicator for group hccl_world_group. "
          "Please check error log above.", _D), "mindspore.comm_init_failed", Category.COMM_TIMEOUT, "generic"),
    (_err("mindspore/ccsrc/distributed/collective/collective_manager.cc:1034", "CreateDeviceCommunicator",
          "Failed to create comm group on device side for hccl_world_group", _D),
     "mindspore.comm_init_failed", Category.COMM_TIMEOUT, "generic"),
    ("RuntimeError: Failed to wait for communicator of hccl_world_group init done. Please check ERROR log above.",
     "mindspore.comm_init_failed", Category.COMM_TIMEOUT, "generic"),
    ("RuntimeError: Communicator of group hccl_world_group inited: failed. Result: Failed to init communicator asynchronizely "
     "for group hccl_world_group. Please check ERROR log.", "mindspore.comm_init_failed", Category.COMM_TIMEOUT, "generic"),
    ("RuntimeError: Ascend collective communication initialization failed.", "mindspore.comm_init_failed",
     Category.COMM_TIMEOUT, "generic"),
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/collective/ascend_collective_comm_lib.cc:149", "InitializeHccl",
          "Hcom init failed.", _D), "mindspore.comm_init_failed", Category.COMM_TIMEOUT, "generic"),
    ("RuntimeError: InitHccl failed.", "mindspore.comm_init_failed", Category.COMM_TIMEOUT, "generic"),
    # HCCL's own calls keep their HCCL rows (ascend_communication_group.cc:181,245)
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/collective/ascend_communication_group.cc:181", "InitByRootInfoConfig",
          "HcclCommInitRootInfoConfig failed. ", _D), "hccl.op_failed", Category.COMM_TIMEOUT, "error"),
    # ---- the cluster: msrun's scheduler and workers (distributed/cluster/topology/compute_graph_node.cc, meta_server_node.cc,
    # distributed/init.cc)
    ("RuntimeError: The state of the cluster is error, total nodes num: 8, abnormal nodes num: 1",
     "mindspore.cluster_abnormal", Category.COMM_TIMEOUT, "error"),
    (_err("mindspore/ccsrc/distributed/cluster/topology/compute_graph_node.cc:286", "Heartbeat",
          "Failed to send heartbeat message to meta server node and try to reconnect to the meta server.", _D),
     "mindspore.scheduler_heartbeat", Category.COMM_TIMEOUT, "generic"),
    ("RuntimeError: Failed to connect to the meta server. Maybe it has exited. Please check scheduler's log.",
     "msrun.node_timeout", Category.COMM_TIMEOUT, "error"),
    (_err("mindspore/ccsrc/distributed/cluster/topology/meta_server_node.cc:511", "UpdateTopoState",
          "The node: 3 is timed out. It may exit with exception, please check this node's log.", _D),
     "msrun.node_timeout", Category.COMM_TIMEOUT, "error"),
    ("RuntimeError: The total number of timed out node is 1. Timed out node list is: [3], worker 3 is the first one timed "
     "out, please check its log.", "msrun.node_timeout", Category.COMM_TIMEOUT, "error"),
    ("RuntimeError: Failed to initialize distributed job cluster because some processes in the cluster are not successfully "
     "spawned. You can run command: 'grep -rn -E 'ERROR|CRITICAL' -C 10' in your log directory to filter out error info. It "
     "may be one of the following reasons:", "mindspore.cluster_init_failed", Category.LAUNCH, "generic"),
    ("RuntimeError: Failed to initialize collective communication because some processes in the cluster are not "
     "successfully spawned. You can run command: 'grep -rn -E 'ERROR|CRITICAL' -C 10' in your log directory to filter out "
     "error info.", "mindspore.cluster_init_failed", Category.LAUNCH, "generic"),
    ("RuntimeError: Failed to register the compute graph node: 3. Reason: Repeated registration node: 3 to the scheduler. "
     "Please check if there's another scheduler process with port:8118 still running, or this is an extra node for "
     "distributed job.", "mindspore.register_rejected", Category.LAUNCH, "error"),
    ("RuntimeError: Failed to register the compute graph node: 9. Reason: Rank id:1 for role:MS_WORKER exists.",
     "mindspore.register_rejected", Category.LAUNCH, "error"),
    # ---- launch settings (plugin/res_manager/ascend/collective/ascend_collective_comm_lib.cc, distributed/cluster/
    # cluster_context.cc, include/backend/distributed/constants.h, distributed/collective/collective_manager.cc,
    # python/mindspore/communication/management.py, python/mindspore/context.py, core/utils/ms_context.cc)
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/collective/ascend_collective_comm_lib.cc:114", "InitializeHccl",
          "The environment variable 'MINDSPORE_HCCL_CONFIG_PATH' or 'RANK_TABLE_FILE' is not set, so get hccl json config "
          "failed, please set env 'MINDSPORE_HCCL_CONFIG_PATH' or 'RANK_TABLE_FILE'", _D),
     "mindspore.launch_env", Category.LAUNCH, "error"),
    (_err("mindspore/ccsrc/plugin/res_manager/ascend/collective/ascend_collective_comm_lib.cc:126", "InitializeHccl",
          "Invalid environment variable 'MINDSPORE_HCCL_CONFIG_PATH' or 'RANK_TABLE_FILE', the path is: "
          "/data/rank_table_8pcs.json. Please check (1) whether the path exists, (2) whether the path has the access "
          "permission, (3) whether the path is too long. ", _D), "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Invalid environment variable 'RANK_ID', it should not be empty.", "mindspore.launch_env",
     Category.LAUNCH, "error"),
    ("RuntimeError: Environment variables RANK_ID has not been exported, please export variables 'RANK_ID'.",
     "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Please set env 'WORKER_NUM' to a number greater than 0.", "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Caught exception of stoi. The environment variable MS_WORKER_NUM is invalid.", "mindspore.launch_env",
     Category.LAUNCH, "error"),
    ("RuntimeError: Caught exception of stoi. The environment variable MS_SCHED_PORT is invalid.", "mindspore.launch_env",
     Category.LAUNCH, "error"),
    ("RuntimeError: MS_SCHED_HOST is empty. MS_SCHED_HOST", "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Role name '' is invalid. Maybe you are trying to call 'mindspore.communication.init()' without using "
     "'mpirun', which will make MindSpore load several environment variables and check their validation.",
     "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Maybe you are trying to call 'mindspore.communication.init()' without using 'mpirun', which will make "
     "MindSpore load several environment variables and check their validation. Please use 'mpirun' to launch this process "
     "to fix this issue", "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Launching distributed job using dynamic cluster or OpenMPI, but the deive id is not imported when set env "
     "'RANK_TABLE_FILE'. Please use msrun startup method to rearrange rank ids based on rank table file or do not set env "
     "'RANK_TABLE_FILE' to arrange rank ids by default.", "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Ranktable startup method doesn't support pynative mode. Please switch to msrun method.",
     "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: For 'init', the argument 'backend_name' should be 'nccl' to init 'GPU', but got 'hccl'.",
     "mindspore.launch_env", Category.LAUNCH, "error"),
    ("ValueError: For 'context.set_context', the argument 'device_id' must be in range [0, 4095], but got 4096.",
     "mindspore.launch_env", Category.LAUNCH, "error"),
    ("RuntimeError: Get hccl rank_table_file failed, please export MINDSPORE_HCCL_CONFIG_PATH or RANK_TABLE_FILE.",
     "ranktable.invalid", Category.LAUNCH, "error"),
    ("RuntimeError: \"hccl\" wheel was not installed correctly. For details, refer to the installation guidelines: "
     "https://www.mindspore.cn/install", "mindspore.hccl_missing", Category.LAUNCH, "error"),
    ("RuntimeError: Call aclrtSetDevice failed, ret[107001]. Got device count[8] and device id[9], please check if device id "
     "is valid.", "launch.device_ordinal", Category.LAUNCH, "error"),
    ("RuntimeError: Unsupported device target Ascend. This process only supports one of the ['CPU']. Please check whether "
     "the Ascend environment is installed and configured correctly, and check whether current mindspore wheel package was "
     "built with \"-e Ascend\".", "mindspore.backend_missing", Category.LAUNCH, "error"),
    # ---- NaN (python/mindspore/train/callback/_loss_monitor.py:80)
    ("ValueError: In epoch: 3 step: 120, loss is NAN or INF, training process cannot continue, terminating training.",
     "loss.nan", Category.NAN, "error"),
]

# Lines MindSpore prints that are no failure (or not this one): they must not be read as errors.
BENIGN: list[str] = [
    # the finalize wrapper's timeout (collective_manager.cc:560) happens while a job is already ending
    _err("mindspore/ccsrc/distributed/collective/collective_manager.cc:134", "operator()",
         "Execute function: finalize_comm_lib_func to destroy communication groups and finalize communication lib timeout, "
         "this node id: 3 exit process", _D),
    # GetUceErrorMsg with nothing wrong (ms_exception.h:212), and the TFT env switches (ms_exception.h CheckUceARFEnv)
    "No uce error occurs.",
    "[WARNING] DEVICE(3521,ffff8b7ff1e0,python):2025-07-05-10:00:00.123.456 [mindspore/core/include/utils/ms_exception.h:182] "
    "CheckUceARFEnv] ARF enabled.",
    # the communicator's normal start/end lines (ascend_communication_group.cc:169,184)
    "[WARNING] DISTRIBUTED(3521,ffff8b7ff1e0,python):2025-07-05-10:00:00.123.456 [mindspore/ccsrc/plugin/res_manager/ascend/"
    "collective/ascend_communication_group.cc:169] InitByRootInfoConfig] Start to initialize communicator by "
    "HcclCommInitRootInfoConfig for hccl_world_group, hcclBufferSize is 200 MB, hcclDeterministic is 0",
    # the loss monitor's normal line (_loss_monitor.py:93)
    "epoch: 1 step: 10, loss is 2.3025851249694824",
]


@pytest.mark.parametrize("line,expected,category,role", LINES, ids=[f"{i}:{r[1]}" for i, r in enumerate(LINES)])
def test_mindspores_message_is_classified_by_its_meaning(line: str, expected: str, category: Category, role: str) -> None:
    assert TRIGGER.search(line), "the prefilter would never show this line to the signatures"
    sig = match_line(line)
    assert sig is not None and sig.id == expected, (line, sig and sig.id)
    assert (sig.category, sig.role) == (category, role)


@pytest.mark.parametrize("line", BENIGN)
def test_benign_mindspore_lines_are_not_errors(line: str) -> None:
    sig = match_line(line)
    assert sig is None or sig.role != "error", (line, sig.id)


def test_mindspore_memory_rows_say_which_memory() -> None:
    assert by_id("mindspore.oom").kind == by_id("mindspore.oom_pool_short").kind == "device"
    assert by_id("mindspore.host_oom").kind == "host"
    assert by_id("mindspore.launch_env").node_wide and by_id("mindspore.hccl_missing").node_wide


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_pool_that_could_not_grow_is_no_oom_when_the_rank_fails_otherwise(tmp_path: Path) -> None:
    _write(tmp_path / "rank_0.log", [
        _err("mindspore/ccsrc/memory/mem_pool/abstract_dynamic_mem_pool.cc:913", "CalMemBlockAllocSize",
             "Memory not enough: current free memory size[1048576] is smaller than required size[2147483648].", _W),
        _err("mindspore/core/utils/ms_exception.cc:51", "ProcessUceError",
             "UCEError error occurs when execute, error_code=507054"),
        "RuntimeError: UCEError error occurs when execute, error_code=507054.",
    ])
    report = triage([tmp_path])
    assert report.category is Category.HARDWARE
    assert report.first_failure is not None and report.first_failure.signature == "mindspore.uce"


def test_the_uce_rank_is_the_culprit_not_the_ranks_tft_force_stopped(tmp_path: Path) -> None:
    _write(tmp_path / "rank_0.log", ["RuntimeError: ForceStopError occurs when execute."])
    _write(tmp_path / "rank_1.log", [
        _err("mindspore/core/utils/ms_exception.cc:51", "ProcessUceError",
             "UCEError error occurs when execute, error_code=507053"),
    ])
    _write(tmp_path / "rank_2.log", ["RuntimeError: ForceStopError occurs when execute."])
    report = triage([tmp_path])
    assert report.category is Category.HARDWARE and report.culprit_rank == 1
