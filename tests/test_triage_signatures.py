"""The signature table against real lines (shared samples), common public formats, and near-misses that must not match."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascendctl.triage.signatures import SIGNATURES, TRIGGERS, Category, all_anchors, by_id, trigger_pattern
from ascendctl.triage import candidate_lines_python as _candidate_lines_python, match_line

SAMPLES = Path(__file__).resolve().parent / "data/samples/ascend"
DATA = Path(__file__).resolve().parent / "data" / "triage"
TRIGGER = re.compile(trigger_pattern())

# (sample file, a substring that picks the line, expected signature): real lines from plogs, HCCL docs and public issues.
REAL = [
    ("real_error_lines_github_issues.txt", "Get_Socket_Timeout(EI0006)", "hccl.socket_timeout"),
    ("real_error_lines_github_issues.txt", "Communication_Error_Get_Socket(EI0006)", "hccl.socket_timeout"),
    ("real_error_lines_github_issues.txt", "specific port[16666] fail", "port.in_use"),
    ("real_error_lines_github_issues.txt", "wait socket establish timeout, role[1] rank[12]", "hccl.link_timeout"),
    ("real_error_lines_github_issues.txt", "EI9999: Inner Error!", "cann.inner_error"),
    ("real_error_lines_github_issues.txt", "EI9999: 2024-10-21", "hccl.notify_wait_timeout"),
    ("real_error_lines_github_issues.txt", "timeout:1836.[FUNC", "hccl.notify_wait_timeout"),
    ("real_error_lines_github_issues.txt", "Tried to allocate 5.03 GiB", "device.oom"),
    ("real_error_lines_github_issues.txt", "Tried to allocate 35.31 GiB", "device.oom"),
    ("real_error_lines_github_issues.txt", "Tried to allocate 22.00 MiB", "device.oom"),
    ("plog_fixtures_ascend-faultdiag.txt", "get socket timeout, total[3]", "hccl.socket_timeout"),
    ("plog_fixtures_ascend-faultdiag.txt", "cqe err status[12], time:[2023-07-04 22:15:59.095392]", "hccl.roce_cqe"),
    ("plog_fixtures_ascend-faultdiag.txt", "|  124.0.0.11(1)   |   124.0.0.21(0)   |  server  | no connect |", "hccl.link_timeout"),
    ("plog_fixtures_ascend-faultdiag.txt", "connected p2p timeout, timeout:130 s. local logicDevid:2", "hccl.link_timeout"),
    ("plog_fixtures_ascend-faultdiag.txt", "seq_num 32716847 dispatch timeout", "hccl.link_timeout"),
    ("plog_fixtures_ascend-faultdiag.txt", "there is a sdma error", "ascend.device_fault"),
    ("plog_fixtures_ascend-faultdiag.txt", "receive ts exception msg, call excep_code=0xb4060007", "ascend.device_fault"),
    ("plog_fixtures_ascend-faultdiag.txt", "Hardware error from APEI Generic Hardware Error Source", "apei.hardware_error"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "Communication_Error_Bind_IP_Port(EI0019)", "port.in_use"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "topo exchange server get socket timeout", "hccl.socket_timeout"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "Config_Error_Invalid_Environment_Variable(EI0001)", "ranktable.invalid"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "path /ranktable.json is not a valid real path", "ranktable.invalid"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "in the ranktable is inconsistent", "ranktable.invalid"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "Resource_Error_Insufficient_Device_Memory(EI0011)", "cann.oom_code"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "EI0005: 2024-04-24", "hccl.inconsistent_args"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "Execution_Error_SDMA(EI0012)", "hccl.code_timeout"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "Execution Error ROCE CQE(EI0013)", "hccl.roce_cqe"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "ExceptionType:[Heartbeat Lost Occurred]", "hccl.heartbeat_lost"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "crimer rank [127.10.0.2/2] status[LOST]", "hccl.heartbeat_lost"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "[TaskExecStage][Timeout][Host]Task run failed, base", "hccl.notify_wait_timeout"),
    ("hccl_log_lines_hicann-hccl-fault-diagnosis-docs.txt", "[ParameterConflict]CMD information tag check fail", "hccl.inconsistent_args"),
]


def sample_line(name: str, needle: str) -> str:
    for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines():
        if needle in line:
            return line
    raise AssertionError(f"{name}: no line holds {needle!r}")


def positives() -> list[tuple[str, str]]:
    rows = []
    for line in (DATA / "positives.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            sig, text = line.split("\t", 1)
            rows.append((sig, text))
    return rows


def near_misses() -> list[str]:
    return [line for line in (DATA / "near_misses.txt").read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize("name,needle,expected", REAL, ids=[r[2] + ":" + r[1][:30] for r in REAL])
def test_real_sample_lines_match_their_signature(name: str, needle: str, expected: str) -> None:
    line = sample_line(name, needle)
    sig = match_line(line)
    assert sig is not None and sig.id == expected, (line, sig and sig.id)
    assert TRIGGER.search(line), "the prefilter would never show this line to the signatures"


@pytest.mark.parametrize("expected,line", positives(), ids=[f"{s}:{i}" for i, (s, _) in enumerate(positives())])
def test_public_format_lines_match_their_signature(expected: str, line: str) -> None:
    sig = match_line(line)
    assert sig is not None and sig.id == expected, (line, sig and sig.id)
    assert TRIGGER.search(line)


@pytest.mark.parametrize("line", near_misses())
def test_near_misses_do_not_match(line: str) -> None:
    sig = match_line(line)
    # one loss-scale reduction is normal: it is only counted (a collapse is a run of halvings, see test_triage_engine.py)
    assert sig is None or sig.id == "fp16.loss_scale_halving", (line, sig and sig.id)


def test_every_signature_is_tested_by_a_line() -> None:
    tested = {expected for _, _, expected in REAL} | {sig for sig, _ in positives()}
    assert {s.id for s in SIGNATURES} <= tested, sorted({s.id for s in SIGNATURES} - tested)


def test_table_rows_are_complete_and_ids_unique() -> None:
    ids = [s.id for s in SIGNATURES]
    assert len(ids) == len(set(ids))
    for sig in SIGNATURES:
        assert sig.meaning and sig.hint and sig.anchors and isinstance(sig.category, Category)
    assert by_id("device.oom").category is Category.OOM


def test_every_anchor_is_seen_by_the_prefilter() -> None:
    for anchor in all_anchors():
        assert TRIGGER.search(anchor), anchor


def test_codes_match_in_both_classic_and_named_forms() -> None:
    for code in ("EI0002", "EI0006", "EI0014", "EI0012", "EL0004", "EE9999", "EI0004", "EI0005"):
        classic = match_line(f"{code}: 2024-01-01-12:00:00.000.000 something failed")
        named = match_line(f"[PID: 1] 2025-01-01-12:00:00.000.000 Some_Error_Name({code}): something failed")
        assert classic is not None and named is not None and classic.id == named.id, code


def test_python_prefilter_and_grep_prefilter_see_the_same_lines(tmp_path: Path) -> None:
    import io
    import shutil

    import subprocess

    from ascendctl.triage.reader import GREP_TRIGGERS

    text = "\n".join([*near_misses(), *(line for _, line in positives()), "plain benign line"] * 3) + "\n"
    py = list(_candidate_lines_python(io.BytesIO(text.encode()), b""))
    assert len(py) >= len(positives()) * 3
    if shutil.which("grep"):
        path = tmp_path / "x.log"
        path.write_text(text)
        out = subprocess.run(["grep", "-a", "-n", "-E", "-e", "|".join(f"({t})" for t in GREP_TRIGGERS), str(path)],
                             capture_output=True, check=True, env={"LC_ALL": "C"}).stdout
        grep = [(int(n), t) for n, _, t in (raw.partition(b":") for raw in out.splitlines())]
        assert grep == py
    assert all(TRIGGER.search(t) for t in TRIGGERS if not any(c in t for c in "\\[(?"))
