"""Fan-out with FakeTransport: bounded concurrency, order, per-node failures, timeouts, Ctrl-C."""

from __future__ import annotations

import _thread
import subprocess
import sys
import threading
import time

import pytest

from ascendctl.errors import AuthError, ConnectError, HostKeyError, Interrupted
from ascendctl.execute import run_command
from ascendctl.remote.fanout import fanout
from ascendctl.remote.group import NodeGroup
from ascendctl.inventory.load import Inventory, Node, parse_inventory
from ascendctl.models import NodeEvent, NodeStatus
from tests.fakes import FakeFactory, ok


def inventory(n: int, **defaults: object) -> Inventory:
    lines = "".join(f"  {k}: {v}\n" for k, v in {"slots": 8, **defaults}.items())
    return parse_inventory(f"defaults:\n{lines}nodes:\n  - host: n[01-{n:02d}]\n", environ={})


def test_results_come_back_in_inventory_order_whatever_finishes_first() -> None:
    inv = inventory(6)
    delays = {name: 0.01 * (6 - i) for i, name in enumerate(inv.names)}
    factory = FakeFactory(inv, default=[("hostname", lambda cmd: ok("x\n"))], delays=delays)
    report = run_command(inv, "hostname", factory=factory)
    assert [n.name for n in report.nodes] == inv.names
    assert all(n.status == NodeStatus.OK for n in report.nodes)


def test_concurrency_is_bounded_by_fanout() -> None:
    inv = inventory(20, fanout=4)
    factory = FakeFactory(inv, default=[("true", ok())], delays={name: 0.02 for name in inv.names})
    run_command(inv, "true", factory=factory)
    assert factory.max_active == 4


def test_each_failure_is_a_result_and_others_are_unaffected() -> None:
    inv = inventory(5, command_timeout=0.1)
    factory = FakeFactory(
        inv,
        default=[("echo", ok("hi\n"))],
        rules={"n04": [("echo", ok("", exit_code=3, stderr="boom\n"))]},
        connect_errors={
            "n01": ConnectError("connection refused by n01:22", hint="is sshd running?"),
            "n02": AuthError("ssh auth failed for root@n02"),
            "n03": HostKeyError("unknown host key for n02"),
        },
        delays={"n05": 1.0},
    )
    report = run_command(inv, "echo hi", factory=factory)
    statuses = [(n.name, n.status, n.exit_code) for n in report.nodes]
    assert statuses == [
        ("n01", NodeStatus.UNREACHABLE, None),
        ("n02", NodeStatus.AUTH_FAILED, None),
        ("n03", NodeStatus.HOST_KEY, None),
        ("n04", NodeStatus.FAILED, 3),
        ("n05", NodeStatus.TIMEOUT, None),
    ]
    assert report.nodes[0].hint == "is sshd running?"
    assert report.nodes[4].error == "command timed out after 0.1s"


def test_unexpected_exception_on_one_node_becomes_an_error_result() -> None:
    inv = inventory(3)

    def work(node: Node) -> str:
        if node.name == "n02":
            raise ValueError("garbage from remote tool")
        return "fine"

    results = fanout(list(inv.nodes), work, max_workers=3)
    assert [r.ok for r in results] == [True, False, True]
    assert results.failed[0].error is not None
    assert results.failed[0].error.status == NodeStatus.ERROR
    assert "garbage from remote tool" in results.failed[0].error.message


def test_events_report_start_and_finish_for_every_node() -> None:
    inv = inventory(4)
    events: list[NodeEvent] = []
    lock = threading.Lock()

    def sink(event: NodeEvent) -> None:
        with lock:
            events.append(event)

    factory = FakeFactory(inv, default=[("true", ok())])
    with NodeGroup(inv, factory=factory) as group:
        group.run(lambda node, t: t.run("true"), on_event=sink)
    assert sorted(e.node for e in events if e.kind == "started") == inv.names
    assert sorted(e.node for e in events if e.kind == "finished") == inv.names
    assert {e.total for e in events} == {4}


def test_ctrl_c_cancels_pending_closes_transports_and_names_incomplete_nodes() -> None:
    inv = inventory(8, fanout=2)
    factory = FakeFactory(inv, default=[("sleep", ok())], delays={name: 5.0 for name in inv.names})
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(Interrupted) as info:
        run_command(inv, "sleep", factory=factory)
    assert time.monotonic() - started < 3.0
    assert info.value.incomplete == inv.names
    assert all(t.closed for t in factory.transports.values())


def test_connections_kept_across_rounds_stay_within_the_fd_budget(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    inv = inventory(12, fanout=8)
    monkeypatch.setattr("ascendctl.remote.group.connection_budget", lambda: 3)
    factory = FakeFactory(inv, default=[("true", ok())], delays={name: 0.01 for name in inv.names})
    with caplog.at_level("WARNING"), NodeGroup(inv, factory=factory) as group:
        for _ in range(2):  # a second round (preflight's cross-node one) reopens what was closed as idle
            results = group.run(lambda node, t: t.run("true"))
            assert [r.node for r in results.succeeded] == inv.names
    assert factory.max_active == 3
    said = [r.getMessage() for r in caplog.records]
    assert sum("working on 3 nodes at once instead of fanout 8" in m for m in said) == 1
    assert sum("at most 3 are kept open" in m for m in said) == 1


def test_the_soft_fd_limit_is_raised_to_the_hard_limit() -> None:
    code = "from ascendctl.remote.fdlimit import nofile_limit, connection_budget; print(nofile_limit(), connection_budget())"
    proc = subprocess.run(["prlimit", "--nofile=256:4096", "--", sys.executable, "-c", code],
                          capture_output=True, text=True, check=True)
    limit, budget = map(int, proc.stdout.split())
    assert limit == 4096
    assert 1000 < budget < 4096 // 3


def test_a_followed_spawn_keeps_its_connection_when_idle_ones_are_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    inv = inventory(6, fanout=2)
    monkeypatch.setattr("ascendctl.remote.group.connection_budget", lambda: 2)
    factory = FakeFactory(inv, default=[("follow", ok("line\n")), ("true", ok())])
    with NodeGroup(inv, factory=factory) as group:
        followed = group.spawn(inv.nodes[0], "follow")
        results = group.run(lambda node, t: t.run("true"), nodes=inv.nodes[1:])
        assert len(results.succeeded) == 5
        assert not factory.transports[inv.nodes[0].name].closed
        assert followed.read() == b"line\n"


def test_an_unpinned_spawn_may_be_closed_as_idle_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """netcheck's servers are followed only for their round: after `unpin` the budget may close that connection."""
    inv = inventory(6, fanout=2)
    monkeypatch.setattr("ascendctl.remote.group.connection_budget", lambda: 2)
    factory = FakeFactory(inv, default=[("follow", ok("line\n")), ("true", ok())])
    with NodeGroup(inv, factory=factory) as group:
        group.spawn(inv.nodes[0], "follow").close()
        group.unpin(inv.nodes[0])
        assert len(group.run(lambda node, t: t.run("true"), nodes=inv.nodes[1:]).succeeded) == 5
        assert factory.transports[inv.nodes[0].name].closed
