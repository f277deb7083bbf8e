"""Triage over the real failure corpus (tests/data/triage/real/): the accuracy floors of issue 11 hold, and each case's
files are well-formed (a label, a source, logs). bench/triage_accuracy.py prints the same figures per category.

A regression guard, not a benchmark: a change to a signature or a rule that costs accuracy on real logs fails here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import triage_accuracy  # noqa: E402

CATEGORIES = {"COMM_TIMEOUT", "OOM", "NAN", "HARDWARE", "LAUNCH", "EXCEPTION", "UNKNOWN"}


def test_every_case_has_a_label_a_source_and_logs() -> None:
    cases = sorted(triage_accuracy.CORPUS.glob("*/case.yaml"))
    assert len(cases) >= 120
    for path in cases:
        label = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert label["id"] == path.parent.name, path
        assert label["category"] in CATEGORIES, path
        assert str(label["source"]).startswith(("http://", "https://")), path
        assert label["split"] in triage_accuracy.SPLITS, path
        assert any((path.parent / "logs").rglob("*")), path
        if not label.get("single_culprit", True):
            assert (label["first_failing"] or {}).get("rank") is None, path


def test_every_category_has_at_least_ten_cases() -> None:
    counts: dict[str, int] = {}
    for path in triage_accuracy.CORPUS.glob("*/case.yaml"):
        category = yaml.safe_load(path.read_text(encoding="utf-8"))["category"]
        counts[category] = counts.get(category, 0) + 1
    assert all(counts.get(c, 0) >= 10 for c in CATEGORIES), counts


@pytest.fixture(scope="module")
def outcomes() -> list[triage_accuracy.Outcome]:
    """The splits the engine was tuned on: a regression guard. The unseen splits (dev3, test3) are measured by
    bench/triage_accuracy.py and reported in issue notes; their floors are targets, not guards."""
    return [triage_accuracy.evaluate(d, label) for d, label in triage_accuracy.load_cases("tuned")]


def test_category_accuracy_floor(outcomes: list[triage_accuracy.Outcome]) -> None:
    misses = [f"{o.case}: want {o.label['category']}, got {o.category}" for o in outcomes if not o.category_ok]
    assert 1 - len(misses) / len(outcomes) >= 0.95, "\n".join(misses)


def test_first_failing_accuracy_floor(outcomes: list[triage_accuracy.Outcome]) -> None:
    misses = [f"{o.case}: want {o.label.get('first_failing')}, got {o.node}/{o.rank} ({o.reason})" for o in outcomes
              if not o.first_ok]
    assert 1 - len(misses) / len(outcomes) >= 0.90, "\n".join(misses)
