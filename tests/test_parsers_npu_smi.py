"""ascendctl.facts.parsers.npu_smi against the real npu-smi / nvidia-smi samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.npu_smi import (
    Health,
    parse_cpu_list,
    parse_npu_health,
    parse_npu_info,
    parse_npu_mapping,
    parse_npu_topo,
    parse_nvidia_topo,
)

SAMPLES = Path(__file__).resolve().parent / "data/samples/ascend"
DATA = Path(__file__).resolve().parent / "data"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def section(text: str, start: str, end: str | None) -> str:
    """The part of a multi-command capture between two command lines."""
    body = text.split(start, 1)[1]
    return body.split(end, 1)[0] if end else body


# --- npu-smi info ----------------------------------------------------------------------------------------


def test_910b4_devices_health_and_hbm() -> None:
    info = parse_npu_info(sample("npu-smi-info_910B4_24.1.rc3.txt"))
    assert (info.smi_version, info.version) == ("24.1.rc3", "24.1.rc3")
    assert info.npu_ids == (0, 1, 2, 3, 4, 5, 6, 7)
    assert info.npu_count == 8
    assert {chip.health for chip in info.chips} == {Health.OK}
    assert [chip.name for chip in info.chips] == ["910B4"] * 8
    first, last = info.chips[0], info.chips[7]
    assert (first.npu_id, first.chip_id, first.device_id) == (0, 0, None)
    assert (first.power_w, first.temp_c, first.aicore_pct) == (85.0, 36, 0)
    assert (first.hbm_used_mb, first.hbm_total_mb, first.bus_id) == (22283, 32768, "0000:C1:00.0")
    assert (last.power_w, last.temp_c, last.aicore_pct, last.hbm_used_mb) == (250.5, 47, 68, 30760)
    assert (last.memory_used_mb, last.memory_total_mb) == (0, 0)


def test_910b4_process_table() -> None:
    info = parse_npu_info(sample("npu-smi-info_910B4_24.1.rc3.txt"))
    assert info.has_process_table
    assert [(p.npu_id, p.chip_id, p.pid, p.memory) for p in info.processes] == [
        (0, 0, 582939, 19502),
        (1, 0, 695171, 19498),
        (6, 0, 99910, 27977),
        (7, 0, 99976, 27977),
    ]
    assert {p.name for p in info.processes} == {""}
    assert {p.memory_unit for p in info.processes} == {"MB"}
    assert info.idle_npus == (2, 3, 4, 5)
    assert [p.pid for p in info.processes_of(6)] == [99910]
    assert info.processes_of(2) == ()


def test_a3_two_dies_per_npu_with_phy_ids() -> None:
    info = parse_npu_info(sample("npu-smi-info_910C-A3_24.1.rc3.3.txt"))
    assert info.version == "24.1.rc3.3"
    assert info.npu_count == 8
    assert len(info.chips) == 16
    assert [(c.npu_id, c.chip_id, c.device_id) for c in info.chips_of(3)] == [(3, 0, 6), (3, 1, 7)]
    assert [c.device_id for c in info.chips] == list(range(16))
    # The second die reports no power ('-').
    assert [c.power_w for c in info.chips_of(0)] == [182.0, None]
    assert info.chips[15].bus_id == "0000:83:00.0"
    assert [(p.npu_id, p.chip_id, p.pid) for p in info.processes_of(7)] == [(7, 0, 957957), (7, 1, 958011)]
    assert len(info.processes) == 8
    assert {p.name for p in info.processes} == {"pt_main_thread"}
    assert info.idle_npus == (0, 1, 2, 3)


def test_910a_warning_health_and_bytes_process_header() -> None:
    info = parse_npu_info(sample("npu-smi-info_910A_23.0.rc1.txt"))
    assert info.smi_version == "23.0.rc1.b070"
    assert info.npu_ids == (0, 1, 2, 3)
    assert [chip.health for chip in info.chips] == [Health.WARNING] * 4
    assert info.chips[0].health_raw == "Warning"
    assert info.health_of(2) == Health.WARNING
    assert (info.chips[2].memory_used_mb, info.chips[2].hbm_used_mb) == (1667, 30750)
    assert info.chips[3].memory_total_mb == 15039
    assert info.has_process_table and info.processes == ()
    assert info.idle_npus == (0,)  # the capture's process table is truncated after NPU 0


def test_310p3_inference_card_without_hbm() -> None:
    info = parse_npu_info(sample("npu-smi-info_310P3_24.1.0.1.txt"))
    assert info.npu_ids == (1536, 1792, 2048, 2304)
    assert len(info.chips) == 8
    assert [(c.chip_id, c.device_id) for c in info.chips_of(2048)] == [(0, 4), (1, 5)]
    assert {c.hbm_total_mb for c in info.chips} == {None}
    assert {c.power_w for c in info.chips} == {None}  # 'NA'
    assert info.chips[1].memory_total_mb == 43693
    assert info.idle_npus == (1536, 1792, 2048, 2304)


def test_blog_capture_with_elided_rows() -> None:
    blog = sample("npu-smi_hccn_tool_910B1_arthurchiao-blog.txt")
    info = parse_npu_info(section(blog, "$ npu-smi info\n", "$ npu-smi info -h"))
    assert info.version == "23.0.rc2"
    assert info.npu_ids == (0, 1, 7)  # the author cut NPUs 2-6 ('...')
    assert [c.hbm_total_mb for c in info.chips] == [65536] * 3
    assert not info.has_process_table
    # Surrounding shell text is ignored, so the whole post parses to the same table.
    assert parse_npu_info(blog) == info


def test_envcheck_dump_has_an_empty_npu_smi_info_body() -> None:
    dump = sample("envcheck_910A_npu-smi_hccn_tool_dump.txt")
    with pytest.raises(ParseError, match="npu-smi info output"):
        parse_npu_info(section(dump, "/usr/local/bin/npu-smi info\n", "/usr/local/Ascend"))


def test_health_of_absent_npu_is_unknown() -> None:
    info = parse_npu_info(sample("npu-smi-info_910B4_24.1.rc3.txt"))
    assert info.health_of(42) == Health.UNKNOWN


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("OK", Health.OK),
        ("Warning", Health.WARNING),
        ("General Warning", Health.WARNING),
        ("Alarm", Health.ALARM),
        ("Important Warning", Health.ALARM),
        ("Critical", Health.CRITICAL),
        ("Emergency Warning", Health.CRITICAL),
        ("NOT_EXIST", Health.UNKNOWN),
    ],
)
def test_health_words(raw: str, expected: Health) -> None:
    assert Health.from_text(raw) is expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "dcmi module initialize failed. ret is -8005\n",
        "+-----+\n| npu-smi 24.1.rc3   Version: 24.1.rc3 |\n+-----+\n",  # header but no NPU rows
        "| npu-smi 1 Version: 1 |\n| 0 910B4 | OK | 85.0 36 0 / 0 |\n+---+\n",  # half a row pair
        "| npu-smi 1 Version: 1 |\n| x 910B4 | OK | 85.0 36 0 / 0 |\n| 0 | 0000:C1:00.0 | 0 0 / 0 1 / 2 |\n",
        "| npu-smi 1 Version: 1 |\n| 0 910B4 | OK | lots of watts |\n| 0 | 0000:C1:00.0 | 0 0 / 0 1 / 2 |\n",
    ],
)
def test_npu_info_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_npu_info(text)


def test_bad_process_row_raises_parse_error() -> None:
    text = sample("npu-smi-info_910B4_24.1.rc3.txt").replace("| 99910         |", "| pid?          |")
    with pytest.raises(ParseError, match="process"):
        parse_npu_info(text)


# --- npu-smi info -t health / -m ------------------------------------------------------------------------


def test_health_query_from_envcheck_dump() -> None:
    dump = sample("envcheck_910A_npu-smi_hccn_tool_dump.txt")
    health = parse_npu_health(section(dump, "-c 0 -t health\n", None))
    assert health.health is Health.OK
    assert health.health_raw == "OK"
    assert health.error_codes == ()
    assert health.error_information is None


def test_health_query_with_error_codes() -> None:
    # The envcheck layout, with the fields a faulty chip fills in.
    text = "\tHealth Status                  : Alarm\n\tError Code                     : 80E18005 80E38003\n\tError Information              : HBM ECC\n"
    health = parse_npu_health(text)
    assert health.health is Health.ALARM
    assert health.error_codes == ("80E18005", "80E38003")
    assert health.error_information == "HBM ECC"


@pytest.mark.parametrize("text", ["", "Error: card id 9 is invalid.\n", "Chip Count : 1\n"])
def test_health_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="Health Status"):
        parse_npu_health(text)


def test_mapping_from_envcheck_dump() -> None:
    dump = sample("envcheck_910A_npu-smi_hccn_tool_dump.txt")
    rows = parse_npu_mapping(section(dump, "npu-smi info -m\n", "/usr/local/bin/npu-smi info\n"))
    assert [(r.npu_id, r.chip_id, r.chip_logic_id) for r in rows] == [(n, 0, n) for n in range(8)]
    assert {r.chip_name for r in rows} == {"Ascend 910A"}
    assert {r.chip_phy_id for r in rows} == {None}


def test_mapping_with_phy_id_and_mcu_rows() -> None:
    text = (
        "\tNPU ID   Chip ID   Chip Logic ID   Chip Phy-ID   Chip Name\n"
        "\t0        0         0               0             Ascend 910B3\n"
        "\t0        1         -               -             Mcu\n"
    )
    rows = parse_npu_mapping(text)
    assert [(r.chip_logic_id, r.chip_phy_id, r.chip_name) for r in rows] == [(0, 0, "Ascend 910B3"), (None, None, "Mcu")]


@pytest.mark.parametrize("text", ["", "garbage\n", "\tNPU ID  Chip ID  Chip Logic ID  Chip Name\n", "\tNPU ID  Chip ID  Chip Logic ID  Chip Name\nx y\n"])
def test_mapping_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_npu_mapping(text)


# --- topology --------------------------------------------------------------------------------------------


def test_npu_topo_910b_full_hccs_mesh() -> None:
    topo = parse_npu_topo(sample("npu-smi-info-t-topo_910B_8npu.txt"))
    assert topo.columns == tuple(f"NPU{i}" for i in range(8))
    assert topo.devices == topo.columns
    assert topo.link("NPU3", "NPU3") == "X"
    assert {topo.link(f"NPU{a}", f"NPU{b}") for a in range(8) for b in range(8) if a != b} == {"HCCS"}
    assert [row.cpu_affinity for row in topo.rows] == ["144-167", "0-23", "144-167", "0-23", "96-119", "48-71", "96-119", "48-71"]
    assert topo.row("NPU4").numa_affinity is None
    assert topo.nic_names == ()


def test_npu_topo_blog_copy_without_header_indent_parses_the_same() -> None:
    blog = sample("npu-smi_hccn_tool_910B1_arthurchiao-blog.txt")
    topo = parse_npu_topo(section(blog, "$ npu-smi info -t topo\n", "$ npu-smi info -t usages"))
    assert topo == parse_npu_topo(sample("npu-smi-info-t-topo_910B_8npu.txt"))


def test_nvidia_topo_8gpu_10nic() -> None:
    topo = parse_nvidia_topo((DATA / "nvidia-smi/topo_m_8gpu_nv12_10nic.txt").read_text())
    assert topo.columns == tuple([f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(10)])
    assert topo.devices == tuple(f"GPU{i}" for i in range(8))
    assert len(topo.rows) == 18
    assert topo.link("GPU0", "GPU5") == "NV12"
    assert topo.link("GPU0", "NIC1") == "PXB"
    assert topo.link("GPU0", "NIC2") == "SYS"
    assert topo.link("NIC8", "NIC9") == "PIX"
    assert topo.link("NIC9", "NIC9") == "X"
    gpu4 = topo.row("GPU4")
    assert (gpu4.cpu_affinity, gpu4.numa_affinity, gpu4.gpu_numa_id) == ("112-127,240-255", "7", None)
    nic0 = topo.row("NIC0")
    assert (nic0.cpu_affinity, nic0.numa_affinity) == (None, None)
    assert dict(topo.nic_names) == {f"NIC{i}": f"mlx5_{i}" for i in range(10)}


# Driver >= 535 layout: a 'GPU NUMA ID' column, and a double tab after 'NUMA Affinity' to keep alignment
# (as in vllm-project/vllm#13855, a DGX H100). Trimmed to two GPUs and two NICs.
NEW_LAYOUT = (
    "\t\x1b[4mGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tPXB\tNODE\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNODE\tPXB\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPXB\tNODE\t X \tNODE\t\t\t\t\n"
    "NIC1\tNODE\tPXB\tNODE\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_bond_0\n"
)


def test_nvidia_topo_gpu_numa_id_column_and_ansi_header() -> None:
    topo = parse_nvidia_topo(NEW_LAYOUT)
    assert topo.columns == ("GPU0", "GPU1", "NIC0", "NIC1")
    gpu1 = topo.row("GPU1")
    assert (gpu1.cpu_affinity, gpu1.numa_affinity, gpu1.gpu_numa_id) == ("56-111,168-223", "1", None)
    assert topo.link("GPU1", "NIC1") == "PXB"
    assert topo.nic_names == (("NIC0", "mlx5_0"), ("NIC1", "mlx5_bond_0"))


def test_nvidia_topo_vm_with_blank_affinities_keeps_columns_apart() -> None:
    # A VM (vllm-project/vllm#19607) leaves CPU and NUMA affinity blank but prints 'N/A' for GPU NUMA ID.
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV12\t\t\t\tN/A\nGPU1\tNV12\t X \t\t\t\t3\n"
    topo = parse_nvidia_topo(text)
    assert (topo.row("GPU0").cpu_affinity, topo.row("GPU0").numa_affinity, topo.row("GPU0").gpu_numa_id) == (None, None, None)
    assert (topo.row("GPU1").cpu_affinity, topo.row("GPU1").gpu_numa_id) == (None, "3")
    # The same pasted with spaces (as in the issue): the lone value still lands under 'GPU NUMA ID'.
    spaced = parse_nvidia_topo("\n".join(line.expandtabs(8) for line in text.split("\n")))
    assert spaced.row("GPU1").gpu_numa_id == "3"
    assert spaced.row("GPU1").numa_affinity is None


def test_nvidia_topo_pasted_with_spaces_instead_of_tabs() -> None:
    plain = NEW_LAYOUT.replace("\x1b[4m", "").replace("\x1b[0m", "")
    spaced = "\n".join(line.expandtabs(8) for line in plain.split("\n"))
    assert parse_nvidia_topo(spaced) == parse_nvidia_topo(NEW_LAYOUT)


def test_topo_lookup_errors_are_parse_errors() -> None:
    topo = parse_npu_topo(sample("npu-smi-info-t-topo_910B_8npu.txt"))
    with pytest.raises(ParseError, match="NPU9"):
        topo.row("NPU9")
    with pytest.raises(ParseError, match="GPU0"):
        topo.link("NPU0", "GPU0")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nvidia-smi: command not found\n",
        "\tGPU0\tGPU1\tCPU Affinity\n",  # header only
        "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-7\nGPU1\tNV12\t0-7\n",  # short row
        "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-7\nGPU7\tNV12\t X \t0-7\n",  # row not in columns
        "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \t?!\t0-7\nGPU1\tNV12\t X \t0-7\n",  # not a link type
        "\tGPU0\tGPU1\tCPU Affinity\nGPU0\tNV12\tNV12\t0-7\nGPU1\tNV12\t X \t0-7\n",  # no 'X' on the diagonal
        "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-7\t9\nGPU1\tNV12\t X \t0-7\n",  # more values than columns
        "GPU0    GPU1    CPU Affinity\nGPU0     X      NV12    0-7   1   2\nGPU1    NV12     X      0-7\n",  # same, spaces
    ],
)
def test_nvidia_topo_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_nvidia_topo(text)


def test_topo_parsers_reject_each_others_output() -> None:
    with pytest.raises(ParseError, match="NPU"):
        parse_npu_topo((DATA / "nvidia-smi/topo_m_8gpu_nv12_10nic.txt").read_text())
    with pytest.raises(ParseError, match="GPU"):
        parse_nvidia_topo(sample("npu-smi-info-t-topo_910B_8npu.txt"))


def test_cpu_list() -> None:
    assert parse_cpu_list("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert len(parse_cpu_list("48-63,176-191")) == 32
    for bad in ("", "a-b", "5-1", "1,,2"):
        with pytest.raises(ParseError):
            parse_cpu_list(bad)
