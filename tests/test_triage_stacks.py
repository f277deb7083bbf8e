"""triage of a bundle that holds a `stacks` capture (issue #27): the capture is judged as `stacks` judged it, and the
verdict is the one the job record got when the capture was taken (one blame engine: jobs/hang.py asks triage).

The captures are real: worker processes with the stacks hook, signalled by the real node program (sh/stacks_node.sh),
their faulthandler dumps laid out as `collect` keeps them (`<node>/files/<node dir>/stacks/<stamp>/`). Ranks "wait in a
collective" in a stand-in module at the path torch's own has (`torch/distributed/distributed_c10d.py:all_reduce`), so
the default wait patterns apply; real torchrun on test hosts is tests/cluster/test_stacks_hosts.py.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.jobs.hang import hang_failure
from ascendctl.stacks.incident import capture_member, newest_capture
from ascendctl.stacks.merge import build_classes, build_tree, judge
from ascendctl.stacks.model import NodeCapture, StacksReport
from ascendctl.stacks.parse import parse_node_answer, rank_stack
from ascendctl.triage import triage
from tests.test_stacks import Ranks, node_dir, node_script

runner = CliRunner()

WORKER = '''
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch.distributed import distributed_c10d


def train_step(rank):
    if rank == int(os.environ.get("STUCK_RANK", "-1")):
        open(os.path.join(os.environ["READY_DIR"], str(rank)), "w").close()
        time.sleep(600)  # the stuck rank
    distributed_c10d.all_reduce(rank)


train_step(int(os.environ["RANK"]))
'''
COLLECTIVE = '''
import os, time


def all_reduce(rank):
    open(os.path.join(os.environ["READY_DIR"], str(rank)), "w").close()
    time.sleep(600)
'''
STAMP = "20261126-210000Z"
LAUNCHER_LOG = "2026-11-26T21:00:00.000000 | [default0]:hello from the job\n"


@pytest.fixture
def capture(tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    """A real capture of 4 ranks on node n1, rank 2 asleep in train_step, the others in all_reduce:
    (the node's job directory, the capture folder, the node program's output)."""
    prog = tmp_path / "prog"
    (prog / "torch" / "distributed").mkdir(parents=True)
    (prog / "worker.py").write_text(WORKER)
    (prog / "torch" / "__init__.py").write_text("")
    (prog / "torch" / "distributed" / "__init__.py").write_text("")
    (prog / "torch" / "distributed" / "distributed_c10d.py").write_text(COLLECTIVE)
    (tmp_path / "ready").mkdir()
    ranks = Ranks(f"triage-stacks-{tmp_path.name}", prog / "worker.py")
    try:
        directory = node_dir(tmp_path)
        for rank in range(4):
            ranks.start(directory, RANK=str(rank), LOCAL_RANK=str(rank), STUCK_RANK="2")
        ranks.wait_ready(0, 1, 2, 3)
        out = node_script(ranks.job, directory, stamp=STAMP, nonce="n0nce")
        yield directory, directory / "stacks" / STAMP, out
    finally:
        ranks.stop()


def as_bundle(tmp_path: Path, directory: Path, *, log: str = LAUNCHER_LOG) -> Path:
    """The node's job directory as collect keeps it: <bundle>/n1/files/<its absolute path>/..."""
    bundle = tmp_path / "bundle"
    kept = bundle / "n1" / "files" / str(directory).lstrip("/")
    shutil.copytree(directory / "stacks", kept / "stacks")
    (kept / "launcher.log").write_text(log)
    return bundle


def test_a_bundle_with_a_capture_names_the_rank_outside_the_collective_with_its_line(capture: tuple[Path, Path, str],
                                                                                     tmp_path: Path) -> None:
    directory, folder, _ = capture
    report = triage([as_bundle(tmp_path, directory)])
    f = report.first_failure
    assert report.category is not None and report.category.value == "HANG" and report.rule == "stacks", report.reason
    assert f is not None and (f.node, f.rank, f.local_rank) == ("n1", 2, 2)
    assert f.line == WORKER.splitlines().index("        time.sleep(600)  # the stuck rank") + 1
    assert f.file.endswith("prog/worker.py") and "train_step" in f.text and "all_reduce" in f.text
    assert any(f"stacks/{STAMP}/rank-2.{f.pid}.txt" in h for h in report.hints)  # the dump it was read from
    assert report.headline() == "HANG on node n1, rank 2"
    assert sorted(v.rank for v in report.victims if v.rank is not None) == [0, 1, 3]
    assert all(v.how.startswith("waiting at ") and "distributed_c10d.py" in v.how for v in report.victims)
    assert any(STAMP in h for h in report.hints)


def test_the_verdict_recorded_when_the_capture_was_taken_is_the_one_triage_gives(capture: tuple[Path, Path, str],
                                                                                tmp_path: Path) -> None:
    directory, _, out = capture
    answer = parse_node_answer(out, "n0nce")
    ranks = tuple(rank_stack("n1", r, incident=answer.incident, shown_bytes=262144) for r in answer.ranks)
    classes, verdict = judge(build_classes(ranks))
    node = NodeCapture("n1", answer.incident, answer.signalled, answer.py_spy, ranks)
    recorded = hang_failure(StacksReport("job-1", STAMP, (node,), build_tree(ranks), classes, verdict))
    report = triage([as_bundle(tmp_path, directory)])
    assert recorded is not None and report.first_failure is not None
    assert (recorded.category, recorded.node, recorded.rank, recorded.line, recorded.headline, recorded.rule) == \
        ("HANG", "n1", 2, report.first_failure.line, report.headline(), "stacks")
    assert [(v.rank, v.how) for v in recorded.victims] == [(v.rank, v.how) for v in report.victims]


def test_the_same_bundle_packed_gives_the_same_verdict_and_json(capture: tuple[Path, Path, str], tmp_path: Path) -> None:
    directory, _, _ = capture
    bundle = as_bundle(tmp_path, directory)
    packed = tmp_path / "bundle.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(bundle, arcname="bundle")
    result = runner.invoke(app, ["triage", str(packed), "--json"])
    doc = json.loads(result.stdout)
    assert doc["category"] == "HANG" and (doc["first_failure"]["node"], doc["first_failure"]["rank"]) == ("n1", 2), doc
    direct = triage([bundle]).first_failure
    assert direct is not None and doc["first_failure"]["line"] == direct.line


def test_an_own_error_before_the_hang_wins_over_the_capture(capture: tuple[Path, Path, str], tmp_path: Path) -> None:
    """A rank that raised is the cause; the capture taken later shows its victims waiting (and it may be in it too)."""
    directory, _, _ = capture
    log = (LAUNCHER_LOG + "2026-11-26T20:59:00.000000 | [default1]:Traceback (most recent call last):\n"
           "2026-11-26T20:59:00.000000 | [default1]:  File \"/job/train.py\", line 9, in <module>\n"
           "2026-11-26T20:59:00.000000 | [default1]:ValueError: bad shape for the batch\n")
    report = triage([as_bundle(tmp_path, directory, log=log)])
    assert report.category is not None and report.category.value == "EXCEPTION", report.reason


def test_captures_that_name_no_suspect_or_are_garbage_leave_the_verdict_to_the_logs(tmp_path: Path) -> None:
    folder = tmp_path / "bundle" / "n1" / "files" / "job" / "stacks" / STAMP
    folder.mkdir(parents=True)
    (folder / "ranks.txt").write_text("pid rank local_rank launcher status\n12 0 0 torchrun dumped\nnot a row\n")
    (folder / "rank-0.12.txt").write_bytes(b"\x00\xffnot a dump\n" * 100)
    (folder / "rank-1.13.py-spy.json").write_text("{not json")
    (folder.parent / "live").mkdir()
    (folder.parent / "live" / "rank-0.12.txt").write_text("ignored: not a capture")
    (tmp_path / "bundle" / "n1" / "files" / "job" / "launcher.log").write_text(LAUNCHER_LOG)
    report = triage([tmp_path / "bundle"])
    assert report.category is not None and report.category.value != "HANG" and report.rule != "stacks"
    judged = newest_capture([("n1", STAMP, "rank-1.13.py-spy.json", "{not json", 9, "x")])
    assert judged is not None and judged.verdict.kind == "no_stacks"
    assert judged.ranks[0].notes and judged.ranks[0].notes[0].startswith("py-spy: unreadable answer")


@pytest.mark.parametrize("parts, expected", [
    (("n1", "files", "job", "stacks", STAMP, "rank-3.77.txt"), (STAMP, "rank-3.77.txt")),
    (("stacks", STAMP + "-2", "ranks.txt"), (STAMP + "-2", "ranks.txt")),
    (("stacks", STAMP, "rank-3.77.py-spy.json.err"), (STAMP, "rank-3.77.py-spy.json.err")),
    (("stacks", "live", "rank-3.77.txt"), None),  # not a capture: the hook's own file
    (("stacks", STAMP, "notes.txt"), None),
    (("logs", STAMP, "rank-3.77.txt"), None),
])
def test_which_paths_are_a_captures_files(parts: tuple[str, ...], expected: tuple[str, str] | None) -> None:
    assert capture_member(parts) == expected


def test_the_newest_capture_is_judged() -> None:
    older = ("n1", STAMP, "ranks.txt", "pid rank local_rank launcher status\n1 0 0 torchrun exited\n", 10, "a")
    newer = ("n1", STAMP + "-2", "ranks.txt", "pid rank local_rank launcher status\n1 0 0 torchrun timeout\n", 10, "b")
    later = ("n1", "20261126-210001Z", "ranks.txt", "pid rank local_rank launcher status\n1 0 0 torchrun nohook\n", 10, "c")
    judged = newest_capture([older, later, newer])
    assert judged is not None and judged.folder == "20261126-210001Z" and judged.unanswered == (("n1", 0, "nohook"),)
    judged = newest_capture([older, newer])
    assert judged is not None and judged.folder == STAMP + "-2"


def test_triage_json_keeps_the_capture_and_the_html_report_shows_its_classes_and_tree(capture: tuple[Path, Path, str],
                                                                                      tmp_path: Path) -> None:
    from html.parser import HTMLParser

    from ascendctl.report import build_report
    from ascendctl.report.html import render_html
    from ascendctl.triage.model import TriageReport
    from tests.json_schemas import assert_valid

    directory, _, _ = capture
    bundle = as_bundle(tmp_path, directory)
    result = runner.invoke(app, ["triage", str(bundle), "--json"])
    doc = json.loads(result.stdout)
    assert_valid("triage", doc)
    stacks = doc["stacks"]
    assert stacks["capture"] == STAMP and stacks["verdict"]["kind"] == "suspect" and stacks["verdict"]["suspects"] == [2]
    assert [c["ranks"] for c in stacks["classes"]] == [[2], [0, 1, 3]] and stacks["classes"][0]["suspect"]
    # the report of that document (as of the bundle itself) shows the capture
    for verdict in (TriageReport.from_dict(doc), triage([bundle])):
        page = render_html(build_report([], triage=verdict))
        assert 'id="stacks"' in page and 'data-suspect="yes"' in page and "worker.py" in page
        tree = page.split('data-field="stacks-tree">', 1)[1].split("</pre>", 1)[0]
        assert tree.splitlines()[0] == "ranks 0-3" and any("rank 2" in line for line in tree.splitlines()), tree
        HTMLParser().feed(page)  # well-formed enough to parse
    bad = dict(doc, stacks={**stacks, "tree": {"frame": None, "ranks": "x"}})
    with pytest.raises(Exception, match="stacks capture with bad content"):
        build_report([], triage=TriageReport.from_dict(bad))


def test_without_the_ranks_table_the_local_rank_comes_from_the_hooks_header() -> None:
    dump = ("# ascendctl-stacks rank=5 local_rank=1 launcher=torchrun pid=77 main_thread=0x0000000000000001 python=3.11\n"
            "Current thread 0x0000000000000001 (most recent call first):\n"
            '  File "/job/train.py", line 9 in step\n  File "/job/train.py", line 20 in <module>\n')
    judged = newest_capture([("n2", STAMP, "rank-5.77.txt", dump, len(dump), "n2/stacks/x/rank-5.77.txt")])
    assert judged is not None and [(r.rank, r.local_rank, r.files) for r in judged.ranks] == [
        (5, 1, ("n2/stacks/x/rank-5.77.txt",))]
