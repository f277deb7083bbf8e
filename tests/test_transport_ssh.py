"""SSH transport failure modes that need no test host: a server that stalls mid-handshake, on loopback."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from ascendctl.execute import run_command
from ascendctl.inventory import load_inventory
from ascendctl.models import NodeStatus


def stalling_server() -> tuple[int, threading.Event]:
    """Accepts, sends an SSH banner, then never answers the key exchange (what an MTU black hole looks like)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve() -> None:
        held = []
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
            held.append(conn)
        for conn in held:
            conn.close()
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return int(listener.getsockname()[1]), stop


def test_handshake_stall_is_reported_as_a_likely_mtu_black_hole(tmp_path: Path) -> None:
    port, stop = stalling_server()
    try:
        inventory = tmp_path / "inv.yaml"
        inventory.write_text(f"defaults: {{port: {port}, connect_timeout: 1.5, connect_retries: 0}}\nnodes: [127.0.0.1]\n")
        started = time.monotonic()
        report = run_command(load_inventory(inventory, environ={}), "true")
        assert time.monotonic() - started < 6
    finally:
        stop.set()
    (node,) = report.nodes
    assert node.status == NodeStatus.UNREACHABLE
    assert node.error is not None and "SSH handshake stalled" in node.error
    assert node.hint is not None and "MTU black hole" in node.hint
