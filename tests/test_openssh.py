"""The `openssh` transport without hosts: the argv it builds, how ssh's answers map to results and errors, and when it
is chosen. A stand-in `ssh` (runs the command here) plays the client where a run is needed; real hosts are in
tests/adversarial/test_openssh_hosts.py."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from pathlib import Path

import pytest

from ascendctl.errors import (AuthError, CommandTimeoutError, ConnectError, HostKeyError, InventoryError,
                              TransientConnectError)
from ascendctl.inventory.load import Inventory, parse_inventory
from ascendctl.remote.transport import ssh_config
from ascendctl.remote.transport.factory import TransportFactory
from ascendctl.remote.transport.openssh import (OpenSSHConnector, OpenSSHTransport, connect_error, kerberos_ticket,
                                                openssh_reason, quote, ssh_failed)

# runs the last argument here, as sshd would on the node; `-O exit` and `-G` answered as ssh answers them
STAND_IN_SSH = """#!/bin/sh
for last; do :; done
case " $* " in *" -O exit "*) echo exit >> "$0.exits"; exit 0;; *" -G "*) cat "$0.G" 2>/dev/null; exit 0;;
  *" -N "*) last=true;; esac  # a master: connect, authenticate, no command
exec sh -c "$last"
"""


def inventory(text: str) -> Inventory:
    return parse_inventory(text, environ={})


def option(argv: list[str], key: str) -> str | None:
    """The value of `-o KEY=...` in argv (None when absent)."""
    values = [argv[i + 1].split("=", 1)[1] for i, word in enumerate(argv[:-1]) if word == "-o" and argv[i + 1].startswith(key + "=")]
    assert len(values) <= 1, values
    return values[0] if values else None


@pytest.fixture(autouse=True)
def _control_dirs_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ControlPath directories (made under $XDG_RUNTIME_DIR) land in the test's own directory."""
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "ssh"
    path.parent.mkdir()
    path.write_text(STAND_IN_SSH)
    path.chmod(0o755)
    return path


def transport(stand_in: Path, text: str = "defaults: {transport: openssh, command_timeout: 20}\nnodes: [n1]\n") -> OpenSSHTransport:
    inv = inventory(text)
    connector = OpenSSHConnector(inv, ssh=str(stand_in))
    return connector.connect(inv.nodes[0])


# -- the argv ----------------------------------------------------------------------------------------------------------

def test_defaults_batch_mode_strict_host_keys_and_a_multiplexed_connection_in_a_private_directory() -> None:
    inv = inventory("defaults: {transport: openssh, connect_timeout: 2.5}\nnodes: [n1, n2]\n")
    connector = OpenSSHConnector(inv, ssh="/usr/bin/ssh")
    try:
        argv = connector.argv(inv.nodes[0])
        assert argv[0] == "/usr/bin/ssh" and argv[-2:] == ["--", "n1"]
        assert option(argv, "BatchMode") == "yes"
        assert option(argv, "StrictHostKeyChecking") == "yes"
        assert option(argv, "UpdateHostKeys") == "no"
        assert option(argv, "ConnectTimeout") == "3"  # whole seconds, never shorter than asked
        assert option(argv, "ControlMaster") == "auto" and option(argv, "ControlPersist") == "60"
        control = option(argv, "ControlPath")
        assert control is not None and control.startswith('"') and control.endswith('/%C"')  # one socket per destination
        folder = control[1:-len('/%C"')]
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700 and os.stat(folder).st_uid == os.getuid()
        assert option(connector.argv(inv.nodes[1]), "ControlPath") == control  # one directory, %C tells nodes apart
        # nothing the inventory left to the ssh config is decided here: ~/.ssh/config and ssh's own files apply
        for key in ("User", "Port", "IdentityFile", "ProxyJump", "UserKnownHostsFile", "GlobalKnownHostsFile"):
            assert option(argv, key) is None, key
        assert "-F" not in argv
    finally:
        connector.close()
    assert not os.path.exists(folder)


def test_inventory_settings_become_quoted_options_and_known_hosts_is_the_only_file(tmp_path: Path) -> None:
    config = tmp_path / "my ssh config"
    config.write_text("Host *\n")
    inv = inventory(json.dumps({"defaults": {
        "ssh_config": str(config), "transport": "openssh", "accept_new_host_keys": True, "user": 'ops "x"', "port": 2222,
        "identity_file": "/keys/id %h key", "known_hosts": "/etc/kh dir/known_hosts", "jump_host": "bastion.example:2200"},
        "nodes": ["n1"]}))
    connector = OpenSSHConnector(inv, ssh="ssh")
    try:
        argv = connector.argv(inv.nodes[0])
    finally:
        connector.close()
    assert argv[1:3] == ["-F", str(config)]  # the inventory's config alone, as the Paramiko transport reads it
    assert option(argv, "StrictHostKeyChecking") == "accept-new"  # only under the explicit opt-in
    assert option(argv, "User") == '"ops \\"x\\""'
    assert option(argv, "Port") == "2222"
    assert option(argv, "IdentityFile") == '"/keys/id %%h key"'  # a literal %, not a token
    assert option(argv, "UserKnownHostsFile") == '"/etc/kh dir/known_hosts"'
    assert option(argv, "GlobalKnownHostsFile") == "none"
    assert option(argv, "ProxyJump") == '"bastion.example:2200"'
    assert argv[-2:] == ["--", "n1"]  # a host can never be read as an option


def test_quote_escapes_what_ssh_s_parser_would_read() -> None:
    assert quote('a "b" \\c') == '"a \\"b\\" \\\\c"'


def test_the_real_ssh_reads_the_options_as_meant(tmp_path: Path) -> None:
    """`ssh -G` (no connection) with the argv's options: every quoted value arrives whole."""
    if not shutil.which("ssh"):
        pytest.fail("ssh (openssh-client) is needed")
    inv = inventory(json.dumps({"defaults": {"ssh_config": str(tmp_path / "none"), "transport": "openssh", "user": "ops",
                                             "known_hosts": f"{tmp_path}/a dir/kh", "identity_file": f"{tmp_path}/id 1"},
                                "nodes": ["n1"]}))
    connector = OpenSSHConnector(inv)
    try:
        node = inv.nodes[0]
        seen = connector.resolved(node, extra=connector.options(node))
        assert seen["batchmode"] == "yes" and seen["stricthostkeychecking"] == "true" and seen["user"] == "ops"
        assert seen["userknownhostsfile"] == f"{tmp_path}/a dir/kh"
        assert seen["identityfile"] == f"{tmp_path}/id 1"
        assert seen["controlpath"].startswith(connector.control_dir() + "/")
        assert connector.known_hosts_files(node) == [f"{tmp_path}/a dir/kh"]
    finally:
        connector.close()


# -- results -----------------------------------------------------------------------------------------------------------

def test_output_exit_status_and_stdin_come_back_as_over_paramiko(stand_in: Path) -> None:
    t = transport(stand_in)
    result = t.run("cat; echo err >&2; exit 4", stdin=b"data\n")
    assert (result.stdout, result.stderr, result.exit_code) == ("data\n", "err\n", 4)
    chunks: list[bytes] = []
    streamed = t.stream("echo a; echo b", on_stdout=chunks.append)
    assert b"".join(chunks) == b"a\nb\n" and streamed.stdout == "" and streamed.exit_code == 0
    t.close()
    assert (stand_in.parent / "ssh.exits").read_text() == "exit\n"  # the node's connection closed with `ssh -O exit`
    t.close()  # twice is fine
    assert (stand_in.parent / "ssh.exits").read_text() == "exit\n"


def test_a_command_past_its_limit_is_stopped_on_the_node_and_is_a_timeout(stand_in: Path) -> None:
    with pytest.raises(CommandTimeoutError) as info:
        transport(stand_in).run("echo started; sleep 30", timeout=0.5)
    assert info.value.timeout == 0.5 and info.value.stdout == "started\n"


def test_status_255_is_the_connection_only_when_ssh_says_so(stand_in: Path) -> None:
    t = transport(stand_in)
    assert t.run("exit 255").exit_code == 255  # the command's own status
    with pytest.raises(ConnectError, match="lost connection to n1: client_loop: send disconnect: Broken pipe"):
        t.run("echo 'client_loop: send disconnect: Broken pipe' >&2; exit 255")


def test_spawn_put_and_get(stand_in: Path, tmp_path: Path) -> None:
    t = transport(stand_in)
    spawned = t.spawn("echo spawned")
    data = b""
    while not spawned.finished():
        data += spawned.read()
    spawned.close()
    assert data == b"spawned\n"
    source = tmp_path / "source"
    source.write_bytes(b"\x00binary\xff")
    source.chmod(0o640)
    t.put(source, str(tmp_path / "copied"))
    assert (tmp_path / "copied").read_bytes() == b"\x00binary\xff"
    assert stat.S_IMODE((tmp_path / "copied").stat().st_mode) == 0o640
    t.get(str(tmp_path / "copied"), tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == b"\x00binary\xff"


@pytest.mark.parametrize(("stderr", "kind", "words"), [
    ("No ED25519 host key is known for 10.0.0.1 and you have requested strict checking.\r\nHost key verification failed.\r\n",
     HostKeyError, "unknown host key for root@n1"),
    ("@@@@\r\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\nOffending ED25519 key in /k/known_hosts:3\r\n"
     "Host key verification failed.\r\n", HostKeyError, "has CHANGED; refusing to connect (ssh: /k/known_hosts line 3"),
    ("root@10.0.0.1: Permission denied (publickey).\r\n", AuthError, "ssh auth failed for root@n1"),
    ("ssh: connect to host 10.0.0.1 port 22: Connection refused\r\n", ConnectError, "connection refused by root@n1"),
    ("ssh: connect to host 10.0.0.1 port 22: Connection timed out\r\n", ConnectError, "timed out after 5s"),
    ("ssh: Could not resolve hostname n1: Name or service not known\r\n", ConnectError, "cannot resolve root@n1"),
    ("kex_exchange_identification: Connection closed by remote host\r\n", TransientConnectError, "dropped the connection"),
])
def test_why_a_connection_failed_is_read_from_ssh_s_words(stderr: str, kind: type[Exception], words: str) -> None:
    error = connect_error("root@n1", 255, stderr, 5)
    assert type(error) is kind and words in error.message


def test_an_unknown_host_key_names_every_file_ssh_searched(stand_in: Path, tmp_path: Path) -> None:
    (stand_in.parent / "ssh.G").write_text(f"userknownhostsfile {tmp_path}/u1 {tmp_path}/u2\nglobalknownhostsfile /etc/g\n")
    stand_in.write_text(STAND_IN_SSH.replace('exec sh -c "$last"', 'echo "Host key verification failed." >&2; exit 255'))
    inv = inventory("defaults: {transport: openssh, connect_retries: 2}\nnodes: [n1]\n")
    with pytest.raises(HostKeyError) as info:
        OpenSSHConnector(inv, ssh=str(stand_in)).connect(inv.nodes[0])
    assert info.value.message == f"unknown host key for n1 (ssh: Host key verification failed); searched {tmp_path}/u1, {tmp_path}/u2, /etc/g"
    assert "--accept-new-host-keys" in (info.value.hint or "")


def test_an_unknown_host_key_s_message_carries_the_fingerprint_the_node_offered(stand_in: Path, tmp_path: Path) -> None:
    # ssh names no key when it refuses one; asked again with -v it says which (`debug1: Server host key: ...`)
    refuse = ('case " $* " in *" -v "*) echo "debug1: Server host key: ssh-ed25519 SHA256:AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg" >&2;; esac; '
              'echo "Host key verification failed." >&2; exit 255')
    stand_in.write_text(STAND_IN_SSH.replace('exec sh -c "$last"', refuse))
    inv = inventory("defaults: {transport: openssh, connect_retries: 0}\nnodes: [n1]\n")
    with pytest.raises(HostKeyError) as info:
        OpenSSHConnector(inv, ssh=str(stand_in)).connect(inv.nodes[0])
    assert info.value.message.startswith(
        "unknown host key for n1 (ssh-ed25519 SHA256:AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg) (ssh: Host key verification")


def test_ssh_failed_tells_ssh_s_last_words_from_a_command_s() -> None:
    assert ssh_failed("Connection to 10.0.0.1 closed by remote host.\r\n")
    assert ssh_failed("mux_client_request_session: read from master failed: Broken pipe\n")
    assert not ssh_failed("my tool: error\n") and not ssh_failed("")


# -- when it is chosen -------------------------------------------------------------------------------------------------

def test_the_transport_key_is_validated() -> None:
    assert inventory("defaults: {transport: openssh}\nnodes: [n1]\n").nodes[0].transport == "openssh"
    with pytest.raises(InventoryError, match="expected one of ssh, openssh, local"):
        inventory("defaults: {transport: opensh}\nnodes: [n1]\n")


@pytest.mark.parametrize(("settings", "reason"), [
    ({"gssapiauthentication": "yes"}, "GSSAPIAuthentication yes"),
    ({"pkcs11provider": "/usr/lib/opensc-pkcs11.so"}, "PKCS11Provider /usr/lib/opensc-pkcs11.so"),
    ({"securitykeyprovider": "/usr/lib/sk.so"}, "SecurityKeyProvider /usr/lib/sk.so"),
    ({"controlpath": "/run/site/%C"}, "ControlPath /run/site/%C"),
    ({"gssapiauthentication": "no", "pkcs11provider": "none", "securitykeyprovider": "internal"}, None),
])
def test_what_paramiko_cannot_do(settings: dict[str, str], reason: str | None, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ticket").touch()
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/ticket")
    found = openssh_reason(settings)
    assert found == reason if reason is None else (found or "").startswith(reason)


def test_gssapi_selects_the_system_ssh_only_with_a_kerberos_ticket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian and Ubuntu set GSSAPIAuthentication yes for every host in /etc/ssh/ssh_config: that alone is no reason."""
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/no-ticket")
    assert not kerberos_ticket() and openssh_reason({"gssapiauthentication": "yes"}) is None
    (tmp_path / "no-ticket").touch()
    assert kerberos_ticket()
    assert kerberos_ticket({"KRB5CCNAME": "KEYRING:persistent:0"})


def test_mentions_finds_keywords_in_any_block() -> None:
    text = "Host a\n  User x\nMatch host b\n  gssapiauthentication=yes\n#ControlPath x\n"
    assert ssh_config.mentions(text, ("gssapiauthentication", "controlpath")) == {"gssapiauthentication"}


def test_a_config_that_needs_the_system_ssh_selects_it_and_says_why_once(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ticket").touch()
    monkeypatch.setenv("KRB5CCNAME", str(tmp_path / "ticket"))
    if not shutil.which("ssh"):
        pytest.fail("ssh (openssh-client) is needed")
    config = tmp_path / "ssh_config"
    config.write_text("Host kerb*\n  GSSAPIAuthentication yes\nHost *\n  User root\n")
    inv = inventory(f"defaults: {{ssh_config: {config}}}\nnodes: [kerb1, kerb2, plain1]\n")
    factory = TransportFactory(inv)
    with caplog.at_level(logging.WARNING):
        chosen = [factory.uses_openssh(node) for node in inv.nodes]
    assert chosen == [True, True, False]
    said = [r.getMessage() for r in caplog.records if "system ssh" in r.getMessage()]
    assert len(said) == 1 and "GSSAPIAuthentication yes" in said[0] and said[0].startswith("kerb1: ")
    # an inventory that names the Paramiko transport keeps it
    named = inventory(f"defaults: {{ssh_config: {config}, transport: ssh}}\nnodes: [kerb1]\n")
    assert TransportFactory(named).uses_openssh(named.nodes[0]) is False
    factory.close_all()


@pytest.mark.parametrize("config_text", ["Host *\n  User root\n  IdentityFile ~/.ssh/id_ed25519\n",
                                         "Host *\n  GSSAPIAuthentication yes\n"])  # as Debian's /etc/ssh/ssh_config
def test_an_ordinary_config_asks_ssh_nothing(config_text: str, tmp_path: Path, stand_in: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/no-ticket")
    config = tmp_path / "ssh_config"
    config.write_text(config_text)
    inv = inventory(f"defaults: {{ssh_config: {config}}}\nnodes: [n1]\n")
    connector = OpenSSHConnector(inv, ssh=str(stand_in))
    (stand_in.parent / "ssh.G").write_text("gssapiauthentication yes\npkcs11provider /x.so\n")  # would select it if asked
    assert connector.reason(inv.nodes[0]) is None
    (tmp_path / "no-ticket").touch()
    assert connector.reason(inv.nodes[0]) == ("GSSAPIAuthentication yes, with a Kerberos ticket"
                                              if "GSSAPI" in config_text else None)


def test_a_site_control_path_is_used_as_it_is_and_its_masters_left_open(tmp_path: Path, stand_in: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ControlMaster auto\n  ControlPath /run/site/%C\n  ControlPersist 4h\n")
    (stand_in.parent / "ssh.G").write_text("controlpath /run/site/0123abcd\ncontrolmaster auto\n")
    inv = inventory(f"defaults: {{ssh_config: {config}, transport: openssh}}\nnodes: [n1]\n")
    connector = OpenSSHConnector(inv, ssh=str(stand_in))
    t = connector.connect(inv.nodes[0])
    argv = t.command_argv("x")
    assert option(argv, "ControlPath") is None and option(argv, "ControlMaster") is None  # the site's own, from its config
    assert option(argv, "BatchMode") == "yes" and argv[1:3] == ["-F", str(config)]
    assert t.run("echo ok").stdout == "ok\n"
    t.close()
    connector.close()
    assert not (stand_in.parent / "ssh.exits").exists()  # no `ssh -O exit`: the site's connection stays


def test_ssh_never_gets_a_terminal_or_an_askpass_program(stand_in: Path) -> None:
    """BatchMode does not reach the ssh that ProxyJump starts: nothing it could prompt on is there either."""
    result = transport(stand_in).run('echo "$SSH_ASKPASS_REQUIRE"; ps -o tty= -p $$')
    assert result.stdout.split() == ["never", "?"]  # no askpass, no controlling terminal (its own session)
