"""ascendctl netcheck: TCP throughput between two nodes; standard library only (runs as `python3 - ARGS`, this file on stdin).

server BIND_IP SIZE TIMEOUT
    listens on BIND_IP (the node's cluster address), port chosen by the kernel, prints `PORT <n>`,
    then serves the client's connections: on an `S` connection it receives until EOF, on an `R` one it
    sends SIZE bytes; prints one JSON line {"recv_bytes", "recv_seconds"} (0 when nothing came).
client SERVER_IP PORT SOURCE_IP SIZE TIMEOUT MODE
    MODE `both`: sends SIZE bytes and receives SIZE bytes at the same time (two connections);
    MODE `send`: only sends. Prints one JSON line {"recv_bytes", "recv_seconds"}.
Each receiver times from its first byte to EOF. Exit 1 with a message on stderr when anything fails.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

CHUNK = 256 * 1024


def receive(conn: socket.socket) -> tuple[int, float]:
    total, first = 0, 0.0
    while True:
        data = conn.recv(CHUNK)
        if not data:
            break
        if not total:
            first = time.monotonic()
        total += len(data)
    return total, (time.monotonic() - first) if total else 0.0


def send(conn: socket.socket, size: int) -> None:
    block = b"\0" * CHUNK
    left = size
    while left > 0:
        n = min(left, CHUNK)
        conn.sendall(block[:n])
        left -= n
    conn.shutdown(socket.SHUT_WR)


def serve(bind_ip: str, size: int, timeout: float) -> dict[str, float]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((bind_ip, 0))
    listener.listen(4)
    listener.settimeout(timeout)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    result = {"recv_bytes": 0.0, "recv_seconds": 0.0}
    errors: list[str] = []
    threads: list[threading.Thread] = []
    conn, _ = listener.accept()
    conn.settimeout(timeout)
    expected = conn.recv(1)  # the client's first connection says how many follow: b"1" or b"2"
    connections = [conn]
    for _ in range(int(expected or b"1") - 1):
        extra, _ = listener.accept()
        extra.settimeout(timeout)
        connections.append(extra)

    def handle(c: socket.socket) -> None:
        try:
            role = c.recv(1)
            if role == b"S":
                got, seconds = receive(c)
                result["recv_bytes"], result["recv_seconds"] = float(got), seconds
            elif role == b"R":
                send(c, size)
                c.recv(1)  # wait for the client's EOF so the bytes are delivered before we close
            else:
                errors.append(f"unexpected role {role!r}")
        except OSError as exc:
            errors.append(str(exc))
        finally:
            c.close()

    for c in connections:
        t = threading.Thread(target=handle, args=(c,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    if errors:
        raise OSError("; ".join(errors))
    return result


def connect(server_ip: str, port: int, source_ip: str, timeout: float, count: bytes, role: bytes) -> socket.socket:
    conn = socket.create_connection((server_ip, port), timeout=timeout, source_address=(source_ip, 0))
    conn.sendall(count + role if count else role)
    return conn


def client(server_ip: str, port: int, source_ip: str, size: int, timeout: float, mode: str) -> dict[str, float]:
    count = b"2" if mode == "both" else b"1"
    out = connect(server_ip, port, source_ip, timeout, count, b"S")
    back = connect(server_ip, port, source_ip, timeout, b"", b"R") if mode == "both" else None
    result = {"recv_bytes": 0.0, "recv_seconds": 0.0}
    errors: list[str] = []

    def download() -> None:
        assert back is not None
        try:
            got, seconds = receive(back)
            result["recv_bytes"], result["recv_seconds"] = float(got), seconds
        except OSError as exc:
            errors.append(str(exc))
        finally:
            back.close()

    worker = threading.Thread(target=download) if back is not None else None
    if worker is not None:
        worker.start()
    try:
        send(out, size)
        out.recv(1)  # EOF from the server: it has read everything
    finally:
        out.close()
    if worker is not None:
        worker.join()
    if errors:
        raise OSError("; ".join(errors))
    return result


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["server"] and len(argv) == 4:
            result = serve(argv[1], int(argv[2]), float(argv[3]))
        elif argv[:1] == ["client"] and len(argv) == 7:
            result = client(argv[1], int(argv[2]), argv[3], int(argv[4]), float(argv[5]), argv[6])
        else:
            print("usage: server BIND_IP SIZE TIMEOUT | client SERVER_IP PORT SOURCE_IP SIZE TIMEOUT both|send", file=sys.stderr)
            return 2
    except (OSError, ValueError) as exc:
        print(f"tcp_bw {argv[0] if argv else ''}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
