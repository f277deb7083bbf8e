"""`launch --restarts` end to end on local nodes (the local transport: real launcher processes, the real job records
and node state in this test's state directory), no test hosts: the HTML report's row per attempt, from a job id and
from a bundle `collect` made; `collect JOB` of a job whose node was quarantined after it ran; two restarting launches
at once on different nodes sharing one node state (no lost update)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.inventory.load import load_inventory
from ascendctl.inventory.nodestate import load_node_state
from ascendctl.jobs.record import list_jobs, load_job
from tests.conftest import REPO
from tests.json_schemas import assert_valid
from tests.html_dom import Element, parse

runner = CliRunner()

# A stand-in launcher: node rank $FAIL_RANK dies of a SIGKILL (a bare SIGKILL: maybe transient, restarted in place),
# or with $ECC set logs an uncorrectable ECC error (HARDWARE: its node is replaced), while ASCENDCTL_ATTEMPT <=
# $FAIL_UNTIL; every other rank, and later attempts, succeed. With $IMPORT_ERR every rank fails to import that module.
LAUNCHER = """#!/bin/sh
for a in "$@"; do case $a in --node-rank=*) rank=${a#--node-rank=};; esac; done
echo "rank $rank attempt $ASCENDCTL_ATTEMPT"
[ -n "$IMPORT_ERR" ] && { echo "ModuleNotFoundError: No module named '$IMPORT_ERR'"; exit 1; }
if [ "$rank" = "${FAIL_RANK:--1}" ] && [ "${ASCENDCTL_ATTEMPT:-1}" -le "${FAIL_UNTIL:-0}" ]; then
  sleep 0.3; echo "rank $rank failing"
  [ -n "$ECC" ] && { echo "RuntimeError: uncorrectable ECC error detected on device 0"; exit 1; }
  kill -9 $$
fi
sleep "${OK_SLEEP:-0.3}"; echo "rank $rank done"; exit 0
"""


def local_inventory(tmp_path: Path, nodes: str = "a b c", name: str = "inv.yaml") -> Path:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "torchrun").write_text(LAUNCHER)
    (bin_dir / "torchrun").chmod(0o755)
    listed = "".join(f"  - {{name: {n}, host: 127.0.0.{i + 1}}}\n" for i, n in enumerate(nodes.split()))
    path = tmp_path / name
    path.write_text(f"defaults:\n  transport: local\n  slots: 1\n  python: {bin_dir}/python\nnodes:\n{listed}")
    return path


def restarted(tmp_path: Path) -> tuple[str, str]:
    """One job, attempt 1 failing on node b, attempt 2 finishing: (first attempt's id, second's)."""
    result = runner.invoke(app, ["launch", "-i", str(local_inventory(tmp_path)), "--launcher", "torchrun", "--no-preflight",
                                 "--restarts", "2", "--restart-backoff", "0", "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=1",
                                 "--log-dir", str(tmp_path / "logs"), "--", "train.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    records = sorted(list_jobs(), key=lambda r: r.attempt)
    assert [(r.attempt, r.status.value) for r in records] == [(1, "failed"), (2, "succeeded")], result.output
    return records[0].id, records[1].id


def attempt_rows(html: Path) -> list[list[str]]:
    root = parse(html.read_text(encoding="utf-8"))
    section = root.find("section", data_view="attempts")
    return [[td.text() for td in row.find_all("td")] for row in section.find("tbody").find_all("tr")]


def test_the_report_of_a_restarted_job_has_a_row_per_attempt_from_its_id_or_its_bundle(tmp_path: Path) -> None:
    first, second = restarted(tmp_path)
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", first, "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = attempt_rows(out)
    assert [(r[0], r[1], r[2]) for r in rows] == [("1", first, "a,b,c"), ("2", second, "a,b,c")]  # in place
    assert rows[0][5].startswith("failed") and rows[0][6] == "restart" and "restarted in place" in rows[0][7], rows[0]
    assert rows[1][5] == "succeeded" and rows[1][6] == "done" and rows[1][7] == "the job succeeded"
    assert all(r[3] and r[4] and r[3] <= r[4] for r in rows)  # start and end
    # the second attempt's id names the same job; a bundle collected for it shows the same rows
    again = runner.invoke(app, ["report", second, "-o", str(tmp_path / "r2.html")], catch_exceptions=False)
    assert again.exit_code == 0 and attempt_rows(tmp_path / "r2.html") == rows
    collected = runner.invoke(app, ["collect", second, "-o", str(tmp_path / "bundle")], catch_exceptions=False)
    assert collected.exit_code == 0, collected.output
    bundled = runner.invoke(app, ["report", str(tmp_path / "bundle"), "-o", str(tmp_path / "r3.html")], catch_exceptions=False)
    assert bundled.exit_code == 0, bundled.output
    assert attempt_rows(tmp_path / "r3.html") == rows
    root = parse((tmp_path / "r3.html").read_text(encoding="utf-8"))
    assert [s.attrs["id"] for s in root.find_all("section")][:2] == ["verdict", "attempts"]


def test_jobs_and_status_say_which_attempt_a_record_is_and_what_was_decided_after_it(tmp_path: Path) -> None:
    first, second = restarted(tmp_path)
    listed = runner.invoke(app, ["jobs", "--no-refresh"], catch_exceptions=False)
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert lines[first].endswith("  (attempt 1: restart)") and lines[second].endswith(f"  (attempt 2 of {first}: done)")
    shown = runner.invoke(app, ["status", second], catch_exceptions=False)
    assert f"attempt 2 of job {first} (launch --restarts); then: done: the job succeeded\n" in shown.stdout
    plain = runner.invoke(app, ["status", first], catch_exceptions=False)
    assert "attempt 1 (launch --restarts); then: restart: " in plain.stdout


def test_a_bundle_carries_the_other_attempts_records_and_without_them_shows_its_own_and_says_so(tmp_path: Path) -> None:
    first, second = restarted(tmp_path)
    assert runner.invoke(app, ["collect", second, "-o", str(tmp_path / "bundle")]).exit_code == 0
    carried = json.loads((tmp_path / "bundle" / "attempts.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in carried] == [first]  # the other attempts' records, beside job.json (attempt 2's)
    state = Path(os.environ["XDG_STATE_HOME"]) / "ascendctl" / "jobs"
    for path in state.glob("*.json"):
        path.unlink()  # another machine: no job records
    result = runner.invoke(app, ["report", str(tmp_path / "bundle"), "-o", str(tmp_path / "r.html")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert [r[:2] for r in attempt_rows(tmp_path / "r.html")] == [["1", first], ["2", second]]
    (tmp_path / "bundle" / "attempts.json").unlink()  # a bundle collected before it carried them
    result = runner.invoke(app, ["report", str(tmp_path / "bundle"), "-o", str(tmp_path / "r.html")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert [r[:2] for r in attempt_rows(tmp_path / "r.html")] == [["2", second]]
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert f"attempt 1 of job {first}: no record on this machine" in page


def test_a_job_id_that_is_not_recorded_is_named_and_a_plain_job_has_no_attempts(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", "20990101-000000-beef", "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "20990101-000000-beef: no such file or directory, nor a job id" in result.stderr
    plain = runner.invoke(app, ["launch", "-i", str(local_inventory(tmp_path)), "--launcher", "torchrun", "--no-preflight",
                                "--log-dir", str(tmp_path / "logs"), "--", "train.py"], catch_exceptions=False)
    assert plain.exit_code == 0, plain.output
    nothing = runner.invoke(app, ["report", "last", "-o", str(tmp_path / "r.html")])
    assert nothing.exit_code == 2 and "nothing to show" in nothing.stderr


def test_collect_of_a_job_takes_the_files_of_its_node_quarantined_after_it_ran(tmp_path: Path) -> None:
    inv = local_inventory(tmp_path)
    result = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--env", "FAIL_RANK=1",
                                 "--env", "FAIL_UNTIL=1", "--log-dir", str(tmp_path / "logs"), "--", "train.py"],
                           catch_exceptions=False)
    assert result.exit_code == 5, result.output
    [record] = list_jobs()
    held = runner.invoke(app, ["nodes", "quarantine", "b", "-i", str(inv), "--reason", f"UNKNOWN in job {record.id}"])
    assert held.exit_code == 0, held.output
    collected = runner.invoke(app, ["collect", record.id, "-o", str(tmp_path / "bundle"), "--json"], catch_exceptions=False)
    assert collected.exit_code == 0, collected.output
    assert "quarantined" not in collected.stderr  # the job's own nodes: nothing left out, nothing to say
    nodes = {n["name"]: n for n in json.loads(collected.stdout)["manifest"]["nodes"]}
    assert sorted(nodes) == ["a", "b", "c"]
    kept = {Path(f["path"]).name: f for f in nodes["b"]["files"]}
    assert "launcher.log" in kept and "exit_code" in kept, sorted(kept)
    log = (tmp_path / "bundle" / kept["launcher.log"]["file"]).read_text()
    assert "rank 1 failing" in log
    # the same command without a job leaves b out, as every command that reaches nodes does
    plain = runner.invoke(app, ["collect", "-i", str(inv), "-o", str(tmp_path / "b2"), "--since", "1h", "--json"])
    assert plain.exit_code == 0, plain.output
    assert [n["name"] for n in json.loads(plain.stdout)["manifest"]["nodes"]] == ["a", "c"]


def test_two_restarting_launches_at_once_on_different_nodes_lose_no_quarantine(tmp_path: Path) -> None:
    """Two `launch --restarts` processes started together on one inventory (one node state), on disjoint nodes: in
    each, node rank 1 logs an ECC error in attempts 1 and 2, so each quarantines two nodes (its rank 1, then the spare
    that took its place) at about the same moments as the other; all four quarantines are kept, each with its job."""
    inv = local_inventory(tmp_path, "a b c d s1 s2 s3 s4")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    common = ["-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--restarts", "3", "--restart-backoff", "0",
              "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=2", "--env", "ECC=1", "--json"]
    procs = [subprocess.Popen([sys.executable, "-m", "ascendctl", "launch", *common, "-w", nodes, "--spares", spares,
                               "--log-dir", str(tmp_path / f"logs-{n}"), "--", "train.py"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n, (nodes, spares) in enumerate((("a,b,s1,s2", "s1,s2"), ("c,d,s3,s4", "s3,s4")))]
    ends = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[1][-2000:] for e in ends]
    attempts = [json.loads(out)["attempts"] for out, _ in ends]
    assert [[(a["nodes"], a["decision"]) for a in job] for job in attempts] == [
        [(["a", "b"], "replace"), (["a", "s1"], "replace"), (["a", "s2"], "done")],
        [(["c", "d"], "replace"), (["c", "s3"], "replace"), (["c", "s4"], "done")]]
    held = load_node_state(load_inventory(inv)).quarantined
    assert sorted(held) == ["b", "d", "s1", "s3"]
    for job in attempts:
        for a in job[:2]:
            node = a["nodes"][1]
            assert held[node].reason == f"HARDWARE in job {a['job']}" and held[node].command == "launch --restarts"
            assert "ECC" in (held[node].evidence or "")
    assert oct(load_node_state(load_inventory(inv)).path.stat().st_mode & 0o777) == "0o600"


# --- before a relaunch: the reduced preflight (jobs/service.run_relaunch_preflight), not the full one -----------------


def test_attempt_1_runs_the_full_launch_preflight_and_the_relaunch_the_reduced_one(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendctl.jobs import service

    ran: list[tuple[str, str | None]] = []
    full, reduced = service.run_launch_preflight, service.run_relaunch_preflight
    monkeypatch.setattr(service, "run_launch_preflight", lambda *a, **k: (ran.append(("full", None)), full(*a, **k))[1])
    monkeypatch.setattr(service, "run_relaunch_preflight",
                        lambda inv, port, group, previous, **k: (ran.append(("reduced", previous.id)),
                                                                 reduced(inv, port, group, previous, **k))[1])
    (tmp_path / "train.py").write_text("")
    result = runner.invoke(app, ["launch", "-i", str(local_inventory(tmp_path)), "--launcher", "torchrun", "--restarts", "2",
                                 "--restart-backoff", "0", "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=2",
                                 "--log-dir", str(tmp_path / "logs"), "--", str(tmp_path / "train.py")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ids = [r.id for r in sorted(list_jobs(), key=lambda r: r.attempt)]
    assert ran == [("full", None), ("reduced", ids[0]), ("reduced", ids[1])]  # each relaunch looks at the attempt before


def test_the_relaunch_preflight_stops_what_the_previous_attempt_left_and_refuses_a_taken_port(
        tmp_path: Path) -> None:
    import socket

    from ascendctl.jobs.plan import LaunchOptions
    from ascendctl.jobs.service import LaunchRefused, launch_job, run_relaunch_preflight
    from ascendctl.remote.group import NodeGroup
    from tests.test_launch import marked

    inv = load_inventory(local_inventory(tmp_path))
    previous = launch_job(inv, LaunchOptions("torchrun", ("t.py",), env=("OK_SLEEP=60",), log_dir=str(tmp_path / "logs")),
                          preflight=False, detach=True).record  # still running: as if its teardown had missed it
    said: list[str] = []
    try:
        assert marked(previous.id) != []
        with socket.socket() as free:
            free.bind(("0.0.0.0", 0))
            port = free.getsockname()[1]
        with NodeGroup(inv) as group:
            run_relaunch_preflight(inv, port, group, previous, grace=1, notice=said.append)
        assert said == [f"a,b,c: processes of job {previous.id} (the previous attempt) still there: stopping them"]
        assert marked(previous.id) == []
        with socket.socket() as taken, NodeGroup(inv) as group:
            taken.bind(("0.0.0.0", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            with pytest.raises(LaunchRefused) as refused:
                run_relaunch_preflight(inv, busy, group, previous, grace=1, notice=said.append)
        assert f"a: port {busy} is already in use on the master" in refused.value.message
    finally:
        runner.invoke(app, ["stop", previous.id, "--grace", "1"])


def test_the_relaunch_preflight_names_a_node_it_cannot_reach(tmp_path: Path) -> None:
    from ascendctl.jobs.service import LaunchRefused, run_relaunch_preflight
    from ascendctl.jobs.record import JobRecord, NodeJob
    from ascendctl.remote.group import NodeGroup

    path = local_inventory(tmp_path)
    path.write_text(path.read_text().replace("defaults:\n", "defaults:\n  connect_retries: 0\n")
                    + "  - {name: d, host: 127.0.0.9, transport: ssh, port: 1, connect_timeout: 2}\n")
    inv = load_inventory(path)
    previous = JobRecord("j0", "torchrun", str(path), ["t.py"], "127.0.0.1", 29500, str(tmp_path / "logs"),
                         (NodeJob("a", "127.0.0.1", 0, "cmd", exit_code=1),), 0.0)
    with NodeGroup(inv) as group, pytest.raises(LaunchRefused) as refused:
        run_relaunch_preflight(inv, 29500, group, previous, grace=1, notice=lambda _m: None)
    assert refused.value.message.startswith("relaunch preflight failed, nothing started:\nd: unreachable: ")


# --- launch --detach --restarts N: the job's supervisor runs the same restart loop -------------------------------------


def detached(tmp_path: Path, *args: str) -> str:
    """`launch --detach --restarts ...` of the stand-in on local nodes a, b, c: returns at once; attempt 1's id."""
    result = runner.invoke(app, ["launch", "-i", str(local_inventory(tmp_path)), "--launcher", "torchrun", "--no-preflight",
                                 "--detach", "--grace", "1", "--log-dir", str(tmp_path / "logs"), *args, "--", "train.py"],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    [record] = list_jobs()
    assert record.supervisor is not None and record.supervisor.loop and record.status == "running", record
    assert f"restarts: on, up to " in result.stdout and f"pid {record.supervisor.pid}, runs the restart loop" in result.stdout
    return record.id


def until(what: Any, seconds: float = 60) -> Any:
    """Poll `what()` until it is truthy (the supervisor works in its own process); its last value."""
    deadline = time.monotonic() + seconds
    while not (value := what()):
        assert time.monotonic() < deadline, f"still not so after {seconds} s"
        time.sleep(0.1)
    return value


def loop_ended(first: str) -> Any:
    """The supervisor of `first` exited: every attempt's record, first to last."""
    from tests.test_launch import process_alive

    pid = load_job(first).supervisor.pid  # type: ignore[union-attr]
    until(lambda: not process_alive(pid))
    return sorted((r for r in list_jobs() if first in (r.id, r.restart_of)), key=lambda r: r.attempt)


def status_of(job: str) -> tuple[int, str, dict[str, Any]]:
    shown = runner.invoke(app, ["status", job], catch_exceptions=False)
    document = runner.invoke(app, ["status", job, "--json"], catch_exceptions=False)
    data = json.loads(document.stdout)
    assert_valid("status", data)
    return shown.exit_code, shown.stdout, data


def test_a_detached_job_whose_rank_fails_once_is_relaunched_by_its_supervisor_and_finishes(tmp_path: Path) -> None:
    first = detached(tmp_path, "--restarts", "2", "--restart-backoff", "0", "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=1")
    attempts = loop_ended(first)
    assert [(r.attempt, r.status.value, (r.decision or "").split(":")[0]) for r in attempts] == [
        (1, "failed", "restart"), (2, "succeeded", "done")]
    assert attempts[1].restart_of == first and attempts[1].supervisor == attempts[0].supervisor  # the loop's own
    said = Path(attempts[1].node("b").log).read_text()  # the same --log-dir: attempt 2's log now
    assert "rank 1 attempt 2" in said and "rank 1 done" in said and "failing" not in said  # ASCENDCTL_ATTEMPT
    code, text, data = status_of(attempts[1].id)
    assert code == 0 and f"restart loop of job {first} (supervisor pid " in text and "ended after attempt 2" in text
    # the id `launch --detach` gave is attempt 1's, which failed: its status speaks for the loop, which succeeded
    assert status_of(first)[0] == 0
    assert data["restarts"]["state"] == "ended" and [a["decision"] for a in data["restarts"]["attempts"]] == ["restart", "done"]
    supervisor_log = Path(attempts[0].supervisor.log).read_text()  # type: ignore[union-attr]
    assert f"the restart loop of job {first} ends after 2 attempt(s): done: the job succeeded" in supervisor_log


def test_a_detached_job_stopped_while_its_loop_waits_starts_no_attempt_after_the_stop(tmp_path: Path) -> None:
    first = detached(tmp_path, "--restarts", "3", "--restart-backoff", "60", "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=3")
    until(lambda: load_job(first).restart_at)  # attempt 1 failed; the loop waits 60 s for attempt 2
    code, text, data = status_of(first)
    assert "waiting to start attempt 2 at " in text, text
    assert code == 0  # attempt 1 failed, but the job goes on: nothing to requeue yet
    assert data["restarts"]["state"] == "waiting" and data["restarts"]["next_attempt"] == 2
    assert data["restarts"]["next_at"] == load_job(first).restart_at
    stopped = runner.invoke(app, ["stop", first, "--grace", "1"], catch_exceptions=False)
    assert stopped.exit_code == 0, stopped.output
    assert f"job {first}: its restart loop is stopped: no attempt starts after attempt 1" in stopped.stderr
    attempts = loop_ended(first)  # at once, not after the 60 s backoff
    assert [r.id for r in attempts] == [first] and attempts[0].restart_at is None
    assert attempts[0].decision is not None and attempts[0].decision.startswith(
        "done: stopped by the user (`ascendctl stop`) while it waited to start attempt 2: not restarted (it had decided: restart: ")
    code, text, data = status_of(first)
    assert data["restarts"]["state"] == "ended" and "ended after attempt 1" in text


def test_stop_of_the_first_attempt_stops_the_attempt_running_now_and_the_loop(tmp_path: Path) -> None:
    from tests.test_launch import marked

    first = detached(tmp_path, "--restarts", "3", "--restart-backoff", "0", "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=1",
                     "--env", "OK_SLEEP=60")
    second = until(lambda: [r for r in list_jobs() if r.restart_of == first and r.status == "running" and
                            all(n.pid for n in r.nodes)])[0]
    until(lambda: len(marked(second.id)) >= 3)
    stopped = runner.invoke(app, ["stop", first, "--grace", "1"], catch_exceptions=False)
    assert stopped.exit_code == 0, stopped.output
    assert f"no attempt starts after attempt 2 (job {second.id})" in stopped.stderr
    attempts = loop_ended(first)
    assert [(r.attempt, r.status.value) for r in attempts] == [(1, "failed"), (2, "stopped")]
    assert attempts[1].decision == "done: stopped by the user (`ascendctl stop`): not restarted"
    assert marked(second.id) == []


def test_a_detached_job_that_cannot_import_its_module_runs_once_and_records_do_not_requeue(tmp_path: Path) -> None:
    first = detached(tmp_path, "--restarts", "3", "--restart-backoff", "0", "--env", "IMPORT_ERR=a_module_that_is_not_here")
    [only] = loop_ended(first)
    assert only.status == "failed" and only.first_failure is not None and only.first_failure.category == "LAUNCH"
    assert only.decision is not None and only.decision.startswith("no_restart: LAUNCH on node ")
    assert only.decision.endswith("the job's own error; a restart would fail the same way")
    code, text, data = status_of(first)
    assert data["restarts"]["state"] == "ended" and data["restarts"]["attempts"][0]["decision"] == "no_restart"
    assert code == 6 and data["exit_code"] == 6  # do not requeue: what launch would have exited with in the foreground


def test_a_loop_whose_supervisor_was_killed_is_gone_in_status_not_waiting(tmp_path: Path) -> None:
    import signal

    from tests.test_launch import process_alive

    first = detached(tmp_path, "--restarts", "2", "--restart-backoff", "60", "--env", "FAIL_RANK=1", "--env", "FAIL_UNTIL=2")
    until(lambda: load_job(first).restart_at)
    pid = load_job(first).supervisor.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGKILL)
    until(lambda: not process_alive(pid))
    code, text, data = status_of(first)
    assert f"gone: its supervisor (pid {pid}) is not running; no attempt after attempt 1 will start" in text, text
    assert "waiting" not in text and data["restarts"]["state"] == "gone"


def test_a_foreground_loop_whose_attempt_is_stopped_from_elsewhere_starts_no_other(tmp_path: Path) -> None:
    """`stop` of a foreground `launch --restarts` attempt is the user's stop, not the job's failure: no restart."""
    from tests.test_launch import marked

    argv = [sys.executable, "-m", "ascendctl", "launch", "-i", str(local_inventory(tmp_path)), "--launcher", "torchrun",
            "--no-preflight", "--grace", "1", "--restarts", "2", "--restart-backoff", "0", "--env", "OK_SLEEP=60",
            "--log-dir", str(tmp_path / "logs"), "--", "train.py"]
    proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        job = until(lambda: [r for r in list_jobs() if all(n.pid for n in r.nodes)])[0]
        until(lambda: len(marked(job.id)) >= 3)
        stopped = runner.invoke(app, ["stop", job.id, "--grace", "1", "--no-stacks"], catch_exceptions=False)
        assert stopped.exit_code == 0, stopped.output
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    [only] = list_jobs()
    assert only.status == "stopped" and only.decision == "done: stopped by the user (`ascendctl stop`): not restarted", (only.status, only.decision, err)
    assert proc.returncode == 0 and marked(job.id) == []


def test_the_inventorys_restart_section_is_the_policy_and_each_flag_given_wins(tmp_path: Path) -> None:
    """`restart:` in the inventory restarts without a flag (and holds the @spares group back); `--restarts 0` turns it
    off; a flag given wins over its key, a key over the built-in default."""
    inv = local_inventory(tmp_path, "a b c d")
    inv.write_text(inv.read_text() + "groups: {spares: d}\nrestart: {restarts: 2, backoff: 0, allow_shrink: true}\n")
    argv = ["launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--env", "FAIL_RANK=1",
            "--env", "FAIL_UNTIL=1", "--log-dir", str(tmp_path / "logs")]
    planned = runner.invoke(app, [*argv, "--dry-run", "--json", "--", "train.py"], catch_exceptions=False)
    assert planned.exit_code == 0, planned.output
    assert [n["name"] for n in json.loads(planned.stdout)["plan"]["nodes"]] == ["a", "b", "c"]  # the spare waits
    plain = runner.invoke(app, [*argv, "--restarts", "0", "--dry-run", "--json", "--", "train.py"], catch_exceptions=False)
    assert [n["name"] for n in json.loads(plain.stdout)["plan"]["nodes"]] == ["a", "b", "c", "d"]  # no restarts: no spare held
    result = runner.invoke(app, [*argv, "--", "train.py"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    records = sorted(list_jobs(), key=lambda r: r.attempt)
    assert [(r.attempt, r.status.value, r.restarts) for r in records] == [(1, "failed", 2), (2, "succeeded", 2)]
    assert "attempt 2 in 0 s" in result.output  # the file's backoff, not the built-in 10 s
