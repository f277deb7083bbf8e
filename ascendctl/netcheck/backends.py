"""How each netcheck backend is run on a pair of nodes: pure command builders and the parsers of what they print.

`tcp` (python3 standard library) and `torch` (gloo on CPU) ship a program in ascendctl/netcheck/programs/ that
reaches the node on stdin (`python3 - ARGS`), like the packaged shell programs: nothing is installed. A pair
is a server (binds the cluster address, prints `PORT <n>`) and a client; each prints one JSON line with what it
received. `nccl-tests` and `hccl_test` are MPI programs started from the pair's first node; their command lines
are built here and their tables parsed in parsers/perftests.py. Every value that reaches a shell is quoted.
Pure; must not import typer or rich.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

BACKENDS = ("hccl_test", "nccl-tests", "torch", "tcp")
# run pair by pair, in the order `auto` prefers them; hccl_test has a command line only (no real output to test a parser on)
RUNNABLE = ("nccl-tests", "torch", "tcp")
MPI_BACKENDS = ("nccl-tests",)  # started once per pair, from the pair's first node, by mpirun
# probe sections: does the node have what the MPI backends need (exit 0 when it does)
HAS_SECTIONS = {
    "nccl-tests": "command -v mpirun >/dev/null 2>&1 && command -v sendrecv_perf >/dev/null 2>&1",
}
PROGRAMS = {"tcp": "tcp_bw.py", "torch": "torch_bw.py"}
HCCL_TEST_DIR = "${ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}/tools/hccl_test/bin"

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
                data = json.loads(line)
                return Received(float(data["recv_bytes"]), float(data["recv_seconds"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise BackendOutputError(f"unreadable result line {line[:80]!r}: {exc}") from None
    tail = text.strip().splitlines()[-1:] or ["no output"]
    raise BackendOutputError(f"no result line ({tail[0][:120]})")


def nccl_tests_command(*, mpirun: str = "mpirun", binary: str = "sendrecv_perf", hosts: tuple[str, str], size: int,
                       ifname: str | None, iters: int = 20) -> str:
    """nccl-tests over two nodes, one GPU each (`sendrecv_perf` measures point-to-point, `all_reduce_perf` a ring).

    `-b`/`-e` at one size, `-g 1` GPU per process, NCCL_SOCKET_IFNAME for the bootstrap/socket transport.
    """
    q = shlex.quote
    env = f"-x NCCL_SOCKET_IFNAME={q(ifname)} " if ifname else ""
    return (f"{q(mpirun)} --allow-run-as-root -np 2 -H {q(hosts[0] + ':1,' + hosts[1] + ':1')} "
            f"{env}{q(binary)} -b {int(size)} -e {int(size)} -g 1 -n {int(iters)}")


def parse_nccl_tests_gbps(text: str, size: int) -> float:
    """The pair's Gbit/s from a `sendrecv_perf` table: the out-of-place algbw at `size` (else the largest row).

    sendrecv over two ranks sends both ways at once, so this is each direction's rate. BackendOutputError when
    there is no table.
    """
    from ..parsers import ParseError
    from ..parsers.perftests import gbit_per_s, parse_nccl_tests

    try:
        table = parse_nccl_tests(text)
    except ParseError as exc:
        tail = text.strip().splitlines()[-1:] or ["no output"]
        raise BackendOutputError(f"{exc} ({tail[0][:120]})") from None
    row = table.at_size(size) or table.largest
    assert row is not None  # parse_nccl_tests refuses a table without rows
    return gbit_per_s(row.algbw)


def hccl_test_command(*, mpirun: str = "mpirun", binary: str = "all_reduce_test", hosts: tuple[str, str], size: int,
                      devices_per_node: int = 8, iters: int = 20) -> str:
    """CANN's hccl_test over two nodes: `-p` NPUs per node, one size (`-b`/`-e`), `-n` iterations.

    The binary lives in the toolkit's tools/hccl_test/bin (HCCL_TEST_DIR, expanded on the node).
    """
    q = shlex.quote
    np = 2 * int(devices_per_node)
    path = f'"{HCCL_TEST_DIR}"/{q(binary)}'
    return (f"{q(mpirun)} -n {np} -hosts {q(hosts[0] + ',' + hosts[1])} {path} "
            f"-b {int(size)} -e {int(size)} -f 2 -d fp32 -o sum -p {int(devices_per_node)} -n {int(iters)}")


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
