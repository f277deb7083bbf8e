"""`ascendctl report`: the structure of each view of the generated page, escaping of node strings, no network
reference, folding of large jobs, bad input, and `--html` on triage and preflight.

Pages are parsed (tests/html_dom.py) and checked element by element; inputs are written by
tests/report_synth.py or built here from log lines, into tmp_path.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.report import build_report, write_report
from ascendctl.report.html import render_html
from tests.html_dom import Element, external_urls, parse
from tests.report_synth import HOSTILE, preflight_doc, triage_doc, write_all, write_bundle

runner = CliRunner()
GOLDEN = Path(__file__).resolve().parent / "golden" / "report"
NPU_INFO = (Path(__file__).resolve().parent / "data/samples/ascend/npu-smi-info_910B4_24.1.rc3.txt").read_text()


def page(paths: list[Path], out: Path) -> Element:
    write_report(paths, out)
    return parse(out.read_text(encoding="utf-8"))


@pytest.fixture
def small(tmp_path: Path) -> Element:
    """3 nodes x 2 ranks: bundle metadata, triage and preflight documents."""
    return page(write_all(tmp_path / "in", 3, 2, npu_info=NPU_INFO), tmp_path / "r.html")


def view(root: Element, name: str) -> Element:
    return root.find("section", data_view=name)


def outline(root: Element) -> dict[str, Any]:
    """The page's skeleton: sections, headings, lanes and their roles, matrix shape, device rows, bars."""
    lanes = root.find_all("div", class_="lane")
    return {
        "sections": [s.attrs["id"] for s in root.find_all("section")],
        "headings": [h.text() for h in root.find_all("h2") + root.find_all("h3")],
        "lanes": [[el.attrs["data-node"], el.attrs["data-rank"], el.attrs["data-role"],
                   sorted({c.attrs.get("class", "") for c in el.find("svg").iter()} - {""})] for el in lanes],
        "matrix": [[row.find("th").text()] + [td.attrs["data-status"] for td in row.find_all("td")]
                   for row in view(root, "preflight").find("table", class_="matrix").find("tbody").find_all("tr")],
        "devices": [[row.attrs["data-nodes"], row.attrs["data-anomaly"]]
                    for row in view(root, "devices").find("tbody").find_all("tr")],
        "bars": [[g.attrs["data-rank"], g.attrs["data-straggler"], g.attrs["data-flagged"]]
                 for g in view(root, "performance").find_all("g", class_="bar")],
    }


def test_page_structure_matches_the_golden_outline(small: Element, update_golden: bool) -> None:
    golden = GOLDEN / "small_outline.json"
    got = outline(small)
    if update_golden:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(golden.read_text())


def test_verdict_view_names_the_culprit_rule_confidence_victims_evidence_and_hints(small: Element) -> None:
    v = view(small, "verdict")
    assert v.find("div", class_="headline").text() == "EXCEPTION on node n02, rank 3, device 1"
    assert v.find("dd", data_field="category").text() == "EXCEPTION"
    assert v.find("dd", data_field="culprit").text() == "node n02, rank 3"
    assert v.find("dd", data_field="culprit_reason").text() == "own_error"
    assert v.find("dd", data_field="confidence").text() == "high"
    assert [li.text() for li in v.find("ul", class_="victims").find_all("li")] == [
        "n[01-03] ranks 0-2,4-5: communication error (gloo.connection_closed) naming rank 3"]
    assert "traceback" in v.find("ul", class_="hints").text()
    evidence = view(small, "evidence")
    first = evidence.find("tr", data_evidence="first")
    assert first.find("td", class_="where").text() == "bundle.tar.gz:n02/files/root/logs/n02/launcher.log:54"
    ranks = evidence.find("table", id="ranks").find("tbody").find_all("tr")
    assert [r.attrs["data-role"] for r in ranks] == ["culprit"] + ["victim"] * 5


def test_timeline_has_a_lane_per_rank_grouped_by_node_and_the_culprit_lane_stands_out(small: Element) -> None:
    t = view(small, "timeline")
    nodes = t.find_all("div", class_="node")
    assert [n.attrs["data-node"] for n in nodes] == ["n01", "n02", "n03"]
    lanes = t.find_all("div", class_="lane")
    assert [(el.attrs["data-node"], el.attrs["data-rank"]) for el in lanes] == [
        ("n01", "0"), ("n01", "1"), ("n02", "2"), ("n02", "3"), ("n03", "4"), ("n03", "5")]
    culprit = [el for el in lanes if el.attrs["data-role"] == "culprit"]
    assert len(culprit) == 1 and culprit[0].attrs["data-rank"] == "3" and "role-culprit" in culprit[0].classes()
    assert culprit[0].find("b", class_="badge").text() == "culprit"
    marks = {el.attrs.get("class") for el in culprit[0].find("svg").iter()}
    assert {"m-error", "m-exit", "m-progress", "m-teardown"} <= marks and "m-comm" not in marks
    for victim in (el for el in lanes if el.attrs["data-role"] == "victim"):
        kinds = {el.attrs.get("class") for el in victim.find("svg").iter()}
        assert "role-victim" in victim.classes() and {"m-comm", "m-stop", "m-exit"} <= kinds and "m-error" not in kinds
    # every mark says what it is on hover, with its time
    error = culprit[0].find("circle", class_="m-error")
    assert error.find("title").text().startswith("first own error at 2026-11-23T16:16:32")
    # marks sit on one time axis: the culprit's error comes before every communication error
    comm_x = [float(p.attrs["d"].split()[0][1:]) for el in lanes for p in el.find_all("path", class_="m-comm")]
    assert float(error.attrs["cx"]) < min(comm_x)


def test_large_jobs_fold_alike_nodes_into_one_expandable_lane_and_say_so(tmp_path: Path) -> None:
    root = page(write_all(tmp_path / "in", 64, 16), tmp_path / "r.html")
    t = view(root, "timeline")
    folds = t.find_all("details", class_="fold")
    assert len(folds) == 1 and folds[0].attrs["data-count"] == "63" and folds[0].attrs["data-nodes"] == "n[01,03-64]"
    summary_lane = folds[0].find("summary").find("div", class_="lane")
    assert summary_lane.attrs["data-node"] == "n[01,03-64]" and summary_lane.find_all("rect", class_="band")
    assert "63 nodes (1008 lanes) behaved alike" in folds[0].find("p", class_="note").text()
    # the culprit's node is never folded: all 16 of its lanes are drawn
    culprit_node = t.find("div", class_="node", data_node="n02")
    assert len(culprit_node.find_all("div", class_="lane")) == 16
    assert len(t.find_all("div", class_="lane")) < 64 * 16 / 10
    notes = [li.text() for li in root.find("ul", class_="notes").find_all("li")]
    assert any(n.startswith("timeline: n[01,03-64]: 63 nodes") for n in notes), notes
    assert any(n.startswith("performance: 1024 ranks; drawn:") for n in notes), notes


def test_preflight_matrix_has_nodes_by_checks_with_hover_summaries_cluster_rows_and_hints(small: Element) -> None:
    p = view(small, "preflight")
    matrix = p.find("table", class_="matrix")
    assert [th.text() for th in matrix.find("thead").find_all("th", class_="check")][:4] == ["ssh", "ntp", "clock_skew", "mtu"]
    rows = {r.attrs["data-nodes"]: r for r in matrix.find("tbody").find_all("tr")}
    assert list(rows) == ["n01", "n02", "n03"]
    mtu = rows["n03"].find_all("td")[3]
    assert mtu.attrs["data-status"] == "fail" and "s-fail" in mtu.classes()
    assert mtu.attrs["title"].startswith("mtu: fail: eth0 MTU 1500 < 9000 ") and "hint: set MTU 9000" in mtu.attrs["title"]
    assert rows["n03"].find_all("td")[1].attrs["data-status"] == "warn"
    assert rows["n01"].find_all("td")[6].attrs["data-status"] == "skip"
    cluster = {r.attrs["data-check"]: r.find("td").attrs["data-status"] for r in p.find("table", class_="cluster").find_all("tr")
               if "data-check" in r.attrs}
    assert cluster == {"clock_skew": "pass", "path_mtu": "fail"}
    problems = p.find("ul", class_="problems").find_all("li")
    assert [li.attrs["data-status"] for li in problems] == ["fail", "warn"]
    assert "hint: set MTU 9000 on eth0 and the switch port" in problems[0].text()


def test_preflight_rows_of_nodes_that_all_passed_alike_fold(tmp_path: Path) -> None:
    root = page(write_all(tmp_path / "in", 64, 2), tmp_path / "r.html")
    rows = view(root, "preflight").find("table", class_="matrix").find("tbody").find_all("tr")
    assert [(r.attrs["data-nodes"], r.attrs["data-count"]) for r in rows] == [
        ("n01", "1"), ("n[02,04-63]", "61"), ("n03", "1"), ("n64", "1")]


def test_devices_view_highlights_the_node_that_differs_from_the_majority(small: Element) -> None:
    d = view(small, "devices")
    rows = d.find("tbody").find_all("tr")
    assert [(r.attrs["data-nodes"], r.attrs["data-anomaly"]) for r in rows] == [("n03", "yes"), ("n[01-02]", "no")]
    anomalies = rows[0].find("td", class_="anomalies").text()
    assert "1 NPUs where most nodes have 8" in anomalies and "NPU 0 DOWN" in anomalies and "NPU1-NPU2 HCCS->PIX" in anomalies
    assert "anomaly" in rows[0].classes() and rows[1].find_all("td")[0].text() == "8"


def test_performance_view_marks_stragglers_and_the_comm_share_limit(small: Element) -> None:
    p = view(small, "performance")
    bars = p.find_all("g", class_="bar")
    assert len(bars) == 6
    slow = [b.attrs["data-rank"] for b in bars if b.attrs["data-straggler"] == "yes"]
    assert slow == ["n02/PROF_0001 dev 0", "n02/PROF_0001 dev 1"]
    assert all(b.find("rect", class_="share").attrs["class"] == "share flagged" for b in bars if b.attrs["data-flagged"] == "yes")
    limit = p.find("line", class_="limit")
    assert limit.find("title").text() == "15% of the step in communication"
    straggler_label = [b.find("text") for b in bars if b.attrs["data-straggler"] == "yes"][0]
    assert straggler_label.text().endswith("(straggler)") and straggler_label.attrs["class"] == "straggler"
    # what made them stragglers: outliers.py's rule as summary.json records it (summaries.STRAGGLER_RULE)
    assert ("a straggler's step is above 120.00 ms in both halves of its steps: 1.2x and 3 spreads over the healthy "
            "ranks' median, the larger (the healthy ranks vary by 5%)") in p.find("p", class_="meta").text()


def test_hostile_node_strings_are_text_and_nothing_is_fetched(small: Element) -> None:
    scripts = small.find_all("script")
    assert len(scripts) == 1 and "alert" not in scripts[0].text()  # ours, the optional sorter
    assert not small.find_all("img")
    evidence = view(small, "evidence").find("tr", data_evidence="first").find("pre", class_="logline").text()
    assert evidence.endswith(HOSTILE)
    problems = view(small, "preflight").find("ul", class_="problems").text()
    assert HOSTILE in problems
    assert external_urls(small) == []
    csp = small.find("meta", http_equiv="Content-Security-Policy").attrs["content"]
    assert csp.startswith("default-src 'none';")
    # every SVG stays one closed element: the `</svg>` in the log line did not end a chart
    for svg in small.find_all("svg"):
        assert svg.parent is not None and svg.parent.tag in ("div", "span", "section")


def test_external_url_check_finds_what_it_looks_for() -> None:
    root = parse('<img src="https://cdn.example/x.png"><a href="//x.example/">a</a><style>@import url(http://x/y.css);</style>'
                 '<link rel="stylesheet" href="s.css">')
    assert len(external_urls(root)) == 4


def test_node_names_with_markup_are_text_in_lanes_and_labels(tmp_path: Path) -> None:
    doc = triage_doc(3, 2)
    for r in doc["ranks"]:
        if r["node"] == "n01":
            r["node"] = "n01</svg><script>x()</script>"
    (tmp_path / "t.json").write_text(json.dumps(doc))
    root = page([tmp_path / "t.json"], tmp_path / "r.html")
    lanes = [el for el in root.find_all("div", class_="lane") if el.attrs["data-node"].startswith("n01")]
    assert len(lanes) == 2 and lanes[0].attrs["data-node"] == "n01</svg><script>x()</script>"
    assert lanes[0].find("span", class_="lane-label").text().startswith("n01</svg><script>x()</script> rank 0")
    assert len(root.find_all("script")) == 1


def test_a_bundle_of_real_log_lines_goes_through_the_triage_engine(tmp_path: Path) -> None:
    bundle = tmp_path / "b1"
    lines = {"h01": ["[rank0]: RuntimeError: Connection closed by peer [10.0.0.12]:29500 2024-01-01T12:00:05"],
             "h02": [f"[rank1]: RuntimeError: rank 1: bad batch 2024-01-01T12:00:01 {HOSTILE}"]}
    for node, text in lines.items():
        (bundle / node / "files/root/logs").mkdir(parents=True)
        (bundle / node / "files/root/logs/launcher.log").write_text("\n".join(["step 1 loss 0.5"] + text) + "\n")
    (bundle / "manifest.json").write_text(json.dumps({"schema": 1, "nodes": [{"name": "h01"}, {"name": "h02"}]}))
    tar = tmp_path / "b1.tar.gz"
    with tarfile.open(tar, "w:gz") as archive:
        archive.add(bundle, arcname="b1")
    for given in (bundle, tar):
        root = page([given], tmp_path / "r.html")
        assert view(root, "verdict").find("dd", data_field="culprit").text() == "node h02, rank 1"
        first = view(root, "evidence").find("tr", data_evidence="first")
        assert first.find("pre", class_="logline").text().endswith(HOSTILE)
        assert root.find("div", class_="lane", data_role="culprit").attrs["data-node"] == "h02"


def test_a_preflight_document_alone_gives_only_the_matrix(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(preflight_doc(4)))
    report = build_report([tmp_path / "p.json"])
    assert report.views == ("preflight",)
    root = parse(render_html(report))
    assert [s.attrs["id"] for s in root.find_all("section")] == ["preflight"]


# --- bad input -------------------------------------------------------------------------------------------


def _tar_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("name, content, message", [
    ("garbage.json", b"{not json", "not a bundle and not a JSON document"),
    ("list.json", b"[1, 2]", "a JSON list, not a triage or preflight document"),
    ("other.json", b'{"schema": 1}', "a JSON document, but not `triage --json`, `preflight --json` or `netcheck --json` output"),
    ("bad_triage.json", json.dumps({**triage_doc(2, 1), "ranks": 5}).encode(), "a triage document with bad content"),
    ("bad_ranks.json", json.dumps({**triage_doc(2, 1), "category": "<b>NOPE</b>"}).encode(), "a triage document with bad content"),
    ("bad_preflight.json", json.dumps({**preflight_doc(2), "nodes": [{"name": 3, "checks": []}]}).encode(),
     "a preflight document with bad content"),
    ("binary.json", bytes(range(256)), "not a bundle and not a JSON document"),
    ("broken.tar.gz", _tar_bytes({"b/manifest.json": b"{}"})[:40], "not a bundle directory or a readable .tar.gz"),
    ("no_manifest.tar.gz", _tar_bytes({"b/h01/facts.json": b"{}"}), "not a collect bundle (no manifest.json at its top)"),
    ("hostile.tar.gz", _tar_bytes({"b/../../etc/passwd": b"x", "/abs/manifest.json": b"{}"}), "not a collect bundle"),
])
def test_bad_input_is_named_with_exit_2_and_no_traceback(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    result = runner.invoke(app, ["report", str(path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2, result.output
    assert f"ascendctl: error: {path}: {message}" in result.stderr, result.stderr
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "r.html").exists()
    assert not (tmp_path / "etc").exists() and not Path("/abs").exists()


def test_a_directory_that_is_not_a_bundle_and_a_missing_path_are_named(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and f"{tmp_path}: not a collect bundle" in result.stderr
    result = runner.invoke(app, ["report", str(tmp_path / "nope.json")])
    assert result.exit_code == 2 and f"{tmp_path / 'nope.json'}: no such file or directory" in result.stderr


def test_two_triage_documents_are_refused(tmp_path: Path) -> None:
    for n in ("a", "b"):
        (tmp_path / f"{n}.json").write_text(json.dumps(triage_doc(2, 1)))
    result = runner.invoke(app, ["report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "at most one triage document" in result.stderr


# --- the commands ------------------------------------------------------------------------------------------


def test_report_command_writes_the_page_and_says_what_it_holds(tmp_path: Path) -> None:
    paths = write_all(tmp_path / "in", 3, 2)
    out = tmp_path / "out.html"
    result = runner.invoke(app, ["report", *map(str, paths), "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"report: wrote {out} (") and "verdict, timeline, preflight, devices, performance" in result.stderr
    assert parse(out.read_text()).find("section", data_view="verdict")


def test_triage_html_writes_the_same_verdict_as_the_terminal(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "bundle", 2, 1)
    (bundle / "n02/files/root/logs").mkdir(parents=True)
    (bundle / "n02/files/root/logs/launcher.log").write_text("[rank1]: RuntimeError: boom 2024-01-01T12:00:01\n")
    out = tmp_path / "t.html"
    result = runner.invoke(app, ["triage", str(bundle), "--html", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    headline = result.stdout.splitlines()[0].removeprefix("verdict: ").split(" (confidence")[0]
    root = parse(out.read_text())
    assert view(root, "verdict").find("div", class_="headline").text() == headline
    assert view(root, "devices").find("tbody").find_all("tr")  # the bundle's metadata came along


def test_preflight_html_writes_the_matrix(tmp_path: Path, write_inventory: Any) -> None:
    inv = write_inventory("nodes:\n  - {host: localhost, name: here, transport: local}\n")
    out = tmp_path / "p.html"
    result = runner.invoke(app, ["preflight", "-i", str(inv), "--only", "disk,limits", "--html", str(out)], catch_exceptions=False)
    assert result.exit_code in (0, 3), result.output
    rows = view(parse(out.read_text()), "preflight").find("table", class_="matrix").find("tbody").find_all("tr")
    assert [r.attrs["data-nodes"] for r in rows] == ["here"]
    assert [td.attrs["data-status"] in ("pass", "warn", "fail", "error", "skip") for td in rows[0].find_all("td")] == [True, True]
