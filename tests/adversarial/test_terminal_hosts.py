"""Hostile nodes and servers against the operator's terminal (issue #13): real test hosts and real sockets.

A node whose tools print escape sequences, bidi overrides and rich markup; servers that accept
TCP but never speak SSH; known_hosts files that cannot be used. See README.md here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec
from tests.sim.hccn_tool import hccn_tool_script
from tests.sim.npu_smi import npu_smi_script

runner = CliRunner()

# Clear screen, OSC 52 (write the operator's clipboard), a C1 CSI, bidi override and isolate, rich markup.
# (No backslash or quote: the simulated hccn_tool prints it with sh's echo inside single quotes.)
HOSTILE = "\x1b[2J\x1b]52;c;ZXZpbA==\x07 \u202eevil\u2066 \x9b31m [red]x[/red] [link=https://e.vil]y[/link]"
SHOWN = "\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07 \\u202eevil\\u2066 \\x9b31m [red]x[/red] [link=https://e.vil]y[/link]"
RAW_MARKERS = ("\x1b", "\x9b", "\u202e", "\u2066")


def hostile_host(cluster_factory: Any) -> Cluster:
    ips = {d: f"198.51.100.{8 + d}" for d in range(8)}
    tools = {"npu-smi": npu_smi_script("910B4", clear_processes=True),
             "hccn_tool": hccn_tool_script(ips, net_health={0: HOSTILE})}
    cluster: Cluster = cluster_factory([HostSpec("h01", tools=tools)])
    return cluster


def assert_no_raw_controls(text: str) -> None:
    assert not [m for m in RAW_MARKERS if m in text], repr(text)


def test_hostile_tool_output_is_escaped_in_exec_and_exact_in_json(cluster_factory: Any, tmp_path: Path) -> None:
    cluster = hostile_host(cluster_factory)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    command = ["--", "hccn_tool -i 0 -net_health -g; hccn_tool -i 0 -net_health -g >&2"]
    result = runner.invoke(app, ["exec", "-i", str(inventory), *command], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == [f"net health status: {SHOWN}"] * 2
    assert_no_raw_controls(result.stdout + result.stderr)
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--json", *command], catch_exceptions=False)
    assert result.exit_code == 0
    assert_no_raw_controls(result.stdout)  # JSON-escaped ...
    (node,) = json.loads(result.stdout)["nodes"]
    assert node["stdout"] == node["stderr"] == f"net health status: {HOSTILE}\n"  # ... and exact


def test_hostile_tool_output_is_escaped_in_preflight_and_exact_in_json(cluster_factory: Any, tmp_path: Path) -> None:
    cluster = hostile_host(cluster_factory)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"accelerator": "ascend"})
    # The hccn parser drops CSI sequences (ESC [ ... letter) before it reads the status; the rest is the node's text.
    summary = "device 0 net health " + HOSTILE.replace("\x1b[2J", "")
    shown = "device 0 net health " + SHOWN.replace("\\x1b[2J", "")
    result = runner.invoke(app, ["preflight", "-i", str(inventory), "--only", "hccn_link"], catch_exceptions=False)
    assert result.exit_code == 3
    assert f"fail h01: hccn_link: {shown}\n" in result.stdout
    assert_no_raw_controls(result.stdout + result.stderr)
    result = runner.invoke(app, ["preflight", "-i", str(inventory), "--only", "hccn_link", "--json"], catch_exceptions=False)
    assert result.exit_code == 3
    assert_no_raw_controls(result.stdout)
    (node,) = json.loads(result.stdout)["nodes"]
    assert {c["id"]: c["summary"] for c in node["checks"]}["hccn_link"] == summary


@contextmanager
def fake_server(reply: bytes | None, *, close: bool) -> Iterator[tuple[int, list[int]]]:
    """A listener on 127.0.0.1 that accepts TCP and sends `reply` (None: nothing), then closes or holds the connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        held = []
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            accepted.append(1)
            if reply is not None:
                conn.sendall(reply)
            if close:
                conn.close()
            else:
                held.append(conn)
        for conn in held:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1]), accepted
    finally:
        stop.set()
        thread.join()
        listener.close()


SERVERS = {
    "silent": (None, False, "SSH protocol error: no SSH banner from 127.0.0.1:{port} within 2s (is this port an SSH server?)"),
    "http": (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", False,
             "SSH protocol error: 127.0.0.1:{port} sent 'HTTP/1.1 400 Bad Request' instead of an SSH banner"),
    "http then close": (b"HTTP/1.1 400 Bad Request\r\n\r\n", True,
                        "SSH protocol error: 127.0.0.1:{port} sent 'HTTP/1.1 400 Bad Request' instead of an SSH banner"),
    "binary then close": (b"\x15\x03\x01\x00\x02\x02\x50\x1b[2J", True,
                          "SSH protocol error: 127.0.0.1:{port} sent '\\x15\\x03\\x01\\x00\\x02\\x02P\\x1b[2J' instead of an SSH banner"),
}


@pytest.mark.parametrize("kind", sorted(SERVERS))
@pytest.mark.parametrize("verbosity", [[], ["-vv"]])
def test_server_that_does_not_speak_ssh_is_a_protocol_error(kind: str, verbosity: list[str], tmp_path: Path) -> None:
    reply, close, message = SERVERS[kind]
    with fake_server(reply, close=close) as (port, accepted):
        inventory = tmp_path / "inv.yaml"
        inventory.write_text(f"defaults: {{port: {port}, connect_timeout: 2, connect_retries: 2}}\n"
                             "nodes: [{name: h01, host: 127.0.0.1}]\n")
        proc = subprocess.run([sys.executable, "-m", "ascendctl", *verbosity, "exec", "-i", str(inventory), "--", "true"],
                              capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode == 4, proc.stderr
    assert f"ascendctl: error: h01: {message.format(port=port)}\n" in proc.stderr
    assert len(accepted) == 1  # not retried: another try cannot make a non-SSH port speak SSH
    everything = proc.stdout + proc.stderr
    assert "Traceback" not in everything and "MaxStartups" not in everything and "MTU" not in everything
    assert_no_raw_controls(everything)


@pytest.mark.parametrize("reply, said", [(None, ""), (b"Exceeded MaxStartups\r\n", " (it said 'Exceeded MaxStartups')")])
def test_connection_dropped_before_the_banner_is_retried_and_the_hint_names_maxstartups(
        reply: bytes | None, said: str, tmp_path: Path) -> None:
    # What sshd does past MaxStartups: closes at once, newer versions after saying so. That evidence earns the hint.
    with fake_server(reply, close=True) as (port, accepted):
        inventory = tmp_path / "inv.yaml"
        inventory.write_text(f"defaults: {{port: {port}, connect_timeout: 2, connect_retries: 2}}\n"
                             "nodes: [{name: h01, host: 127.0.0.1}]\n")
        proc = subprocess.run([sys.executable, "-m", "ascendctl", "exec", "-i", str(inventory), "--", "true"],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4
    assert len(accepted) == 3
    assert (f"ascendctl: error: h01: 127.0.0.1:{port} dropped the connection before its SSH banner{said} (after 3 attempts)\n"
            in proc.stderr)
    assert "hint: sshd dropped the connection repeatedly: check MaxStartups" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def exec_json(inventory: Path) -> tuple[int, dict[str, Any], str]:
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--json", "--", "hostname"], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout), result.stderr


def test_known_hosts_that_is_a_directory_is_named_as_such(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(1)
    directory = tmp_path / "known_hosts.d"
    directory.mkdir()
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"known_hosts": str(directory)})
    code, doc, stderr = exec_json(inventory)
    assert code == 4
    (node,) = doc["nodes"]
    assert node["status"] == "host_key"
    assert node["error"] == f"cannot use known_hosts {directory}: it is a directory"
    assert "unknown host key" not in stderr + json.dumps(doc) and "Traceback" not in stderr


def test_known_hosts_garbage_lines_are_named(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(1)
    known_hosts = tmp_path / "known_hosts"
    garbage = b"\x1b[2Jnot a key line at all\nonly-two fields\n10.213.0.9 ssh-ed25519 %%%%\n"
    known_hosts.write_bytes(garbage)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"known_hosts": str(known_hosts)})
    code, doc, stderr = exec_json(inventory)
    assert code == 4
    (node,) = doc["nodes"]
    assert node["status"] == "host_key"
    assert node["error"].startswith(f"known_hosts {known_hosts} holds no key for {cluster.hosts[0].ip} (ssh-ed25519 SHA256:")
    assert node["error"].endswith("and its lines 1, 2, 3 not in known_hosts format")
    assert "unknown host key" not in node["error"] and "Traceback" not in stderr
    # The node's real key beside the garbage: it connects, and the garbage is still pointed out.
    known_hosts.write_bytes(garbage + cluster.known_hosts.read_bytes())
    code, doc, stderr = exec_json(inventory)
    assert code == 0 and doc["nodes"][0]["stdout"] == "h01\n"
    assert f"known_hosts {known_hosts}: lines 1, 2, 3 not in known_hosts format (ignored)" in stderr
