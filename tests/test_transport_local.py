"""LocalTransport: the same protocol as SSH on this machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ascendctl.errors import CommandTimeoutError, NodeSilentError
from ascendctl.inventory.load import parse_inventory
from ascendctl.remote.transport.local import LocalTransport


def transport() -> LocalTransport:
    return LocalTransport(parse_inventory("defaults: {transport: local}\nnodes: [here]\n", environ={}).nodes[0])


def test_run_captures_output_and_exit_status() -> None:
    result = transport().run("echo out; echo err >&2; exit 4")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 4)


def test_stream_delivers_chunks_as_they_arrive() -> None:
    arrivals: list[tuple[float, bytes]] = []
    started = time.monotonic()
    result = transport().stream("echo first; sleep 0.6; echo second", on_stdout=lambda b: arrivals.append((time.monotonic() - started, b)))
    assert b"".join(chunk for _, chunk in arrivals) == b"first\nsecond\n"
    assert arrivals[0][0] < 0.4 < arrivals[-1][0]  # the first line came before the command finished
    assert result.exit_code == 0 and result.stdout == ""


def test_timeout_kills_the_whole_process_group() -> None:
    with pytest.raises(CommandTimeoutError) as info:
        transport().run("sleep 30 & sleep 30; echo never", timeout=0.5)
    assert info.value.timeout == 0.5
    assert "never" not in info.value.stdout


def test_idle_limit_ends_a_stream_that_goes_quiet_and_spares_one_that_keeps_talking() -> None:
    """`idle`: no total limit, but nothing received for that long and the node is lost (NodeSilentError, `unreachable`),
    its command stopped."""
    chunks: list[bytes] = []
    result = transport().stream("for i in 1 2 3 4 5 6; do echo $i; sleep 0.4; done", on_stdout=chunks.append,
                                timeout=float("inf"), idle=1.5)
    assert result.exit_code == 0 and b"".join(chunks) == b"1\n2\n3\n4\n5\n6\n"  # 2.4 s in all, never 1.5 s quiet
    started = time.monotonic()
    with pytest.raises(NodeSilentError) as info:
        transport().stream("echo hello; sleep 30", on_stdout=chunks.append, timeout=float("inf"), idle=1.0)
    assert 1.0 <= time.monotonic() - started < 1.0 + 3.0
    assert info.value.status == "unreachable" and "nothing received for 1s" in info.value.message


def test_put_and_get(tmp_path: Path) -> None:
    source = tmp_path / "a"
    source.write_text("data")
    t = transport()
    t.put(source, str(tmp_path / "b"))
    t.get(str(tmp_path / "b"), tmp_path / "c")
    assert (tmp_path / "c").read_text() == "data"
