"""`ascendctl perf`: links from torch.profiler traces. A point-to-point receive names its link (peer -> rank), timed at
the receiver; point-to-point calls do not vote. Real traces of a 4-host gloo job on the test hosts (tests/data/perf/
INDEX.md: `slow_link/` with h02 -> h01 limited by tc, `even_links/` with no limit) and made-up events for the edges."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ascendctl.errors import ExitCode
from ascendctl.perf import read
from ascendctl.perf.analyse import gbps, perf
from tests.test_perf import run_json

DATA = Path(__file__).resolve().parent / "data" / "perf"
SLOW_LINK, EVEN_LINKS = DATA / "slow_link", DATA / "even_links"
PAIRS = {(s, d) for s in range(4) for d in range(4) if s != d}


def test_the_real_rate_limited_link_is_named_and_no_other() -> None:
    report = perf([SLOW_LINK])
    assert {(link.src, link.dst) for link in report.links} == PAIRS and {link.transport for link in report.links} == {"gloo"}
    assert [link.name for link in report.slow_links] == ["1->0 gloo"]
    (slow,) = report.slow_links
    assert slow.bandwidth_gbps is not None and slow.median_gbps is not None
    assert slow.bandwidth_gbps < 0.25 * slow.median_gbps  # tc held it to 20mbit, the others to 100mbit
    # it is a link of gloo's all_reduce ring too: every rank's all_reduce is many times the unlimited job's, and no
    # rank is named for it (the vote is on the order the ranks arrive in, not on how long the call took)
    limited = [min(c.ms for c in p.calls if c.op == "all_reduce") for p in profiles(SLOW_LINK)]
    unlimited = max(c.ms for p in profiles(EVEN_LINKS) for c in p.calls if c.op == "all_reduce")
    assert len(limited) == 4 and min(limited) > 3 * unlimited
    assert slow.size_mb == pytest.approx(3 * 1.048576)  # three profiled steps of 1 MiB
    assert report.straggler is None and report.exit_code == ExitCode.CHECKS_FAILED
    assert f"slow link(s): 1->0 gloo {gbps(slow.bandwidth_gbps)} GB/s (median {gbps(slow.median_gbps)})" in report.verdict


def test_the_real_job_without_a_limit_names_nothing() -> None:
    report = perf([EVEN_LINKS])
    assert {(link.src, link.dst) for link in report.links} == PAIRS
    assert report.slow_links == () and report.straggler is None and report.exit_code == ExitCode.OK
    assert report.verdict.endswith("links: none slow of 12")


def test_the_json_names_the_link_by_source_destination_and_transport() -> None:
    code, document = run_json([str(SLOW_LINK)])
    assert code == ExitCode.CHECKS_FAILED and document["links_measured"] is True and document["straggler"] is None
    assert [(x["src"], x["dst"], x["transport"]) for x in document["links"] if x["slow"]] == [(1, 0, "gloo")]


def profiles(path: Path) -> list[Any]:
    return read.read_profiles([path], readers=1)[0]


def events_of(rank: int) -> list[dict[str, Any]]:
    document = json.loads(gzip.decompress((SLOW_LINK / f"rank{rank}.pt.trace.json.gz").read_bytes()))
    return sorted((e for e in document["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])


def test_a_receive_is_timed_at_the_receiver_because_a_send_ends_when_its_bytes_are_buffered() -> None:
    """gloo's send of 1 MiB ends once the bytes are in the socket's buffer: on the limited link rank 1's sends end in
    under a millisecond while rank 0's receives take hundreds. The shorter end would hide the link; the receive is used."""
    events = events_of(1)
    ops = [(e, next(o for o in reversed(events[:i]) if o["name"].startswith("c10d::"))) for i, e in enumerate(events)
           if e["name"] == "gloo:send"]
    sends = [e["dur"] for e, op in ops if op["name"] == "c10d::send" and op["args"]["Concrete Inputs"][2] == "0"]
    profile = read.parse_trace(gzip.decompress((SLOW_LINK / "rank0.pt.trace.json.gz").read_bytes()), "rank0", "rank0")
    receives = [s.time_ms * 1000 for s in profile.links if s.src == 1]
    assert len(sends) == len(receives) == 3 and max(sends) * 10 < min(receives)
    assert {(s.src, s.dst) for s in profile.links} == {(1, 0), (2, 0), (3, 0)}  # what rank 0 received, from whom
    assert all(s.size_mb == pytest.approx(1.048576) and s.transport == "gloo" for s in profile.links)


def test_point_to_point_calls_count_as_communication_but_do_not_vote() -> None:
    profile = read.parse_trace(gzip.decompress((SLOW_LINK / "rank0.pt.trace.json.gz").read_bytes()), "rank0", "rank0")
    assert {c.op for c in profile.calls} == {"all_reduce", "barrier"}
    assert all(s.comm_ms is not None and s.step_ms is not None and s.comm_ms > 0.5 * s.step_ms for s in profile.steps)


def made(recv_args: dict[str, Any], range_args: dict[str, Any], info: dict[str, Any] | None = None,
         extra: list[dict[str, Any]] | None = None) -> list[Any]:
    """A one-step trace of rank 2 receiving from rank 0 as torch 2.13 writes it (c10d::recv_, then gloo:recv inside
    it on the same thread), its link samples as tuples."""
    events = [{"ph": "X", "name": "ProfilerStep#4", "cat": "user_annotation", "ts": 0, "dur": 5000, "tid": 1},
              {"ph": "X", "name": "c10d::recv_", "cat": "cpu_op", "ts": 100, "dur": 30, "tid": 1, "args": recv_args},
              {"ph": "X", "name": "gloo:recv", "cat": "user_annotation", "ts": 120, "dur": 4000, "tid": 1,
               "args": range_args}, *(extra or [])]
    document = {"distributedInfo": info or {"rank": 2, "world_size": 4}, "traceEvents": events}
    profile = read.parse_trace(json.dumps(document).encode(), "t", "t")
    assert [c.op for c in profile.calls if c.op == "recv"] == []
    return [(s.src, s.dst, s.transport, s.op, s.size_mb, s.time_ms) for s in profile.links]


PEER = {"Concrete Inputs": ["", "", "0", "0"]}
FLOATS = {"Input Dims": [[1024, 256]], "Input type": ["float"]}


def test_a_made_receive_is_one_sample_with_its_peer_size_and_time() -> None:
    assert made(PEER, FLOATS) == [(0, 2, "gloo", "step4/recv 0->2#0", 1.048576, 4.0)]
    assert made(PEER, {"Input Dims": [[1024]], "Input type": ["c10::BFloat16"]})[0][4] == pytest.approx(0.002048)


@pytest.mark.parametrize("recv_args, range_args, info, why", [
    ({}, FLOATS, None, "no record_shapes: no peer"),
    (PEER, {}, None, "no record_shapes: no size"),
    (PEER, {"Input Dims": [[1024]], "Input type": ["c10::Float8_e4m3fn"]}, None, "a type of unknown size"),
    (PEER, FLOATS, {"rank": 2, "pg_config": [{"ranks": [0, 1, 2, 3]}, {"ranks": [2, 3]}]},
     "two process groups: the peer may be a rank of either"),
    ({"Concrete Inputs": ["", "", "2", "0"]}, FLOATS, None, "a receive from itself"),
])
def test_a_receive_whose_peer_or_size_is_unknown_names_no_link(recv_args: dict[str, Any], range_args: dict[str, Any],
                                                              info: dict[str, Any] | None, why: str) -> None:
    assert made(recv_args, range_args, info) == [], why


def test_on_a_gpu_the_recv_range_only_enqueues_so_no_link_is_named() -> None:
    kernel = {"ph": "X", "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "cat": "kernel",
              "ts": 200, "dur": 300, "tid": 9}
    assert made(PEER, FLOATS, extra=[kernel]) == []


def test_small_bandwidths_keep_two_significant_digits() -> None:
    assert (gbps(17.4949), gbps(0.1), gbps(0.0026213), gbps(None)) == ("17.49", "0.10", "0.0026", "0")
