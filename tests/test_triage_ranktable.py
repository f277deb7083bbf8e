"""A rank table that came with the logs (the job's RANK_TABLE_FILE, which `collect JOB` takes) attributes a line that names
only its device to the rank the table puts on that node's device, and says how many ranks the job had (issue #26:
"device id -> rank via the rank table or RANK_TABLE_FILE"; "expected ranks come from ... the rank table")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ascendctl.ranktable import NAME_RX, RankPlace, rank_places
from ascendctl.triage import triage
from ascendctl.triage.signatures import Category

SAMPLES = Path(__file__).parent / "data" / "samples" / "ascend"  # real rank tables from HCCL's docs (INDEX.md there)
A2_TWO_NODES = SAMPLES / "ranktable_v1.0_A2_2nodes_device_port_hccl-doc.json"  # node_0: devices 0,1 = ranks 0,1; node_1: 2,3
# a real plog line (tests/data/samples/ascend/plog_fixtures_ascend-faultdiag.txt:78): the driver's ts exception on devid=1
TS_EXCEPTION = ("[EVENT] KERNEL(6843,sklogd):2023-06-10-13:16:14.096.793 [klogd.c:253][251681.794072] [ascend] [ERROR] "
                "[tsdrv] [tsdrv_hb_cq_callback 319] <swapper/30:0> receive ts exception msg, call excep_code=0xb4060007, "
                "time=1686374174.94000000s, devid=1 tsid=0")


def load(name: str) -> object:
    return json.loads((SAMPLES / name).read_text(encoding="utf-8"))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def socket_timeout(second: int, device: int, rank: int) -> str:
    """torch_npu's error header, then HCCL's EI0006 (CANN's text): a rank whose peer never connected, naming none."""
    return (f"[ERROR] 2024-05-21-11:57:5{second} (PID:92700{rank}, Device:{device}, RankID:{rank}) ERR02200 DIST call hccl "
            "api failed.\nEI0006: Getting socket times out. Reason: 1. The remote does not initiate a connect request. "
            "some NPUs in the cluster are abnormal.\n")


def test_every_layout_hccl_takes_is_read_rank_by_rank() -> None:
    assert rank_places(load("ranktable_v1.0_A2_2nodes_device_port_hccl-doc.json")) == [
        RankPlace(0, "node_0", None, 0), RankPlace(1, "node_0", None, 1), RankPlace(2, "node_1", None, 0),
        RankPlace(3, "node_1", None, 1)]
    spod = rank_places(load("ranktable_v1.2_A3_superpod_2pods_4nodes_hccl-doc.json"))
    assert len(spod) == 16 and spod[0] == RankPlace(0, "node_0", "172.16.0.100", 0)
    merged = rank_places(load("rank_table_16p_64_66_ais-bench_merge_hccl-style.json"))
    assert [p.rank for p in merged] == list(range(16)) and merged[8].server == "90.90.66.66"
    v2 = rank_places(load("ranktable_v2.0_Ascend950_hccl-doc.json"))  # ranks and devices, no servers
    assert [p.rank for p in v2] == [0, 1, 2, 3] and all(p.server is None for p in v2)
    legacy = rank_places(load("ranktable_legacy_template2_group_list_910_hccl-doc.json"))  # ranks in order of the list
    assert [(p.rank, p.server, p.device) for p in legacy] == [(0, "node_0", 0), (1, "node_1", 1)]


@pytest.mark.parametrize("table", [None, [], {"server_list": "x"}, {"server_list": [{"device": [{"rank_id": "-1"}]}]},
                                   {"server_list": [{"device": [{"rank_id": True, "device_id": "0"}, "x"]}]},
                                   {"rank_list": [{"rank_id": "two"}]}, {"group_list": [{"instance_list": 3}]}])
def test_a_malformed_table_places_nothing_and_raises_nothing(table: object) -> None:
    assert rank_places(table) == []


def test_names_of_rank_tables() -> None:
    for name in ("rank_table.json", "rank_table_16p.json", "RANK_TABLE_FILE.json", "ranktable_2node.json", "hccl_8p.json",
                 "hccl_2s_16p.json"):
        assert NAME_RX.search(name), name
    for name in ("job.json", "facts.json", "summary.json", "trace_rank0.json", "my_hccl.json.log", "rank_table.txt"):
        assert not NAME_RX.search(name), name


def test_a_device_fault_that_names_only_its_device_is_the_rank_the_table_puts_there(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    write(bundle / "node_1" / "plog" / "plog-6843_20230610.log", TS_EXCEPTION + "\n")
    without = triage([bundle])
    assert without.category == Category.HARDWARE and (without.culprit_node, without.culprit_rank) == ("node_1", None)
    shutil.copy(A2_TWO_NODES, bundle / "rank_table.json")
    report = triage([bundle])
    assert report.category == Category.HARDWARE and (report.culprit_node, report.culprit_rank) == ("node_1", 3)
    assert report.first_failure is not None and report.first_failure.device == 1


def test_the_table_says_which_rank_never_spoke_while_the_others_timed_out(tmp_path: Path) -> None:
    """Ranks 0-2 time out waiting for a peer they do not name; rank 3 logged nothing. Without the table the ranks seen
    are all there were; with it, rank 3 was expected and is the one that did not come, on the node the table says."""
    bundle = tmp_path / "b"
    write(bundle / "node_0" / "rank_0.log", socket_timeout(0, 0, 0))
    write(bundle / "node_0" / "rank_1.log", socket_timeout(1, 1, 1))
    write(bundle / "node_1" / "rank_2.log", socket_timeout(2, 0, 2))
    without = triage([bundle])
    assert without.rule == "everyone_timed_out" and without.culprit_rank is None
    shutil.copy(A2_TWO_NODES, bundle / "hccl_4p.json")
    report = triage([bundle])
    assert report.category == Category.COMM_TIMEOUT and report.rule == "hang"
    assert (report.culprit_node, report.culprit_rank) == ("node_1", 3)


def test_servers_named_by_address_are_the_nodes_collect_found_at_that_address(tmp_path: Path) -> None:
    """A v1.0 table names servers by host address: collect's facts.json says which node had it; a server no node had
    places nothing (a device on an unknown server is not guessed)."""
    bundle = tmp_path / "b"
    write(bundle / "n66" / "facts.json", json.dumps({"name": "n66", "host": "90.90.66.66"}))
    write(bundle / "n66" / "plog" / "plog-6843_20230610.log", TS_EXCEPTION + "\n")
    shutil.copy(SAMPLES / "rank_table_16p_64_66_ais-bench_merge_hccl-style.json", bundle / "rank_table_16p.json")
    report = triage([bundle])
    assert (report.culprit_node, report.culprit_rank) == ("n66", 9)  # 90.90.66.66's device 1
    (bundle / "n66" / "facts.json").write_text(json.dumps({"name": "n66", "host": "10.1.1.1"}), encoding="utf-8")
    report = triage([bundle])
    assert (report.culprit_node, report.culprit_rank) == ("n66", None)


def test_a_file_named_like_a_rank_table_that_is_none_is_said_and_not_read_as_a_log(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    write(bundle / "node_1" / "plog" / "plog-6843_20230610.log", TS_EXCEPTION + "\n")
    write(bundle / "rank_table.json", "{not json")
    report = triage([bundle])
    assert report.culprit_rank is None
    assert any("rank_table.json: named like a rank table, but no rank table was read from it" in n for n in report.notes)
