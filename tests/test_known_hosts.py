"""Host-key lookup as OpenSSH does it (remote/transport/known_hosts.py) and the ssh config reader (ssh_config.py).

Files live in tmp_path; where OpenSSH's own tools can judge the same file (`ssh-keygen -F`, `ssh-keygen -H`),
they are the reference.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import subprocess
from pathlib import Path

import paramiko
import pytest

from ascendctl.errors import HostKeyError
from ascendctl.inventory.load import load_inventory
from ascendctl.remote.transport import ssh_config
from ascendctl.remote.transport.known_hosts import (DEFAULT_GLOBAL_FILES, DEFAULT_USER_FILES, KnownHostsFile, Verdict,
                                                    certificate_problem, check_host_key, expand_path, hash_host,
                                                    host_key_names, host_matches, known_hosts_files, parse_certificate,
                                                    parse_line, read_known_hosts)
from ascendctl.remote.transport.ssh import SSHConnector, _host_key_refusal, _signed_by

KEY_A = paramiko.ECDSAKey.generate()
KEY_B = paramiko.ECDSAKey.generate()
KEY_C = paramiko.ECDSAKey.generate()
TYPE = KEY_A.get_name()


def line(hosts: str, key: paramiko.PKey = KEY_A, marker: str = "") -> str:
    return f"{marker + ' ' if marker else ''}{hosts} {key.get_name()} {key.get_base64()}"


def write(path: Path, *lines: str) -> KnownHostsFile:
    path.write_text("".join(x + "\n" for x in lines))
    return read_known_hosts(str(path))


def verdict(files: list[KnownHostsFile], names: tuple[str, ...], key: paramiko.PKey = KEY_A) -> Verdict:
    return check_host_key(files, names, key.get_name(), key.get_base64()).verdict


# -- host patterns ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("patterns", "name", "expected"), [
    ("node01", "node01", True),
    ("NODE01", "node01", True),  # case-insensitive both ways
    ("node01", "NODE01", True),
    ("node01", "node011", False),  # whole name, not a prefix
    ("node0?", "node07", True),
    ("node0?", "node007", False),
    ("*.example.com", "a.b.example.com", True),
    ("*.example.com", "example.com", False),
    ("*.example.com,!bad.example.com", "bad.example.com", False),  # a matching negation rules the line out
    ("!bad.example.com,*.example.com", "bad.example.com", False),  # in any position
    ("*.example.com,!bad.example.com", "good.example.com", True),
    ("!bad.example.com", "good.example.com", False),  # a negation alone never matches
    ("[node01]:2222", "[node01]:2222", True),  # brackets are literal, not a character class
    ("[node01]:2222", "node01", False),
    ("node01", "[node01]:2222", False),
    ("[node0?]:*", "[node05]:2222", True),
    ("10.0.0.*", "10.0.0.17", True),
    ("10.0.0.*", "10.0.1.17", False),
])
def test_host_patterns_match_as_openssh_does(patterns: str, name: str, expected: bool) -> None:
    assert host_matches(patterns, name) is expected


def test_hashed_entries_match_what_openssh_hashes_and_openssh_finds_ours(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.write_text(line("node01") + "\n" + line("[node02]:2222", KEY_B) + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(theirs)], check=True, capture_output=True)
    hashed = read_known_hosts(str(theirs))
    assert all(e.patterns.startswith("|1|") for e in hashed.entries) and "node01" not in theirs.read_text()
    assert verdict([hashed], ("node01",)) is Verdict.OK
    assert verdict([hashed], ("NODE01",)) is Verdict.OK
    assert verdict([hashed], ("[node02]:2222",), KEY_B) is Verdict.OK
    assert verdict([hashed], ("node02",), KEY_B) is Verdict.UNKNOWN
    ours = tmp_path / "ours"
    ours.write_text(line(hash_host("node03")) + "\n")
    found = subprocess.run(["ssh-keygen", "-F", "node03", "-f", str(ours)], capture_output=True, text=True)
    assert found.returncode == 0 and KEY_A.get_base64() in found.stdout
    assert subprocess.run(["ssh-keygen", "-F", "node04", "-f", str(ours)], capture_output=True).returncode != 0


def test_plain_names_looked_up_by_name_and_patterns_one_by_one_give_the_same_lines_in_file_order(tmp_path: Path) -> None:
    read = write(tmp_path / "kh", line("NODE01,10.0.0.1"), line("node0*"), line("!node01,node*"), line(hash_host("node01")),
                 line("node011"), line("node01", KEY_B, "@revoked"))
    assert [e.line for e in read.matching(["node01"])] == [1, 2, 4, 6]
    assert [e.line for e in read.matching(["Node01", "10.0.0.1"])] == [1, 2, 4, 6]  # each line once
    assert [e.line for e in read.matching(["node011"])] == [2, 3, 5]
    assert [e.line for e in read.with_entry("node09", TYPE, KEY_A.get_base64()).matching(["NODE09"])] == [2, 3, 7]


def test_dev_null_holds_no_keys_and_other_special_files_are_a_problem(tmp_path: Path) -> None:
    assert read_known_hosts("/dev/null") == KnownHostsFile("/dev/null")
    assert read_known_hosts("/dev/zero").problem == "it is not a regular file"
    assert read_known_hosts(str(tmp_path)).problem == "it is a directory"


def test_lines_that_are_no_entries_are_counted(tmp_path: Path) -> None:
    read = write(tmp_path / "kh", "# comment", line("ok"), "two fields", f"h {TYPE} !!!", f"h ssh-ed25519 {KEY_A.get_base64()}",
                 "|1|bad|hash " + line("x").split(" ", 1)[1], "@revoke " + line("h"), line("ok2"))
    # line 5: the blob's own type is not ssh-ed25519; line 6: a hash that is not base64; line 7: unknown marker
    assert read.bad_lines == (3, 4, 5, 6, 7)
    assert [e.patterns for e in read.entries] == ["ok", "ok2"]
    assert parse_line(line("h", marker="@revoked"), 1) is not None


# -- names -----------------------------------------------------------------------------------------------------------
def test_names_are_the_alias_and_the_host_name_or_the_host_key_alias_alone() -> None:
    assert host_key_names("alpha", "10.0.0.1", 22) == ("10.0.0.1", "alpha")
    assert host_key_names("node01", "node01", 22) == ("node01",)
    assert host_key_names("Alpha", "10.0.0.1", 2222) == ("[10.0.0.1]:2222", "[alpha]:2222")
    assert host_key_names("alpha", "10.0.0.1", 2222, "KeyName") == ("keyname",)  # as ssh: no port with HostKeyAlias


def test_port_entries_are_found_only_under_the_bracketed_name(tmp_path: Path) -> None:
    read = write(tmp_path / "kh", line("10.0.0.1"), line("[10.0.0.2]:2222"))
    assert verdict([read], host_key_names("10.0.0.1", "10.0.0.1", 2222)) is Verdict.UNKNOWN
    assert verdict([read], host_key_names("10.0.0.2", "10.0.0.2", 2222)) is Verdict.OK
    assert verdict([read], host_key_names("10.0.0.2", "10.0.0.2", 22)) is Verdict.UNKNOWN


# -- verdicts over several files -------------------------------------------------------------------------------------
def test_every_file_is_searched_and_any_matching_line_accepts(tmp_path: Path) -> None:
    first = write(tmp_path / "first", line("node01", KEY_B))  # a stale key here ...
    second = write(tmp_path / "second", line("node01"))  # ... and the right one here: accepted, as ssh does
    assert verdict([first, second], ("node01",)) is Verdict.OK
    assert verdict([first], ("node01",)) is Verdict.CHANGED
    check = check_host_key([first, write(tmp_path / "third", line("other"))], ("node01",), TYPE, KEY_A.get_base64())
    assert check.verdict is Verdict.CHANGED and [(p, e.line) for p, e in check.lines] == [(str(tmp_path / "first"), 1)]


def test_a_revoked_key_is_refused_even_where_another_line_accepts_it(tmp_path: Path) -> None:
    accepts = write(tmp_path / "user", line("node01"), line("node02"))
    revokes = write(tmp_path / "global", "# revoked", line("node01,node03", marker="@revoked"), line("*", KEY_C, "@revoked"))
    check = check_host_key([accepts, revokes], ("node01",), TYPE, KEY_A.get_base64())
    assert check.verdict is Verdict.REVOKED and check.lines[0][0] == str(tmp_path / "global") and check.lines[0][1].line == 2
    assert verdict([accepts, revokes], ("node02",)) is Verdict.OK  # the @revoked line names other hosts
    assert verdict([accepts, revokes], ("node03",)) is Verdict.REVOKED  # revoked though no line accepts it either
    assert verdict([accepts, revokes], ("anything",), KEY_C) is Verdict.REVOKED  # `*`
    error = _host_key_refusal(check, ("node01",), f"{TYPE} SHA256:x", "a, b")
    assert error.message == (f"host key for node01 is REVOKED ({TYPE} SHA256:x): @revoked in {tmp_path / 'global'} line 2; "
                             "refusing to connect")


def test_other_key_types_only_and_unknown(tmp_path: Path) -> None:
    read = write(tmp_path / "kh", line("node01", paramiko.RSAKey.generate(1024)))
    assert read.bad_lines == () and verdict([read], ("node01",)) is Verdict.OTHER_TYPES
    assert verdict([read], ("node02",)) is Verdict.UNKNOWN


def test_a_host_known_only_through_a_cert_authority_that_offers_no_certificate_is_told_so(tmp_path: Path) -> None:
    path = tmp_path / "kh"
    read = write(path, line("node02"), line("*.example.com,node0?", KEY_C, "@cert-authority"))
    check = check_host_key([read], ("node01",), TYPE, KEY_A.get_base64())
    assert check.verdict is Verdict.CERT_ONLY
    error = _host_key_refusal(check, ("node01",), f"{TYPE} SHA256:x", str(path))
    assert error.message.startswith(f"node01 is known only through @cert-authority ({path} line 2), but it offered no "
                                    "host certificate signed by that CA")
    assert verdict([read], ("node02",)) is Verdict.OK  # a plain line wins over the CA line


# -- which files -----------------------------------------------------------------------------------------------------
TOKENS = {"C": "c0ffee", "d": "/home/me", "h": "10.0.0.1", "i": "1000", "k": "alias", "L": "box", "l": "box.lan",
          "n": "alpha", "p": "2222", "r": "root", "u": "me"}


def test_files_come_from_the_config_with_tokens_else_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/me")
    monkeypatch.setenv("KH_DIR", "/srv/kh")
    where = known_hosts_files({"userknownhostsfile": "~/.ssh/kh_%h_%p %d/%n-%r-%u %k/%C %%x ${KH_DIR}/%L",
                               "globalknownhostsfile": "/etc/kh_%l %i"}, TOKENS)
    assert where.user == ("/home/me/.ssh/kh_10.0.0.1_2222", "/home/me/alpha-root-me", "alias/c0ffee", "%x", "/srv/kh/box")
    assert where.system == ("/etc/kh_box.lan", "1000") and not where.explicit
    assert where.write_to == "/home/me/.ssh/kh_10.0.0.1_2222"
    defaults = known_hosts_files({}, TOKENS)
    assert (defaults.user, defaults.system) == (DEFAULT_USER_FILES, DEFAULT_GLOBAL_FILES)
    only_user = known_hosts_files({"userknownhostsfile": "/a"}, TOKENS)
    assert only_user.all == ("/a", *DEFAULT_GLOBAL_FILES)
    none = known_hosts_files({"userknownhostsfile": "none", "globalknownhostsfile": "/g"}, TOKENS)
    assert none.user == () and none.write_to is None and none.all == ("/g",)


def test_a_bad_token_or_unset_variable_is_a_message_naming_the_option() -> None:
    with pytest.raises(ValueError, match=r"^UserKnownHostsFile ~/kh_%z: unknown token %z \(known: %C %L"):
        expand_path("~/kh_%z", "UserKnownHostsFile", TOKENS)
    with pytest.raises(ValueError, match=r"^GlobalKnownHostsFile \$\{ASCT_UNSET_VAR\}/kh: environment variable ASCT_UNSET_VAR"):
        expand_path("${ASCT_UNSET_VAR}/kh", "GlobalKnownHostsFile", TOKENS)


# -- the ssh config reader -------------------------------------------------------------------------------------------
def test_includes_are_followed_relative_to_the_ssh_directory_and_keep_the_enclosing_block(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    ssh_dir = tmp_path / ".ssh"
    (ssh_dir / "conf.d").mkdir(parents=True)
    (ssh_dir / "conf.d" / "10-nodes.conf").write_text("Host node*\n  HostKeyAlias nodes\n  UserKnownHostsFile ~/kh_nodes\n")
    (ssh_dir / "conf.d" / "20-more.conf").write_text("Host other\n  Port 2200\n")
    (ssh_dir / "config").write_text("Host alpha\n  Include conf.d/*.conf\n  HostName 10.0.0.9\nHost *\n  Port 2222\n")
    system = tmp_path / "etc_ssh_config"
    system.write_text("Host *\n  GlobalKnownHostsFile /etc/kh_sys\n  Port 22\n  UserKnownHostsFile /sys_user\n")
    text = ssh_config.read_config_text("~/.ssh/config", system=str(system))
    assert text.files == (str(ssh_dir / "config"), str(ssh_dir / "conf.d" / "10-nodes.conf"),
                          str(ssh_dir / "conf.d" / "20-more.conf"), str(system))
    parsed = paramiko.SSHConfig.from_text(text.text)
    alpha = parsed.lookup("alpha")
    assert alpha["hostname"] == "10.0.0.9"  # after the Include, the line is still alpha's
    assert alpha["port"] == "2222" and alpha["globalknownhostsfile"] == "/etc/kh_sys"  # the user file wins; the system adds
    assert alpha["userknownhostsfile"] == "/sys_user"
    node = parsed.lookup("node7")
    assert node["hostkeyalias"] == "nodes" and node["userknownhostsfile"] == "~/kh_nodes" and node["hostname"] == "node7"
    assert parsed.lookup("other")["port"] == "2200"
    assert "globalknownhostsfile" not in paramiko.SSHConfig.from_text(
        ssh_config.read_config_text("~/.ssh/config", system=None).text).lookup("alpha")


def test_unreadable_or_missing_configs_are_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "config").write_text(f"Include {tmp_path}/none-*.conf {tmp_path}/dir\nPort 2201\n")
    (tmp_path / "dir").mkdir()
    assert ssh_config.read_config_text(str(tmp_path / "missing"), system=None).files == ()
    with caplog.at_level(logging.WARNING):
        text = ssh_config.read_config_text(str(tmp_path / "dir"), system=str(tmp_path / "config"))
    assert text.files == (str(tmp_path / "config"),) and "Port 2201" in text.text
    assert f"ssh config {tmp_path / 'dir'}: not a regular file; ignored" in caplog.text


# -- the connector: which files for a node --------------------------------------------------------------------------
def test_the_inventory_known_hosts_wins_when_set_and_the_ssh_config_decides_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(ssh_config, "SYSTEM_SSH_CONFIG", str(tmp_path / "system_config"))
    (tmp_path / "system_config").write_text("Host *\n  GlobalKnownHostsFile /etc/kh_%h\n")
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(
        "Host alpha\n  HostName 10.0.0.1\n  Port 2222\n  User admin\n  UserKnownHostsFile ~/a_%n_%h_%p_%r ~/b\n"
        "Host bravo\n  HostKeyAlias bravo-key\n  UserKnownHostsFile ~/c_%k\nHost bad\n  UserKnownHostsFile ~/x_%z\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("nodes: [alpha, bravo, bad, {host: delta, known_hosts: /explicit/kh}]\n")
    connector = SSHConnector(load_inventory(inventory, environ={}))
    alpha, bravo, bad, delta = connector.inventory.nodes

    def where(node: object) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        ep = connector.endpoint(node)  # type: ignore[arg-type]
        files = connector._known_hosts_where(node, ep)  # type: ignore[arg-type]
        return files.user, files.system, ep.host_key_names

    assert where(alpha) == ((f"{tmp_path}/a_alpha_10.0.0.1_2222_admin", f"{tmp_path}/b"), ("/etc/kh_10.0.0.1",),
                            ("[10.0.0.1]:2222", "[alpha]:2222"))
    assert where(bravo) == ((f"{tmp_path}/c_bravo-key",), ("/etc/kh_bravo",), ("bravo-key",))
    assert where(delta) == (("/explicit/kh",), (), ("delta",))
    assert connector._known_hosts_where(delta, connector.endpoint(delta)).explicit
    with pytest.raises(HostKeyError, match=r"^ssh config \(.*/\.ssh/config, .*/system_config\): UserKnownHostsFile ~/x_%z: "
                       "unknown token %z"):
        where(bad)
    # an inventory that names its ssh config reads that file alone, as `ssh -F FILE`
    inventory.write_text(f"defaults: {{ssh_config: {tmp_path}/.ssh/config}}\nnodes: [alpha]\n")
    alone = SSHConnector(load_inventory(inventory, environ={}))
    node = alone.inventory.nodes[0]
    assert alone._known_hosts_where(node, alone.endpoint(node)).system == DEFAULT_GLOBAL_FILES


# -- host certificates -----------------------------------------------------------------------------------------------
def keygen(path: Path, key_type: str = "ed25519") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", "", "-f", str(path)], check=True, capture_output=True)
    return path


def certify(tmp_path: Path, ca: Path, *options: str, name: str = "host") -> bytes:
    key = tmp_path / name
    if not key.exists():
        keygen(key)
    subprocess.run(["ssh-keygen", "-q", "-s", str(ca), "-I", f"id-{name}", "-z", "42", *options, f"{key}.pub"], check=True,
                   capture_output=True)
    return base64.b64decode(Path(f"{key}-cert.pub").read_text().split()[1])


def test_host_certificates_are_read_and_judged_as_openssh_judges_them(tmp_path: Path) -> None:
    ca, other_ca = keygen(tmp_path / "ca"), keygen(tmp_path / "other_ca", "ecdsa")
    now = 1_700_000_000.0
    good = parse_certificate(certify(tmp_path, ca, "-h", "-n", "node01,*.example.com", "-V", "20231101:20231201"))
    assert (good.key_type, good.serial, good.kind, good.key_id, good.principals) == (
        "ssh-ed25519", 42, 2, "id-host", ("node01", "*.example.com"))
    assert certificate_problem(good, ("node01",), now) is None
    assert certificate_problem(good, ("10.0.0.1", "n7.EXAMPLE.com"), now) is None  # wildcard principal, any case
    assert certificate_problem(good, ("node02",), now) == "its principals (node01, *.example.com) do not name node02"
    assert certificate_problem(good, ("node01",), 1_698_000_000.0) == "it is not valid before 2023-11-01 00:00:00 UTC"
    assert certificate_problem(good, ("node01",), 1_702_000_000.0) == "it expired at 2023-12-01 00:00:00 UTC"
    anyone = parse_certificate(certify(tmp_path, ca, "-h", name="anyone"))  # no principals, valid forever
    assert certificate_problem(anyone, ("whatever",), now) is None
    user = parse_certificate(certify(tmp_path, ca, "-n", "node01", name="user"))
    assert certificate_problem(user, ("node01",), now) == "it is a user certificate, not a host certificate"
    ca_blob = base64_key(tmp_path / "ca.pub")
    assert good.ca_key == ca_blob
    assert _signed_by("ssh-ed25519", ca_blob, good)
    assert not _signed_by("ecdsa-sha2-nistp256", base64_key(tmp_path / "other_ca.pub"), good)
    forged = parse_certificate(certify(tmp_path, other_ca, "-h", name="forged"))
    assert _signed_by("ecdsa-sha2-nistp256", base64_key(tmp_path / "other_ca.pub"), forged)
    assert not _signed_by("ssh-ed25519", ca_blob, dataclasses.replace(forged, ca_key=ca_blob))  # naming a CA is no proof
    with pytest.raises(ValueError, match="truncated"):
        parse_certificate(certify(tmp_path, ca, "-h", name="cut")[:-10])
    with pytest.raises(ValueError, match="not a certificate type"):
        parse_certificate(base64_key(tmp_path / "ca.pub"))


def base64_key(pub: Path) -> bytes:
    return base64.b64decode(pub.read_text().split()[1])
