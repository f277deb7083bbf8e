"""The ssh config options the Paramiko transport takes (issue #29), against real sshds.

Every case runs the real client first, `ssh -F CONFIG -o BatchMode=yes NODE true`, as the control: ascendctl must
connect exactly where it does and refuse exactly where it refuses. The inventory names the same CONFIG (read alone,
as `-F`). One cluster: h01 is a bastion, h02 the target (its sshd also trusts a user CA). Unit tests of each option:
tests/test_ssh_config.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec, build_cluster

runner = CliRunner()


@dataclass
class Setup:
    cluster: Cluster
    keys: Path  # the client's keys, certificates, agent socket and known_hosts files
    config: Path
    inventory: Path


def keygen(path: Path, *extra: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path), *extra], check=True)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    keys = tmp_path_factory.mktemp("ssh_config_keys")
    keygen(keys / "user_ca")
    built = build_cluster([HostSpec("h01", chrony="none"),
                           HostSpec("h02", chrony="none", sshd_config_extra=[f"TrustedUserCAKeys {keys}/user_ca.pub"])],
                          workdir=tmp_path_factory.mktemp("ssh_config_hosts"), wait_chrony=False)
    agent: subprocess.Popen[bytes] | None = None
    try:
        h01, h02 = built.host("h01"), built.host("h02")
        for name in ("wrong1", "wrong2", "right", "stale", "ukey"):
            keygen(keys / name)
        with h02.authorized_keys.open("a") as handle:  # `right` may log in; `stale`, `wrong*` and `ukey` may not
            handle.write((keys / "right.pub").read_text())
        # the same key as `right`, passphrase-protected: only the agent can use it (found by its .pub)
        (keys / "right_enc").write_bytes((keys / "right").read_bytes())
        (keys / "right_enc").chmod(0o600)
        subprocess.run(["ssh-keygen", "-q", "-p", "-N", "secret", "-f", str(keys / "right_enc")], check=True)
        (keys / "right_enc.pub").write_text((keys / "right.pub").read_text())
        # a user certificate for root, where neither ssh nor paramiko looks for it by itself (not KEY-cert.pub)
        subprocess.run(["ssh-keygen", "-q", "-s", str(keys / "user_ca"), "-I", "alice", "-n", "root", "-V", "-5m:+1h",
                        str(keys / "ukey.pub")], check=True)
        (keys / "ukey-cert.pub").rename(keys / "root.crt")
        sock = keys / "agent.sock"
        agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
        for _ in range(200):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.01"], check=True)
        for name in ("wrong1", "wrong2", "right"):  # offered in this order by an agent-first client
            subprocess.run(["ssh-add", "-q", str(keys / name)], env={**os.environ, "SSH_AUTH_SOCK": str(sock)},
                           check=True, capture_output=True)
        config = keys / "ssh_config"
        config.write_text(f"""\
Host bastion
  HostName {h01.ip}
  IdentityFile {built.client_key}
Host via-bastion
  HostName h02
  HostKeyAlias {h02.ip}
  IdentityFile {built.client_key}
  ProxyCommand ssh -F {config} -o BatchMode=yes -W %h:%p bastion
Host only-ids
  HostName {h02.ip}
  IdentityFile {keys}/right_enc
Host ids-refused ids-refused-not-only
  HostName {h02.ip}
  IdentityFile {keys}/stale
Host ids-refused-not-only
  IdentitiesOnly no
Host cert
  HostName {h02.ip}
  IdentityFile {keys}/ukey
  CertificateFile {keys}/root.crt
  IdentityAgent none
Host accept-new*
  HostName {h02.ip}
  IdentityFile {built.client_key}
  StrictHostKeyChecking accept-new
  UserKnownHostsFile {keys}/kh_%n
  GlobalKnownHostsFile /dev/null
Host alive
  HostName {h02.ip}
  IdentityFile {built.client_key}
  ServerAliveInterval 1
  ServerAliveCountMax 1
Host no-check
  HostName {h02.ip}
  IdentityFile {built.client_key}
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  GlobalKnownHostsFile /dev/null
Host *
  User root
  IdentitiesOnly yes
  IdentityAgent {sock}
  UserKnownHostsFile {built.known_hosts_all}
  GlobalKnownHostsFile /dev/null
  UpdateHostKeys no
  ConnectTimeout 5
  CheckHostIP no
""")
        inventory = keys / "inv.yaml"
        inventory.write_text(json.dumps({"defaults": {"ssh_config": str(config), "connect_retries": 0},
                                         "nodes": ["via-bastion", "only-ids", "ids-refused", "ids-refused-not-only", "cert",
                                                   "accept-new", "no-check", "alive"]}))
        yield Setup(built, keys, config, inventory)
    finally:
        if agent is not None:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=5)
        built.teardown()


def ssh(setup: Setup, node: str, command: str = "true") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", str(setup.config), "-o", "BatchMode=yes", node, command], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def ascendctl(setup: Setup, *nodes: str, command: str = "true") -> dict[str, dict[str, Any]]:
    result = runner.invoke(app, ["exec", "-i", str(setup.inventory), "-w", ",".join(nodes), "--json", "--", command],
                           catch_exceptions=False)
    assert "Traceback" not in result.output
    return {n["name"]: n for n in json.loads(result.stdout)["nodes"]}


def test_proxy_command_through_a_bastion(setup: Setup, hermetic_env: Path) -> None:
    """`h02` resolves only on the bastion: connected at all, the connection went through the ProxyCommand."""
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("h02", 22)
    assert ssh(setup, "via-bastion").returncode == 0
    node = ascendctl(setup, "via-bastion")["via-bastion"]
    assert node["status"] == "ok", node


def test_identities_only_with_an_agent_that_holds_other_keys(setup: Setup, hermetic_env: Path) -> None:
    # the IdentityFile is encrypted: its key is used from the agent (found by its .pub), the agent's others are not
    assert ssh(setup, "only-ids").returncode == 0
    assert ascendctl(setup, "only-ids")["only-ids"]["status"] == "ok"
    # the IdentityFile may not log in and the agent's `right` may: refused, as ssh refuses; without IdentitiesOnly,
    # the agent's keys are offered too and both get in
    control = ssh(setup, "ids-refused")
    assert control.returncode == 255 and "Permission denied" in control.stderr
    assert ssh(setup, "ids-refused-not-only").returncode == 0
    nodes = ascendctl(setup, "ids-refused", "ids-refused-not-only")
    refused = nodes["ids-refused"]
    assert refused["status"] == "auth_failed" and f"tried {setup.keys}/stale)" in refused["error"], refused
    assert nodes["ids-refused-not-only"]["status"] == "ok"


def test_certificate_file_signed_by_a_ca_the_node_trusts(setup: Setup, hermetic_env: Path) -> None:
    assert ssh(setup, "cert").returncode == 0
    node = ascendctl(setup, "cert")["cert"]
    assert node["status"] == "ok", node


def test_strict_host_key_checking_accept_new_records_and_no_is_refused(setup: Setup, hermetic_env: Path) -> None:
    h02 = setup.cluster.host("h02")
    assert ssh(setup, "accept-new-ssh").returncode == 0  # records into kh_accept-new-ssh
    recorded_by_ssh = (setup.keys / "kh_accept-new-ssh").read_text()
    assert ascendctl(setup, "accept-new")["accept-new"]["status"] == "ok"
    recorded = (setup.keys / "kh_accept-new").read_text().split()
    assert recorded_by_ssh.split()[1:3] == recorded[1:3]  # the same key, h02's own
    assert ascendctl(setup, "accept-new")["accept-new"]["status"] == "ok"  # known now
    assert ssh(setup, "no-check").returncode == 0  # ssh goes ahead without knowing the key at all
    node = ascendctl(setup, "no-check")["no-check"]
    assert node["status"] == "host_key"
    line = setup.config.read_text().splitlines().index("  StrictHostKeyChecking no") + 1
    assert node["error"].startswith(f"ssh config {setup.config}:{line}: StrictHostKeyChecking no is refused"), node
    assert h02.ip in recorded[0] or recorded[0].startswith("|1|")


def test_server_alive_keepalives_are_answered_and_counted(setup: Setup, hermetic_env: Path) -> None:
    """A keepalive every second, the connection closed after one left unanswered: a quiet 2.5 s command lives only
    if sshd's answers are seen (it answers keepalive@openssh.com with a failure, which shows it is alive)."""
    assert ssh(setup, "alive", "sleep 2.5").returncode == 0
    node = ascendctl(setup, "alive", command="sleep 2.5")["alive"]
    assert node["status"] == "ok", node
