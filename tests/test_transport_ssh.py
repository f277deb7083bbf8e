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


def _key_line(name: str) -> str:
    import paramiko

    key = paramiko.ECDSAKey.generate()
    return f"{name} {key.get_name()} {key.get_base64()}"


def test_known_hosts_garbage_lines_are_counted_and_valid_lines_still_load(tmp_path: Path) -> None:
    from ascendctl.transport.ssh import load_known_hosts

    path = tmp_path / "known_hosts"
    lines = [b"# comment", _key_line("10.0.0.1").encode(), b"just-two fields", b"\x16\x03\x01\x02\x00\x01\x00\xff\xfe",
             b"10.0.0.2 ssh-ed25519 !!!not-base64!!!", b"@cert-authority *.example ssh-ed25519 AAAA",
             b"10.0.0.3 sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t", b"", _key_line("10.0.0.4").encode()]
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = load_known_hosts(str(path))
    assert loaded.problem is None
    assert loaded.bad_lines == (3, 4, 5)
    assert loaded.keys.lookup("10.0.0.1") and loaded.keys.lookup("10.0.0.4")
    assert loaded.keys.lookup("10.0.0.2") is None


def test_known_hosts_that_cannot_be_used_says_why(tmp_path: Path) -> None:
    import os

    from ascendctl.transport.ssh import load_known_hosts

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").write_text("")
    assert load_known_hosts(str(tmp_path)).problem == "it is a directory"
    assert load_known_hosts(str(fifo)).problem == "it is not a regular file"
    assert load_known_hosts(str(tmp_path / "file" / "known_hosts")).problem == "it cannot be read (Not a directory)"
    missing = load_known_hosts(str(tmp_path / "missing"))
    assert missing.problem is None and missing.bad_lines == () and len(missing.keys) == 0
