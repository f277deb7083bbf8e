"""Job records read back (ascendctl/jobs/record.py): what ascendctl writes reads back equal, and a record that is not one
(damaged, truncated, wrong shape or types) is named with its file and what is wrong, never an internal error, never
silently left out: `jobs` lists the others and exits 1, `status`/`logs`/`stop` on it exit 1 naming the file."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.triage.model import Victim
from ascendctl.jobs.record import FirstFailure, JobRecord, JobRecordError, NodeJob, load_job, read_jobs, save_job
from ascendctl.jobs.record import RecordShapeError, jobs_dir
from tests.json_schemas import assert_valid

runner = CliRunner()


def record(job_id: str, **changes: Any) -> JobRecord:
    """A finished two-node job as `launch` records it (a verdict with victims and hints included)."""
    nodes = tuple(NodeJob(name, f"10.0.0.{11 + i}", i, f"torchrun --node-rank={i} t.py", {"A": "1", "HF_TOKEN": "<redacted>"},
                          f"/tmp/ascendctl/{job_id}/{name}/launcher.log", f"/tmp/ascendctl/{job_id}/{name}/workers", pid=100 + i,
                          exit_code=i, started=1_700_000_000.0, ended=1_700_000_060.5, workers=2, first_rank=2 * i,
                          address=f"172.16.0.{11 + i}", utc_offset=3600) for i, name in enumerate(("a", "b")))
    verdict = FirstFailure("rank 3 raised", node="b", rank=3, category="EXCEPTION", headline="EXCEPTION on rank 3",
                           confidence="high", time="2026-11-23T10:00:00.000001", file="b/launcher.log", line=7,
                           victims=(Victim("a", 0, "timed out in all_reduce"),), hints=("look at rank 3",))
    fields: dict[str, Any] = dict(id=job_id, launcher="torchrun", inventory="/x/inv.yaml", script=["t.py", "--lr", "0.1"],
                                  master_addr="172.16.0.11", master_port=29500, log_dir=f"/tmp/ascendctl/{job_id}", nodes=nodes,
                                  started=1_700_000_000.0, ended=1_700_000_061.0, status="failed", first_failure=verdict)
    fields.update(changes)
    return JobRecord(**fields)


GOOD = ("20261122-100000-aaaa", "20261122-120000-cccc")
BAD = "20261122-110000-bbbb"


def good_data() -> dict[str, Any]:
    return record(BAD).to_dict()


def with_node(**changes: Any) -> dict[str, Any]:
    data = good_data()
    data["nodes"][1].update(changes)
    return data


def without(*keys: str) -> dict[str, Any]:
    data = good_data()
    for key in keys:
        del data[key]
    return data


# Each damaged record: the text of the file, and what the message must say about it.
TRUNCATED = json.dumps(good_data(), indent=2)[:700]
BAD_RECORDS: dict[str, tuple[Callable[[], bytes], str]] = {
    "a list": (lambda: b"[]\n", "expected an object at the top, got a list"),
    "a string": (lambda: b'"job"\n', "expected an object at the top, got a string 'job'"),
    "null": (lambda: b"null\n", "expected an object at the top, got null"),
    "keys missing": (lambda: json.dumps(without("launcher", "nodes")).encode(), "required keys missing: launcher, nodes"),
    "nodes not a list": (lambda: json.dumps({**good_data(), "nodes": "a,b"}).encode(),
                         "nodes: expected a list of objects, got a string 'a,b'"),
    "a node not an object": (lambda: json.dumps({**good_data(), "nodes": [good_data()["nodes"][0], 5]}).encode(),
                             "nodes[1]: expected an object, got a number 5"),
    "a node missing keys": (lambda: json.dumps({**good_data(), "nodes": [{"name": "a"}]}).encode(),
                            "nodes[0]: required keys missing: host, rank, command"),
    "pid a string": (lambda: json.dumps(with_node(pid="12")).encode(),
                     "nodes[1].pid: expected an integer or null, got a string '12'"),
    "rank a bool": (lambda: json.dumps(with_node(rank=True)).encode(), "nodes[1].rank: expected an integer, got true"),
    "env not strings": (lambda: json.dumps(with_node(env={"A": 1})).encode(), "nodes[1].env: expected an object of strings"),
    "script a string": (lambda: json.dumps({**good_data(), "script": "t.py"}).encode(),
                        "script: expected a list of strings, got a string 't.py'"),
    "started NaN": (lambda: json.dumps({**good_data(), "started": float("nan")}).encode(), "started: expected a number, got NaN"),
    "started past year 9999": (lambda: json.dumps({**good_data(), "started": 1e300}).encode(), "started: expected epoch seconds"),
    "verdict wrong types": (lambda: json.dumps({**good_data(),
                                                "first_failure": {"reason": 3, "victims": [{"how": "x", "rank": "0"}]}}).encode(),
                            "first_failure.reason: expected a string, got a number 3; "
                            "first_failure.victims[0].rank: expected an integer or null"),
    "id escapes the directory": (lambda: json.dumps({**good_data(), "id": "../../evil"}).encode(),
                                 "id: '../../evil' is not the file's name"),
    "node name not a name": (lambda: json.dumps(with_node(name="b[1")).encode(), "nodes[1].name: a name cannot contain '['"),
    "truncated": (lambda: TRUNCATED.encode(), "; it ends early: truncated?"),
    "empty": (lambda: b"", "the file is empty"),
    "not UTF-8": (lambda: b'{"id": "\xff"}', "not UTF-8 text (byte 0xff at offset 8)"),
    "nested too deep": (lambda: b"[" * 100_000, "not valid JSON"),
}


@pytest.fixture
def records() -> Path:
    """Two good job records around the one a test damages; the path of that one."""
    for job_id in GOOD:
        save_job(record(job_id))
    return jobs_dir() / f"{BAD}.json"


def test_a_record_as_saved_reads_back_equal() -> None:
    original = record(GOOD[0])
    save_job(original)
    assert load_job(GOOD[0]) == original
    assert JobRecord.from_dict(json.loads(json.dumps(original.to_dict()))) == original


def test_records_of_older_versions_still_read() -> None:
    data = good_data()
    data["first_failure"].update(time=1_700_000_000.5, victims=[{"node": "a", "rank": 0}, "junk"], hints=None)
    del data["first_failure"]["reason"], data["runner"], data["slurm_submitted"]
    verdict = JobRecord.from_dict(data).first_failure
    assert verdict is not None and verdict.time is None and verdict.reason == ""
    assert verdict.victims == (Victim("a", 0, ""),) and verdict.hints == ()


def test_every_problem_of_a_record_is_named_with_its_key_path() -> None:
    data = with_node(pid="12", exit_code=1.5)
    data["master_port"] = "29500"
    with pytest.raises(RecordShapeError) as caught:
        JobRecord.from_dict(data)
    assert caught.value.problems == ["master_port: expected an integer, got a string '29500'",
                                     "nodes[1].pid: expected an integer or null, got a string '12'",
                                     "nodes[1].exit_code: expected an integer or null, got a number 1.5"]


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_jobs_names_a_bad_record_lists_the_others_and_exits_1(records: Path, case: str) -> None:
    text, why = BAD_RECORDS[case]
    records.write_bytes(text())
    result = runner.invoke(app, ["jobs"])
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.stderr and "Traceback" not in result.output
    assert f"ascendctl: warning: {records}: unreadable job record, not listed: " in result.stderr
    assert why in result.stderr, result.stderr
    assert "hint: ascendctl writes its records whole" in result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == list(GOOD)

    document = json.loads(runner.invoke(app, ["jobs", "--json"]).stdout)
    assert_valid("jobs", document)
    assert (document["exit_code"], document["status"]) == (1, "error")
    assert [job["id"] for job in document["jobs"]] == list(GOOD)
    [error] = document["errors"]
    assert error["path"] == str(records) and why in error["message"] and error["message"].startswith(f"{records}: ")


@pytest.mark.parametrize("case", ["a list", "keys missing", "pid a string", "truncated"])
@pytest.mark.parametrize("command", [["status"], ["logs"], ["stop"], ["status", "--json"], ["stop", "--json"]])
def test_status_logs_and_stop_on_a_bad_record_name_it_and_exit_1(records: Path, case: str, command: list[str]) -> None:
    text, why = BAD_RECORDS[case]
    records.write_bytes(text())
    result = runner.invoke(app, [*command, BAD[:12]])  # a unique prefix, as a person types it
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.stderr and "Traceback" not in result.output
    if "--json" in command:
        document = json.loads(result.stdout)
        assert_valid("error", document)
        message = document["errors"][0]["message"]
        assert message.startswith(f"{records}: unreadable job record: ") and why in message
    else:
        assert result.stdout == ""
        assert f"ascendctl: error: {records}: unreadable job record: " in result.stderr and why in result.stderr


def test_the_newest_record_unreadable_is_named_not_replaced_by_an_older_job(records: Path) -> None:
    newest = jobs_dir() / "20261123-000000-ffff.json"
    newest.write_text("{}")
    result = runner.invoke(app, ["stop"])  # never stop the job before it instead
    assert result.exit_code == 1 and f"{newest}: unreadable job record: required keys missing: id, launcher" in result.stderr
    with pytest.raises(JobRecordError):
        load_job()
    assert load_job(GOOD[1]).status == "failed"  # the others still read


def test_no_such_job_stays_a_usage_error(records: Path) -> None:
    result = runner.invoke(app, ["status", "nope"])
    assert result.exit_code == 2 and "no job 'nope'" in result.stderr


def test_only_unreadable_records_print_no_table(records: Path) -> None:
    for job_id in GOOD:
        (jobs_dir() / f"{job_id}.json").write_text("[]")
    result = runner.invoke(app, ["jobs"])
    assert result.exit_code == 1 and result.stdout == "" and result.stderr.count("unreadable job record") == 2
    assert [bad.path.name for bad in read_jobs().unreadable] == [f"{GOOD[0]}.json", f"{GOOD[1]}.json"]


def test_a_clean_listing_still_exits_0(records: Path) -> None:
    result = runner.invoke(app, ["jobs"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stderr == ""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_000))
    assert f"{GOOD[0]}   failed       torchrun      2  {started}  t.py --lr 0.1" in result.stdout


@pytest.mark.parametrize("answer, expected", [
    ("exit 0 1764150000", ("exited", 0, 1764150000.0, None)),
    ("exit -9", ("exited", -9, None, None)),
    ("exit", ("exited", None, None, None)),
    ("running", ("running", None, None, None)),
    ("gone", ("gone", None, None, None)),
    ("gone: Slurm job 7 ended (CANCELLED) before the launcher wrote its exit status",
     ("gone", None, None, "Slurm job 7 ended (CANCELLED) before the launcher wrote its exit status")),
])
def test_a_nodes_job_state_answer_is_read_into_one_typed_end(answer: str, expected: tuple[object, ...]) -> None:
    from ascendctl.models import NodeEnd

    end = NodeEnd.from_state(answer)
    assert (end.kind.value, end.code, end.when, end.why) == expected


@pytest.mark.parametrize("exit_code, error, kind", [
    (0, None, "exited"), (3, "unreachable: silent for 60 s", "exited"), (None, "unreachable: silent for 60 s", "lost"),
    (None, "lost track of the launcher", "lost"), (None, "not started: ssh: connection refused", "not started"),
    (None, "launcher gone without an exit status", "gone"), (None, None, "running"), (True, None, "running"),
])
def test_a_recorded_node_end_is_read_in_one_place(exit_code: object, error: object, kind: str) -> None:
    """Job outcomes (lost -> unreachable, not started -> failed) and triage's lost nodes both read it here."""
    from ascendctl.models import NodeEnd

    assert NodeEnd.of_recorded(exit_code, error).kind.value == kind
