"""Issue #26, "the culprit is the rank that is missing": a rank whose traceback ends inside a torch.distributed
collective, barrier or store wait was WAITING (a communication wait), not failing on its own; one that waited in HF
`main_process_first`'s barrier on entering it names the main process it waited for.

Lines are written as torch 2.x prints them (`[rankN]:` prefixes, Python 3.10/3.11 tracebacks); the frames are those of
torch/distributed/distributed_c10d.py and c10d_logger.py, transformers/training_args.py and accelerate/state.py.
"""

from __future__ import annotations

from pathlib import Path

from ascendctl.triage import triage
from ascendctl.triage.signatures import Category

SITE = "/usr/local/lib/python3.10/dist-packages"


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def prefixed(rank: int, lines: list[str]) -> list[str]:
    return [f"[rank{rank}]: {line}" if line.strip() else f"[rank{rank}]:" for line in lines]


def barrier_frames() -> list[str]:
    return [f'  File "{SITE}/torch/distributed/c10d_logger.py", line 79, in wrapper',
            "    return func(*args, **kwargs)",
            "           ^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{SITE}/torch/distributed/distributed_c10d.py", line 3936, in barrier',
            "    work = default_pg.barrier(opts=opts)"]


def hf_main_first(rank: int, *, with_line: str = 'with training_args.main_process_first(desc="dataset map tokenization"):',
                  exit_path: bool = False, cut_after_wrapper: bool = True) -> list[str]:
    """A transformers Trainer script's rank waiting in TrainingArguments.main_process_first's dist.barrier()."""
    lines = ["Traceback (most recent call last):",
             '  File "/workspace/train.py", line 312, in <module>',
             "    main()",
             '  File "/workspace/train.py", line 201, in main',
             f"    {with_line}",
             f'  File "/usr/lib/python3.10/contextlib.py", line {153 if exit_path else 135}, in '
             f'{"__exit__" if exit_path else "__enter__"}',
             "    next(self.gen)" if exit_path else "    return next(self.gen)",
             f'  File "{SITE}/transformers/training_args.py", line 2410, in main_process_first',
             "    dist.barrier()"]
    frames = barrier_frames()
    return prefixed(rank, lines + (frames[:3] if cut_after_wrapper else frames))


def test_ranks_waiting_in_main_process_first_name_rank_0_busy_elsewhere(tmp_path: Path) -> None:
    # one host, 4 ranks: rank 0 is tokenizing; ranks 1-3 wait in the barrier until the process group timeout; the
    # tracebacks are cut after the c10d_logger frame (no exception line at all)
    lines = ["Running tokenizer on dataset (num_proc=8):  97%|█████████▋| 990000/1020000 [29:50<00:54, 550.1 examples/s]"]
    for rank in (3, 1, 2):
        lines += hf_main_first(rank)
    write(tmp_path / "output.log", lines)
    report = triage([tmp_path])
    assert report.category is Category.COMM_TIMEOUT and report.rule == "main_first"
    assert report.culprit_rank == 0
    assert "main_process_first" in report.reason and "one node assumed" in report.reason
    assert {f.signature for f in report.findings} == {"main_first.local_wait"}
    assert all(f.category is Category.COMM_TIMEOUT for f in report.findings)
    assert {v.rank for v in report.victims} == {1, 2, 3}


def test_local_false_and_accelerate_main_process_first_wait_for_global_rank_0(tmp_path: Path) -> None:
    hf = tmp_path / "hf"
    write(hf / "output.log", hf_main_first(
        5, with_line='with training_args.main_process_first(local=False, desc="grouping texts"):'))
    report = triage([hf])
    assert [f.signature for f in report.findings] == ["main_first.wait"] and report.findings[0].peer_rank == 0
    assert report.rule == "main_first" and report.culprit_rank == 0 and report.confidence == "medium"

    acc = tmp_path / "acc"
    tb = ["Traceback (most recent call last):",
          '  File "/workspace/sft.py", line 90, in <module>',
          "    with accelerator.main_process_first():",
          '  File "/usr/lib/python3.10/contextlib.py", line 135, in __enter__',
          "    return next(self.gen)",
          f'  File "{SITE}/accelerate/accelerator.py", line 905, in main_process_first',
          "    with self.state.main_process_first():",
          '  File "/usr/lib/python3.10/contextlib.py", line 135, in __enter__',
          "    return next(self.gen)",
          f'  File "{SITE}/accelerate/state.py", line 462, in main_process_first',
          "    yield from self._goes_first(self.is_main_process)",
          f'  File "{SITE}/accelerate/state.py", line 346, in _goes_first',
          "    self.wait_for_everyone()",
          f'  File "{SITE}/accelerate/state.py", line 340, in wait_for_everyone',
          "    torch.distributed.barrier()",
          *barrier_frames(),
          "torch.distributed.DistNetworkError: Connection reset by peer"]
    for node, rank in (("node1", 1), ("node2", 9)):
        write(acc / node / "rank.log", prefixed(rank, tb))
    report = triage([acc])
    # the DistNetworkError raised by the barrier itself is how the wait ended, not the rank's own EXCEPTION
    assert report.category is Category.COMM_TIMEOUT and report.rule == "main_first" and report.culprit_rank == 0
    assert not [f for f in report.findings if f.category is Category.EXCEPTION]


def test_a_cut_traceback_in_a_collective_is_a_wait_and_the_silent_rank_is_the_culprit(tmp_path: Path) -> None:
    # torch 2.x, 4 ranks: ranks 0, 1, 3 were in all_reduce (their tracebacks cut at the paste boundary); rank 2 logged
    # nothing (stuck in its dataloader); no main_process_first, so nobody is named by the traceback itself
    lines: list[str] = []
    for rank in (0, 1, 3):
        lines += prefixed(rank, ["Traceback (most recent call last):",
                                 '  File "/workspace/train.py", line 140, in train_step',
                                 "    dist.all_reduce(loss, op=dist.ReduceOp.SUM)",
                                 f'  File "{SITE}/torch/distributed/c10d_logger.py", line 83, in wrapper',
                                 "    return func(*args, **kwargs)",
                                 f'  File "{SITE}/torch/distributed/distributed_c10d.py", line 2501, in all_reduce',
                                 "    work = group.allreduce([tensor], opts)"])
    write(tmp_path / "output.log", lines)
    report = triage([tmp_path])
    assert {f.signature for f in report.findings} == {"torch.collective_wait"}
    assert report.category is Category.COMM_TIMEOUT and report.rule == "hang" and report.culprit_rank == 2


def test_a_cut_traceback_whose_last_source_line_is_dist_barrier_is_a_wait(tmp_path: Path) -> None:
    write(tmp_path / "output.log", prefixed(1, ["Traceback (most recent call last):",
                                                '  File "/workspace/eval.py", line 77, in evaluate',
                                                "    dist.barrier()"]))
    report = triage([tmp_path])
    assert [f.signature for f in report.findings] == ["torch.collective_wait"] and report.category is Category.COMM_TIMEOUT


def test_an_exception_in_the_ranks_own_code_under_a_dataloader_stays_its_own_exception(tmp_path: Path) -> None:
    # the traceback passes through torch.distributed (elastic's @record wrapper) and a DataLoader: the rank raised
    lines = prefixed(2, ["Traceback (most recent call last):",
                         '  File "/workspace/train.py", line 312, in <module>',
                         "    main()",
                         f'  File "{SITE}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper',
                         "    return f(*args, **kwargs)",
                         '  File "/workspace/train.py", line 260, in main',
                         "    for batch in loader:",
                         f'  File "{SITE}/torch/utils/data/dataloader.py", line 701, in __next__',
                         "    data = self._next_data()",
                         f'  File "{SITE}/torch/utils/data/_utils/fetch.py", line 55, in fetch',
                         "    return self.collate_fn(data)",
                         '  File "/workspace/data.py", line 48, in collate',
                         "    raise ValueError(f\"sequence longer than max_len: {n}\")",
                         "ValueError: sequence longer than max_len: 4097"])
    write(tmp_path / "output.log", lines)
    report = triage([tmp_path])
    assert report.category is Category.EXCEPTION and report.rule == "own_error" and report.culprit_rank == 2
    assert not [f for f in report.findings if f.category is Category.COMM_TIMEOUT]


def test_a_real_exception_raised_inside_a_collective_call_stays_the_ranks_own(tmp_path: Path) -> None:
    # innermost frame all_reduce, but what it raised is an argument error of this rank: not a wait
    lines = prefixed(1, ["Traceback (most recent call last):",
                         '  File "/workspace/train.py", line 140, in train_step',
                         "    dist.all_reduce(stats)",
                         f'  File "{SITE}/torch/distributed/c10d_logger.py", line 83, in wrapper',
                         "    return func(*args, **kwargs)",
                         f'  File "{SITE}/torch/distributed/distributed_c10d.py", line 2489, in all_reduce',
                         '    _check_single_tensor(tensor, "tensor")',
                         f'  File "{SITE}/torch/distributed/distributed_c10d.py", line 1069, in _check_single_tensor',
                         "    raise TypeError(",
                         "TypeError: Invalid function argument. Expected parameter `tensor` of type torch.Tensor"])
    write(tmp_path / "output.log", lines)
    report = triage([tmp_path])
    assert report.category is Category.EXCEPTION and report.culprit_rank == 1
    assert not [f for f in report.findings if f.signature == "torch.collective_wait"]


def test_waiting_on_the_exit_path_or_on_several_nodes_names_no_main_process(tmp_path: Path) -> None:
    # on __exit__ the waiting rank is a main process itself (it waits for the others): nobody is named
    write(tmp_path / "exit" / "output.log", hf_main_first(0, exit_path=True))
    report = triage([tmp_path / "exit"])
    assert [f.signature for f in report.findings] == ["torch.collective_wait"] and report.rule != "main_first"
    # local=True (the default) on two known nodes: the late main may be local rank 0 of either node
    for node, rank in (("node1", 1), ("node2", 9)):
        write(tmp_path / "multi" / node / "rank.log", hf_main_first(rank))
    report = triage([tmp_path / "multi"])
    assert report.rule != "main_first" and report.category is Category.COMM_TIMEOUT


def test_an_errno_runtime_error_raised_by_a_store_wait_is_the_wait_not_an_own_exception(tmp_path: Path) -> None:
    # torch before 2.1: the store client's socket error surfaces as a bare RuntimeError inside the barrier
    lines = ["Traceback (most recent call last):",
             '  File "/workspace/train.py", line 140, in main',
             "    torch.distributed.barrier()",
             '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 2709, in barrier',
             "    work = default_pg.barrier(opts=opts)",
             "RuntimeError: Connection reset by peer"]
    write(tmp_path / "output.log", prefixed(3, lines))
    report = triage([tmp_path])
    assert [f.signature for f in report.findings] == ["torch.collective_wait"] and report.category is Category.COMM_TIMEOUT
    assert "Connection reset by peer" in report.findings[0].text
