"""The perf section of the HTML report: `ascendctl perf`'s verdict with its evidence, the rank x step map and the
source x destination bandwidth matrix; only what the verdict names is marked; large jobs are bounded and say so."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.perf.analyse import analyse
from ascendctl.perf.model import RankInput, StepTimes
from ascendctl.perf.read import read_profiles
from ascendctl.report import build_report
from ascendctl.report.views import MAX_PERF_HEAT_RANKS, MAX_PERF_HEAT_STEPS, PerfView, perf_view
from tests.html_dom import parse
from tests.report_synth import write_bundle

DATA = Path(__file__).resolve().parent / "data" / "perf"
STRAGGLER, EVEN, ASCEND = DATA / "straggler", DATA / "even", DATA / "ascend"
runner = CliRunner()


def view_of(path: Path) -> PerfView:
    profiles, problems, _ = read_profiles([path])
    view = perf_view(analyse(profiles, problems), profiles)
    assert view is not None
    return view


def test_the_view_marks_the_named_straggler_and_the_named_slow_link_only() -> None:
    view = view_of(ASCEND)
    assert view.verdict.startswith("rank 1 is the straggler") and view.straggler == "rank 1"
    assert view.slow_links and view.slow_links[0].startswith("2->3 HCCS")
    assert any(e.startswith("votes for rank 1: allReduce") for e in view.evidence)
    steps = view.steps
    assert steps is not None and steps.rows == ("rank 0", "rank 1", "rank 2", "rank 3")
    assert steps.cols == ("1", "2", "3", "4", "5", "6") and len(steps.cells) == 24
    assert steps.marked == ("rank 1",)
    assert {c.title.split(",")[0] for c in steps.cells if c.status == "slow"} == {"rank 1"}
    # the straggler waits least: its cells are the greenest
    green = {c.title.split(",")[0]: int(c.fill.split(",")[1]) for c in steps.cells}
    assert green["rank 1"] == max(green.values())
    links = view.links
    assert links is not None and links.marked == ("rank 2", "rank 3")
    slow = [c for c in links.cells if c.status == "slow"]
    assert len(slow) == 1 and slow[0].title.startswith("2->3 HCCS") and "slow" in slow[0].title
    assert all(c.status == "ok" for c in links.cells if c is not slow[0])
    # source on the row, destination on the column
    assert (slow[0].y // links.cell, slow[0].x // links.cell) == (2, 3)


def test_a_healthy_job_marks_nobody() -> None:
    view = view_of(EVEN)
    assert view.verdict.startswith("no straggler") and view.straggler == "" and view.slow_links == ()
    assert view.steps is not None and view.steps.marked == ()
    assert all(c.status in ("ok", "unmeasured") for c in view.steps.cells)
    assert view.links is None and view.notes == ()


def test_many_ranks_and_steps_are_bounded_the_straggler_kept_and_the_fold_said() -> None:
    ranks, steps, slow = 300, 150, 217
    profiles = [RankInput(r, "torch", (f"rank{r}",), tuple(
        StepTimes(s, 100.0, 90.0 if r != slow else 99.0, 10.0 if r != slow else 1.0, 10.0 if r != slow else 1.0, 0.0)
        for s in range(1, steps + 1))) for r in range(ranks)]
    report = analyse(profiles)
    assert report.straggler is not None and report.straggler.rank == slow
    view = perf_view(report, profiles)
    assert view is not None and view.steps is not None
    assert len(view.steps.rows) <= MAX_PERF_HEAT_RANKS and len(view.steps.cols) <= MAX_PERF_HEAT_STEPS
    assert f"rank {slow}" in view.steps.rows and view.steps.marked == (f"rank {slow}",)
    assert len(view.steps.cells) == len(view.steps.rows) * len(view.steps.cols)
    assert any("300 ranks" in n for n in view.notes) and any("150 steps" in n for n in view.notes)


def test_the_page_shows_the_verdict_and_both_maps(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(ASCEND), "-o", str(out)])
    assert result.exit_code == 0, result.output
    root = parse(out.read_text())
    [section] = root.find_all("section", id="perf")
    assert section.find("div", data_field="perf-verdict").text().startswith("rank 1 is the straggler in 12 of 12")
    assert len(section.find_all("rect", class_="rank-step")) == 24
    assert len(section.find_all("rect", class_="link")) == 4
    marked = [t.text() for t in section.find_all("text", class_="slow")]
    assert sorted(marked) == ["rank 1", "rank 2", "rank 2", "rank 3", "rank 3"]  # straggler row; both ends, row and column
    assert "rank 1" in section.find("p", data_field="perf-straggler").text()
    assert "perf" in [a.text() for a in root.find_all("a")]


def test_a_bundle_holding_profiles_gets_the_section_and_unreadable_files_are_named(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "bundle", 2, 1)
    shutil.copytree(ASCEND, bundle / "n1" / "profile")
    bad = bundle / "n2" / "profile" / "x<script>_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    bad.mkdir(parents=True)
    (bad / "step_trace_time.csv").write_text("Step,Computing\n1,abc\n")
    report = build_report([bundle])
    assert report.perf is not None and report.perf.straggler == "rank 1"
    assert any("x<script>_ascend_pt" in n and "not a number" in n for n in report.perf.notes)
    out = tmp_path / "report.html"
    assert runner.invoke(app, ["report", str(bundle), "-o", str(out)]).exit_code == 0
    root = parse(out.read_text())
    assert root.find_all("section", id="perf")
    assert len(root.find_all("script")) == 1 and "x<script>_ascend_pt" in root.text()  # the page's own script; text


def test_a_bundle_without_profiles_has_no_perf_section(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "bundle", 2, 1)
    assert build_report([bundle]).perf is None
