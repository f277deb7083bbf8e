"""JUnit XML for CI: the one writer (a preflight report, one testcase per node x check and per cluster check; a run
that failed before any check, one errored testcase)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Mapping

from ascendctl.preflight.checks.model import Status

if TYPE_CHECKING:
    from ascendctl.preflight.checks.model import CheckResult
    from ascendctl.preflight.result import PreflightReport


def junit_xml(report: PreflightReport) -> str:
    """JUnit XML for CI: one testcase per node x check, plus one per cluster summary."""
    suite = ET.Element("testsuite", name="ascendctl preflight", time=f"{report.duration:.3f}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def case(classname: str, check: CheckResult) -> None:
        element = ET.SubElement(suite, "testcase", classname=classname, name=check.check)
        counts["tests"] += 1
        text = check.summary + (f"\nhint: {check.hint}" if check.hint else "")
        if check.status == Status.FAIL:
            counts["failures"] += 1
            ET.SubElement(element, "failure", message=check.summary).text = text
        elif check.status == Status.ERROR:
            counts["errors"] += 1
            ET.SubElement(element, "error", message=check.summary).text = text
        elif check.status == Status.SKIP:
            counts["skipped"] += 1
            ET.SubElement(element, "skipped", message=check.summary)
        else:
            ET.SubElement(element, "system-out").text = f"{check.status.value}: {text}"

    for node in report.nodes:
        for check in node.checks:
            case(f"preflight.{node.name}", check)
    for check in report.cluster:
        case("preflight.cluster", check)
    return _junit_document(suite, counts)


def junit_error_xml(message: str) -> str:
    """--junit is always written when asked: a run that failed before any check gives one errored testcase."""
    suite = ET.Element("testsuite", name="ascendctl preflight", time="0.000")
    case = ET.SubElement(suite, "testcase", classname="preflight", name="setup")
    ET.SubElement(case, "error", message=message.splitlines()[0] if message else "error").text = message
    return _junit_document(suite, {"tests": 1, "failures": 0, "errors": 1, "skipped": 0})


def _junit_document(suite: ET.Element, counts: Mapping[str, int]) -> str:
    """The one JUnit writer's envelope: counts on the suite, one <testsuites> root, indented, with its declaration."""
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
