"""Issue #26: the loss scalers' and NaN checks' messages, and gloo's and the c10d store's errors, as their emitters spell
them (format arguments filled with plausible values), each classified with the category the README's rules give it;
routine lines (one overflow that halves a large scale, a scale that grows back, INFO lines) are not failures.

Sources (pinned; the rows of ascendctl/triage/signatures.py cite file and line):
  DeepSpeed   github.com/microsoft/DeepSpeed @ 38327e07f6cd39b63418f60cedd1651b0be3e7c3 (runtime/fp16/loss_scaler.py,
              fused_optimizer.py, unfused_optimizer.py)
  Megatron-LM github.com/NVIDIA/Megatron-LM @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (core/distributed/
              param_and_grad_buffer.py, core/rerun_state_machine.py, pretrain_gpt.py) and e39f9f697229969f4e02a7d6e7507d207b510649
              (the asserts before the rerun state machine)
  Apex amp    github.com/NVIDIA/apex @ e13873debc4699d39c6861074b9a3b2a02327f92 (apex/amp/handle.py, the last commit with amp)
  fairseq     github.com/facebookresearch/fairseq @ 3d262bb25690e4eb2e7d3c1309b1e9c406ca4b99 (optim/dynamic_loss_scaler.py,
              optim/amp_optimizer.py, trainer.py, nan_detector.py)
  Colossal-AI github.com/hpcaitech/ColossalAI @ 4f9953be335ef371b3848719ddafe596c01ecd37 (amp/naive_amp/grad_scaler/
              dynamic_grad_scaler.py, zero/low_level/low_level_optim.py)
  Lightning   github.com/Lightning-AI/pytorch-lightning @ 7f0c3436cd3f6ad3753125672024fc415cbcb414 (pytorch/loops/utilities.py,
              pytorch/callbacks/early_stopping.py)
  torch       github.com/pytorch/pytorch: torch/csrc/autograd/engine.cpp (anomaly mode), torch/csrc/distributed/c10d/socket.cpp
              @ 8cf1b8e3942565c8bdcc7ba98f02f626ebdda5d1, TCPStore.cpp @ 00321a02d719de5729aeac5871792398114a1570 ("Timed out
              after N seconds waiting for clients", DistStoreError "Socket Timeout"; b874478480be06eab07db7ecd307883fb286fb8a
              raised it as a RuntimeError; later ones "wait timeout after Nms, keys: ..."), Utils.hpp
              @ edeed37857e025510b6a193a9cc1fe0dbc53303f, distributed_c10d.py (_store_based_barrier),
              elastic/rendezvous/dynamic_rendezvous.py and c10d_rendezvous_backend.py @ 858f73b0f90bb8c540fbd8fadb2877ed07f22e00
  gloo        github.com/facebookincubator/gloo @ cc441984208d0b54b4fc614301f41e82e951e5cd (transport/tcp/pair.cc, pair.h,
              buffer.cc, unbound_buffer.cc, helpers.h, error.cc; rendezvous/hash_store.cc; common/error.h's GLOO_ERROR_MSG)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascendctl.triage import match_line, triage
from ascendctl.triage.signatures import Category, by_id, trigger_pattern

TRIGGER = re.compile(trigger_pattern())
GLOO = "../third_party/gloo/gloo"  # GLOO_ERROR_MSG's "[<__FILE__>:<line>] " as torch builds gloo

# (expected signature, the emitter's line)
NAN = [
    # DeepSpeed
    ("deepspeed.loss_scale_min",
     "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."),
    ("fp16.loss_scale_collapse", "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2, reducing to 1"),
    ("fp16.loss_scale_collapse",
     "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 1.0, reducing to 1.0"),
    ("fp16.loss_scale_collapse", "Reducing dynamic loss scale from 2.0 to 1.0"),
    ("fp16.loss_scale_floor",
     "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 128.0, reducing to 128.0"),
    ("fp16.loss_scale_floor", "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1024, reducing to 1024"),
    # NVIDIA Apex amp
    ("fp16.loss_scale_collapse", "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.5"),
    # Colossal-AI
    ("fp16.loss_scale_collapse", "Overflow occurs, the loss scale is adjusted to 1.0"),
    # fairseq
    ("fp16.min_loss_scale_reached", "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. "
                                    "Try lowering the learning rate, using gradient clipping or increasing the batch size."),
    ("fp16.min_loss_scale_reached", "FloatingPointError: AMP: Minimum loss scale reached (0.0001). Your loss is probably "
                                    "exploding. Try restarting training or use fp32. 6.103515625e-05"),
    ("fairseq.nan", "FloatingPointError: gradients are Nan/Inf"),
    ("fairseq.nan", "2021-03-01 10:00:00 | INFO | fairseq.nan_detector | Detected nan/inf grad norm, dumping norms..."),
    ("fairseq.nan", "2021-03-01 10:00:00 | WARNING | fairseq.nan_detector | NaN detected in output of "
                    "encoder.layers.3.self_attn, shape: torch.Size([128, 8, 512]), forward input max: 123.0, input min: -45.0"),
    ("fairseq.nan", "2021-03-01 10:00:00 | WARNING | fairseq.nan_detector | Inf detected in output of decoder.output_projection, "
                    "shape: torch.Size([128, 8, 512]), backward"),
    # Megatron-LM
    ("megatron.nan_grad", "RuntimeError: Rank 13, node gpu-node-07, device 5, iteration 1201: Unexpected result tensor(nan, "
                          "device='cuda:5') (message='found NaN in local grad norm for bucket #0 in backward pass before "
                          "data-parallel communication collective')"),
    ("megatron.nan_grad", "Rank 13, node gpu-node-07, device 5, iteration 1201: Unexpected result tensor(inf, device='cuda:5') "
                          "(message='found Inf in local grad norm for bucket #0 in backward pass before data-parallel "
                          "communication collective')"),
    ("megatron.nan_grad", "AssertionError: Rank 5: found NaN in local grad norm in backward pass before data-parallel "
                          "communication collective. Device: 5, node: gpu-node-07"),
    ("megatron.nan_grad", "[Megatron-FSDP](check_for_nan_in_grad=True) Detected NaN or Inf in wgrad: tensor([nan, nan], "
                          "device='cuda:0')"),
    ("megatron.nan_loss", "AssertionError: Rank 3: found NaN in local forward loss calculation. Device: 3, node: gpu-node-07"),
    ("megatron.nan_loss", "RuntimeError: Rank 3, node gpu-node-07, device 3, iteration 1201: Unexpected result nan "
                          "(message='found NaN in local forward loss calculation')"),
    ("megatron.nan_loss", "Unexpected result tensor(inf, device='cuda:3') on rank 3 at iteration #1201 invocation #1 "
                          "(message='found Inf in local forward loss calculation')"),
    # Lightning
    ("lightning.not_finite", "ValueError: The loss returned in `training_step` is nan."),
    ("lightning.not_finite", "ValueError: The loss returned in `training_step` is tensor(inf, device='cuda:0', "
                             "grad_fn=<AddBackward0>)."),
    ("lightning.not_finite", "Monitored metric val_loss = nan is not finite. Previous best value was 0.123. "
                             "Signaling Trainer to stop."),
    # torch's anomaly mode
    ("torch.anomaly_nan", "RuntimeError: Function 'MulBackward0' returned nan values in its 0th output."),
    ("torch.anomaly_nan",
     "RuntimeError: Function 'ScaledDotProductEfficientAttentionBackward0' returned nan values in its 1th output."),
]

COMM = [
    # gloo's transport (each behind GLOO_ERROR_MSG's "[file:line] ", as torch raises it)
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:544] Connection closed by peer [10.0.0.2]:37284"),
    ("gloo.timeout", f"[rank1]: [{GLOO}/transport/tcp/pair.cc:534] Connection closed by peer [192.168.239.202]:35230"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:535] Read error [10.0.0.2]:37284: Connection reset by peer"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:520] Read timeout [10.0.0.2]:37284"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/buffer.cc:113] Write timeout [10.0.0.2]:37284"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.h:311] Connect timeout [10.0.0.2]:37284"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:338] writev [10.0.0.2]:37284: Broken pipe"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:797] Socket closed [10.0.0.2]:37284"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:201] Socket unexpectedly closed [10.0.0.2]:37284"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv "
                     "operation to complete"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/unbound_buffer.cc:133] Timed out waiting 1800000ms for send "
                     "operation to complete"),
    ("gloo.timeout", "RuntimeError: Application timeout caused pair closure"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, "
                     "remote=[10.0.0.1]:41234"),
    ("gloo.timeout", f"RuntimeError: [{GLOO}/rendezvous/hash_store.cc:55] Wait timeout for key(s): [\"rank_1\"]"),
    ("gloo.timeout", f"RuntimeError: Gloo connectFullMesh failed with [{GLOO}/transport/tcp/pair.cc:144] no error"),
    # the c10d store
    ("rendezvous.timeout",
     "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 3/4 clients joined."),
    ("rendezvous.timeout", "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg/0//cuda//0"),
    ("rendezvous.timeout", "torch.distributed.DistStoreError: Socket Timeout"),
    ("rendezvous.timeout", "torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to "
                           "connect to (node01, 29500)."),
    ("rendezvous.timeout", "[W socket.cpp:600] [c10d] The server socket on [node01]:29500 has timed out, will retry."),
    ("rendezvous.timeout", "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
                           "key-value store by key '0', but store->get('0') got error: Socket Timeout"),
    ("c10d.store_unreachable", "torch.distributed.DistNetworkError: The client socket has failed to connect to any network "
                               "address of (node01, 29500). The client socket has failed to connect to [node01]:29500 "
                               "(errno: 113 - No route to host)."),
    ("c10d.store_unreachable", "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
                               "store has failed. See inner exception for details."),
    ("c10d.store_connection_lost", "torch.distributed.DistNetworkError: Connection reset by peer"),
    ("c10d.store_connection_lost", "torch.distributed.DistNetworkError: Broken pipe"),
    # distributed_c10d's store-based barrier, and torchelastic's rendezvous
    ("rendezvous.timeout", "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
                           "store_based_barrier_key:1 (world_size=8, worker_count=1, timeout=0:30:00)"),
    ("rendezvous.timeout", "torch.distributed.DistStoreError: Timed out initializing process group in store based barrier on "
                           "rank 0, for key: store_based_barrier_key:1 (world_size=8, num_workers_joined=7, timeout=0:30:00 "
                           "error=Socket Timeout)"),
    ("rendezvous.timeout", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"),
    ("rendezvous.timeout", "torch.distributed.elastic.rendezvous.api.RendezvousClosedError"),
]

LAUNCH = [
    # a store address in use stays a launch error (the c10d store's server socket; gloo's listener)
    ("port.in_use", "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
                    "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server "
                    "socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use)."),
    # more processes joined the store barrier than the world size: another job shares the store
    ("c10d.barrier_overfull", "torch.distributed.DistStoreError: Timed out initializing process group in store based barrier "
                              "on rank 0, for key: store_based_barrier_key:1 (world_size=8, num_workers_joined=16, "
                              "timeout=0:15:00)"),
]

# routine lines: the step is skipped and training goes on; no failure on their own (the halving row is generic evidence
# that extract.py only counts; a run of halvings every step is tested in test_triage_engine.py)
ROUTINE_HALVINGS = [
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 1024.0, reducing to 512.0",
    "Reducing dynamic loss scale from 1024.0 to 512.0",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "Gradient overflow.  Skipping step, reducing loss scale to 16384.0",
    "Overflow occurs, the loss scale is adjusted to 32768.0",
    "2021-03-01 10:00:00 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, "
    "setting loss scale to: 64.0",
]
BENIGN = [
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step.",
    "Grad overflow on iteration 1200",
    "No Grad overflow for 1000 iterations",
    "Increasing dynamic loss scale from 512.0 to 1024.0",
    "Using static loss scale of: 128.0",
    "[deepspeed] setting loss scale from 65536.0 -> 1.0",
    "Gradient overflow, skipping update",
    "Found overflow. Skip step",
    "No overflow for consecutive 1000 steps, the loss scale is adjusted to 65536.0",
    "2021-03-01 10:00:00 | INFO | fairseq.optim.amp_optimizer | AMP: overflow detected, setting scale to to 64.0",
    "2021-03-01 10:00:00 | INFO | fairseq.trainer | AMP: skipping this batch.",
    "Metric val_loss improved by 0.010 >= min_delta = 0.0. New best score: 0.113",
    "[I socket.cpp:470] [c10d] The server socket has started to listen on [::]:29500.",
    "[I socket.cpp:787] [c10d] The client socket has connected to [node01]:29500 on [node02]:48412.",
    "[I socket.cpp:520] [c10d] No socket on (node01, 29500) is listening yet, will retry.",
    # printed by healthy runs that then connect by another address (IPv6 localhost)
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 "
    "(errno: 99 - Cannot assign requested address).",
    # the agent's keep-alive warning says only that the store's host went away, not who failed or why
    "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'node01_1234_0' has failed to send a keep-alive "
    "heartbeat to the rendezvous 'none' due to an error of type RendezvousConnectionError.",
    "[Gloo] Rank 0 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3",
    "2022-05-10 18:55:00 | INFO | torch.distributed.distributed_c10d | Rank 1: Completed store-based barrier for "
    "key:store_based_barrier_key:1 with 4 nodes.",
]
# gloo's invariant checks are a program's mismatch (a tensor of another size on one rank), not a connection failure;
# fairseq's inconsistent grad norms across workers are its own check; torch before 2.1 raised the store socket's errno
# text bare, too bare alone to name the store (extract.py reads it as the end of a wait inside a collective's traceback)
NOT_COMM = [
    "RuntimeError: Connection reset by peer",
    f"RuntimeError: [enforce fail at {GLOO}/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 881216 vs 8",
    "FloatingPointError: Fatal error: gradients are inconsistent between workers. Try --ddp-backend=legacy_ddp. Or are you "
    "mixing up different generation of GPUs in training?",
]


@pytest.mark.parametrize("expected,line", [*NAN, *COMM, *LAUNCH], ids=lambda v: v[:60] if isinstance(v, str) else v)
def test_upstream_message_is_classified_with_its_category(expected: str, line: str) -> None:
    assert TRIGGER.search(line), "the prefilter would never show this line to the signatures"
    sig = match_line(line)
    assert sig is not None and sig.id == expected, (line, sig and sig.id)
    want = Category.NAN if (expected, line) in NAN else Category.COMM_TIMEOUT if (expected, line) in COMM else Category.LAUNCH
    assert sig.category is want and sig.role == "error"


@pytest.mark.parametrize("line", ROUTINE_HALVINGS)
def test_a_routine_overflow_is_only_generic_evidence(line: str) -> None:
    sig = match_line(line)
    assert sig is not None and sig.id == "fp16.loss_scale_halving" and sig.role == "generic", (line, sig and sig.id)


@pytest.mark.parametrize("line", BENIGN)
def test_benign_lines_of_the_same_emitters_are_not_failures(line: str) -> None:
    sig = match_line(line)
    assert sig is None, (line, sig.id)


@pytest.mark.parametrize("line", NOT_COMM)
def test_lines_left_to_the_exception_row(line: str) -> None:
    sig = match_line(line)
    assert sig is not None and sig.category is Category.EXCEPTION, (line, sig and sig.id)


def test_the_new_rows_keep_their_categories() -> None:
    for sid, cat in (("fp16.min_loss_scale_reached", Category.NAN), ("fp16.loss_scale_floor", Category.NAN),
                     ("fairseq.nan", Category.NAN), ("lightning.not_finite", Category.NAN), ("megatron.nan_loss", Category.NAN),
                     ("c10d.store_unreachable", Category.COMM_TIMEOUT), ("c10d.store_connection_lost", Category.COMM_TIMEOUT)):
        assert by_id(sid).category is cat


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_apex_scale_below_one_in_scientific_notation_is_a_collapse(tmp_path: Path) -> None:
    # amp has no floor by default: its scale keeps halving below 1 and prints Python's float repr
    _write(tmp_path / "rank0.log", ["Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 6.103515625e-05"])
    report = triage([tmp_path])
    assert report.category is Category.NAN and report.first_failure is not None
    assert report.first_failure.signature == "fp16.loss_scale_collapse"


def test_one_routine_overflow_before_a_gloo_peer_closing_is_not_a_nan_failure(tmp_path: Path) -> None:
    _write(tmp_path / "rank0.log", [
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
        f"RuntimeError: [{GLOO}/transport/tcp/pair.cc:544] Connection closed by peer [10.0.0.2]:37284",
    ])
    report = triage([tmp_path])
    assert report.category is Category.COMM_TIMEOUT, report.category


def test_fairseq_minimum_loss_scale_ends_the_run_as_nan(tmp_path: Path) -> None:
    _write(tmp_path / "train.log", [
        "2021-03-01 10:00:00 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, "
        "setting loss scale to: 0.001",
        "Traceback (most recent call last):",
        '  File "/opt/fairseq/fairseq/optim/dynamic_loss_scaler.py", line 61, in check_overflow',
        "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the learning "
        "rate, using gradient clipping or increasing the batch size.",
    ])
    report = triage([tmp_path])
    assert report.category is Category.NAN, report.category
