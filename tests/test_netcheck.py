"""netcheck's pure parts: the pair schedule, the verdict, the backends' command lines and result lines."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any, Callable

import pytest

from ascendctl.netcheck import backends
from ascendctl.netcheck.run import choose_backend
from ascendctl.netcheck.schedule import (Group, Pair, circle_round, default_round_count, pair_rounds, partners_promised,
                                         quick_search_rounds, ring_links, rounds_for_all_pairs, second_look_rounds,
                                         with_second_looks)
from ascendctl.netcheck.verdict import Measurement, NetcheckVerdict, judge
from tests.json_schemas import assert_valid


def partners(n: int, rounds: list[list[tuple[int, int]]]) -> list[set[int]]:
    met: list[set[int]] = [set() for _ in range(n)]
    for pairs in rounds:
        busy: list[int] = [x for pair in pairs for x in pair]
        assert len(busy) == len(set(busy)), "a node in two pairs of one round"
        for a, b in pairs:
            assert a != b and 0 <= a < n and 0 <= b < n
            met[a].add(b)
            met[b].add(a)
    return met


def test_default_schedule_gives_every_node_the_promised_partners_for_every_n_up_to_1024() -> None:
    for n in range(2, 1025):
        rounds = pair_rounds(n)
        want = min(n - 1, math.ceil(math.log2(n)) + 1)
        assert partners_promised(n) == want
        assert min(len(m) for m in partners(n, rounds)) >= want, n
        # no round more than needed: one fewer round breaks the promise (odd n: the bye)
        assert min(len(m) for m in partners(n, rounds[:-1])) < want, n
        # every node is in a pair each round, except the one with the bye when n is odd
        assert all(len(r) == n // 2 for r in rounds)


@pytest.mark.parametrize("n", [*range(2, 40), 63, 64, 127, 128, 1023, 1024])
def test_all_pairs_covers_every_pair_exactly_once_in_n_minus_1_rounds(n: int) -> None:
    rounds = pair_rounds(n, all_pairs=True)
    assert len(rounds) == rounds_for_all_pairs(n) == (n - 1 if n % 2 == 0 else n)
    seen = [frozenset(p) for r in rounds for p in r]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    assert all(len(m) == n - 1 for m in partners(n, rounds))


def test_odd_n_gives_each_node_exactly_one_bye_over_all_rounds() -> None:
    n = 7
    byes = [set(range(n)) - {x for p in circle_round(n, r) for x in p} for r in range(rounds_for_all_pairs(n))]
    assert sorted(x for bye in byes for x in bye) == list(range(n))


def test_small_and_degenerate_schedules() -> None:
    assert pair_rounds(1) == [] and pair_rounds(0) == [] and default_round_count(1) == 0
    assert pair_rounds(2) == [[(0, 1)]]
    assert pair_rounds(3, all_pairs=True) == [[(1, 2)], [(0, 1)], [(0, 2)]]  # a bye each: 0, then 2, then 1
    assert ring_links(range(2)) == [(0, 1)]
    assert ring_links(range(4)) == [(0, 1), (1, 2), (2, 3), (3, 0)]


def test_ring_round_each_node_serves_once_and_connects_once() -> None:
    for n in range(3, 50):
        ring = ring_links(range(n))
        assert sorted(a for a, _ in ring) == list(range(n)) and sorted(b for _, b in ring) == list(range(n))


def simulated_quick(n: int, *, per_link: bool, slow_nodes: tuple[int, ...] = (), slow_links: tuple[Pair, ...] = (),
                    healthy: float = 100.0) -> tuple[list[list[Group]], list[Measurement], NetcheckVerdict]:
    """--quick over simulated bandwidths (slow: 10%); returns the search's rounds, the pairs measured, and the verdict
    after the second look (as run_netcheck: what the search flagged, measured again)."""
    names = [f"n{i:04d}" for i in range(n)]
    bad_links = {frozenset(link) for link in slow_links}
    pairs: list[Measurement] = []

    def bw(a: int, b: int) -> float:
        slow = a in slow_nodes or b in slow_nodes or frozenset((a, b)) in bad_links
        return healthy * (0.1 if slow else 1.0) * (1 + 0.01 * ((a * 7 + b) % 5))  # a little spread

    def figure(group: Group) -> tuple[float | None, tuple[tuple[Pair, float | None], ...]]:
        links = tuple((link, bw(*link)) for link in ring_links(group))
        if per_link or len(group) == 2:
            pairs.extend(Measurement(names[a], names[b], v, v, 0) for (a, b), v in links)
        return min(v for _, v in links), (links if per_link else ())

    search, rounds = quick_search_rounds(n, figure, per_link=per_link)
    index = {name: i for i, name in enumerate(names)}
    vouched = [names[i] for i in search.cleared]
    verdict, _ = with_second_looks(
        pairs, lambda ms: judge(names, ms, spread=search.spread, vouched=vouched),
        lambda todo, r: [m(a, b, bw(index[a], index[b])) for a, b in todo])
    return rounds, pairs, verdict


@pytest.mark.parametrize("per_link", [True, False], ids=["links", "aggregate"])
def test_quick_healthy_cluster_stops_after_the_ring_or_the_halves(per_link: bool) -> None:
    for n in [*range(2, 40), 63, 64, 65, 127, 128, 1023, 1024]:
        rounds, _, verdict = simulated_quick(n, per_link=per_link)
        assert len(rounds) == (1 if per_link or n == 2 else 2), n
        assert rounds[0] == [tuple(range(n))]
        assert verdict.clean and all(v.status == "ok" for v in verdict.nodes), n  # nodes cleared by a group are ok


@pytest.mark.parametrize("per_link", [True, False], ids=["links", "aggregate"])
def test_quick_isolates_one_slow_node_in_about_log2_n_plus_2_rounds(per_link: bool) -> None:
    for n in [*range(4, 40), 63, 64, 65, 127, 128, 1000, 1023, 1024]:
        for slow in sorted({0, 1, n // 3, n // 2, n - 1}):
            rounds, _, verdict = simulated_quick(n, per_link=per_link, slow_nodes=(slow,))
            name = f"n{slow:04d}"
            assert verdict.slow_nodes == (name,), (n, slow, verdict.slow_nodes, verdict.slow_links)
            assert verdict.slow_links == () and verdict.broken_links == ()
            assert len(rounds) <= math.ceil(math.log2(n)) + 2, (n, slow, len(rounds))
            for groups in rounds:  # the groups of a round are disjoint
                members = [x for g in groups for x in g]
                assert len(members) == len(set(members))


@pytest.mark.parametrize("per_link", [True, False], ids=["links", "aggregate"])
def test_quick_names_a_slow_link_as_a_link(per_link: bool) -> None:
    for n in [4, 5, 7, 8, 9, 16, 33, 64, 1024]:
        for link in sorted({(0, 1), (n // 2 - 1, n // 2), (n - 1, 0)}):
            rounds, _, verdict = simulated_quick(n, per_link=per_link, slow_links=(link,))
            named = tuple(sorted((f"n{link[0]:04d}", f"n{link[1]:04d}")))
            assert verdict.slow_links == (named,) and verdict.slow_nodes == (), (n, link, verdict)
            assert len(rounds) <= math.ceil(math.log2(n)) + 2, (n, link, len(rounds))


def test_quick_bisection_halves_are_measured_at_the_same_time_and_the_slow_one_is_split() -> None:
    rounds, _, verdict = simulated_quick(8, per_link=False, slow_nodes=(5,))
    assert rounds[0] == [tuple(range(8))]
    assert rounds[1] == [(0, 1, 2, 3), (4, 5, 6, 7)]  # the halves: each the other's reference
    assert rounds[2] == [(4, 5), (6, 7)]  # the slow half, split
    assert [set(g) & {4, 5} for g in rounds[3]] == [{4}, {5}]  # each alone with a healthy helper
    assert verdict.slow_nodes == ("n0005",)


def test_quick_with_links_localises_from_the_ring_without_splitting_the_cluster() -> None:
    rounds, _, verdict = simulated_quick(64, per_link=True, slow_nodes=(20,))
    assert len(rounds) == 3 and all(len(g) <= 2 for groups in rounds[1:] for g in groups)
    assert verdict.slow_nodes == ("n0020",)


def test_quick_cannot_judge_three_nodes_by_a_median_when_one_of_them_is_slow() -> None:
    """With three nodes one slow node slows two links of three: the median is slow, and nothing stands out (as with --all-pairs)."""
    _, _, verdict = simulated_quick(3, per_link=True, slow_nodes=(1,))
    assert verdict.clean
    _, _, verdict = simulated_quick(4, per_link=True, slow_nodes=(1,))
    assert verdict.slow_nodes == ("n0001",)


def m(a: str, b: str, ab: float | None, ba: float | None = None, error: str | None = None) -> Measurement:
    return Measurement(a, b, ab, ab if ba is None else ba, 0, error)


NODES = [f"n{i}" for i in range(8)]


def healthy(pairs: list[tuple[int, int]], value: float = 10.0) -> list[Measurement]:
    return [m(NODES[a], NODES[b], value + 0.1 * (a + b)) for a, b in pairs]


def measured_pairs() -> list[tuple[int, int]]:
    return [p for r in pair_rounds(8) for p in r]


def second_looked(nodes: list[str], data: list[Measurement], bw: Callable[[str, str], float | None],
                  **options: Any) -> NetcheckVerdict:
    """judge, then the second look as run_netcheck takes it, `bw(a, b)` standing for each pair measured again."""
    verdict, _ = with_second_looks(list(data), lambda ms: judge(nodes, ms, **options),
                                   lambda todo, r: [m(a, b, bw(a, b)) for a, b in todo])
    return verdict


def speed(slow: set[str], links: frozenset[frozenset[str]] = frozenset(), *, good: float = 10.0, bad: float = 1.0
          ) -> Callable[[str, str], float]:
    return lambda a, b: bad if slow & {a, b} or frozenset((a, b)) in links else good


def test_slow_node_is_slow_with_every_partner_and_explains_its_pairs() -> None:
    data = [m(NODES[a], NODES[b], 1.0 if 5 in (a, b) else 10.0) for a, b in measured_pairs()]
    first = judge(NODES, data)
    assert first.clean and first.slow_nodes == () and first.outcome == "inconclusive"  # flagged, not yet named
    assert [(s.kind, s.nodes, s.outcome) for s in first.suspects] == [("node", ("n5",), "pending")]
    verdict = second_looked(NODES, data, speed({"n5"}))
    assert verdict.slow_nodes == ("n5",) and verdict.outcome == "slow"
    assert verdict.slow_links == () and verdict.broken_links == ()
    assert not verdict.clean
    assert next(n for n in verdict.nodes if n.node == "n5").slow_partners == 4
    (suspect,) = verdict.suspects
    assert suspect.first == (1.0,) * 4 and suspect.second == (1.0,) and len(suspect.partners) == 1
    assert suspect.partners[0] not in {x for key in pair_keys(data) if "n5" in key for x in key}  # a partner it had not met
    assert suspect.ratio == pytest.approx(0.1) and suspect.spreads is not None and suspect.spreads > 3


def pair_keys(data: list[Measurement]) -> set[tuple[str, str]]:
    return {d.key() for d in data}


def test_slow_link_names_the_pair_and_neither_node() -> None:
    pairs = measured_pairs()
    a, b = pairs[0]
    data = [m(NODES[x], NODES[y], 10.0, 1.0 if (x, y) == (a, b) else 10.0) for x, y in pairs]
    link = frozenset((NODES[a], NODES[b]))
    verdict, rounds = with_second_looks(data, lambda ms: judge(NODES, ms),
                                        lambda todo, r: [m(x, y, 1.0 if frozenset((x, y)) == link else 10.0) for x, y in todo])
    assert verdict.slow_links == (tuple(sorted((NODES[a], NODES[b]))),)
    assert verdict.slow_nodes == ()
    (suspect,) = verdict.suspects
    # the pair again, alone; then each of its nodes with a known-good partner, at once: the link, not a node
    assert suspect.second == (1.0,) and suspect.controls == (10.0, 10.0) and len(suspect.partners) == 2
    assert [len(r) for r in rounds] == [1, 2] and frozenset(rounds[0][0]) == link
    assert {x for pair in rounds[1] for x in pair} >= set(link) and not set(suspect.partners) & set(link)


def test_a_pair_slow_once_and_fine_on_the_second_look_is_cleared_as_noise() -> None:
    pairs = measured_pairs()
    a, b = NODES[pairs[0][0]], NODES[pairs[0][1]]
    data = [m(NODES[x], NODES[y], 1.0 if (x, y) == pairs[0] else 10.0) for x, y in pairs]
    verdict = second_looked(NODES, data, speed(set()))
    assert verdict.clean and verdict.outcome == "clean" and verdict.slow_links == ()
    (suspect,) = verdict.suspects
    assert suspect.nodes == tuple(sorted((a, b))) and suspect.outcome == "cleared" and "noise" in suspect.reason
    assert suspect.controls == ()  # cleared by its own second look: no controls needed


def test_a_node_slow_with_a_known_good_partner_too_makes_a_slow_link_inconclusive() -> None:
    pairs = measured_pairs()
    a, b = NODES[pairs[0][0]], NODES[pairs[0][1]]
    data = [m(NODES[x], NODES[y], 1.0 if (x, y) == pairs[0] else 10.0) for x, y in pairs]
    verdict = second_looked(NODES, data, speed({a}))  # a got slow with everyone after the first look
    assert verdict.clean and verdict.outcome == "inconclusive" and verdict.slow_links == () and verdict.slow_nodes == ()
    assert verdict.suspects[0].outcome == "inconclusive" and "known-good partner" in verdict.suspects[0].reason


def test_a_second_look_that_fails_leaves_the_suspect_inconclusive_and_names_nothing() -> None:
    data = [m(NODES[a], NODES[b], 1.0 if 5 in (a, b) else 10.0) for a, b in measured_pairs()]
    verdict, _ = with_second_looks(data, lambda ms: judge(NODES, ms),
                                   lambda todo, r: [m(a, b, None, None, "timed out") for a, b in todo])
    assert verdict.clean and verdict.slow_nodes == () and verdict.outcome == "inconclusive"
    assert verdict.suspects[0].reason == "second look failed: timed out"


def test_healthy_cluster_is_clean_and_small_spread_is_not_slow() -> None:
    verdict = judge(NODES, healthy(measured_pairs()))
    assert verdict.clean and all(n.status == "ok" for n in verdict.nodes) and verdict.outcome == "clean"
    assert verdict.suspects == ()
    assert verdict.median_gbps is not None and 10.0 < verdict.median_gbps < 11.5


def test_noisy_healthy_pairs_below_threshold_are_inconclusive_not_slow() -> None:
    """Pairs spread from 0.6 to 1.4 x median (the unshaped test hosts): a pair at 0.62 is within that noise."""
    pairs = measured_pairs()
    factors = [0.62, 1.4, 0.7, 1.3, 0.85, 1.2, 0.9, 1.1, 1.0, 0.95, 1.05, 0.8, 1.25, 0.75, 1.15, 1.0]
    data = [m(NODES[x], NODES[y], 10.0 * f) for (x, y), f in zip(pairs, factors)]
    verdict = second_looked(NODES, data, lambda a, b: 6.5)  # and low again on the second look
    assert verdict.clean and verdict.slow_links == () and verdict.slow_nodes == ()
    assert verdict.outcome == "inconclusive"
    assert verdict.spread is not None and verdict.spread.measured_relative > 0.2
    assert {s.outcome for s in verdict.suspects} == {"inconclusive"}
    assert all("not beyond the noise" in s.reason for s in verdict.suspects)


def test_threshold_is_the_smallest_shortfall_named() -> None:
    data = [m(NODES[a], NODES[b], 7.0 if 2 in (a, b) else 10.0) for a, b in measured_pairs()]
    assert second_looked(NODES, data, speed({"n2"}, bad=7.0), threshold=0.8).slow_nodes == ("n2",)
    assert second_looked(NODES, data, speed({"n2"}, bad=7.0), threshold=0.6).clean


def test_broken_pairs_and_broken_nodes() -> None:
    data = [m(NODES[a], NODES[b], None, None, "connection refused") if 6 in (a, b) else m(NODES[a], NODES[b], 10.0)
            for a, b in measured_pairs()]
    data.append(m("n0", "n1", None, None, "timed out"))  # a second measurement of a pair that also succeeded
    verdict = judge(NODES, data)
    assert verdict.broken_nodes == ("n6",) and verdict.broken_links == () and not verdict.clean
    assert verdict.outcome == "broken"
    single = judge(NODES, [m("n0", "n1", None, None, "client exited 1"), m("n0", "n2", 10.0), m("n1", "n2", 10.0)])
    assert single.broken_links == (("n0", "n1", "client exited 1"),)


def test_one_partner_is_not_enough_to_call_a_node_slow() -> None:
    nodes = ["a", "b", "c", "d"]
    verdict = second_looked(nodes, [m("a", "b", 1.0), m("c", "d", 10.0), m("a", "c", 10.0), m("b", "d", 10.0)],
                            speed(set(), frozenset({frozenset("ab")})))
    assert verdict.slow_nodes == () and verdict.slow_links == (("a", "b"),)


def test_pair_value_is_the_slower_direction_and_json_has_both() -> None:
    one = Measurement("x", "y", 9.0, 3.0, 2)
    assert one.gbps == 3.0 and one.key() == ("x", "y")
    assert one.to_dict() == {"a": "x", "b": "y", "a_to_b_gbps": 9.0, "b_to_a_gbps": 3.0, "round": 2, "error": None,
                             "look": 1}
    assert Measurement("y", "x", None, 4.0, 0).gbps == 4.0 and Measurement("y", "x", None, 4.0, 0).key() == ("x", "y")


def test_tcp_command_lines_quote_every_value() -> None:
    server = backends.server_command("tcp", python="/opt/py 3/bin/python3", bind_ip="10.0.0.1", ifname="eth1",
                                     size=1 << 20, timeout=30)
    assert server == "exec '/opt/py 3/bin/python3' - server 10.0.0.1 1048576 30"
    client = backends.client_command("tcp", python="python3", server_ip="10.0.0.1;rm -rf /", port=4000,
                                     source_ip="10.0.0.2", ifname=None, size=10, timeout=2.5, both_ways=False)
    assert shlex.split(client) == ["exec", "python3", "-", "client", "10.0.0.1;rm -rf /", "4000", "10.0.0.2", "10", "2.5", "send"]


def test_torch_command_lines_name_the_cluster_interface_for_gloo() -> None:
    server = backends.server_command("torch", python="python", bind_ip="10.214.1.11", ifname="eth1", size=8, timeout=60)
    assert server == "GLOO_SOCKET_IFNAME=eth1 exec python - server 10.214.1.11 8 60 both"
    client = backends.client_command("torch", python="python", server_ip="10.214.1.11", port=29500, source_ip="x",
                                     ifname="e$(x)", size=8, timeout=60)
    assert client.startswith("GLOO_SOCKET_IFNAME='e$(x)' exec python - client 10.214.1.11 29500 8 60 both")
    with pytest.raises(ValueError):
        backends.server_command("hccl_test", python="p", bind_ip="i", ifname=None, size=1, timeout=1)


def test_ring_bus_factor_makes_rings_of_any_size_compare_with_a_pair() -> None:
    assert backends.ring_bus_factor(2) == 1.0 and backends.ring_bus_factor(4) == 1.5
    # an all-reduce ring of k nodes on links of rate L runs at an algorithm bandwidth of L k / 2(k-1)
    for k in (2, 3, 8, 1024):
        assert L_k(k) * backends.ring_bus_factor(k) == pytest.approx(10.0)


def L_k(k: int, link: float = 10.0) -> float:
    return link * k / (2 * (k - 1))


def test_mpi_backend_command_lines() -> None:
    nccl = backends.nccl_tests_command(hosts=("10.0.0.1", "10.0.0.2"), size=64 << 20, ifname="ib0")
    assert shlex.split(nccl) == ["mpirun", "--allow-run-as-root", "-np", "2", "-H", "10.0.0.1:1,10.0.0.2:1",
                                 "-x", "NCCL_SOCKET_IFNAME=ib0", "sendrecv_perf", "-b", "67108864", "-e", "67108864",
                                 "-g", "1", "-n", "20"]
    ring = backends.nccl_tests_command(hosts=("a", "b", "c"), size=8, ifname=None)
    assert shlex.split(ring)[:7] == ["mpirun", "--allow-run-as-root", "-np", "3", "-H", "a:1,b:1,c:1", "all_reduce_perf"]


def test_hccl_test_command_line_each_mpi_form() -> None:
    hccl = backends.hccl_test_command(hosts=("10.0.0.1", "10.0.0.2"), size=1024, npus=8, ifname="eth1")
    program = ("\"${ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}/tools/hccl_test/bin\"/all_reduce_test "
               "-p 8 -b 1024 -e 1024 -f 2 -d fp32 -o sum -n 20")
    assert hccl == ("if mpirun --version 2>&1 | grep -q 'Open MPI'; then "
                    "HCCL_SOCKET_IFNAME==eth1 exec mpirun --allow-run-as-root -n 16 -H 10.0.0.1:8,10.0.0.2:8 "
                    f"-x HCCL_SOCKET_IFNAME -x LD_LIBRARY_PATH {program}; "
                    f"else HCCL_SOCKET_IFNAME==eth1 exec mpirun -n 16 -hosts 10.0.0.1:8,10.0.0.2:8 {program}; fi")
    three = backends.hccl_test_command(hosts=("a", "b", "c"), size=64 << 20, npus=4)
    assert "-n 12 -hosts a:4,b:4,c:4 " in three and "-p 4 -b 67108864 -e 67108864" in three and "HCCL_SOCKET" not in three


def test_hccl_test_command_quotes_hostile_host_names_and_interfaces(tmp_path: Path) -> None:
    import subprocess

    hostile = ("a;touch " + str(tmp_path / "pwned"), "$(touch " + str(tmp_path / "pwned2") + ")")
    command = backends.hccl_test_command(hosts=hostile, size=8, npus=1, ifname="e;x", mpirun=str(tmp_path / "mpirun"))
    (tmp_path / "mpirun").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (tmp_path / "mpirun").chmod(0o755)
    argv = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout.splitlines()
    assert argv[:4] == ["-n", "2", "-hosts", f"{hostile[0]}:1,{hostile[1]}:1"]  # one argument, as given
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_port_and_result_lines() -> None:
    assert backends.parse_port("PORT 40123\n") == 40123 and backends.parse_port("starting\n") is None
    got = backends.parse_received('PORT 1\n{"recv_bytes": 125000000.0, "recv_seconds": 1.0}\n')
    assert got.gbps == pytest.approx(1.0)
    assert backends.Received(0, 0).gbps is None
    with pytest.raises(backends.BackendOutputError, match="no result line"):
        backends.parse_received("tcp_bw client: [Errno 111] Connection refused\n")
    with pytest.raises(backends.BackendOutputError, match="unreadable"):
        backends.parse_received('{"recv_bytes": "x"}')


@pytest.mark.parametrize("text,value", [("64M", 64 << 20), ("512K", 512 << 10), ("1G", 1 << 30), ("1000", 1000),
                                        ("2MiB", 2 << 20), ("1.5M", 3 << 19)])
def test_parse_size(text: str, value: int) -> None:
    assert backends.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "-1M", "64X", "0"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        backends.parse_size(text)


def test_auto_backend_takes_the_first_every_node_has() -> None:
    assert choose_backend("auto", [frozenset({"tcp", "torch"}), frozenset({"tcp", "torch", "nccl-tests"})]) == \
        ("torch", "auto: every node has torch")
    assert choose_backend("auto", [frozenset({"tcp", "torch", "nccl-tests"})] * 2) == ("nccl-tests", "auto: every node has nccl-tests")
    assert choose_backend("auto", [frozenset({"tcp", "torch", "nccl-tests", "hccl_test"})] * 2) == \
        ("hccl_test", "auto: every node has hccl_test")  # the Ascend device plane first
    assert choose_backend("auto", [frozenset({"tcp", "hccl_test"}), frozenset({"tcp"})])[0] == "tcp"
    assert choose_backend("auto", [frozenset({"tcp"}), frozenset()])[0] == "tcp"
    assert choose_backend("torch", [frozenset()]) == ("torch", "asked for")


@pytest.mark.parametrize("mode, programs, has_nccl_tests", [
    ("pairs", ("mpirun", "sendrecv_perf"), True),  # pairs run sendrecv_perf only
    ("all-pairs", ("mpirun", "sendrecv_perf"), True),
    ("quick", ("mpirun", "sendrecv_perf"), False),  # rings of more than two need all_reduce_perf too
    ("quick", ("mpirun", "sendrecv_perf", "all_reduce_perf"), True),
    ("pairs", ("sendrecv_perf",), False),  # no mpirun
])
def test_a_node_has_nccl_tests_for_the_mode_it_is_asked_for(tmp_path: Path, mode: str, programs: tuple[str, ...],
                                                             has_nccl_tests: bool) -> None:
    """The probe's own check run by a shell on a PATH holding just these programs (the real section text)."""
    import subprocess

    from ascendctl.inventory.load import parse_inventory
    from ascendctl.netcheck.run import facts_sections

    for name in programs:
        program = tmp_path / name
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755)
    inventory = parse_inventory("nodes: [10.0.0.1, 10.0.0.2]\n", environ={})
    check = facts_sections(inventory.nodes[0], inventory, "nccl-tests", mode=mode)["netcheck.nccl-tests"]
    proc = subprocess.run(["/bin/sh", "-c", check], env={"PATH": str(tmp_path)})
    assert (proc.returncode == 0) is has_nccl_tests


def run_cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from ascendctl.cli import app

    result = CliRunner().invoke(app, ["netcheck", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("args,message", [(["--quick", "--all-pairs"], "choose one of"), (["--size", "lots"], "not a size"),
                                          (["--backend", "ib_write_bw"], "unknown backend")])
def test_usage_errors_exit_2_with_a_message(args: list[str], message: str, tmp_path: object) -> None:
    code, out, err = run_cli(*args)
    assert code == 2 and message in err and out == ""


def test_simulated_sendrecv_perf_replays_the_capture_scaled_and_the_backend_reads_it(tmp_path: Path) -> None:
    import os
    import subprocess

    from tests.sim.nccl_tests import CAPTURE, mpirun_script, sendrecv_perf_script

    for name, text in (("mpirun", mpirun_script()), ("sendrecv_perf", sendrecv_perf_script({"10.0.0.2": 0.1}))):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}

    def run(hosts: tuple[str, str]) -> str:
        command = backends.nccl_tests_command(hosts=hosts, size=4096, ifname="eth1")
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    healthy, slow = run(("10.0.0.1", "10.0.0.3")), run(("10.0.0.1", "10.0.0.2"))
    assert healthy.splitlines()[:9] == CAPTURE.read_text().splitlines()[:9]  # the header as captured
    assert backends.parse_nccl_tests_gbps(healthy, 4096) == pytest.approx(0.13 * 8)  # the capture's 4096-byte algbw
    assert backends.parse_nccl_tests_gbps(slow, 4096) == pytest.approx(0.01 * 8)
    with pytest.raises(backends.BackendOutputError, match="no nccl-tests table header"):
        backends.parse_nccl_tests_gbps("mpirun: sendrecv_perf: not found\n", 4096)


def test_one_node_is_nothing_measured_not_an_all_clear(tmp_path: Path) -> None:
    """A real run on this machine (local transport): one node has no network to another to measure."""
    import subprocess
    import sys

    inventory = tmp_path / "one.yaml"
    inventory.write_text("defaults:\n  transport: local\nnodes:\n  - {name: solo, host: 127.0.0.1}\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ascendctl", "netcheck", "-i", str(inventory), "--quick", "--no-device-ping"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "nothing measured: netcheck needs two nodes or more (1 reachable)" in proc.stdout
    as_json = subprocess.run([sys.executable, "-m", "ascendctl", "netcheck", "-i", str(inventory), "--quick", "--no-device-ping",
                              "--json"], capture_output=True, text=True, timeout=120)
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["measured"] is False and document["matrix"] == []
    assert "no slow node or link" not in proc.stdout


def report_of(verdict: NetcheckVerdict, measured: list[Measurement], second: int) -> Any:
    from ascendctl.netcheck.run import NetcheckReport
    from ascendctl.facts.endpoint import Endpoint

    names = [n.node for n in verdict.nodes]
    rounds = tuple(tuple((m.a, m.b) for m in measured if m.round == r) for r in sorted({m.round for m in measured}))
    endpoints = {n: Endpoint(n, "eth1", f"10.0.0.{i}", "eth1") for i, n in enumerate(names)}
    return NetcheckReport("pairs", "tcp", "asked for", 8 << 20, endpoints, rounds, tuple(measured), verdict,
                          second_look_rounds=second)


def test_the_text_says_how_sure_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    """The spread and the rule, each suspect's looks, and the verdict: named (with its numbers), or cleared as noise."""
    from ascendctl.ui.netcheck_view import show_netcheck

    data = [m(NODES[a], NODES[b], 1.0 if 5 in (a, b) else 10.0 + 0.2 * ((a * 3 + b) % 4)) for a, b in measured_pairs()]
    for k, d in enumerate(data):
        data[k] = Measurement(d.a, d.b, d.a_to_b, d.b_to_a, k // 4)
    measured = list(data)
    verdict, second = with_second_looks(measured, lambda ms: judge(NODES, ms),
                                        lambda todo, r: [Measurement(a, b, 1.0, 1.0, r) for a, b in todo], first_round=4)
    report = report_of(verdict, measured, len(second))
    assert report.exit_code == 3
    show_netcheck(report, as_json=False, argv=["ascendctl", "netcheck"])
    out, err = capsys.readouterr()
    assert "4 round(s) (+1 second look)" in out
    assert "spread: the healthy pairs vary by" in out and "more than 3 spreads below it" in out
    assert "flagged by the first look" in out and "second look" in out
    assert "ascendctl: error: n5: slow node: slow with every partner, on both looks (slow on every look (5)" in err
    show_netcheck(report, as_json=True, argv=["ascendctl", "netcheck", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert_valid("netcheck", document)
    assert document["second_look_rounds"] == 1 and [m["look"] for m in document["matrix"]].count(2) == 1
    assert document["verdict"]["outcome"] == "slow" and document["verdict"]["suspects"][0]["outcome"] == "slow"
    assert document["verdict"]["rule"] == {"spreads": 3.0, "floor": 0.05, "min_effect": 0.2, "looks": 2}


def test_an_inconclusive_verdict_exits_0_and_says_how_much_the_healthy_pairs_vary(capsys: pytest.CaptureFixture[str]) -> None:
    from ascendctl.ui.netcheck_view import show_netcheck

    pairs = measured_pairs()
    factors = [0.62, 1.4, 0.7, 1.3, 0.85, 1.2, 0.9, 1.1, 1.0, 0.95, 1.05, 0.8, 1.25, 0.75, 1.15, 1.0]
    measured = [Measurement(NODES[x], NODES[y], 10.0 * f, 10.0 * f, k // 4)
                for k, ((x, y), f) in enumerate(zip(pairs, factors))]
    verdict, second = with_second_looks(measured, lambda ms: judge(NODES, ms),
                                        lambda todo, r: [Measurement(a, b, 6.5, 6.5, r) for a, b in todo], first_round=4)
    report = report_of(verdict, measured, len(second))
    assert verdict.outcome == "inconclusive" and report.exit_code == 0
    show_netcheck(report, as_json=False, argv=["ascendctl", "netcheck"])
    out, err = capsys.readouterr()
    assert "inconclusive: the healthy pairs vary by" in out and "nothing is shown slow beyond that" in out
    assert "error" not in err


def test_the_second_look_measures_each_suspect_alone_worst_first_at_most_one_round_per_node() -> None:
    """Many pairs low on the first look (a noisy cluster): each is measured again in a round of its own, the node
    suspect first, then the lowest pairs, and no more rounds than there are nodes: what is left stays inconclusive."""
    pairs = [p for r in pair_rounds(8, all_pairs=True) for p in r]
    low = {frozenset((NODES[a], NODES[b])): 5.0 + 0.1 * k for k, (a, b) in enumerate(pairs[:12]) if 7 not in (a, b)}
    data = [m(NODES[a], NODES[b], 1.0 if 7 in (a, b) else low.get(frozenset((NODES[a], NODES[b])), 10.0)) for a, b in pairs]
    first = judge(NODES, data)
    assert [s.kind for s in first.suspects][:1] == ["node"] and len(first.suspects) == 1 + len(low)
    rounds = second_look_rounds(first, data)
    assert len(rounds) == len(NODES) and all(len(r) == 1 for r in rounds)
    assert "n7" in rounds[0][0] and frozenset(rounds[1][0]) == min(low, key=lambda k: low[k])
    verdict, done = with_second_looks(list(data), lambda ms: judge(NODES, ms),
                                      lambda todo, r: [m(a, b, 1.0 if "n7" in (a, b) else 10.0) for a, b in todo])
    assert verdict.slow_nodes == ("n7",) and verdict.slow_links == () and len(done) == len(NODES)
    outcomes = [s.outcome for s in verdict.suspects if s.kind == "link"]
    assert outcomes.count("cleared") == len(NODES) - 1 and outcomes.count("pending") == len(low) - len(NODES) + 1
    assert verdict.outcome == "slow"
