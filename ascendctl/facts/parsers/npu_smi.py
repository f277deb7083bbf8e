"""Parsers for ``npu-smi`` (Ascend) and ``nvidia-smi topo -m`` output.

Owns ``npu-smi info`` (device table, process table, header version), ``npu-smi info -t health``,
``npu-smi info -m`` and the two topology matrices. Pure functions over text; must not import typer,
rich, paramiko or transport code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ascendctl.facts.parsers import ParseError, body_lines, excerpt

__all__ = [
    "Health",
    "NpuChip",
    "NpuProcess",
    "NpuInfo",
    "NpuHealth",
    "NpuMapping",
    "TopoRow",
    "TopoMatrix",
    "parse_npu_info",
    "parse_npu_health",
    "parse_npu_mapping",
    "parse_npu_topo",
    "parse_nvidia_topo",
    "parse_cpu_list",
]


class Health(str, Enum):
    """An NPU's health, normalised from what npu-smi prints (``OK``, ``Warning``, ``Alarm``, ``Critical``)."""

    OK = "ok"
    WARNING = "warning"
    ALARM = "alarm"
    CRITICAL = "critical"
    UNKNOWN = "unknown"

    @classmethod
    def from_text(cls, text: str) -> Health:
        """Map npu-smi's health word to a member; anything unrecognised becomes UNKNOWN."""
        word = text.strip().lower()
        if word in ("ok", "healthy", "normal"):
            return cls.OK
        # DCMI levels: 1 minor ("Warning", "General Warning"), 2 major ("Alarm", "Important Warning"),
        # 3 critical ("Critical", "Emergency Warning"). Check the stronger words first.
        if "critical" in word or "emergency" in word:
            return cls.CRITICAL
        if "alarm" in word or "important" in word or "major" in word:
            return cls.ALARM
        if "warn" in word or "minor" in word:
            return cls.WARNING
        return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class NpuChip:
    """One row pair of the ``npu-smi info`` device table: a chip (an A3 die, a 310P chip) of one NPU."""

    npu_id: int
    chip_id: int
    # Second number of the chip row: 'Phy-ID' on A3, 'Device' on 310P; None where npu-smi prints only 'Chip'.
    device_id: int | None
    name: str
    health: Health
    health_raw: str
    power_w: float | None  # None for 'NA' and for the second A3 die ('-')
    temp_c: int | None
    hugepages_used: int | None
    hugepages_total: int | None
    aicore_pct: int | None
    memory_used_mb: int | None
    memory_total_mb: int | None
    hbm_used_mb: int | None  # None where the table has no HBM column (310P)
    hbm_total_mb: int | None
    bus_id: str


@dataclass(frozen=True, slots=True)
class NpuProcess:
    """One row of the ``npu-smi info`` process table."""

    npu_id: int
    chip_id: int
    pid: int
    name: str  # often empty: npu-smi cannot always read the name
    memory: int
    memory_unit: str  # 'MB' or 'B', from the 'Process memory(..)' header

    @property
    def memory_mb(self) -> float:
        """Process memory in MiB whatever unit the table used."""
        return self.memory / (1024 * 1024) if self.memory_unit == "B" else float(self.memory)


@dataclass(frozen=True, slots=True)
class NpuInfo:
    """Everything ``npu-smi info`` prints."""

    smi_version: str  # 'npu-smi 24.1.rc3'
    version: str  # 'Version: 24.1.rc3' (the driver)
    chips: tuple[NpuChip, ...]
    processes: tuple[NpuProcess, ...]
    idle_npus: tuple[int, ...]  # 'No running processes found in NPU N'
    has_process_table: bool

    @property
    def npu_ids(self) -> tuple[int, ...]:
        """Distinct NPU ids in table order."""
        return tuple(dict.fromkeys(chip.npu_id for chip in self.chips))

    @property
    def npu_count(self) -> int:
        """How many NPUs the table lists (an A3 NPU with two dies counts once)."""
        return len(self.npu_ids)

    def chips_of(self, npu_id: int) -> tuple[NpuChip, ...]:
        """The chips (dies) of one NPU."""
        return tuple(chip for chip in self.chips if chip.npu_id == npu_id)

    def health_of(self, npu_id: int) -> Health:
        """The worst health among the NPU's chips (A3 has two dies per NPU); UNKNOWN for an absent NPU."""
        order = (Health.OK, Health.UNKNOWN, Health.WARNING, Health.ALARM, Health.CRITICAL)
        found = [chip.health for chip in self.chips_of(npu_id)]
        return max(found, key=order.index) if found else Health.UNKNOWN

    def processes_of(self, npu_id: int) -> tuple[NpuProcess, ...]:
        """Process rows on one NPU."""
        return tuple(proc for proc in self.processes if proc.npu_id == npu_id)


@dataclass(frozen=True, slots=True)
class NpuHealth:
    """``npu-smi info -t health -i N [-c C]``."""

    health: Health
    health_raw: str
    error_codes: tuple[str, ...]  # empty for 'NA'
    error_information: str | None  # None for 'NA'


@dataclass(frozen=True, slots=True)
class NpuMapping:
    """One row of ``npu-smi info -m``."""

    npu_id: int
    chip_id: int
    chip_logic_id: int | None  # None for '-' (the MCU row on A2/A3 boards)
    chip_phy_id: int | None  # only printed by newer npu-smi versions
    chip_name: str


@dataclass(frozen=True, slots=True)
class TopoRow:
    """One row of a topology matrix: links from ``name`` to every column, plus the affinity columns."""

    name: str
    links: tuple[str, ...]  # aligned with TopoMatrix.columns; 'X' on the diagonal
    cpu_affinity: str | None  # '144-167', '0-55,112-167'; None when empty (NIC rows) or 'N/A'
    numa_affinity: str | None
    gpu_numa_id: str | None


@dataclass(frozen=True, slots=True)
class TopoMatrix:
    """``npu-smi info -t topo`` or ``nvidia-smi topo -m``; the legend is dropped."""

    columns: tuple[str, ...]
    rows: tuple[TopoRow, ...]
    nic_names: tuple[tuple[str, str], ...] = ()  # ('NIC0', 'mlx5_0') from nvidia-smi's NIC Legend

    @property
    def devices(self) -> tuple[str, ...]:
        """Accelerator rows ('NPU0'.., 'GPU0'..) in order."""
        return tuple(row.name for row in self.rows if row.name.startswith(("NPU", "GPU")))

    def row(self, name: str) -> TopoRow:
        """The row called ``name``; ParseError if the matrix has none."""
        for row in self.rows:
            if row.name == name:
                return row
        raise ParseError(f"topology matrix has no row {name!r} (rows: {', '.join(r.name for r in self.rows)})")

    def link(self, src: str, dst: str) -> str:
        """The connection type from ``src`` (a row) to ``dst`` (a column), e.g. 'HCCS', 'NV18', 'SYS'."""
        if dst not in self.columns:
            raise ParseError(f"topology matrix has no column {dst!r} (columns: {', '.join(self.columns)})")
        return self.row(src).links[self.columns.index(dst)]


# --- npu-smi info -------------------------------------------------------------------------------------

_HEADER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_NO_PROCESS = re.compile(r"No running processes found in NPU\s+(\d+)", re.IGNORECASE)
_PAIR = r"(\d+)\s*/\s*(\d+)"
_ROW1_METRICS = re.compile(rf"^(\S+)\s+(\S+)\s+{_PAIR}$")
_ROW2_METRICS = re.compile(rf"^(\S+)\s+{_PAIR}(?:\s+{_PAIR})?$")


def parse_npu_info(text: str) -> NpuInfo:
    """Parse ``npu-smi info``: device rows, process rows and the version header."""
    header: tuple[str, str] | None = None
    groups: list[list[list[str]]] = [[]]  # table lines between '+---' separators, split on '|'
    in_processes = False
    memory_unit = "MB"
    process_lines: list[list[str]] = []
    has_process_table = False

    for line in body_lines(text):
        stripped = line.strip()
        if stripped.startswith("+"):
            groups.append([])
            continue
        if not stripped.startswith("|"):
            continue  # prompts, warnings, elisions ('...') around the table
        cells = [cell.strip() for cell in stripped.strip("|").split("|")]
        joined = " ".join(cells)
        if header is None and (match := _HEADER.search(joined)):
            header = (match.group(1), match.group(2))
            continue
        if any(cell.startswith("Process id") for cell in cells):
            in_processes, has_process_table = True, True
            if unit := re.search(r"Process memory\((\w+)\)", joined):
                memory_unit = unit.group(1)
            continue
        if any(cell.startswith(("Health", "Bus-Id")) for cell in cells):
            continue  # the device table's two column-title rows
        if in_processes:
            process_lines.append(cells)
        else:
            groups[-1].append(cells)

    if header is None:
        raise ParseError(f"expected npu-smi info output with a 'npu-smi <ver> Version: <ver>' header, got {excerpt(text)}")
    chips = tuple(_parse_chip(group) for group in groups if group)
    if not chips:
        raise ParseError("expected at least one NPU row pair in the npu-smi info device table, found none")
    processes: list[NpuProcess] = []
    idle: list[int] = []
    for cells in process_lines:
        joined = " ".join(cells)
        if match := _NO_PROCESS.search(joined):
            idle.append(int(match.group(1)))
        else:
            processes.append(_parse_process(cells, memory_unit))
    return NpuInfo(header[0], header[1], chips, tuple(processes), tuple(idle), has_process_table)


def _parse_chip(group: list[list[str]]) -> NpuChip:
    if len(group) != 2 or any(len(cells) != 3 for cells in group):
        shown = " / ".join("|".join(cells) for cells in group)
        raise ParseError(f"expected an NPU row pair of 3 '|' columns each in npu-smi info, got {excerpt(shown, 160)}")
    (ids1, health_raw, metrics1), (ids2, bus_id, metrics2) = group
    first = ids1.split(None, 1)
    second = ids2.split()
    m1 = _ROW1_METRICS.match(metrics1)
    m2 = _ROW2_METRICS.match(metrics2)
    if len(first) != 2 or not first[0].isdigit() or not 1 <= len(second) <= 2 or not all(s.isdigit() for s in second):
        raise ParseError(f"expected 'NPU Name' / 'Chip [Phy-ID]' cells in npu-smi info, got {ids1!r} / {ids2!r}")
    if m1 is None or m2 is None:
        raise ParseError(f"expected 'Power Temp Hugepages' / 'AICore Memory [HBM]' cells, got {metrics1!r} / {metrics2!r}")
    return NpuChip(
        npu_id=int(first[0]),
        chip_id=int(second[0]),
        device_id=int(second[1]) if len(second) == 2 else None,
        name=first[1].strip(),
        health=Health.from_text(health_raw),
        health_raw=health_raw,
        power_w=_float_or_none(m1.group(1)),
        temp_c=_int_or_none(m1.group(2)),
        hugepages_used=int(m1.group(3)),
        hugepages_total=int(m1.group(4)),
        aicore_pct=_int_or_none(m2.group(1)),
        memory_used_mb=int(m2.group(2)),
        memory_total_mb=int(m2.group(3)),
        hbm_used_mb=int(m2.group(4)) if m2.group(4) is not None else None,
        hbm_total_mb=int(m2.group(5)) if m2.group(5) is not None else None,
        bus_id=bus_id,
    )


def _parse_process(cells: list[str], unit: str) -> NpuProcess:
    ids = cells[0].split() if cells else []
    if len(cells) != 4 or len(ids) != 2 or not all(i.isdigit() for i in ids) or not cells[1].isdigit():
        raise ParseError(f"expected a process row 'NPU Chip | pid | name | memory' in npu-smi info, got {excerpt('|'.join(cells))}")
    memory = cells[3].split()[0] if cells[3] else ""
    if not memory.isdigit():
        raise ParseError(f"expected a process memory number, got {cells[3]!r}")
    return NpuProcess(int(ids[0]), int(ids[1]), int(cells[1]), cells[2], int(memory), unit)


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # 'NA', '-'


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None


# --- npu-smi info -t health / -m ------------------------------------------------------------------------


def parse_npu_health(text: str) -> NpuHealth:
    """Parse ``npu-smi info -t health -i N`` (``Health Status``, ``Error Code``, ``Error Information``)."""
    fields: dict[str, str] = {}
    for line in body_lines(text):
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    raw = fields.get("health status")
    if raw is None:
        raise ParseError(f"expected a 'Health Status : <value>' line from npu-smi info -t health, got {excerpt(text)}")
    codes = fields.get("error code", "NA")
    info = fields.get("error information", "NA")
    return NpuHealth(
        health=Health.from_text(raw),
        health_raw=raw,
        error_codes=() if codes.upper() in ("", "NA") else tuple(codes.replace(",", " ").split()),
        error_information=None if info.upper() in ("", "NA") else info,
    )


def parse_npu_mapping(text: str) -> tuple[NpuMapping, ...]:
    """Parse ``npu-smi info -m`` (NPU ID, Chip ID, Chip Logic ID, [Chip Phy-ID,] Chip Name)."""
    rows: list[NpuMapping] = []
    has_phy = None
    for line in body_lines(text):
        if "Chip Logic ID" in line:
            has_phy = "Phy-ID" in line or "Phy ID" in line
            continue
        if has_phy is None or not line.strip():
            continue
        parts = line.split(None, 4 if has_phy else 3)
        want = 5 if has_phy else 4
        if len(parts) != want or not parts[0].isdigit() or not parts[1].isdigit():
            raise ParseError(f"expected an npu-smi info -m row 'NPU Chip Logic{' Phy' if has_phy else ''} Name', got {line.strip()!r}")
        rows.append(
            NpuMapping(
                npu_id=int(parts[0]),
                chip_id=int(parts[1]),
                chip_logic_id=_int_or_none(parts[2]),
                chip_phy_id=_int_or_none(parts[3]) if has_phy else None,
                chip_name=parts[-1].strip(),
            )
        )
    if has_phy is None:
        raise ParseError(f"expected npu-smi info -m output with a 'Chip Logic ID' header, got {excerpt(text)}")
    if not rows:
        raise ParseError("expected at least one row in npu-smi info -m output, found only the header")
    return tuple(rows)


# --- topology matrices -----------------------------------------------------------------------------------

_TAIL_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_CELL = re.compile(r"^[A-Z][A-Z0-9_#/]*$")  # X, HCCS, NV18, PIX, PXB, PHB, NODE, SYS, NA, SIO, ...
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


def parse_npu_topo(text: str) -> TopoMatrix:
    """Parse ``npu-smi info -t topo``: NPU rows/columns with HCCS/PIX/PXB/PHB/SYS/NA cells and CPU Affinity."""
    matrix = _parse_matrix(text, "npu-smi info -t topo")
    if not any(name.startswith("NPU") for name in matrix.columns):
        raise ParseError(f"expected NPU<n> columns in npu-smi info -t topo, got {', '.join(matrix.columns)}")
    return matrix


def parse_nvidia_topo(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m``: GPU and NIC rows, X/NV#/PIX/PXB/PHB/NODE/SYS cells, affinity columns, NIC legend."""
    matrix = _parse_matrix(text, "nvidia-smi topo -m")
    if not any(name.startswith("GPU") for name in matrix.columns):
        raise ParseError(f"expected GPU<n> columns in nvidia-smi topo -m, got {', '.join(matrix.columns)}")
    return matrix


def _parse_matrix(text: str, tool: str) -> TopoMatrix:
    lines = [line.rstrip() for line in body_lines(text)]
    header_at = next((i for i, line in enumerate(lines) if "CPU Affinity" in line), None)
    if header_at is None:
        raise ParseError(f"expected a {tool} header row ending in 'CPU Affinity', got {excerpt(text)}")
    header = lines[header_at].expandtabs(8)
    columns = tuple(header[: header.index("CPU Affinity")].split())
    if not columns:
        raise ParseError(f"expected device names before 'CPU Affinity' in the {tool} header, got {header.strip()!r}")
    tails = [(header.index(name), name) for name in _TAIL_COLUMNS if name in header]

    rows: list[TopoRow] = []
    nic_names: list[tuple[str, str]] = []
    in_legend = False
    for line in lines[header_at + 1 :]:
        if not line.strip():
            continue
        if line.lstrip().startswith(("Legend", "NIC Legend")):
            in_legend = True
            continue
        if in_legend:
            if match := _NIC_LEGEND.match(line):
                nic_names.append((match.group(1), match.group(2)))
            continue
        rows.append(_parse_matrix_row(line, columns, header.index(columns[0]), tails, tool))
    if not rows:
        raise ParseError(f"expected device rows after the {tool} header, found none")
    return TopoMatrix(columns, tuple(rows), tuple(nic_names))


def _parse_matrix_row(line: str, columns: tuple[str, ...], first_col: int, tails: list[tuple[int, str]], tool: str) -> TopoRow:
    n = len(columns)
    if "\t" in line:
        # nvidia-smi separates every field with a tab, empty ones included, and puts two tabs between
        # 'NUMA Affinity' and 'GPU NUMA ID': name, n cells, cpu, numa, '', gpu-numa.
        fields = [field.strip() for field in line.split("\t")]
        name, cells, rest = fields[0], fields[1 : 1 + n], fields[1 + n :]
        values = _tab_tail(rest, [tail for _, tail in tails])
    else:
        tokens = [(m.start(), m.group()) for m in re.finditer(r"\S+", line)]
        name, cells = tokens[0][1], [cell for _, cell in tokens[1 : 1 + n]]
        values = _spaced_tail(tokens[1 + n :], tokens[1][0] - first_col if len(tokens) > 1 else 0, tails)
    if values is None or name not in columns or len(cells) != n or not all(_CELL.match(cell) for cell in cells):
        raise ParseError(f"expected a {tool} row '<device> <{n} link types> [affinity]', got {line.strip()!r}")
    if cells[columns.index(name)] != "X":
        raise ParseError(f"expected 'X' where {name} meets itself in the {tool} matrix, got {line.strip()!r}")

    def value(key: str) -> str | None:
        found = values.get(key) if values else None
        return None if found in (None, "", "N/A", "NA") else found

    return TopoRow(name, tuple(cells), value("CPU Affinity"), value("NUMA Affinity"), value("GPU NUMA ID"))


def _tab_tail(rest: list[str], names: list[str]) -> dict[str, str] | None:
    values: dict[str, str] = {}
    used: set[int] = set()
    for index, name in enumerate(names[:2]):  # CPU Affinity, NUMA Affinity sit right after the cells
        if index < len(rest):
            values[name], used = rest[index], used | {index}
    if "GPU NUMA ID" in names:
        last = max((i for i in range(2, len(rest)) if rest[i]), default=None)
        if last is not None:
            values["GPU NUMA ID"], used = rest[last], used | {last}
    stray = [field for i, field in enumerate(rest) if field and i not in used]
    return None if stray else values


def _spaced_tail(tokens: list[tuple[int, str]], shift: int, tails: list[tuple[int, str]]) -> dict[str, str] | None:
    # Pasted copies lose the tabs. With every affinity present the order is enough; when some are blank
    # (VMs) each value goes to the nearest column title, the later one on a tie. The header may sit one
    # column left of the rows (npu-smi indents it, blog copies do not); 'shift' measures that.
    if len(tokens) > len(tails):
        return None
    if len(tokens) == len(tails):
        return {name: token for (_, token), (_, name) in zip(tokens, tails)}
    values: dict[str, str] = {}
    for start, token in tokens:
        nearest = min(tails, key=lambda tail: (abs(tail[0] - (start - shift)), -tail[0]))
        values[nearest[1]] = token
    return values


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """Expand a CPU list such as '0-23,96-119' (an affinity cell) into CPU numbers."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        low, sep, high = part.partition("-")
        if not low.strip().isdigit() or (sep and not high.strip().isdigit()):
            raise ParseError(f"expected a CPU list like '0-23,96-119', got {text!r}")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise ParseError(f"expected ascending CPU ranges, got {part!r} in {text!r}")
        cpus.extend(range(first, last + 1))
    return tuple(cpus)
