"""`ascendctl report`: one self-contained HTML page from collect bundles, triage and preflight documents.

This package reads what it is given through the owners of each piece of knowledge (the triage
engine and its `TriageReport`, the bundle's layout and reader in bundle/layout.py, `PreflightReport`,
the msprof summary),
`views.py` turns it into view models (folding and sampling large jobs), and `html.py` renders
templates/report.html.j2 (the only module that imports jinja2). Must not import typer or rich.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ascendctl.bundle.layout import (ATTEMPTS, CMD_HCCN_LINK, CMD_HCCN_NET_HEALTH, CMD_NPU_INFO, JOB, MANIFEST, SUMMARY,
                                     is_archive_name, read_bundle_meta)
from ascendctl.bundle.layout import is_bundle as is_bundle  # re-exported: `triage --html` tells bundles by it
from ascendctl.errors import AscendctlError, UsageError, parse_json
from ascendctl.outcome import Outcome, exit_code_for
from ascendctl.perf.read import holds_profiles
from ascendctl.preflight.result import PreflightReport
from ascendctl.bundle.summaries import MsprofSummary
from ascendctl.triage import TriageReport
from ascendctl.report.views import (Report, StacksView, devices_view, network_view, performance_view, preflight_view,
                                   PerfView, perf_view, stacks_view, timeline_view, verdict_view)
from ascendctl.paths import write_text_atomic

if TYPE_CHECKING:
    from ascendctl.errors import ExitCode
    from ascendctl.jobs.record import JobRecord
    from ascendctl.report.attempts import AttemptsView
    from ascendctl.report.views import NetworkView

MAX_DOCUMENT = 512 * 1024**2  # a --json document larger than this is not one ascendctl wrote
# what the devices view reads: the outputs of these commands (name prefixes, the dot ending the command name)
DEVICE_COMMANDS = tuple(f"{name}." for name in (CMD_NPU_INFO, CMD_HCCN_LINK, CMD_HCCN_NET_HEALTH))
INPUT_HINT = ("pass a bundle from `ascendctl collect` (.tar.gz or directory), or `triage --json`, `preflight --json` or "
              "`netcheck --json` output, or a directory or archive of per-rank profiles (`ascendctl perf` reads)")


@dataclass(frozen=True, slots=True)
class WrittenReport:
    """Where the page went, how large it is, which views it holds and what was folded."""

    path: Path
    bytes: int
    views: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for([Outcome.OK])


def _bad(path: Path, why: str) -> UsageError:
    return UsageError(f"{path}: {why}", hint=INPUT_HINT)


def _document(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_DOCUMENT:
            raise _bad(path, f"larger than {MAX_DOCUMENT // 1024**2} MB: not a document ascendctl wrote")
        data = parse_json(path.read_bytes())
    except OSError as exc:
        raise AscendctlError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError and parse_json's "nested too deeply"
        raise _bad(path, f"not a bundle and not a JSON document ({exc})") from None
    if not isinstance(data, dict):
        raise _bad(path, f"a JSON {type(data).__name__}, not a triage or preflight document")
    return data


def _triage_of(path: Path, data: Mapping[str, Any]) -> TriageReport:
    try:
        return TriageReport.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _bad(path, f"a triage document with bad content ({type(exc).__name__}: {exc})") from None


def _preflight_of(path: Path, data: Mapping[str, Any]) -> PreflightReport:
    try:
        return PreflightReport.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _bad(path, f"a preflight document with bad content ({type(exc).__name__}: {exc})") from None


def build_report(paths: Iterable[str | os.PathLike[str]], *, triage: TriageReport | None = None,
                 preflight: PreflightReport | None = None) -> Report:
    """Read bundles and documents (each once) into the report's views; `triage`/`preflight` are verdicts already made."""
    from ascendctl.triage import triage as run_triage

    bundles: list[Path] = []
    meta: dict[str, bytes] = {}
    triage_docs: list[TriageReport] = []
    preflight_docs: list[PreflightReport] = []
    network: NetworkView | None = None
    profiled: list[Path] = []  # bundles and directories that may hold per-rank profiles (the perf section)
    sources: list[str] = []
    jobs: list[JobRecord] = []  # job ids given: their attempts (report/attempts.py)
    for given in paths:
        path = Path(given)
        sources.append(str(path))
        if not path.exists():
            named = _job_named(str(given))  # `ascendctl report JOB`: its attempts, from the job records
            if named is None:
                raise UsageError(f"{path}: no such file or directory, nor a job id", hint=INPUT_HINT)
            jobs.append(named)
            continue
        if path.is_dir() or is_archive_name(path.name):
            found = read_bundle_meta(path, commands=DEVICE_COMMANDS)
            if MANIFEST not in found:
                if holds_profiles(path):  # a directory or archive of per-rank profiles: the perf section only
                    profiled.append(path)
                    continue
                if triage is not None:  # `triage --html` over an archive of logs: its lines are in the verdict already
                    continue
                raise _bad(path, f"not a collect bundle (no {MANIFEST} at its top)")
            bundles.append(path)
            profiled.append(path)
            meta.update(found)
            continue
        data = _document(path)
        if "culprit_reason" in data:
            triage_docs.append(_triage_of(path, data))
        elif "checks" in data and "nodes" in data:
            preflight_docs.append(_preflight_of(path, data))
        elif "matrix" in data and "verdict" in data:
            if network is not None:
                raise UsageError("give at most one netcheck document")
            try:
                network = network_view(data)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise _bad(path, f"a netcheck document with bad content ({type(exc).__name__}: {exc})") from None
        else:
            raise _bad(path, "a JSON document, but not `triage --json`, `preflight --json` or `netcheck --json` output")
    if len(triage_docs) + (triage is not None) > 1 or len(preflight_docs) + (preflight is not None) > 1:
        raise UsageError("give at most one triage document and one preflight document",
                         hint="several bundles may be given: triage reads them together")
    verdict = triage or (triage_docs[0] if triage_docs else None)
    if verdict is None and bundles:
        verdict = run_triage(bundles)
    checks = preflight or (preflight_docs[0] if preflight_docs else None)
    job = _json_of(meta.get(JOB))
    others = _json_of(meta.get(ATTEMPTS))
    attempts = _attempts_of(jobs, job if isinstance(job, Mapping) and bundles else None,
                            others if isinstance(others, list) and bundles else None)
    summary = _json_of(meta.get(SUMMARY))
    msprof = None
    if isinstance(summary, Mapping) and isinstance(summary.get("msprof"), Mapping):
        try:
            msprof = MsprofSummary.from_dict(summary["msprof"])
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad(bundles[0], f"{SUMMARY}: msprof summary with bad content ({exc})") from None
    return Report(
        _title(verdict, checks, attempts), tuple(sources),
        verdict_view(verdict) if verdict else None,
        timeline_view(verdict, job if isinstance(job, Mapping) else None) if verdict else None,
        preflight_view(checks) if checks else None,
        devices_view(meta, summary if isinstance(summary, Mapping) else None) if bundles else None,
        performance_view(msprof) if msprof else None,
        network,
        _stacks_of(verdict, sources),
        attempts=attempts,
        perf=_perf_of(profiled),
    )


def _perf_of(paths: list[Path]) -> PerfView | None:
    """`ascendctl perf`'s verdict and maps over the per-rank profiles these bundles or directories hold, if any."""
    from ascendctl.perf.analyse import analyse
    from ascendctl.perf.model import MixedTasksError
    from ascendctl.perf.read import read_profiles

    if not paths:
        return None
    try:
        profiles, problems, found = read_profiles(paths)
    except MixedTasksError as exc:  # the section says why there is no verdict
        return PerfView(f"not judged: {exc.message}", (exc.hint or "",), "", (), "", None, None, ())
    return perf_view(analyse(profiles, problems), profiles) if found else None


def _job_named(text: str) -> JobRecord | None:
    """The job record `text` names (an id, a unique prefix, or `last`); None when it names none. An unreadable record
    is an error naming its file."""
    from ascendctl.jobs.record import JobError, JobRecordError, load_job

    if not text or "/" in text:
        return None
    try:
        return load_job(None if text == "last" else text)
    except JobRecordError:
        raise
    except JobError:
        return None


def _attempts_of(jobs: list[JobRecord], bundled: Mapping[str, Any] | None,
                 bundled_others: list[Any] | None = None) -> AttemptsView | None:
    """The attempts section: of the job id given, else of the job a bundle was collected for (when it was restarted),
    with the other attempts' records the bundle holds (attempts.json) beside this machine's."""
    from ascendctl.jobs.record import JobListing, read_jobs
    from ascendctl.report.attempts import attempts_view, record_of

    if len({r.restart_of or r.id for r in jobs}) > 1:
        raise UsageError("give the attempts of one job at most: " + ", ".join(r.id for r in jobs))
    record = jobs[-1] if jobs else record_of(bundled)
    if record is None:
        return None
    carried = [r for r in (record_of(d) if isinstance(d, Mapping) else None for d in bundled_others or []) if r]
    if not carried:
        return attempts_view(record)
    here = {r.id: r for r in read_jobs().records}
    return attempts_view(record, JobListing(tuple({**{r.id: r for r in carried}, **here}.values())))


def _stacks_of(verdict: TriageReport | None, sources: list[str]) -> StacksView | None:
    """The verdict's stacks capture as the report shows it; a capture that cannot be shown is a clear error."""
    if verdict is None or verdict.stacks is None:
        return None
    try:
        return stacks_view(verdict.stacks)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise UsageError(f"{', '.join(sources) or 'the verdict'}: a stacks capture with bad content "
                         f"({type(exc).__name__}: {exc})") from None


def _json_of(data: bytes | None) -> Any:
    try:
        return None if data is None else parse_json(data)
    except ValueError:
        return None


def _title(verdict: TriageReport | None, checks: PreflightReport | None, attempts: AttemptsView | None = None) -> str:
    if verdict is not None:
        return f"ascendctl report: {verdict.headline()}"
    if checks is not None:
        return f"ascendctl report: preflight of {len(checks.nodes)} node(s), " + ("ready" if checks.ok else "not ready")
    if attempts is not None and attempts.rows:
        last = attempts.rows[-1]
        return f"ascendctl report: job {attempts.first}, {len(attempts.rows)} attempt(s), the last {last.status}"
    return "ascendctl report"


def write_report(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str], *,
                 triage: TriageReport | None = None, preflight: PreflightReport | None = None) -> WrittenReport:
    """Build the report and write it as one self-contained HTML file (written aside, then moved into place)."""
    from ascendctl.report.html import render_html

    report = build_report(paths, triage=triage, preflight=preflight)
    if not report.views:
        raise UsageError("nothing to show: no verdict, timeline, preflight, devices, performance or profile data", hint=INPUT_HINT)
    page = render_html(report)
    target = Path(output)
    write_text_atomic(target, page)
    return WrittenReport(target, len(page.encode("utf-8")), report.views, report.notes)


__all__ = ["Report", "WrittenReport", "build_report", "is_bundle", "write_report"]
