"""The ssh config options the Paramiko transport takes (issue #29): each parsed, with where it came from, and the
connection parameters it produces (remote/transport/ssh_config.py and ssh.py's SSHConnector.endpoint/_credentials).

Real hosts: tests/cluster/test_ssh_config_hosts.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.errors import AuthError, ConnectError, HostKeyError
from ascendctl.inventory.load import load_inventory
from ascendctl.remote.transport import ssh_config
from ascendctl.remote.transport.ssh import KEEPALIVE, SSHConnector, SSHEndpoint

runner = CliRunner()


def connector(tmp_path: Path, config: str, nodes: str = "[alpha]", defaults: str = "") -> tuple[SSHConnector, Path]:
    """A connector whose inventory reads `config` alone (as ssh -F) and lists `nodes`."""
    path = tmp_path / "ssh_config"
    path.write_text(config)
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"defaults: {{ssh_config: {path}{', ' + defaults if defaults else ''}}}\nnodes: {nodes}\n")
    return SSHConnector(load_inventory(inventory, environ={})), path


def endpoint(tmp_path: Path, config: str, nodes: str = "[alpha]", defaults: str = "") -> tuple[SSHEndpoint, Path]:
    conn, path = connector(tmp_path, config, nodes, defaults)
    return conn.endpoint(conn.inventory.nodes[0]), path


# -- the reader: lines, where they came from, which blocks applied ----------------------------------------------------
def test_every_option_line_keeps_its_file_and_line_through_includes_and_only_applied_blocks_count(tmp_path: Path) -> None:
    (tmp_path / "nodes.conf").write_text("Host alpha\n  ProxyCommand ssh -W %h:%p bastion\n")
    (tmp_path / "config").write_text(f"Include {tmp_path}/nodes.conf\nHost beta\n  ConnectTimeout 3\n"
                                     "Match user carol\n  IdentitiesOnly yes\nHost *\n  ConnectTimeout=7\n"
                                     '  IdentityAgent "/run/a b"\n')
    text = ssh_config.read_config_text(str(tmp_path / "config"), system=None)
    parsed = paramiko.SSHConfig.from_text(text.text)
    looked_up = parsed.lookup("alpha")
    lines = ssh_config.applied_lines(text, looked_up)
    assert lines["proxycommand"][0].where == f"{tmp_path}/nodes.conf:2"
    assert [line.where for line in lines["connecttimeout"]] == [f"{tmp_path}/config:7"]  # beta's line did not apply
    assert "identitiesonly" not in lines  # the Match did not apply
    assert lines["identityagent"][0].value == "/run/a b" and lines["identityagent"][0].option == "IdentityAgent"
    assert not any(key.startswith(ssh_config.BLOCK_MARK) for key in ssh_config.without_marks(looked_up))
    assert ssh_config.without_marks(looked_up)["connecttimeout"] == "7"
    assert [line.where for line in ssh_config.applied_lines(text, parsed.lookup("beta"))["connecttimeout"]] == [
        f"{tmp_path}/config:3", f"{tmp_path}/config:7"]


# -- each option: parsed, and the connection parameters it produces --------------------------------------------------
def test_proxy_command_gets_the_final_host_port_and_user_and_the_first_of_proxyjump_and_proxycommand_wins(
        tmp_path: Path) -> None:
    config = ("Host alpha\n  HostName 10.1.2.3\n  Port 2222\n  ProxyCommand ssh -W %h:%p -l %r %n-via %% ${HOME}\n"
              "  ProxyJump ignored\n")
    ep, path = endpoint(tmp_path, config, nodes="[{host: alpha, user: ops}]")
    assert ep.proxy_command == "ssh -W 10.1.2.3:2222 -l ops alpha-via % ${HOME}"  # the shell expands ${HOME}
    assert ep.proxy_jump is None and ep.where("proxycommand") == f"{path}:4"
    ep, _ = endpoint(tmp_path, "Host alpha\n  ProxyJump bastion\n  ProxyCommand nc %h %p\n")
    assert ep.proxy_jump == "bastion" and ep.proxy_command is None
    ep, _ = endpoint(tmp_path, "Host alpha\n  ProxyCommand none\nHost *\n  ProxyJump bastion\n")
    assert ep.proxy_jump is None and ep.proxy_command is None and "proxycommand" in ep.taken
    ep, _ = endpoint(tmp_path, "Host alpha\n  ProxyCommand nc %h %p\n", nodes="[{host: alpha, jump_host: j1}]")
    assert ep.proxy_jump == "j1" and ep.proxy_command is None and "proxycommand" not in ep.taken  # the inventory wins
    ep, path = endpoint(tmp_path, "Host alpha\n  ProxyCommand nc %h %Z\n")
    assert isinstance(ep.problem, ConnectError) and f"ssh config {path}:2: ProxyCommand" in ep.problem.message
    assert "unknown token %Z" in ep.problem.message


def test_a_proxy_command_that_fails_names_itself_its_line_its_status_and_what_it_said(tmp_path: Path) -> None:
    conn, path = connector(tmp_path, "Host alpha\n  ProxyCommand sh -c \"echo 'bastion: no route to %h' >&2; exit 7\"\n"
                                     "  ConnectTimeout 5\n", defaults="connect_retries: 0")
    with pytest.raises(ConnectError) as caught:
        conn.connect(conn.inventory.nodes[0])
    message = caught.value.message
    assert f"ProxyCommand for alpha ({path}:2) exited with status 7" in message
    assert "bastion: no route to alpha" in message
    assert "ssh -o BatchMode=yes alpha true" in (caught.value.hint or "")


def test_a_proxy_command_carries_the_connection(tmp_path: Path) -> None:
    """Its stdout is what the server says: a banner through it, then silence, is a handshake stall (never a
    failure to resolve `alpha`, which a direct connection would be)."""
    conn, _ = connector(tmp_path, "Host alpha\n  ProxyCommand sh -c \"printf 'SSH-2.0-relayed\\r\\n'; exec sleep 20\"\n"
                                  "  ConnectTimeout 1\n", defaults="connect_retries: 0")
    with pytest.raises(ConnectError) as caught:
        conn.connect(conn.inventory.nodes[0])
    assert "SSH handshake stalled" in caught.value.message


def test_identities_only_identity_agent_and_certificate_file_are_read(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", "/env/agent.sock")
    monkeypatch.setenv("OTHER_SOCK", "/other/agent.sock")
    ep, _ = endpoint(tmp_path, "Host alpha\n  IdentitiesOnly yes\n  IdentityAgent ~/agents/%r-%h.sock\n"
                               "  CertificateFile ~/c1-cert.pub\n  CertificateFile /c/%r.cert\n  User ops\n")
    assert ep.identities_only
    assert ep.identity_agent == os.path.expanduser("~/agents/ops-alpha.sock")
    assert [path for path, _ in ep.certificate_files] == [os.path.expanduser("~/c1-cert.pub"), "/c/ops.cert"]
    assert [where for _, where in ep.certificate_files] == [f"{tmp_path}/ssh_config:4", f"{tmp_path}/ssh_config:5"]
    assert endpoint(tmp_path, "Host alpha\n  IdentityAgent none\n")[0].identity_agent is None
    assert endpoint(tmp_path, "Host alpha\n  IdentityAgent SSH_AUTH_SOCK\n")[0].identity_agent == "/env/agent.sock"
    assert endpoint(tmp_path, "Host alpha\n  IdentityAgent $OTHER_SOCK\n")[0].identity_agent == "/other/agent.sock"
    plain, _ = endpoint(tmp_path, "Host alpha\n  IdentitiesOnly no\n")
    assert not plain.identities_only and plain.identity_agent == "/env/agent.sock" and plain.certificate_files == ()
    ep, path = endpoint(tmp_path, "Host alpha\n  IdentityAgent $UNSET_SOCK_VAR\n")
    assert isinstance(ep.problem, AuthError) and f"{path}:2: IdentityAgent $UNSET_SOCK_VAR" in ep.problem.message


@pytest.mark.parametrize(("value", "accept_new"), [("accept-new", True), ("yes", False), ("ask", False)])
def test_strict_host_key_checking_yes_and_accept_new(tmp_path: Path, value: str, accept_new: bool) -> None:
    ep, _ = endpoint(tmp_path, f"Host *\n  StrictHostKeyChecking {value}\n")
    assert ep.accept_new is accept_new and ep.problem is None
    # the inventory's own setting decides when it is set, whatever the config says
    ep, _ = endpoint(tmp_path, f"Host *\n  StrictHostKeyChecking {value}\n", defaults="accept_new_host_keys: false")
    assert ep.accept_new is False and "stricthostkeychecking" not in ep.taken


@pytest.mark.parametrize("value", ["no", "off", "false"])
def test_strict_host_key_checking_no_is_refused_saying_why_and_what_to_do(tmp_path: Path, value: str) -> None:
    conn, path = connector(tmp_path, f"Host *\n  StrictHostKeyChecking {value}\n")
    node = conn.inventory.nodes[0]
    with pytest.raises(HostKeyError) as caught:
        conn.connect(node)  # refused before any connection is made (alpha does not even resolve)
    assert caught.value.message.startswith(f"ssh config {path}:2: StrictHostKeyChecking {value} is refused: it would "
                                           "accept any host key, a changed one too")
    assert "StrictHostKeyChecking accept-new" in (caught.value.hint or "")
    assert "--accept-new-host-keys" in (caught.value.hint or "")
    ep, _ = endpoint(tmp_path, f"Host *\n  StrictHostKeyChecking {value}\n", defaults="accept_new_host_keys: true")
    assert ep.problem is None and ep.accept_new  # the inventory decides instead
    ep, _ = endpoint(tmp_path, "Host *\n  StrictHostKeyChecking maybe\n")
    assert isinstance(ep.problem, HostKeyError) and "'maybe' is not yes, accept-new, ask or no" in ep.problem.message


def test_connect_timeout_applies_unless_the_inventory_sets_one(tmp_path: Path) -> None:
    assert endpoint(tmp_path, "Host *\n  ConnectTimeout 4\n")[0].connect_timeout == 4
    assert endpoint(tmp_path, "Host *\n  ConnectTimeout 4\n", defaults="connect_timeout: 9")[0].connect_timeout == 9
    assert endpoint(tmp_path, "Host beta\n  ConnectTimeout 4\n")[0].connect_timeout == 10  # ascendctl's default
    ep, path = endpoint(tmp_path, "Host *\n  ConnectTimeout soon\n")
    assert isinstance(ep.problem, ConnectError)
    assert ep.problem.message == f"ssh config {path}:2: ConnectTimeout 'soon' is not a number of seconds"


def test_server_alive_interval_and_count(tmp_path: Path) -> None:
    ep, _ = endpoint(tmp_path, "Host *\n  ServerAliveInterval 5\n  ServerAliveCountMax 2\n")
    assert (ep.keepalive, ep.alive_count) == (5, 2)
    assert (endpoint(tmp_path, "Host *\n  ServerAliveInterval 5\n")[0].alive_count) == 3  # OpenSSH's default count
    assert (endpoint(tmp_path, "Host *\n  ServerAliveInterval 0\n")[0].keepalive) == 0  # as ssh: off
    ep, _ = endpoint(tmp_path, "Host *\n  ServerAliveCountMax 2\n")
    assert (ep.keepalive, ep.alive_count) == (KEEPALIVE, 0)  # ascendctl's own keepalive, which never ends a connection
    assert isinstance(endpoint(tmp_path, "Host *\n  ServerAliveInterval -1\n")[0].problem, ConnectError)


# -- the keys offered: IdentitiesOnly, IdentityAgent, CertificateFile -------------------------------------------------
@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Path]:
    """A real ssh-agent on its own socket, holding `wrong` and `right` (tmp_path/NAME, with .pub)."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for name in ("wrong", "right"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(tmp_path / name)], check=True)
        for _ in range(100):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.05"], check=True)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        for name in ("wrong", "right"):
            subprocess.run(["ssh-add", "-q", str(tmp_path / name)], env=env, check=True, capture_output=True)
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=5)


def offered(conn: SSHConnector) -> list[tuple[str, str]]:
    candidates, problems = conn._credentials(conn.endpoint(conn.inventory.nodes[0]))
    assert not problems, problems
    return [(label, key.comment if isinstance(key, paramiko.AgentKey) else "file") for label, key in candidates]


def test_identities_only_offers_no_agent_key_but_the_configured_ones(tmp_path: Path, agent: Path) -> None:
    # the right key's private half is encrypted on disk: only its .pub says which agent key it is (as ssh does)
    subprocess.run(["ssh-keygen", "-q", "-p", "-N", "secret", "-f", str(tmp_path / "right")], check=True)
    base = f"Host *\n  IdentityAgent {agent}\n  IdentityFile {tmp_path}/right\n"
    conn, _ = connector(tmp_path, base + "  IdentitiesOnly yes\n")
    candidates, problems = conn._credentials(conn.endpoint(conn.inventory.nodes[0]))
    assert [(label, key.comment) for label, key in candidates] == [("ssh-agent", "right")]
    assert len(problems) == 1 and f"{tmp_path}/right" in problems[0]  # the key file itself cannot be used
    (tmp_path / "plain").mkdir()
    conn, _ = connector(tmp_path / "plain", base)  # the same without IdentitiesOnly
    candidates, _ = conn._credentials(conn.endpoint(conn.inventory.nodes[0]))
    assert [key.comment for _, key in candidates] == ["right", "wrong"]  # the agent's own order is wrong, right
    conn, _ = connector(tmp_path, f"Host *\n  IdentityAgent none\n  IdentityFile {tmp_path}/wrong\n")
    assert offered(conn) == [(f"{tmp_path}/wrong", "file")]


def test_certificate_file_is_offered_first_with_the_key_that_holds_it(tmp_path: Path, agent: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ca", "-f", str(tmp_path / "ca")], check=True)
    for name in ("right", "wrong"):
        subprocess.run(["ssh-keygen", "-q", "-s", str(tmp_path / "ca"), "-I", name, "-n", "root", "-V", "-5m:+1h",
                        str(tmp_path / f"{name}.pub")], check=True)
        (tmp_path / f"{name}-cert.pub").rename(tmp_path / f"{name}.crt")  # not where paramiko would find it itself
    conn, path = connector(tmp_path, f"Host *\n  IdentityFile {tmp_path}/right\n  IdentitiesOnly yes\n"
                                     f"  IdentityAgent none\n  CertificateFile {tmp_path}/right.crt\n")
    candidates, problems = conn._credentials(conn.endpoint(conn.inventory.nodes[0]))
    assert not problems
    assert [label for label, _ in candidates] == [f"certificate {tmp_path}/right.crt", f"{tmp_path}/right"]
    assert candidates[0][1].public_blob.key_type == "ssh-ed25519-cert-v01@openssh.com"
    assert candidates[1][1].public_blob is None  # the plain key stays plain
    # the key only in the agent: the certificate goes with the agent's key (IdentitiesOnly lets that one through)
    conn, _ = connector(tmp_path, f"Host *\n  IdentitiesOnly yes\n  IdentityAgent {agent}\n  IdentityFile {tmp_path}/none\n"
                                  f"  CertificateFile {tmp_path}/wrong.crt\n  CertificateFile {tmp_path}/missing.crt\n")
    candidates, problems = conn._credentials(conn.endpoint(conn.inventory.nodes[0]))
    assert [label for label, _ in candidates] == [f"certificate {tmp_path}/wrong.crt", "ssh-agent"]
    assert isinstance(candidates[0][1], paramiko.AgentKey) and candidates[0][1].public_blob is not None
    assert candidates[1][1].public_blob is None  # the agent's own key object is not changed
    assert f"CertificateFile {tmp_path}/missing.crt ({tmp_path}/ssh_config:6) cannot be read" in "; ".join(problems)


def test_an_identity_agent_that_is_not_there_is_named_when_no_key_is_left(tmp_path: Path) -> None:
    conn, path = connector(tmp_path, f"Host *\n  IdentityAgent {tmp_path}/gone.sock\n  IdentityFile {tmp_path}/nokey\n")
    candidates, problems = conn._credentials(conn.endpoint(conn.inventory.nodes[0]))
    assert candidates == []
    assert f"IdentityAgent {tmp_path}/gone.sock ({path}:2): cannot use the agent" in "; ".join(problems)


# -- inventory show -------------------------------------------------------------------------------------------------
def test_inventory_show_lists_what_the_ssh_config_decides_with_file_and_line(tmp_path: Path, hermetic_env: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short path: the table fits in 100 columns
    config = Path("ssh_config")
    config.write_text("Host n*\n  HostName 10.0.0.%h\n  ProxyCommand ssh -W %h:%p bastion\n  IdentitiesOnly yes\n"
                      "  StrictHostKeyChecking accept-new\n  ConnectTimeout 7\nHost *\n  User alice\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"defaults: {{ssh_config: {config}}}\nnodes: [n1, n2, {{host: m3, user: root}}]\n")
    result = runner.invoke(app, ["inventory", "show", "-i", str(inventory)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.output[result.output.index("from the ssh config"):]
    assert f"ProxyCommand           ssh -W %h:%p bastion  {config}:3  n[1-2]" in text
    assert f"User                   alice                 {config}:8  n[1-2]" in text  # m3's user is the inventory's
    result = runner.invoke(app, ["inventory", "show", "-i", str(inventory), "--json"], catch_exceptions=False)
    nodes = json.loads(result.stdout)["nodes"]
    assert {"option": "StrictHostKeyChecking", "value": "accept-new", "source": f"{config}:5"} in nodes[0]["ssh_config"]
    assert nodes[2]["ssh_config"] == []


def test_server_alive_count_closes_a_connection_whose_server_answers_no_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    from ascendctl.remote.transport.ssh import _Transport

    ours, theirs = socket.socketpair()
    try:
        transport = _Transport(ours)
        sent: list[bytes] = []
        closed: list[bool] = []
        monkeypatch.setattr(transport, "_send_user_message", lambda message: sent.append(message.asbytes()))
        monkeypatch.setattr(transport, "close", lambda: closed.append(True))
        transport.server_alive(5, 2)
        probe = transport.packetizer._Packetizer__keepalive_callback  # what paramiko calls after 5 s of quiet
        probe()
        probe()
        assert len(sent) == 2 and b"keepalive@openssh.com" in sent[0] and sent[0].endswith(b"\x01")  # want_reply
        transport._parse_request_failure(paramiko.Message())  # sshd's answer to an unknown request: alive
        probe()
        probe()
        assert not closed and len(sent) == 4
        probe()  # two unanswered: the third time, the connection is closed instead
        assert closed == [True] and len(sent) == 4
        assert transport.gave_up == "no answer to 2 keepalives 5s apart (ServerAliveCountMax)"
    finally:
        ours.close()
        theirs.close()
