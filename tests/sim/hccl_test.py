"""Simulated MPICH `mpirun` and CANN hccl_test `all_reduce_test` for netcheck's hccl_test backend on test hosts (no NPU there).

`all_reduce_test_script(rates)` replays the vendor's documented output, tests/data/netcheck/hccl_test/
all_reduce_test.doc.txt (hicann/oam-tools docs/zh/hccl_test/execution.md; tests/data/netcheck/INDEX.md), keeping the
rows whose size lies between its `-b` and `-e`, with every row's time divided and alg_bandwidth multiplied by the
slowest of the run's hosts' rates (`rates`: host address -> factor, 1.0 when not named). That is the only change to
the capture: the header and the layout are what the documentation shows. It refuses to run without `-p`, `-b`,
`-e` and an `-n` on mpirun of (hosts x -p), the checks of what reaches the node.
`mpirun_script()` reads the MPICH (hydra) options netcheck gives (`-n`, `-hosts a:P,b:P`), answers `--version` as
hydra does (`HYDRA build details:`), and runs the program once with `SIM_MPI_HOSTS` set to the hosts (without `:P`)
and `SIM_MPI_NP` to `-n`, as a stand-in for hydra starting the ranks on those hosts. Nothing here measures anything:
what the tests check with it is the command netcheck sends, the parser, and the pair/group logic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

CAPTURE = Path(__file__).parent.parent / "data" / "netcheck" / "hccl_test" / "all_reduce_test.doc.txt"
# where a test host's toolkit lives: ASCEND_TOOLKIT_HOME in its SSH sessions, under the per-host tools directory
TOOLKIT = "/usr/local/sbin/ascend-toolkit"
BINARY = f"{TOOLKIT}/tools/hccl_test/bin/all_reduce_test"

MPIRUN = """#!/bin/sh
# Simulated MPICH mpirun (tests/sim/hccl_test.py)
case "$1" in --version|-version) printf 'HYDRA build details:\\n    Version:                                 3.2.1\\n'; exit 0 ;; esac
hosts=; np=
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-np) np=$2; shift 2 ;;
    -hosts|-host) hosts=$2; shift 2 ;;
    -f) hosts=$(awk -F: 'NF { printf "%s%s", sep, $1; sep = "," }' "$2"); shift 2 ;;
    -*) echo "mpirun (simulated MPICH): unknown option $1" >&2; exit 1 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "mpirun (simulated MPICH): no program" >&2; exit 1; }
SIM_MPI_HOSTS=$(echo "$hosts" | tr ',' '\\n' | sed 's/:[0-9]*$//' | paste -sd, -); SIM_MPI_NP=$np
export SIM_MPI_HOSTS SIM_MPI_NP
exec "$@"
"""


def mpirun_script() -> str:
    return MPIRUN


def all_reduce_test_script(rates: Mapping[str, float]) -> str:
    """An `all_reduce_test` that prints the documented table between -b and -e, scaled by min(rate of its hosts)."""
    table = " ".join(f"{host}={float(rate):g}" for host, rate in sorted(rates.items()))
    capture = CAPTURE.read_text()
    assert "'" not in capture
    return f"""#!/bin/sh
# Simulated hccl_test all_reduce_test (tests/sim/hccl_test.py): the documented output, scaled
b=; e=; p=
while [ $# -gt 0 ]; do
  case "$1" in
    -b) b=$2; shift 2 ;;
    -e) e=$2; shift 2 ;;
    -p) p=$2; shift 2 ;;
    -f|-d|-o|-n|-w|-c|-i) shift 2 ;;
    *) echo "all_reduce_test (simulated): unknown option $1" >&2; exit 1 ;;
  esac
done
[ -n "$b" ] && [ -n "$e" ] && [ -n "$p" ] || {{ echo "all_reduce_test (simulated): needs -b, -e and -p" >&2; exit 1; }}
nodes=$(echo "$SIM_MPI_HOSTS" | tr ',' '\\n' | grep -c .)
[ "$SIM_MPI_NP" = $((nodes * p)) ] || {{ echo "all_reduce_test (simulated): mpirun -n $SIM_MPI_NP is not $nodes nodes x -p $p" >&2; exit 1; }}
factor=$(echo "$SIM_MPI_HOSTS" | tr ',' '\\n' | awk -v table='{table}' '
  BEGIN {{ n = split(table, kv, " "); for (i = 1; i <= n; i++) {{ split(kv[i], q, "="); rate[q[1]] = q[2] }} m = 0 }}
  NF {{ r = ($1 in rate) ? rate[$1] : 1; if (m == 0 || r < m) m = r }}
  END {{ print (m == 0 ? 1 : m) }}')
printf '%s' '{capture}' | awk -F'|' -v f="$factor" -v b="$b" -v e="$e" '
  /^[0-9]/ {{ if ($1 + 0 >= b + 0 && $1 + 0 <= e + 0) printf "%-17s |    %8.2f    |      %9.5f        |%s\\n", $1 + 0, $2 / f, $3 * f, $4; next }}
  {{ print }}'
"""
