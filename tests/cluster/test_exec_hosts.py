"""`ascendctl exec` over real SSH to real test hosts (network namespaces with sshd)."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.execute import run_command
from ascendctl.inventory.load import load_inventory
from ascendctl.models import NodeStatus
from ascendctl.remote.transport.factory import TransportFactory
from tests.cluster.harness import Cluster, HostSpec

runner = CliRunner()


def exec_json(inventory: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--json", *args], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def test_exec_on_eight_hosts_reaches_each_and_folds_identical_output(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(8)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    code, doc = exec_json(inventory, "--", "hostname")
    assert code == 0
    assert [(n["name"], n["status"], n["stdout"]) for n in doc["nodes"]] == [
        (h.name, "ok", f"{h.name}\n") for h in cluster.hosts
    ]
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--", "echo", "same"], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].startswith("h[01-08] (8) ok, exit 0")
    assert result.stdout.splitlines()[1] == "same"


def test_each_fault_is_reported_as_exactly_that_and_others_are_unaffected(cluster_factory: Any, tmp_path: Path) -> None:
    specs = [HostSpec("h01"), HostSpec("h02", sshd=False), HostSpec("h03", authorize_key=False),
             HostSpec("h04", known_host=False), HostSpec("h05"), HostSpec("h06")]
    cluster: Cluster = cluster_factory(specs)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"connect_timeout": 5, "connect_retries": 0})
    hang_on_h05 = 'if [ "$(hostname)" = h05 ]; then sleep 30; fi; echo done'
    started = time.monotonic()
    code, doc = exec_json(inventory, "--command-timeout", "2", "--", hang_on_h05)
    assert time.monotonic() - started < 15
    assert code == 4
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert {name: n["status"] for name, n in by_name.items()} == {
        "h01": "ok", "h02": "unreachable", "h03": "auth_failed", "h04": "host_key", "h05": "timeout", "h06": "ok",
    }
    assert "connection refused" in by_name["h02"]["error"]
    assert "ssh auth failed for root@" in by_name["h03"]["error"]
    assert "unknown host key" in by_name["h04"]["error"] and "accept_new_host_keys" in by_name["h04"]["hint"]
    assert by_name["h05"]["error"] == "command timed out after 2s (stopped on the node)"
    assert by_name["h01"]["stdout"] == by_name["h06"]["stdout"] == "done\n"
    assert {e["node"] for e in doc["errors"]} == {"h02", "h03", "h04", "h05"}


def test_accept_new_host_keys_is_an_explicit_opt_in_and_changed_keys_are_refused(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([HostSpec("h01", known_host=False), HostSpec("h02")])
    new_host = cluster.host("h01")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(cluster.known_hosts.read_text())
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"known_hosts": str(known_hosts)})
    code, doc = exec_json(inventory, "--", "true")
    assert code == 4 and doc["nodes"][0]["status"] == "host_key"
    code, doc = exec_json(inventory, "--accept-new-host-keys", "--", "true")
    assert code == 0
    # recorded as `ssh` would (hashed where ssh_config, e.g. Debian's /etc/ssh/ssh_config, says HashKnownHosts yes)
    import subprocess
    found = subprocess.run(["ssh-keygen", "-F", new_host.ip, "-f", str(known_hosts)], capture_output=True, text=True)
    assert found.returncode == 0 and "ssh-ed25519" in found.stdout
    code, doc = exec_json(inventory, "--", "true")  # now known, no opt-in needed
    assert code == 0
    # Swap h02's recorded key for h01's: a changed key must be refused even with the opt-in.
    other = cluster.host("h02")
    lines = known_hosts.read_text().splitlines()
    h01_key = next(line.split(" ", 1)[1] for line in cluster.known_hosts_all.read_text().splitlines()
                   if line.startswith(new_host.ip + " "))
    known_hosts.write_text("\n".join(
        f"{other.ip} {h01_key}" if line.startswith(other.ip + " ") else line for line in lines) + "\n")
    code, doc = exec_json(inventory, "--accept-new-host-keys", "--", "true")
    assert code == 4
    assert doc["nodes"][1]["status"] == "host_key" and "CHANGED" in doc["nodes"][1]["error"]


def test_unknown_keys_on_many_nodes_fold_but_show_each_fingerprint_and_hashed_files_stay_hashed(
        cluster_factory: Any, tmp_path: Path) -> None:
    """Issue #30: the folded error said `SHA256:<fingerprint>`, hiding what must be verified; an accepted key
    went into a hashed known_hosts in clear text."""
    import subprocess

    cluster: Cluster = cluster_factory([HostSpec("h01", known_host=False), HostSpec("h02", known_host=False), HostSpec("h03")])
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(cluster.known_hosts.read_text())
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"known_hosts": str(known_hosts)})
    code, doc = exec_json(inventory, "--", "true")
    assert code == 4
    fingerprints = {n["name"]: n["error"].split("(ssh-ed25519 ")[1].split(")")[0] for n in doc["nodes"][:2]}
    assert all(f.startswith("SHA256:") and len(f) > 20 for f in fingerprints.values()) and len(set(fingerprints.values())) == 2
    text = runner.invoke(app, ["exec", "-i", str(inventory), "--", "true"], catch_exceptions=False)
    assert "SHA256:<fingerprint>" in text.stdout  # the two errors still fold into one block ...
    for name, fingerprint in fingerprints.items():  # ... which names each node's own fingerprint
        assert f"{name} {fingerprint}" in text.stdout, text.stdout
    preflight = runner.invoke(app, ["preflight", "-i", str(inventory), "--only", "ssh"], catch_exceptions=False)
    assert preflight.exit_code == 4
    for name, fingerprint in fingerprints.items():
        assert f"{name} {fingerprint}" in preflight.stdout, preflight.stdout
    # a hashed file (ssh-keygen -H) gets hashed entries: no clear-text host name appears in it
    subprocess.run(["ssh-keygen", "-H", "-f", str(known_hosts)], check=True, capture_output=True)
    known_hosts.with_name("known_hosts.old").unlink()
    code, doc = exec_json(inventory, "--accept-new-host-keys", "--", "true")
    assert code == 0, doc
    lines = known_hosts.read_text().splitlines()
    assert len(lines) == 3 and all(line.startswith("|1|") for line in lines), lines
    assert not any(h.ip in known_hosts.read_text() for h in cluster.hosts)
    found = subprocess.run(["ssh-keygen", "-F", cluster.host("h01").ip, "-f", str(known_hosts)], capture_output=True, text=True)
    assert found.returncode == 0 and "ssh-ed25519" in found.stdout  # OpenSSH finds the hashed entry
    code, doc = exec_json(inventory, "--", "true")  # and so does ascendctl, with no opt-in
    assert code == 0


def test_ssh_config_and_jump_host_are_honoured(cluster_factory: Any, tmp_path: Path, hermetic_env: Path) -> None:
    cluster: Cluster = cluster_factory(3)
    h01, h02, h03 = cluster.hosts
    ssh_dir = hermetic_env / ".ssh"
    ssh_dir.mkdir(exist_ok=True)
    (ssh_dir / "config").write_text(
        f"Host alpha\n  HostName {h02.ip}\n  User root\n  IdentityFile {cluster.client_key}\n"
        f"Host beta\n  HostName {h03.ip}\n  User root\n  IdentityFile {cluster.client_key}\n  ProxyJump root@{h01.ip}\n"
    )
    # known_hosts entries are by the name as written (the alias), as OpenSSH does.
    known = tmp_path / "known_hosts"
    entries = cluster.known_hosts.read_text().splitlines()
    key_of = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in entries}
    known.write_text(f"alpha {key_of[h02.ip]}\nbeta {key_of[h03.ip]}\n{h01.ip} {key_of[h01.ip]}\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"defaults: {{known_hosts: {known}}}\nnodes: [alpha, beta]\n")
    code, doc = exec_json(inventory, "--", "hostname")
    assert code == 0, doc["nodes"]
    assert [n["stdout"] for n in doc["nodes"]] == ["h02\n", "h03\n"]
    # The inventory's jump_host works without any ssh config, and explicit values beat the config.
    (ssh_dir / "config").write_text("Host *\n  User nobody\n  Port 2222\n")
    inventory.write_text(
        f"defaults: {{user: root, port: 22, identity_file: {cluster.client_key}, known_hosts: {cluster.known_hosts},"
        f" jump_host: 'root@{h01.ip}:22'}}\nnodes: [{h02.ip}, {h03.ip}]\n"
    )
    code, doc = exec_json(inventory, "--", "hostname")
    assert code == 0, doc["nodes"]
    assert [n["stdout"] for n in doc["nodes"]] == ["h02\n", "h03\n"]


def test_put_and_get_move_files_over_sftp(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(1)
    inv = load_inventory(cluster.write_inventory(tmp_path / "inv.yaml"), environ={})
    factory = TransportFactory(inv)
    try:
        transport = factory.open(inv.nodes[0])
        source = tmp_path / "payload.sh"
        source.write_text("#!/bin/sh\necho payload $(hostname)\n")
        source.chmod(0o755)
        transport.put(source, "/tmp/ascendctl-put-test.sh")
        assert transport.run("/tmp/ascendctl-put-test.sh").stdout == "payload h01\n"
        transport.run("echo back > /tmp/ascendctl-get-test.txt")
        transport.get("/tmp/ascendctl-get-test.txt", tmp_path / "back.txt")
        assert (tmp_path / "back.txt").read_text() == "back\n"
        transport.run("rm -f /tmp/ascendctl-put-test.sh /tmp/ascendctl-get-test.txt")
    finally:
        factory.close_all()


def test_burst_over_64_hosts_with_default_maxstartups(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(64)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    code, doc = exec_json(inventory, "--", "hostname")
    assert code == 0
    assert [n["stdout"].strip() for n in doc["nodes"]] == [h.name for h in cluster.hosts]


def _hold_startups(ip: str, count: int) -> list[socket.socket]:
    """Open unauthenticated connections, each confirmed by sshd's banner: each holds a MaxStartups slot.

    A connection that ended just before (the harness's own readiness check) may still hold a slot for a moment on a
    loaded machine, and sshd then answers "Exceeded MaxStartups": that one is closed and tried again until the slot is
    free, so the `count` held ones are exactly those of this test."""
    held: list[socket.socket] = []
    deadline = time.monotonic() + 20
    while len(held) < count:
        sock = socket.create_connection((ip, 22), timeout=5)
        banner = sock.recv(64)
        if banner.startswith(b"SSH-2.0-"):
            held.append(sock)
            continue
        sock.close()
        assert banner.startswith(b"Exceeded MaxStartups") and time.monotonic() < deadline, banner
        time.sleep(0.2)
    return held


def test_connections_dropped_by_maxstartups_are_retried(cluster_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # sshd's default MaxStartups 10:30:100 drops new connections at random once 10 are
    # unauthenticated; `MaxStartups 3` is the same mechanism made deterministic: with 3
    # pending, every new connection is dropped ("Error reading SSH protocol banner").
    cluster: Cluster = cluster_factory([HostSpec("h01", sshd_config_extra=["MaxStartups 3"])])
    host = cluster.hosts[0]
    without_retries = load_inventory(cluster.write_inventory(tmp_path / "noretry.yaml", defaults={"connect_retries": 0}), environ={})
    held = _hold_startups(host.ip, 3)
    try:
        report = run_command(without_retries, "true")
        assert report.nodes[0].status == NodeStatus.UNREACHABLE
        assert "dropped the connection" in (report.nodes[0].error or "")
        with_retries = load_inventory(cluster.write_inventory(tmp_path / "retry.yaml", defaults={"connect_retries": 6}), environ={})
        release = threading.Timer(0.6, lambda: [s.close() for s in held])
        release.start()
        with caplog.at_level(logging.DEBUG, logger="ascendctl.remote.transport.ssh"):
            report = run_command(with_retries, "hostname")
        release.join()
    finally:
        for sock in held:
            sock.close()
    assert report.nodes[0].status == NodeStatus.OK and report.nodes[0].stdout == "h01\n"
    assert any("transient connect failure" in r.getMessage() for r in caplog.records)


def test_ssh_stream_delivers_output_while_the_command_runs(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(1)
    inv = load_inventory(cluster.write_inventory(tmp_path / "inv.yaml"), environ={})
    factory = TransportFactory(inv)
    try:
        transport = factory.open(inv.nodes[0])
        arrivals: list[tuple[float, bytes]] = []
        started = time.monotonic()
        result = transport.stream("echo first; sleep 0.6; echo second; echo err >&2",
                                  on_stdout=lambda b: arrivals.append((time.monotonic() - started, b)))
        assert b"".join(chunk for _, chunk in arrivals) == b"first\nsecond\n"
        assert arrivals[0][0] < 0.4 < arrivals[-1][0]
        assert result.stderr == "err\n" and result.exit_code == 0
    finally:
        factory.close_all()


def test_keys_from_ssh_agent_are_used_when_no_identity_file_is_set(
    cluster_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    cluster: Cluster = cluster_factory(1)
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if sock.exists():
                break
            time.sleep(0.05)
        env = {"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"}
        subprocess.run(["ssh-add", str(cluster.client_key)], env=env, check=True, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        inventory = tmp_path / "inv.yaml"
        inventory.write_text(f"defaults: {{user: root, known_hosts: {cluster.known_hosts}}}\nnodes: [{cluster.hosts[0].ip}]\n")
        report = run_command(load_inventory(inventory, environ={}), "hostname")
        assert report.nodes[0].status == NodeStatus.OK and report.nodes[0].stdout == "h01\n"
    finally:
        agent.terminate()
        agent.wait(timeout=5)


def test_connections_ask_for_aes_gcm_and_stream_through_it(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(1)
    inv = load_inventory(cluster.write_inventory(tmp_path / "inv.yaml"))
    factory = TransportFactory(inv)
    try:
        transport = factory.open(inv.nodes[0])
        assert transport._transport.remote_cipher == "aes128-gcm@openssh.com"  # type: ignore[attr-defined]
        chunks: list[bytes] = []
        result = transport.stream("head -c 3000000 /dev/zero", on_stdout=chunks.append)
        assert result.exit_code == 0 and sum(map(len, chunks)) == 3000000
    finally:
        factory.close_all()
