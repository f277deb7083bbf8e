"""Synthetic inputs for `ascendctl report` of any size: a collect bundle's metadata, a triage --json document
and a preflight --json document, written by code (no file outside the repository is read).

The job: `nodes` x `ranks` ranks; rank `culprit` (on the second node) raises first, every other rank then
logs a communication error naming it and is stopped by its launcher (SIGTERM). The third node has one
NPU fewer and a link down; the msprof summary marks the culprit's node slow. Used by tests/test_report.py
and bench/report.py. `hostile` goes into the culprit's evidence line, a node name and a check summary.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HOSTILE = '<script>alert("x")</script></svg><img src="http://198.51.100.7/pixel.png">&amp;'
T0 = datetime(2026, 11, 23, 16, 16, 30)
CHECKS = ("ssh", "ntp", "clock_skew", "mtu", "path_mtu", "npu.count", "npu.health", "hccn.link", "hccn.ip", "versions",
          "disk", "shm", "ulimit", "master_port")


def _t(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def name(i: int, nodes: int) -> str:
    return f"n{i + 1:0{max(2, len(str(nodes)))}d}"


def triage_doc(nodes: int, ranks: int, *, hostile: str = HOSTILE) -> dict[str, Any]:
    """A `triage --json` document (envelope included) of the job described above."""
    culprit_node, culprit_rank = name(1, nodes), ranks + min(1, ranks - 1)
    first = {"node": culprit_node, "rank": culprit_rank, "device": culprit_rank - ranks, "time": _t(2.0),
             "file": f"bundle.tar.gz:{culprit_node}/files/root/logs/{culprit_node}/launcher.log", "line": 54,
             "text": f"RuntimeError: rank {culprit_rank}: bad batch at step 2 {hostile}", "signature": "python.exception"}
    rank_rows: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = [{**first, "category": "EXCEPTION", "local_rank": None, "role": "error", "peer_rank": None,
                                       "peer_addr": None, "exit_code": None, "signal": None}]
    victims = []
    for n in range(nodes):
        node = name(n, nodes)
        for local in range(ranks):
            rank = n * ranks + local
            brief_log = f"bundle.tar.gz:{node}/files/root/logs/{node}/launcher.log"
            if rank == culprit_rank:
                rank_rows.append({"node": node, "rank": rank, "role": "culprit",
                                  "first_error": {"signature": "python.exception", "category": "EXCEPTION", "time": first["time"],
                                                  "file": first["file"], "line": 54, "text": first["text"]},
                                  "first_comm_error": None, "peer": None, "exit_code": 1, "signal": None,
                                  "exit_time": _t(2.5), "last_step": 1, "last_progress_time": _t(1.0)})
                continue
            when = 3.0 + (rank % 97) / 97 * 2.0
            comm = {"signature": "gloo.connection_closed", "category": "COMM_TIMEOUT", "time": _t(when), "file": brief_log,
                    "line": 60 + local, "text": f"[rank{rank}]: Connection closed by peer [10.0.0.12]:{20000 + rank}"}
            rank_rows.append({"node": node, "rank": rank, "role": "victim", "first_error": None, "first_comm_error": comm,
                              "peer": f"rank {culprit_rank}", "exit_code": -15, "signal": "SIGTERM", "exit_time": _t(when + 1.5),
                              "last_step": 1, "last_progress_time": _t(1.0 + (rank % 5) / 10)})
            findings.append({**comm, "node": node, "rank": rank, "device": local, "local_rank": local, "role": "error",
                             "peer_rank": culprit_rank, "peer_addr": "10.0.0.12", "exit_code": None, "signal": None})
            findings.append({"category": "UNKNOWN", "signature": "torchrun.sigterm", "node": node, "rank": rank, "device": local,
                             "local_rank": local, "time": _t(when + 1.0), "file": brief_log, "line": 90 + local,
                             "text": f"Sending process {4000 + rank} closing signal SIGTERM", "role": "stop", "peer_rank": None,
                             "peer_addr": None, "exit_code": None, "signal": None})
            victims.append({"node": node, "rank": rank, "how": f"communication error (gloo.connection_closed) naming rank {culprit_rank}"})
    return {"schema": 1, "command": ["ascendctl", "triage", "--json", "bundle.tar.gz"], "status": "ok", "exit_code": 0,
            "category": "EXCEPTION", "first_failure": first, "single_culprit": True,
            "reason": f"node {culprit_node}, rank {culprit_rank} raised first; the others lost their peer",
            "culprit_reason": "own_error", "confidence": "high", "oom_kind": None, "victims": victims, "ranks": rank_rows,
            "launcher_blamed": None, "findings": findings,
            "hints": ["read that rank's traceback (its log around the evidence line): the other ranks only lost their peer"],
            "files_read": nodes * 3, "bytes_read": nodes * 40000, "suppressed_findings": 0, "notes": [], "unreadable": [],
            "errors": []}


def preflight_doc(nodes: int, *, hostile: str = HOSTILE) -> dict[str, Any]:
    """A `preflight --json` document: every check passes except MTU on the third node and NTP warning on the last."""
    rows = []
    for n in range(nodes):
        checks = []
        for check in CHECKS:
            status, summary, hint = "pass", f"{check} ok on {name(n, nodes)}", None
            if n == min(2, nodes - 1) and check == "mtu":
                status, summary, hint = "fail", f"eth0 MTU 1500 < 9000 {hostile}", "set MTU 9000 on eth0 and the switch port"
            if n == nodes - 1 and check == "ntp":
                status, summary, hint = "warn", "chrony synchronised, stratum 9", "check the NTP server"
            if check == "npu.health" and nodes > 1 and n == 0:
                status, summary = "skip", "npu-smi absent"
            checks.append({"id": check, "status": status, "summary": summary, "hint": hint})
        rows.append({"name": name(n, nodes), "host": f"10.0.{n // 250}.{n % 250 + 1}", "reachable": True, "checks": checks})
    cluster = [{"id": "clock_skew", "status": "pass", "summary": "max skew 0.8 ms", "hint": None},
               {"id": "path_mtu", "status": "fail", "summary": f"{name(min(2, nodes - 1), nodes)}: 1472-byte ping lost",
                "hint": "a jumbo-frame black hole on the data path"}]
    return {"schema": 1, "command": ["ascendctl", "preflight", "--json"], "status": "partial", "exit_code": 3, "ok": False,
            "checks": list(CHECKS), "nodes": rows, "cluster": cluster, "duration": 3.2, "errors": []}


def write_bundle(directory: Path, nodes: int, ranks: int, *, npu_info: str | None = None) -> Path:
    """A bundle directory with collect's metadata only (manifest, summary, job record, facts, npu-smi/hccn_tool output)."""
    directory.mkdir(parents=True, exist_ok=True)
    odd = min(2, nodes - 1)
    manifest_nodes = []
    for n in range(nodes):
        node = name(n, nodes)
        (directory / node / "commands").mkdir(parents=True, exist_ok=True)
        devices = ranks - 1 if n == odd and nodes > 2 else ranks
        (directory / node / "facts.json").write_text(json.dumps({"name": node, "npu_ids": list(range(devices))}))
        if npu_info is not None and n != odd:
            (directory / node / "commands" / "npu-smi.info.txt").write_text(npu_info)
        for d in range(devices):
            state = "DOWN" if n == odd and d == 0 else "UP"
            (directory / node / "commands" / f"hccn_tool.link.{d}.txt").write_text(f"link status: {state}\n")
            (directory / node / "commands" / f"hccn_tool.net_health.{d}.txt").write_text("net health status: Success\n")
        manifest_nodes.append({"name": node, "host": f"10.0.0.{n + 1}", "status": "ok"})
    (directory / "manifest.json").write_text(json.dumps({"schema": 1, "nodes": manifest_nodes, "unreachable": []}))
    profiles = []
    for n in range(nodes):
        for local in range(ranks):
            slow = n == 1
            step = 100000.0 * (1.5 if slow else 1.0) + local * 37
            comm = step * (0.22 if slow else 0.08)
            profiles.append({"rank": f"{name(n, nodes)}/PROF_0001 dev {local}", "steps": 20, "step_us": step,
                             "compute_us": step - comm, "comm_us": comm, "comm_share": comm / step, "comm_flag": slow,
                             "straggler": slow})
    summary = {"topology": [{"tool": "npu-smi", "devices": [f"NPU{d}" for d in range(8)],
                             "majority": [name(n, nodes) for n in range(nodes) if n != odd],
                             "outliers": [{"node": name(odd, nodes), "cells": [{"row": "NPU1", "column": "NPU2",
                                                                                "expected": "HCCS", "actual": "PIX"}]}]}],
               "msprof": {"ranks": profiles, "median_step_us": 100000.0, "comm_limit": 0.15, "straggler_factor": 1.2,
                          "straggler_limit_us": 120000.0, "step_spread": 0.05,
                          "straggler_rule": {"spreads": 3.0, "floor": 0.05, "min_effect": 0.2, "looks": 2},
                          "comm_flagged": [], "stragglers": []}}
    (directory / "summary.json").write_text(json.dumps(summary))
    teardown = (T0 + timedelta(seconds=2.8) - datetime(1970, 1, 1)).total_seconds()
    job = {"id": "synthetic", "teardown_started": teardown,
           "nodes": [{"name": name(n, nodes), "utc_offset": 0} for n in range(nodes)]}
    (directory / "job.json").write_text(json.dumps(job))
    return directory


def write_all(directory: Path, nodes: int, ranks: int, *, npu_info: str | None = None) -> list[Path]:
    """Bundle directory, triage.json and preflight.json under `directory`; returns the three paths."""
    bundle = write_bundle(directory / "bundle", nodes, ranks, npu_info=npu_info)
    triage = directory / "triage.json"
    triage.write_text(json.dumps(triage_doc(nodes, ranks)))
    preflight = directory / "preflight.json"
    preflight.write_text(json.dumps(preflight_doc(nodes)))
    return [bundle, triage, preflight]
