"""`launch --flight-recorder` and the Flight Recorder matcher (ascendctl/stacks/flight.py), on real torch dumps.

tests/data/flight/ holds dumps of a real gloo hang made with the venv's torch (INDEX.md says how): rank 2 never calls
all-reduce #5. The matcher is tested on them as they are, with ranks taken away, with pg_config as NCCL writes it,
and against hostile and broken files. The node program and the hook are tested on real processes; the last test
launches the real hang with the venv's torchrun through `ascendctl launch --flight-recorder` and takes its stacks.
"""

from __future__ import annotations

import builtins
import json
import pickle
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.jobs.environment import flight_recorder_env
from ascendctl.stacks.flight import (MAX_DUMP_BYTES, FlightDumpError, load_rank, match_dumps, match_files, rank_from_name,
                                     read_dump)
from ascendctl.stacks.parse import parse_node_answer
from tests.json_schemas import assert_valid
from tests.test_shell_programs import SHELLS, busybox_path  # noqa: F401  (a fixture: one busybox PATH)
from tests.test_stacks import Ranks, node_dir, node_script, program, ranks  # noqa: F401  (fixtures)

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "flight"
REAL = DATA / "gloo-3ranks"
STUCK = ("rank 2 never joined collective #5 of process group 0 (default_pg): gloo:all_reduce, input sizes [[4, 8]] "
         "Float (rank 2 at #4; ranks 0,1 joined it)")


def real(pattern: str = "*.fr.json", *, without: tuple[int, ...] = ()) -> list[tuple[str, bytes]]:
    files = [(p.name, p.read_bytes()) for p in sorted(REAL.glob(pattern))]
    return [(name, data) for name, data in files if rank_from_name(name) not in without]


def torch_dump(rank: int) -> dict[str, Any]:
    """The torch part of a rank's real dump, to be changed by a test."""
    document: dict[str, Any] = json.loads(next(REAL.glob(f"rank-{rank}.*.fr.json")).read_text())
    return dict(document["dumps"]["torch"])


# -- the matcher on the real dumps -----------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["*.fr.json", "torch-fr-rank-?"])
def test_the_rank_that_never_joined_all_reduce_5_is_named_with_its_group_op_and_sizes(pattern: str) -> None:
    report = match_files(real(pattern), expected=range(3))
    assert report.errors == () and report.ranks == (0, 1, 2) and report.missing == ()
    assert report.culprits == (2,)
    assert report.lines() == [STUCK]
    default, pair = report.groups
    assert (default.pg, default.pg_desc, default.members_from, default.positions, default.finished) == (
        "0", "default_pg", "default_pg", ((0, 5), (1, 5), (2, 4)), False)
    assert default.collective is not None and (default.collective.op, default.collective.seq,
                                               default.collective.input_sizes) == ("gloo:all_reduce", 5, ((4, 8),))
    # the pair group made by new_group([0, 2]): its members from the entries, both at #4, finished: nothing to say
    assert (pair.pg, pair.members, pair.members_from, pair.positions, pair.finished, pair.message) == (
        "1", (0, 2), "entries", ((0, 4), (2, 4)), True, None)


def test_gloo_keys_pg_config_by_an_empty_name_and_the_answer_does_not_depend_on_it() -> None:
    for name, data in real("*.fr.json") + real("torch-fr-rank-?"):
        document = read_dump(data)
        config = (document["dumps"]["torch"] if "dumps" in document else document)["pg_config"]
        assert list(config) == [""], name  # what makes torch's own fr_trace fail (INDEX.md)
    assert [g.members_from for g in match_files(real()).groups] == ["default_pg", "entries"]


def test_the_json_and_the_pickle_of_the_same_ranks_line_up_alike() -> None:
    as_json, as_pickle = match_files(real("*.fr.json")), match_files(real("torch-fr-rank-?"))
    assert [g.to_dict() for g in as_json.groups] == [g.to_dict() for g in as_pickle.groups]


def test_a_rank_without_a_dump_is_named_and_the_others_still_give_the_answer() -> None:
    report = match_files(real(without=(0,)), expected=range(3))
    assert report.missing == (0,) and report.culprits == (2,)
    assert report.lines()[0].startswith("rank 2 never joined collective #5 of process group 0 (default_pg)")
    assert report.lines()[-1] == "no dump from rank 0"
    # the stuck rank's own dump missing: the others joined #5 and it never finished; who is missing is said
    report = match_files(real(without=(2,)), expected=range(3))
    assert report.culprits == () and report.missing == (2,)
    assert report.lines() == ["every member joined collective #5 of process group 0 (default_pg) and it has not finished: "
                              "gloo:all_reduce, input sizes [[4, 8]] Float", "no dump from rank 2"]


def test_pg_config_that_names_its_group_gives_the_members_even_one_that_recorded_nothing() -> None:
    dumps = {rank: torch_dump(rank) for rank in range(3)}
    for rank, dump in dumps.items():  # as NCCL writes it: keyed by the group's name, its global ranks listed
        dump["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
                             "1": {"name": "1", "desc": "undefined", "ranks": "[0, 1, 2]"}}
    report = match_dumps([load_rank(json.dumps(d).encode(), r) for r, d in dumps.items()], expected=range(3))
    default, pair = report.groups
    assert (default.members_from, default.members, default.no_dump, default.absent) == ("pg_config", (0, 1, 2, 3), (3,), (2,))
    # rank 1 is a member by pg_config and never recorded a collective of group 1: it never joined #4
    assert (pair.members, pair.positions, pair.absent) == ((0, 1, 2), ((0, 4), (1, 0), (2, 4)), (1,))
    assert report.culprits == (1, 2)


def test_a_group_whose_own_name_is_empty_is_still_lined_up() -> None:
    dumps = {rank: torch_dump(rank) for rank in range(3)}
    for dump in dumps.values():
        dump["entries"] = [{**e, "process_group": ["", ""]} for e in dump["entries"] if e["process_group"][0] == "0"]
        dump["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[0, 1, 2]"}}
    report = match_dumps([load_rank(json.dumps(d).encode(), r) for r, d in dumps.items()])
    assert [(g.pg, g.members_from, g.absent) for g in report.groups] == [("", "entries", (2,))]
    assert report.lines()[0].startswith("rank 2 never joined collective #5 of process group '': gloo:all_reduce")


def test_torch_npus_hccl_recorder_is_lined_up_apart_from_torchs() -> None:
    torch_part = torch_dump(1)
    entries = [{**e, "profiling_name": "hccl:allreduce"} for e in torch_part["entries"][:3]]
    hccl = {**torch_part, "pg_status": {}, "entries": entries}
    wrapper = {"ascendctl_flight_recorder": 1, "rank": 1, "pid": 7, "dumps": {"torch": torch_part, "hccl": hccl}, "errors": []}
    dump = load_rank(json.dumps(wrapper).encode())
    assert dump.rank == 1 and dict(dump.positions) == {("hccl", "0"): 3, ("torch", "0"): 5}
    report = match_dumps([dump, load_rank(json.dumps({**wrapper, "rank": 0}).encode())])
    assert [g.label for g in report.groups] == ["HCCL process group 0 (default_pg)", "process group 0 (default_pg)"]


def test_ranks_at_the_same_number_with_a_different_collective_are_a_mismatch() -> None:
    dumps = {rank: torch_dump(rank) for rank in (0, 1)}
    newest = dumps[1]["entries"][-1]
    assert newest["collective_seq_id"] == 5
    newest["input_sizes"] = [[8, 8]]
    report = match_dumps([load_rank(json.dumps(d).encode(), r) for r, d in dumps.items()])
    assert report.groups[0].mismatched == ((1, "gloo:all_reduce, input sizes [[8, 8]] Float"),)
    assert report.lines() == ["collective #5 of process group 0 (default_pg) differs between ranks: gloo:all_reduce, "
                              "input sizes [[4, 8]] Float vs rank 1: gloo:all_reduce, input sizes [[8, 8]] Float"]


def test_a_rank_dumped_twice_keeps_its_furthest_position_and_the_rank_comes_from_the_name_for_torchs_files() -> None:
    old = torch_dump(0)
    old["entries"] = old["entries"][:2]
    old["pg_status"] = {}
    report = match_files([("torch-fr-rank-0", json.dumps(old).encode())] + real("*.fr.json"))
    assert report.lines() == [STUCK]
    assert [rank_from_name(n) for n in ("rank-3.1234.fr.json", "fr-rank-12.99.json", "torch-fr-rank-7", "x")] == [
        3, 12, 7, None]


# -- files that are not dumps ----------------------------------------------------------------------------------------
class Hostile:
    """Unpickling this opens (creates) the file named: code run by the pickle."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return builtins.open, (str(self.target), "w")


def test_a_hostile_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    target = tmp_path / "pwned"
    payload = pickle.dumps({"entries": [], "version": "2.10", "x": Hostile(target)}, protocol=2)
    pickle.loads(payload).get("x").close()  # the plain unpickler does run it: the file is a real threat
    assert target.exists()
    target.unlink()
    with pytest.raises(FlightDumpError, match=r"refused: the pickle names a global \(io\.open\)"):
        read_dump(payload)
    report = match_files([("torch-fr-rank-1", payload)] + real(without=(1,)))
    assert not target.exists()
    assert report.errors == (("torch-fr-rank-1", "not a plain pickle: UnpicklingError: refused: the pickle names a "
                                                 "global (io.open)"),)
    assert report.culprits == (2,)  # the other ranks still give their answer


@pytest.mark.parametrize("data, message", [
    (b"", "neither JSON nor a pickle"),
    (b"\x00\x01garbage", "neither JSON nor a pickle"),
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "expected a mapping, found list"),
    (b"[" * 100_000, "JSON nested too deeply"),
    (b"{\xff\xfe}", "not valid JSON"),
    ((REAL / "torch-fr-rank-0").read_bytes()[:700], "not a plain pickle"),
    (pickle.dumps([1, 2], protocol=2), "expected a mapping, found list"),
    (b'{"entries": 5}', "`entries` is not a list"),
    (b'{"ascendctl_flight_recorder": 1, "rank": 1, "dumps": [1]}', "no `dumps` mapping"),
    (b'{"entries": []}', "no rank"),
])
def test_garbage_is_a_clear_error_never_a_traceback(data: bytes, message: str) -> None:
    with pytest.raises(FlightDumpError, match=message):
        load_rank(data)
    report = match_files([("dump", data)])
    assert len(report.errors) == 1 and message.strip("`") in report.errors[0][1] and report.lines()[0] == \
        "no collective recorded in the dumps"


def test_a_file_larger_than_any_dump_is_not_read() -> None:
    with pytest.raises(FlightDumpError, match="larger than any Flight Recorder dump"):
        read_dump(b"{" + b" " * MAX_DUMP_BYTES + b"}")


def test_entries_of_another_shape_are_skipped_not_fatal() -> None:
    dump = torch_dump(0)
    dump["entries"] = [None, {"process_group": "x"}, {"is_p2p": True, "process_group": ["0", "p"], "collective_seq_id": 9},
                       {"process_group": ["0", "default_pg"], "collective_seq_id": True}, *dump["entries"]]
    assert match_dumps([load_rank(json.dumps(dump).encode(), 0)]).groups[0].positions == ((0, 5),)


# -- the environment, the hook and the node program ------------------------------------------------------------------
def test_the_flag_sets_torchs_and_torch_npus_variables_under_the_nodes_stacks_directory(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"defaults: {{transport: local, slots: 2, python: {sys.executable}}}\n"
                   "nodes:\n  - {name: a, host: 127.0.0.1}\n")
    args = ["launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--dry-run", "--json",
            "--log-dir", "/jobs/x"]
    plain = json.loads(runner.invoke(app, [*args, "--", "t.py"], catch_exceptions=False).stdout)
    flagged = json.loads(runner.invoke(app, [*args, "--flight-recorder", "--", "t.py"], catch_exceptions=False).stdout)

    def env(document: dict[str, Any]) -> dict[str, str]:
        found: dict[str, str] = next(v for k, v in _walk(document) if k == "env" and isinstance(v, dict))
        return found

    added = {k: v for k, v in env(flagged).items() if k not in env(plain)}
    assert added == flight_recorder_env("/jobs/x/a/stacks/live")
    assert added["TORCH_FR_BUFFER_SIZE"] == "2000" and added["ASCENDCTL_FLIGHT_RECORDER"] == "1"
    assert added["TORCH_FR_DUMP_TEMP_FILE"] == added["TORCH_HCCL_DEBUG_INFO_TEMP_FILE"] == "/jobs/x/a/stacks/live/torch-fr-rank-"
    assert not any(k.startswith(("TORCH_FR", "TORCH_HCCL", "ASCENDCTL_FLIGHT")) for k in env(plain))


def test_a_submitted_batch_job_launches_with_the_flag_too() -> None:
    from ascendctl.jobs.plan import LaunchOptions
    from ascendctl.jobs.submit import inner_launch_args

    assert "--flight-recorder" in inner_launch_args(LaunchOptions("torchrun", ("t.py",), flight_recorder=True), "j",
                                                    preflight=False)
    assert "--flight-recorder" not in inner_launch_args(LaunchOptions("torchrun", ("t.py",)), "j", preflight=False)


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


@pytest.mark.parametrize("shell", [None, *SHELLS])
def test_the_node_program_asks_only_flagged_ranks_and_a_rank_without_torch_says_so(
        shell: str | None, busybox_path: str, ranks: Ranks, tmp_path: Path) -> None:
    directory = node_dir(tmp_path)
    ranks.start(directory, RANK="0", LOCAL_RANK="0", STUCK_RANK="0", ASCENDCTL_FLIGHT_RECORDER="1")
    ranks.start(directory, RANK="1", LOCAL_RANK="1")  # no flag: no thread, no request, no file
    ranks.wait_ready(0, 1)
    argv = [shutil.which(SHELLS[shell][0]) or SHELLS[shell][0], *SHELLS[shell][1:]] if shell else None
    answer = parse_node_answer(node_script(ranks.job, directory, shell=argv, path=busybox_path if shell else None), "n0nce")
    kinds = {r.rank: [f.kind for f in r.files] for r in answer.ranks}
    assert kinds == {0: ["faulthandler", "flight-recorder"], 1: ["faulthandler"]}
    flagged = answer.ranks[0]
    kept = Path(str(answer.incident)) / f"rank-0.{flagged.pid}.fr.json"
    assert json.loads(kept.read_text()) == json.loads(flagged.files[1].text)
    assert sorted(p.name for p in (directory / "stacks" / "live").iterdir() if p.name.startswith("fr-")) == []
    report = match_files([(str(kept), flagged.files[1].text.encode())])
    assert report.notes == ((0, "torch.distributed is not loaded in this process: no Flight Recorder to dump"),)
    assert report.groups == () and report.errors == ()


# -- end to end: a real torchrun hang, launched with the flag -------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def torch_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """`launch --flight-recorder` of tests/data/flight/hang_gloo.py: one local node, 3 ranks, rank 2 stuck."""
    pytest.importorskip("torch.distributed")
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists():
        pytest.skip("no torchrun beside this Python")
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"defaults: {{transport: local, slots: 3, python: {sys.executable}}}\n"
                   "nodes:\n  - {name: a, host: 127.0.0.1}\n")
    monkeypatch.chdir(tmp_path)
    ready = tmp_path / "ready"
    ready.mkdir()
    launched = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--detach",
                                   "--flight-recorder", "--master-port", str(free_port()), "--log-dir", str(tmp_path / "logs"),
                                   "--env", f"READY_DIR={ready}", "--env", "JOB_STUCK_RANK=2", "--json", "--",
                                   str(DATA / "hang_gloo.py")], catch_exceptions=False)
    assert launched.exit_code == 0, launched.output
    job = json.loads(launched.stdout)["job"]
    try:
        deadline = time.monotonic() + 120
        while len(list(ready.iterdir())) < 3:
            assert time.monotonic() < deadline, sorted(p.name for p in ready.iterdir())
            time.sleep(0.1)
        yield {"id": job["id"], "logs": tmp_path / "logs"}
    finally:
        stopped = runner.invoke(app, ["stop", job["id"], "--grace", "1"], catch_exceptions=False)
        assert stopped.exit_code == 0, stopped.output
        left = subprocess.run(["sh", "-c", f"grep -lzF 'ASCENDCTL_JOB={job['id']}/' /proc/[0-9]*/environ"],
                              capture_output=True, text=True).stdout
        assert left == "", left


@pytest.mark.slow
def test_stacks_of_a_real_torch_hang_launched_with_the_flag_name_the_rank_that_never_joined(torch_job: dict[str, Any]) -> None:
    result = runner.invoke(app, ["stacks", torch_job["id"], "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert_valid("stacks", document)
    flight = document["flight_recorder"]
    assert flight["ranks"] == [0, 1, 2] and flight["culprits"] == [2] and flight["missing"] == [], flight
    assert flight["messages"] == [STUCK]
    kept = sorted(p.name for p in (torch_job["logs"] / "a" / "stacks").glob("2*/rank-*.fr.json"))
    assert [rank_from_name(name) for name in kept] == [0, 1, 2]
    text = runner.invoke(app, ["stacks", torch_job["id"]], catch_exceptions=False).stdout.splitlines()
    assert text[text.index("flight recorder (3 rank(s) dumped):") + 1] == f"  {STUCK}"
