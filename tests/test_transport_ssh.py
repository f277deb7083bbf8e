"""SSH transport failure modes that need no test host: a server that stalls mid-handshake, one that sends its banner
slowly (a paramiko server behind a relay that trickles the banner), on loopback."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from ascendctl.execute import run_command
from ascendctl.inventory.load import load_inventory
from ascendctl.models import NodeStatus


def serve_on_loopback(handle: Callable[[socket.socket, threading.Event], None]) -> tuple[int, threading.Event]:
    """A listener on 127.0.0.1 handing each connection to `handle(conn, stop)` until `stop` is set: (port, stop)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            handle(conn, stop)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return int(listener.getsockname()[1]), stop


def stalling_server() -> tuple[int, threading.Event]:
    """Accepts, sends an SSH banner, then never answers the key exchange (what an MTU black hole looks like)."""
    def hold(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
        def close_at_end() -> None:  # held open, silent, until the test ends
            stop.wait()
            conn.close()

        threading.Thread(target=close_at_end, daemon=True).start()

    return serve_on_loopback(hold)


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


def slow_banner_server(pieces: int, gap: float, *, kex_delay: float = 0.0,
                       then_close: bool = False) -> tuple[int, threading.Event]:
    """A real (paramiko) SSH server whose banner reaches the client in `pieces`, `gap` seconds apart, through a relay.

    `kex_delay`: a further pause before the server's key exchange is relayed (a loaded sshd is slow at both).
    `then_close`: send the first pieces of the banner, then close (the rest never comes).
    """
    import paramiko

    host_key = paramiko.ECDSAKey.generate()

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def relay(conn: socket.socket, stop: threading.Event) -> None:
        inner, outer = socket.socketpair()
        server = paramiko.Transport(inner)
        server.add_server_key(host_key)
        server.start_server(event=threading.Event(), server=paramiko.ServerInterface())
        try:
            banner = b""
            while not banner.endswith(b"\n"):
                banner += outer.recv(1)
            size = -(-len(banner) // pieces)
            for i in range(0, len(banner), size):
                if then_close and i >= len(banner) // 2 or stop.is_set():
                    return
                conn.sendall(banner[i:i + size])
                stop.wait(gap)
            stop.wait(kex_delay)
            threading.Thread(target=pump, args=(conn, outer), daemon=True).start()
            pump(outer, conn)
        except OSError:
            pass  # the client gave up (what some of these tests expect)
        finally:
            conn.close()
            server.close()

    return serve_on_loopback(lambda conn, stop: threading.Thread(target=relay, args=(conn, stop), daemon=True).start())


def _connect_report(tmp_path: Path, port: int, timeout: float) -> tuple[float, NodeStatus, str, str]:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"defaults: {{port: {port}, connect_timeout: {timeout}, connect_retries: 0}}\nnodes: [127.0.0.1]\n")
    started = time.monotonic()
    report = run_command(load_inventory(inventory, environ={}), "true")
    (node,) = report.nodes
    return time.monotonic() - started, node.status, node.error or "", node.hint or ""


def test_a_banner_arriving_in_pieces_within_the_connect_timeout_is_accepted(tmp_path: Path) -> None:
    # Eight pieces 0.4 s apart: the banner ends 2.8 s into a 4 s connect_timeout; the key exchange then takes 2 s more.
    # The handshake completes: what stops it is the unknown host key (no known_hosts here), not a banner problem.
    port, stop = slow_banner_server(8, 0.4, kex_delay=2.0)
    try:
        _, status, error, _ = _connect_report(tmp_path, port, 4)
    finally:
        stop.set()
    assert status == NodeStatus.HOST_KEY, error
    assert error.startswith(f"unknown host key for [127.0.0.1]:{port}")


def test_a_banner_still_arriving_at_the_connect_timeout_is_a_timeout_naming_it(tmp_path: Path) -> None:
    port, stop = slow_banner_server(8, 0.5)  # the banner would end after 3.5 s; connect_timeout is 2 s
    try:
        elapsed, status, error, hint = _connect_report(tmp_path, port, 2)
    finally:
        stop.set()
    assert status == NodeStatus.UNREACHABLE
    assert error.startswith(f"SSH banner from 127.0.0.1:{port} timed out after 2s: it was still arriving ('SSH-2.0-"), error
    assert "protocol error" not in error and "instead of an SSH banner" not in error and "MTU" not in hint
    assert "connect_timeout" in hint
    assert elapsed < 5


@pytest.mark.parametrize("pieces", [4, 40])
def test_a_banner_cut_off_by_a_close_is_a_dropped_connection_not_a_foreign_service(tmp_path: Path, pieces: int) -> None:
    port, stop = slow_banner_server(pieces, 0.05, then_close=True)
    try:
        elapsed, status, error, _ = _connect_report(tmp_path, port, 10)
    finally:
        stop.set()
    assert status == NodeStatus.UNREACHABLE
    assert "dropped the connection" in error and "instead of an SSH banner" not in error, error
    assert elapsed < 5  # seen as closed at once, not waited on until connect_timeout


def _key_line(name: str) -> str:
    import paramiko

    key = paramiko.ECDSAKey.generate()
    return f"{name} {key.get_name()} {key.get_base64()}"


def test_known_hosts_garbage_lines_are_counted_and_valid_lines_still_load(tmp_path: Path) -> None:
    from ascendctl.remote.transport.known_hosts import known_key_types, read_known_hosts

    path = tmp_path / "known_hosts"
    lines = [b"# comment", _key_line("10.0.0.1").encode(), b"just-two fields", b"\x16\x03\x01\x02\x00\x01\x00\xff\xfe",
             b"10.0.0.2 ssh-ed25519 !!!not-base64!!!", b"@cert-authority *.example ssh-ed25519 AAAA",
             b"10.0.0.3 sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t", b"", _key_line("10.0.0.4").encode()]
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = read_known_hosts(str(path))
    assert loaded.problem is None
    assert loaded.bad_lines == (3, 4, 5, 6)  # line 6: `AAAA` is no key, @cert-authority or not
    assert known_key_types([loaded], ["10.0.0.1"]) == known_key_types([loaded], ["10.0.0.4"]) == {"ecdsa-sha2-nistp256"}
    assert known_key_types([loaded], ["10.0.0.2"]) == set()
    assert known_key_types([loaded], ["10.0.0.3"]) == {"sk-ssh-ed25519@openssh.com"}  # a type paramiko lacks: no garbage


def test_known_hosts_that_cannot_be_used_says_why(tmp_path: Path) -> None:
    import os

    from ascendctl.remote.transport.known_hosts import read_known_hosts as load_known_hosts

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").write_text("")
    assert load_known_hosts(str(tmp_path)).problem == "it is a directory"
    assert load_known_hosts(str(fifo)).problem == "it is not a regular file"
    assert load_known_hosts(str(tmp_path / "file" / "known_hosts")).problem == "it cannot be read (Not a directory)"
    missing = load_known_hosts(str(tmp_path / "missing"))
    assert missing.problem is None and missing.bad_lines == () and missing.entries == ()
