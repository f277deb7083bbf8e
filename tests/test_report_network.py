"""netcheck's pair matrix in the HTML report: a heat map, slow node and link named, node text escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ascendctl.cli import app
from tests.html_dom import external_urls, parse
from tests.json_schemas import assert_valid

runner = CliRunner()
HOSTILE = "n4<script>x</script>"


def netcheck_document() -> dict[str, Any]:
    """A `netcheck --json` document (validated against its schema below): n3 slow with every partner."""
    nodes = ["n1", "n2", "n3", HOSTILE]
    speed = {"n1": 9.0, "n2": 9.2, "n3": 1.0, HOSTILE: 9.1}
    matrix = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            value = min(speed[a], speed[b])
            matrix.append({"a": a, "b": b, "a_to_b_gbps": value, "b_to_a_gbps": value, "round": 0, "error": None, "look": 1})
    matrix.append({"a": "n3", "b": "n1", "a_to_b_gbps": 1.1, "b_to_a_gbps": 1.0, "round": 1, "error": None, "look": 2})
    verdict = {"threshold": 0.8, "median_gbps": 9.0, "outcome": "slow", "slow_nodes": ["n3"], "broken_nodes": [],
               "slow_links": [], "broken_links": [],
               "nodes": [{"node": n, "median_gbps": speed[n], "partners": 3, "slow_partners": 3 if n == "n3" else 1,
                          "status": "slow" if n == "n3" else "ok"} for n in nodes],
               "rule": {"spreads": 3.0, "floor": 0.05, "min_effect": 0.2, "looks": 2},
               "spread": {"median_gbps": 9.1, "relative": 0.05, "measured_relative": 0.0163, "pairs": 3, "left_out": 3},
               "suspects": [{"kind": "node", "nodes": ["n3"], "first_gbps": [1.0, 1.0, 1.0], "second_gbps": [1.0],
                             "partners": ["n1"], "controls_gbps": [], "outcome": "slow", "ratio": 0.1099, "spreads": 17.8,
                             "reason": "slow on every look (4)", "failed": []},
                            {"kind": "link", "nodes": ["n1", "n2"], "first_gbps": [6.0], "second_gbps": [6.5],
                             "partners": [], "controls_gbps": [], "outcome": "inconclusive", "ratio": 0.71, "spreads": 2.5,
                             "reason": "low, but not beyond the noise", "failed": []}]}
    return {"schema": 1, "command": ["ascendctl", "netcheck", "--json"], "status": "partial", "exit_code": 3,
            "mode": "all-pairs", "backend": "tcp", "backend_reason": "python3 on every node", "size_bytes": 8388608,
            "seconds": 4.2, "endpoints": {n: {"interface": "eth1", "ip": f"10.0.0.{i}"} for i, n in enumerate(nodes)},
            "rounds": [[[m["a"], m["b"]]] for m in matrix], "second_look_rounds": 1, "matrix": matrix, "verdict": verdict,
            "problems": [],
            "devices": {"pings": [], "broken_devices": [], "broken_links": [], "skipped": "not asked"}, "errors": []}


def test_a_netcheck_document_becomes_a_heat_map(tmp_path: Path) -> None:
    doc = netcheck_document()
    assert_valid("netcheck", doc)  # the shape netcheck really emits
    source = tmp_path / "net.json"
    source.write_text(json.dumps(doc))
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    root = parse(out.read_text())
    section = root.find_all("section", id="network")
    assert len(section) == 1
    cells = section[0].find_all("rect", class_="pair")
    assert len(cells) == 2 * (len(doc["matrix"]) - 1)  # both halves of the symmetric grid; the second look in a title
    assert any("second look 1.00 Gbit/s" in c.text() for c in cells if "n1 <-> n3" in c.text())
    slow = {c.attrs["data-status"] for c in cells if "n3 <-> " in c.text() or " <-> n3" in c.text()}
    assert slow == {"slow"}
    assert {c.attrs["data-status"] for c in cells if "n3" not in c.text()} == {"ok"}
    assert [p.text() for p in section[0].find_all("p", data_field="slow-nodes")] == ["slow nodes: n3"]
    assert [p.text() for p in section[0].find_all("p", data_field="inconclusive")] == [
        "inconclusive (low, not shown slow beyond the noise; not named): n1 <-> n2 (low, but not beyond the noise)"]
    assert "the healthy pairs vary by 2%" in section[0].text()
    assert [s for s in root.find_all("script") if s.text().strip() == "x"] == []  # the hostile name made no element
    assert any(HOSTILE in t.text() for t in section[0].find_all("text"))  # shown as text, not markup
    assert external_urls(root) == []


def test_a_garbage_netcheck_document_is_named(tmp_path: Path) -> None:
    doc = netcheck_document()
    doc["matrix"] = [{"a": "n1"}]  # no b
    source = tmp_path / "net.json"
    source.write_text(json.dumps(doc))
    result = runner.invoke(app, ["report", str(source), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "netcheck document with bad content" in result.stderr and str(source) in result.stderr


def test_a_low_pair_the_verdict_did_not_name_is_not_drawn_slow(tmp_path: Path) -> None:
    """Below threshold x median on one look, but not named (inconclusive, or cleared by the second look): not red as slow."""
    doc = netcheck_document()
    doc["verdict"]["slow_nodes"] = []
    doc["verdict"]["outcome"] = "inconclusive"
    doc["verdict"]["nodes"] = [dict(n, status="ok") for n in doc["verdict"]["nodes"]]
    doc["verdict"]["suspects"] = doc["verdict"]["suspects"][1:]
    assert_valid("netcheck", doc)
    source = tmp_path / "net.json"
    source.write_text(json.dumps(doc))
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    section = parse(out.read_text()).find_all("section", id="network")[0]
    cells = section.find_all("rect", class_="pair")
    assert {c.attrs["data-status"] for c in cells} == {"ok"}
    low = [c for c in cells if "n3 <-> " in c.text() or " <-> n3" in c.text()]
    assert low and all("not shown slow beyond the noise" in c.text() for c in low)
    assert section.find_all("p", data_field="slow-nodes") == [] and "nothing slow or broken" in section.text()
