"""Simulated `mpirun` and `sendrecv_perf` for netcheck's nccl-tests backend on test hosts (no GPU there).

`sendrecv_perf_script(rates)` (and `all_reduce_perf_script(rates)`, for rings of more than two nodes: the rccl-tests
all_reduce_perf capture of hpc-ai-envs#30, the same table layout, scaled the same way) replays a REAL captured table, tests/data/netcheck/
sendrecv_perf_2nodes_a40_nccl-tests-issue-214.txt (two nodes, one A40 each, posted in NVIDIA/nccl-tests#214),
with every row's time divided and algbw/busbw multiplied by the slower of the two hosts' rates (`rates`: host
address -> factor, 1.0 when not named). That is the only change to the capture: the tool's layout, header and
values are what nccl-tests printed. `mpirun_script()` reads the options netcheck gives it (`-np`, `-H a:1,b:1`,
`-x VAR=VALUE`, `--allow-run-as-root`) and runs the program with `SIM_MPI_HOSTS` set to the `-H` value, as a
stand-in for Open MPI starting one rank on each host.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

CAPTURE = Path(__file__).parent.parent / "data" / "netcheck" / "sendrecv_perf_2nodes_a40_nccl-tests-issue-214.txt"
# the ring (--quick groups of more than two): rccl-tests' all_reduce_perf on 8 MI300X, the same table layout
ALL_REDUCE = Path(__file__).parent.parent / "data" / "netcheck" / "all_reduce_perf_8x_mi300x_rccl-tests_hpc-ai-envs-pr-30.txt"

MPIRUN = """#!/bin/sh
# Simulated mpirun (tests/sim/nccl_tests.py)
hosts=
while [ $# -gt 0 ]; do
  case "$1" in
    -np|-n) shift 2 ;;
    -H|--host) hosts=$2; shift 2 ;;
    -x) export "$2"; shift 2 ;;
    --allow-run-as-root) shift ;;
    -*) echo "mpirun (simulated): unknown option $1" >&2; exit 1 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "mpirun (simulated): no program" >&2; exit 1; }
SIM_MPI_HOSTS=$hosts; export SIM_MPI_HOSTS
exec "$@"
"""


def mpirun_script() -> str:
    return MPIRUN


def sendrecv_perf_script(rates: Mapping[str, float]) -> str:
    """A `sendrecv_perf` that prints the captured table scaled by min(rate of each `-H` host)."""
    return _perf_script("sendrecv_perf", CAPTURE, "the capture of NVIDIA/nccl-tests#214", rates)


def all_reduce_perf_script(rates: Mapping[str, float]) -> str:
    """An `all_reduce_perf` that prints a real all_reduce_perf table (rccl-tests, same layout), scaled the same way."""
    return _perf_script("all_reduce_perf", ALL_REDUCE, "rccl-tests all_reduce_perf from hpc-ai-envs#30", rates)


def _perf_script(name: str, capture_file: Path, source: str, rates: Mapping[str, float]) -> str:
    table = " ".join(f"{host}={float(rate):g}" for host, rate in sorted(rates.items()))
    capture = capture_file.read_text()
    assert "'" not in capture
    return f"""#!/bin/sh
# Simulated {name} (tests/sim/nccl_tests.py): {source}, scaled
factor=$(echo "$SIM_MPI_HOSTS" | tr ',' '\\n' | awk -v table='{table}' '
  BEGIN {{ n = split(table, kv, " "); for (i = 1; i <= n; i++) {{ split(kv[i], p, "="); rate[p[1]] = p[2] }} m = 0 }}
  {{ split($0, h, ":"); r = (h[1] in rate) ? rate[h[1]] : 1; if (m == 0 || r < m) m = r }}
  END {{ print (m == 0 ? 1 : m) }}')
printf '%s' '{capture}' | awk -v f="$factor" '
  /^ *[0-9]/ {{ printf "%12s  %12s  %8s  %6s  %6s  %7.2f  %6.2f  %6.2f  %6s  %7.2f  %6.2f  %6.2f  %6s\\n", $1, $2, $3, $4, $5, $6 / f, $7 * f, $8 * f, $9, $10 / f, $11 * f, $12 * f, $13; next }}
  {{ print }}'
"""
