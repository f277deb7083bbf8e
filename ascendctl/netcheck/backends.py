"""How each netcheck backend is run on a pair of nodes: pure command builders and the parsers of what they print.

`tcp` (python3 standard library) and `torch` (gloo on CPU) ship a program in ascendctl/netcheck/programs/ that
reaches the node on stdin (`python3 - ARGS`), like the packaged shell programs: nothing is installed. A pair
is a server (binds the cluster address, prints `PORT <n>`) and a client; each prints one JSON line with what it
received. `hccl_test` and `nccl-tests` are MPI programs started once per measured group (a pair is a group of two)
from its first node; their command lines are built here (the MPI table) and their tables parsed in
parsers/perftests.py. Every value that reaches a shell is quoted.
Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import Callable, Sequence

from ascendctl.errors import parse_json

BACKENDS = ("hccl_test", "nccl-tests", "torch", "tcp")
# the order `auto` prefers them: the Ascend device plane (hccl_test), the GPU one (nccl-tests), then the host network
HCCL_TEST_DIR = "${ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}/tools/hccl_test/bin"
# probe sections: does the node have what the MPI backends need (exit 0 when it does); pairs (two nodes) run
# nccl-tests' sendrecv_perf, rings of more (`--quick`) its all_reduce_perf: see has_sections
HAS_SECTIONS = {
    "hccl_test": f'command -v mpirun >/dev/null 2>&1 && test -x "{HCCL_TEST_DIR}/all_reduce_test"',
    "nccl-tests": "command -v mpirun >/dev/null 2>&1 && command -v sendrecv_perf >/dev/null 2>&1",
}
# what a ring of more than two nodes adds (nccl_tests_command runs all_reduce_perf for those)
_RINGS_NEED = {"nccl-tests": " && command -v all_reduce_perf >/dev/null 2>&1"}


def has_sections(rings: bool) -> dict[str, str]:
    """HAS_SECTIONS for a run that measures rings of more than two nodes (`--quick`) or only pairs."""
    return {name: check + (_RINGS_NEED.get(name, "") if rings else "") for name, check in HAS_SECTIONS.items()}


PROGRAMS = {"tcp": "tcp_bw.py", "torch": "torch_bw.py"}

_PORT = re.compile(r"^PORT (\d+)\s*$", re.MULTILINE)


class BackendOutputError(ValueError):
    """A backend printed something that is not its result."""


@dataclass(frozen=True, slots=True)
class Received:
    """What one side of a pair received: bytes and seconds from first byte to the last."""

    nbytes: float
    seconds: float

    @property
    def gbps(self) -> float | None:
        """Gbit/s (10^9 bits per second), None when nothing was received."""
        if self.nbytes <= 0 or self.seconds <= 0:
            return None
        return self.nbytes * 8 / self.seconds / 1e9


@lru_cache(maxsize=None)
def program(backend: str) -> bytes:
    """The Python program of a backend, as sent on the node's stdin."""
    return (files("ascendctl") / "netcheck" / "programs" / PROGRAMS[backend]).read_bytes()


def _mode(both_ways: bool) -> str:
    return "both" if both_ways else "send"


def server_command(backend: str, *, python: str, bind_ip: str, ifname: str | None, size: int, timeout: float,
                   both_ways: bool = True) -> str:
    """The server side of a pair: listens on the node's cluster address and prints `PORT <n>` first."""
    q = shlex.quote
    if backend == "tcp":
        return f"exec {q(python)} - server {q(bind_ip)} {int(size)} {timeout:g}"
    if backend == "torch":
        return f"{_gloo_env(ifname)}exec {q(python)} - server {q(bind_ip)} {int(size)} {timeout:g} {_mode(both_ways)}"
    raise ValueError(f"{backend}: not a server/client backend")


def client_command(backend: str, *, python: str, server_ip: str, port: int, source_ip: str, ifname: str | None,
                   size: int, timeout: float, both_ways: bool = True) -> str:
    """The client side of a pair: connects from its own cluster address to the server's."""
    q = shlex.quote
    if backend == "tcp":
        return (f"exec {q(python)} - client {q(server_ip)} {int(port)} {q(source_ip)} {int(size)} {timeout:g} "
                f"{_mode(both_ways)}")
    if backend == "torch":
        return (f"{_gloo_env(ifname)}exec {q(python)} - client {q(server_ip)} {int(port)} {int(size)} {timeout:g} "
                f"{_mode(both_ways)}")
    raise ValueError(f"{backend}: not a server/client backend")


def _gloo_env(ifname: str | None) -> str:
    # gloo picks the interface of the hostname otherwise, which may be the management NIC
    return f"GLOO_SOCKET_IFNAME={shlex.quote(ifname)} " if ifname else ""


def parse_port(text: str) -> int | None:
    """The port a server announced (`PORT 40123`), or None when it has not yet."""
    match = _PORT.search(text)
    return int(match.group(1)) if match else None


def parse_received(text: str) -> Received:
    """The last JSON line a tcp/torch side printed: {"recv_bytes": ..., "recv_seconds": ...}."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = parse_json(line)
                return Received(float(data["recv_bytes"]), float(data["recv_seconds"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise BackendOutputError(f"unreadable result line {line[:80]!r}: {exc}") from None
    raise BackendOutputError(f"no result line ({_tail(text)})")


def nccl_tests_command(*, mpirun: str = "mpirun", binary: str | None = None, hosts: Sequence[str], size: int,
                       ifname: str | None, iters: int = 20) -> str:
    """nccl-tests over the nodes `hosts`, one GPU each: `sendrecv_perf` for two (point-to-point), else `all_reduce_perf` (a ring).

    `-b`/`-e` at one size, `-g 1` GPU per process, NCCL_SOCKET_IFNAME for the bootstrap/socket transport.
    """
    q = shlex.quote
    program = binary or ("sendrecv_perf" if len(hosts) == 2 else "all_reduce_perf")
    env = f"-x NCCL_SOCKET_IFNAME={q(ifname)} " if ifname else ""
    return (f"{q(mpirun)} --allow-run-as-root -np {len(hosts)} -H {q(','.join(h + ':1' for h in hosts))} "
            f"{env}{q(program)} -b {int(size)} -e {int(size)} -g 1 -n {int(iters)}")


def _tail(text: str) -> str:
    """The last line a backend printed, for an error message."""
    return (text.strip().splitlines()[-1:] or ["no output"])[0][:120]


def parse_nccl_tests_gbps(text: str, size: int) -> float:
    """The run's Gbit/s from a nccl-tests table: the out-of-place algbw at `size` (else the largest row).

    sendrecv over two ranks sends both ways at once, so for a pair this is each direction's rate. BackendOutputError
    when there is no table.
    """
    from ascendctl.facts.parsers import ParseError
    from ascendctl.facts.parsers.perftests import gbit_per_s, parse_nccl_tests

    try:
        table = parse_nccl_tests(text)
    except ParseError as exc:
        raise BackendOutputError(f"{exc} ({_tail(text)})") from None
    row = table.at_size(size) or table.largest
    assert row is not None  # parse_nccl_tests refuses a table without rows
    return gbit_per_s(row.algbw)


def hccl_test_command(*, mpirun: str = "mpirun", binary: str = "all_reduce_test", hosts: Sequence[str], size: int,
                      npus: int = 8, ifname: str | None = None, iters: int = 20) -> str:
    """CANN's hccl_test all-reduce over the nodes `hosts`, `npus` NPUs each, at one size (`-b S -e S`).

    `-n` on mpirun is the NPUs in all (nodes x npus), `-p` the NPUs per node; the binary is the toolkit's
    tools/hccl_test/bin/all_reduce_test (HCCL_TEST_DIR, expanded on the node). The node's mpirun decides the form
    (hccl_test builds against either): MPICH (hydra) takes `-hosts a:P,b:P` and passes the environment on by
    itself; Open MPI takes `-H a:P,b:P`, `-x` for each variable and `--allow-run-as-root`. HCCL_SOCKET_IFNAME
    `=<if>` (exact match) puts HCCL's host-side bootstrap on the cluster interface. The result check stays on (its
    default, `-c 1`): a `failed` check is a broken measurement, not a bandwidth.
    """
    q = shlex.quote
    per_node = int(npus)
    placement = q(",".join(f"{h}:{per_node}" for h in hosts))
    program = (f'"{HCCL_TEST_DIR}"/{q(binary)} -p {per_node} -b {int(size)} -e {int(size)} -f 2 -d fp32 -o sum '
               f"-n {int(iters)}")
    env = f"HCCL_SOCKET_IFNAME={q('=' + ifname)} " if ifname else ""
    forward = "-x HCCL_SOCKET_IFNAME " if ifname else ""
    total = len(hosts) * per_node
    openmpi = (f"{env}exec {q(mpirun)} --allow-run-as-root -n {total} -H {placement} {forward}-x LD_LIBRARY_PATH "
               f"{program}")
    mpich = f"{env}exec {q(mpirun)} -n {total} -hosts {placement} {program}"
    return f"if {q(mpirun)} --version 2>&1 | grep -q 'Open MPI'; then {openmpi}; else {mpich}; fi"


def parse_hccl_test_gbps(text: str, size: int) -> float:
    """The run's Gbit/s from an hccl_test table: alg_bandwidth (GB/s) at `size` (else the largest row) x 8.

    A failed result check (a `failed` row, or a `local rank_id N, check result failed` line) is a
    BackendOutputError naming the ranks: the data did not arrive intact, so its speed means nothing.
    """
    from ascendctl.facts.parsers import ParseError
    from ascendctl.facts.parsers.perftests import gbit_per_s, parse_hccl_test

    try:
        table = parse_hccl_test(text)
    except ParseError as exc:
        raise BackendOutputError(f"{exc} ({_tail(text)})") from None
    if table.failed_ranks:
        ranks = ", ".join(str(r) for r in sorted({rank for rank, _ in table.failed_ranks}))
        raise BackendOutputError(f"hccl_test: result check failed on rank {ranks}")
    row = table.at_size(size) or table.largest
    assert row is not None  # parse_hccl_test refuses a table with neither rows nor failed ranks
    if row.check == "failed":
        raise BackendOutputError(f"hccl_test: result check failed at {row.size} bytes")
    return gbit_per_s(row.algbw)


def ring_bus_factor(nodes: int) -> float:
    """2(k-1)/k: an all-reduce ring over k nodes moves that many times the data over each node's link.

    An all-reduce's algorithm bandwidth falls as its ring grows (k/2(k-1) of the link rate); times this factor it is
    the link's rate (nccl-tests' `busbw`), so rings of different sizes, and pairs (factor 1), compare.
    """
    return 2 * (nodes - 1) / nodes if nodes > 1 else 1.0


@dataclass(frozen=True, slots=True)
class MpiBackend:
    """How an MPI backend measures a group of nodes: the command started on its first node and the parser of its output."""

    command: Callable[[Sequence[str], int, str | None, int], str]  # (hosts, size, ifname, npus per node)
    gbps: Callable[[str, int], float]  # (output, size) -> the run's algorithm bandwidth in Gbit/s


MPI = {
    "hccl_test": MpiBackend(lambda hosts, size, ifname, npus: hccl_test_command(hosts=hosts, size=size, npus=npus,
                                                                                ifname=ifname),
                            parse_hccl_test_gbps),
    "nccl-tests": MpiBackend(lambda hosts, size, ifname, npus: nccl_tests_command(hosts=hosts, size=size, ifname=ifname),
                             parse_nccl_tests_gbps),
}
MPI_BACKENDS = tuple(MPI)  # one mpirun per measured group (a pair is a group of two), from its first node


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)i?[bB]?\s*$")


def parse_size(text: str) -> int:
    """`64M`, `512K`, `1G`, `1048576` as bytes (binary multiples, as nccl-tests' -b/-e read them)."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (examples: 64M, 512K, 1G)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    value = int(float(match.group(1)) * scale)
    if value <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return value
