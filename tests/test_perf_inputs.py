"""Inputs issue #31 lists for `ascendctl perf`: a 64-rank Ascend-format job with one slowed rank and one slowed link
(tests/data/perf/ascend64, made by make_ascend.py), a rank whose op counts differ (left out of the vote, and said),
and profiles of two tasks in one directory (refused with the reason)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import ExitCode
from ascendctl.perf.analyse import perf
from ascendctl.perf.model import MixedTasksError
from ascendctl.report import build_report
from tests.json_schemas import assert_valid

DATA = Path(__file__).resolve().parent / "data" / "perf"
ASCEND, ASCEND64, STRAGGLER = DATA / "ascend", DATA / "ascend64", DATA / "straggler"
runner = CliRunner()


def test_64_ranks_name_the_slowed_rank_and_the_slowed_link_and_nothing_else() -> None:
    report = perf([ASCEND64])
    assert len(report.ranks) == 64 and report.kinds == ("ascend",) and report.vote_on == "wait"
    assert report.straggler is not None and report.straggler.rank == 45
    assert report.straggler.votes == report.compared == 6 and {v.rank for v in report.votes} == {45}
    assert [v.test for v in report.votes] == ["dixon-q"] * 6  # 64 ranks: Dixon's Q, not 3 sigma
    assert [(link.src, link.dst, link.transport) for link in report.slow_links] == [(20, 21, "HCCS")]
    assert len(report.links) == 64 and report.dropped == ()
    assert report.verdict.startswith("rank 45 is the straggler in 6 of 6 allReduce calls")
    assert "slow link(s): 20->21 HCCS" in report.verdict and report.exit_code == ExitCode.CHECKS_FAILED


def drop_one_call(tree: Path, rank_dir: str) -> None:
    """Remove one allReduce from one rank's communication.json (its op counts now differ from the others')."""
    path = tree / rank_dir / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    document = json.loads(path.read_text())
    ops = document["step2"]["collective"]
    del ops[sorted(ops)[0]]
    path.write_text(json.dumps(document))


def test_a_rank_whose_op_counts_differ_is_left_out_of_the_vote_and_said(tmp_path: Path) -> None:
    shutil.copytree(ASCEND64, tmp_path / "run")
    drop_one_call(tmp_path / "run", "node1_41238_20261126095500123_ascend_pt")  # rank 8
    report = perf([tmp_path / "run"])
    assert [d.rank for d in report.dropped] == [8]
    assert report.dropped[0].reason == ("its collective calls (allReduce 5) differ from the 63 other ranks' "
                                        "(allReduce 6)")
    assert report.straggler is not None and report.straggler.rank == 45 and report.compared == 6
    assert 8 not in {v.rank for v in report.votes}
    assert report.verdict.endswith("rank 8 left out of the vote (collective calls unlike the others')")
    assert next(r for r in report.ranks if r.rank == 8).steps == 3  # its means are still shown
    result = runner.invoke(app, ["perf", str(tmp_path / "run"), "--json"])
    document: dict[str, Any] = json.loads(result.stdout)
    assert_valid("perf", document)
    assert document["dropped"] == [{"rank": 8, "reason": report.dropped[0].reason}]
    text = runner.invoke(app, ["perf", str(tmp_path / "run")]).stdout
    assert f"left out of the vote: rank 8: {report.dropped[0].reason}" in text


def test_without_the_rule_the_odd_rank_would_shrink_the_calls_compared(tmp_path: Path) -> None:
    """What the rule changes: with rank 8 in the vote the call it lacks could not be compared at all."""
    from ascendctl.perf.analyse import _compared
    from ascendctl.perf.read import read_profiles

    shutil.copytree(ASCEND64, tmp_path / "run")
    drop_one_call(tmp_path / "run", "node1_41238_20261126095500123_ascend_pt")
    profiles, _, _ = read_profiles([tmp_path / "run"])
    assert len(_compared(profiles)[1]) == 5
    assert perf([tmp_path / "run"]).compared == 6


def test_ranks_that_agree_with_no_majority_are_all_kept(tmp_path: Path) -> None:
    shutil.copytree(ASCEND, tmp_path / "run")
    units = sorted((tmp_path / "run").iterdir())
    drop_one_call(tmp_path / "run", units[0].name)
    drop_one_call(tmp_path / "run", units[1].name)  # two of four differ: no majority to differ from
    assert perf([tmp_path / "run"]).dropped == ()


@pytest.mark.parametrize("kind", ["ascend", "torch"])
def test_two_tasks_in_one_directory_are_refused_with_the_reason(tmp_path: Path, kind: str) -> None:
    run = tmp_path / "prof"
    if kind == "ascend":
        shutil.copytree(ASCEND, run)
        shutil.copytree(ASCEND / "node0_41231_20261126095500123_ascend_pt", run / "node0_5_20261127080000000_ascend_pt")
        where = ("rank 1 in", "node0_41231_20261126095500123_ascend_pt", "node0_5_20261127080000000_ascend_pt")
    else:
        shutil.copytree(STRAGGLER, run)
        shutil.copy(STRAGGLER / "rank3.pt.trace.json.gz", run / "host_77.1764150000.pt.trace.json.gz")
        where = ("rank 3 in", "rank3.pt.trace.json.gz", "host_77.1764150000.pt.trace.json.gz")
    with pytest.raises(MixedTasksError) as caught:
        perf([run])
    assert "more than one profiling task" in caught.value.message and all(w in caught.value.message for w in where)
    result = runner.invoke(app, ["perf", str(run)])
    assert result.exit_code == ExitCode.USAGE and result.stdout == ""
    assert "more than one profiling task" in result.stderr and "one task per analysis" in result.stderr
    view = build_report([run]).perf  # the report says why there is no verdict
    assert view is not None and view.verdict.startswith("not judged: profiles of more than one profiling task")
    assert view.steps is None and view.straggler == ""


def test_collects_summary_of_two_tasks_says_why_it_judged_nothing(tmp_path: Path) -> None:
    from ascendctl.bundle.summaries import summarize_perf

    shutil.copytree(STRAGGLER, tmp_path / "b" / "n1" / "files" / "prof")
    shutil.copytree(STRAGGLER, tmp_path / "b" / "n2" / "files" / "prof")  # a shared directory: every rank twice
    summary = summarize_perf(tmp_path / "b")
    assert summary is not None and summary["verdict"].startswith("not judged: profiles of more than one profiling task")
    assert summary["straggler"] is None and summary["ranks"] == 0


def test_real_nccl_traces_of_two_of_128_ranks_are_read_on_the_gpu_and_the_others_said_missing() -> None:
    """Two sampled ranks of a real 128-rank NCCL job (Holistic Trace Analysis's test data, tests/data/perf/INDEX.md):
    both read as GPU ranks (communication from the NCCL kernels), their two steps compared, and the verdict says the
    other 126 ranks were not given: a straggler among them cannot be named."""
    report = perf([DATA / "hta_nccl"])
    assert not report.problems and report.kinds == ("torch",) and [r.rank for r in report.ranks] == [0, 1]
    assert report.world_size == 128 and report.vote_on == "step communication" and report.compared == 2
    assert report.straggler is None and report.verdict.endswith(
        "profiles of 2 of the job's 128 ranks: the other 126 not compared")
    for rank in report.ranks:  # steps 551 and 552, ~0.6 s each, about a third of it in NCCL kernels
        assert rank.steps == 2 and 600 < rank.step_ms < 640 and 0.25 < (rank.comm_share or 0) < 0.40
    result = CliRunner().invoke(app, ["perf", str(DATA / "hta_nccl"), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert_valid("perf", document)
    assert document["world_size"] == 128
