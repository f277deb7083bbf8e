"""Host keys found where `ssh NODE true` finds them (issue #29), against real sshds.

Every case runs the real client first, `ssh -F CONFIG -o BatchMode=yes NODE true`, as the control: ascendctl must
connect exactly where it does and refuse exactly where it refuses. The inventory names the same CONFIG
(`ssh_config`, which is read alone, as `-F`) and sets no `known_hosts`, so the ssh config decides where keys are.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec, build_cluster

runner = CliRunner()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """h01..h03; h03's sshd also offers a host certificate for its address, signed by `workdir/ca` (valid now)."""
    workdir = tmp_path_factory.mktemp("kh")
    certificate = workdir / "hosts" / "h03" / "ssh_host_ed25519_key-cert.pub"  # what ssh-keygen -s writes
    built = build_cluster([HostSpec("h01", chrony="none"), HostSpec("h02", chrony="none"),
                           HostSpec("h03", chrony="none", sshd_config_extra=[f"HostCertificate {certificate}"])],
                          workdir=workdir, wait_chrony=False)
    try:
        h03 = built.host("h03")
        for name in ("ca", "other_ca"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(workdir / name)], check=True)
        subprocess.run(["ssh-keygen", "-q", "-s", str(workdir / "ca"), "-h", "-I", "h03", "-n", h03.ip, "-V", "-5m:+1h",
                        str(h03.host_key_pub)], check=True)
        assert certificate.exists()
        built.stop_sshd(h03)
        built.start_sshd(h03)  # now with the certificate
        yield built
    finally:
        built.teardown()


def ca_key(cluster: Cluster, name: str = "ca") -> str:
    return (cluster.workdir / f"{name}.pub").read_text().split(" ", 2)[1]


def key_of(cluster: Cluster, host: str) -> str:
    """`ssh-ed25519 BASE64` of a host's real key."""
    ip = cluster.host(host).ip
    return next(line.split(" ", 1)[1] for line in cluster.known_hosts_all.read_text().splitlines() if line.startswith(ip + " "))


def setup(cluster: Cluster, tmp_path: Path, config: str, nodes: list[str]) -> tuple[Path, Path]:
    """An ssh config (`config` first, then what every case shares) and an inventory that uses it."""
    path = tmp_path / "ssh_config"
    path.write_text(config + f"\nHost *\n  User root\n  IdentityFile {cluster.client_key}\n  IdentitiesOnly yes\n"
                    "  UpdateHostKeys no\n  ConnectTimeout 5\n  CheckHostIP no\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(json.dumps({"defaults": {"ssh_config": str(path), "connect_retries": 0}, "nodes": nodes}))
    return path, inventory


def ssh_ok(config: Path, node: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", node, "true"], capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)


def ascendctl(inventory: Path, *flags: str) -> dict[str, dict[str, Any]]:
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--json", *flags, "--", "true"], catch_exceptions=False)
    assert "Traceback" not in result.output
    return {n["name"]: n for n in json.loads(result.stdout)["nodes"]}


def test_user_known_hosts_files_of_the_config_and_new_keys_go_to_the_first(cluster: Cluster, tmp_path: Path,
                                                                           hermetic_env: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    h01, h02 = cluster.host("h01").ip, cluster.host("h02").ip
    second.write_text(f"{h01} {key_of(cluster, 'h01')}\n")
    config, inventory = setup(cluster, tmp_path, f"Host *\n  UserKnownHostsFile {first} {second}\n"
                              "  GlobalKnownHostsFile /dev/null", [h01, h02])
    assert ssh_ok(config, h01).returncode == 0 and ssh_ok(config, h02).returncode != 0
    nodes = ascendctl(inventory)
    assert nodes[h01]["status"] == "ok"
    assert nodes[h02]["status"] == "host_key"
    assert nodes[h02]["error"].startswith(f"unknown host key for {h02} (ssh-ed25519 SHA256:")
    assert nodes[h02]["error"].endswith(f"; not in {first}, {second}, /dev/null")
    nodes = ascendctl(inventory, "--accept-new-host-keys")
    assert nodes[h02]["status"] == "ok"
    found = subprocess.run(["ssh-keygen", "-F", h02, "-f", str(first)], capture_output=True, text=True)
    assert found.returncode == 0 and key_of(cluster, "h02") in found.stdout  # recorded where ssh records it
    assert h02 not in second.read_text()
    assert ssh_ok(config, h02).returncode == 0


def test_keys_only_in_the_system_wide_file(cluster: Cluster, tmp_path: Path, hermetic_env: Path) -> None:
    system = tmp_path / "ssh_known_hosts"
    h03 = cluster.host("h03").ip
    system.write_text(f"# system-wide\n{cluster.host('h01').ip},{h03} {key_of(cluster, 'h03')}\n")
    config, inventory = setup(cluster, tmp_path, f"Host *\n  UserKnownHostsFile {tmp_path}/none_here\n"
                              f"  GlobalKnownHostsFile {tmp_path}/missing {system}", [h03])
    assert ssh_ok(config, h03).returncode == 0
    assert ascendctl(inventory)[h03]["status"] == "ok"


def test_an_alias_whose_key_is_under_its_address_and_a_host_key_alias(cluster: Cluster, tmp_path: Path,
                                                                      hermetic_env: Path) -> None:
    known = tmp_path / "known_hosts"
    h01, h02 = cluster.host("h01").ip, cluster.host("h02").ip
    known.write_text(f"{h01} {key_of(cluster, 'h01')}\n"  # alpha's key, under its address (as ssh records it)
                     f"bravo-key {key_of(cluster, 'h02')}\n"  # bravo's, under its HostKeyAlias
                     f"{h02} {key_of(cluster, 'h03')}\n")  # never consulted for charlie: the HostKeyAlias replaces it
    config, inventory = setup(cluster, tmp_path,
                              f"Host alpha\n  HostName {h01}\nHost bravo\n  HostName {h02}\n  HostKeyAlias bravo-key\n"
                              f"Host charlie\n  HostName {h02}\n  HostKeyAlias charlie-key\n"
                              f"Host *\n  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null",
                              ["alpha", "bravo", "charlie"])
    assert [ssh_ok(config, n).returncode == 0 for n in ("alpha", "bravo", "charlie")] == [True, True, False]
    nodes = ascendctl(inventory)
    assert [nodes[n]["status"] for n in ("alpha", "bravo", "charlie")] == ["ok", "ok", "host_key"]
    assert nodes["charlie"]["error"].startswith("unknown host key for charlie-key (ssh-ed25519 ")


def test_a_revoked_key_is_refused_though_another_file_accepts_it(cluster: Cluster, tmp_path: Path,
                                                                 hermetic_env: Path) -> None:
    user, system = tmp_path / "user_kh", tmp_path / "global_kh"
    h03 = cluster.host("h03").ip
    user.write_text(f"{h03} {key_of(cluster, 'h03')}\n")
    system.write_text(f"@revoked * {key_of(cluster, 'h03')}\n")
    config, inventory = setup(cluster, tmp_path, f"Host *\n  UserKnownHostsFile {user}\n  GlobalKnownHostsFile {system}",
                              [h03])
    control = ssh_ok(config, h03)
    assert control.returncode != 0 and "REVOKED" in control.stderr
    for flags in ((), ("--accept-new-host-keys",)):
        node = ascendctl(inventory, *flags)[h03]
        assert node["status"] == "host_key"
        assert node["error"].startswith(f"host key for {h03} is REVOKED (ssh-ed25519 SHA256:")
        assert node["error"].endswith(f"@revoked in {system} line 1; refusing to connect")


def test_a_changed_key_is_refused_naming_every_file_searched(cluster: Cluster, tmp_path: Path, hermetic_env: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    h01 = cluster.host("h01").ip
    first.write_text(f"{cluster.host('h02').ip} {key_of(cluster, 'h02')}\n{h01} {key_of(cluster, 'h02')}\n")
    second.write_text("")
    config, inventory = setup(cluster, tmp_path, f"Host *\n  UserKnownHostsFile {first}\n"
                              f"  GlobalKnownHostsFile {second}", [h01])
    control = ssh_ok(config, h01)
    assert control.returncode != 0 and "HOST IDENTIFICATION HAS CHANGED" in control.stderr
    node = ascendctl(inventory, "--accept-new-host-keys")[h01]
    assert node["status"] == "host_key"
    assert node["error"].startswith(f"host key for {h01} has CHANGED (ssh-ed25519 SHA256:")
    assert node["error"].endswith(f"; refusing to connect ({first} line 2 holds another ssh-ed25519 key; "
                                  f"searched {first}, {second})")
    assert node["hint"] == f"if the node was reinstalled, remove the old key: ssh-keygen -R {h01} -f {first}"


def test_a_host_certificate_signed_by_a_trusted_ca_is_accepted_and_checked(cluster: Cluster, tmp_path: Path,
                                                                          hermetic_env: Path) -> None:
    known = tmp_path / "known_hosts"
    h03 = cluster.host("h03").ip
    known.write_text(f"# CA\n@cert-authority 10.213.*,wrong-name ssh-ed25519 {ca_key(cluster)}\n")
    config, inventory = setup(cluster, tmp_path, f"Host wrong\n  HostName {h03}\n  HostKeyAlias wrong-name\n"
                              f"Host *\n  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null", [h03, "wrong"])
    assert ssh_ok(config, h03).returncode == 0
    wrong = ssh_ok(config, "wrong")  # the certificate names the address, not `wrong-name`
    assert wrong.returncode != 0 and "name is not a listed principal" in wrong.stderr
    nodes = ascendctl(inventory)
    assert nodes[h03]["status"] == "ok"
    assert nodes["wrong"]["status"] == "host_key"
    assert nodes["wrong"]["error"] == (f"host certificate of wrong-name (id 'h03', serial 0, CA of {known} line 2) is "
                                       f"refused: its principals ({h03}) do not name wrong-name")
    # the CA's key @revoked: refused by both, though the @cert-authority line is still there
    known.write_text(known.read_text() + f"@revoked * ssh-ed25519 {ca_key(cluster)}\n")
    assert ssh_ok(config, h03).returncode != 0
    node = ascendctl(inventory, "--accept-new-host-keys")[h03]
    assert node["status"] == "host_key"
    assert node["error"].startswith(f"host key for {h03} is REVOKED (its certificate's CA key, ssh-ed25519 SHA256:")
    assert node["error"].endswith(f"@revoked in {known} line 3; refusing to connect")


def test_a_host_known_only_through_a_cert_authority_that_did_not_sign_its_key_is_refused_saying_so(
        cluster: Cluster, tmp_path: Path, hermetic_env: Path) -> None:
    known = tmp_path / "known_hosts"
    h02, h03 = cluster.host("h02").ip, cluster.host("h03").ip
    known.write_text(f"# CA\n@cert-authority 10.213.* ssh-ed25519 {ca_key(cluster, 'other_ca')}\n")
    config, inventory = setup(cluster, tmp_path, f"Host *\n  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null",
                              [h02, h03])
    assert ssh_ok(config, h02).returncode != 0  # no certificate at all
    assert ssh_ok(config, h03).returncode != 0  # a certificate from another CA
    nodes = ascendctl(inventory)
    for ip in (h02, h03):
        assert nodes[ip]["status"] == "host_key"
        assert nodes[ip]["error"].startswith(f"{ip} is known only through @cert-authority ({known} line 2), but it "
                                             "offered no host certificate signed by that CA (ssh-ed25519 SHA256:")


def test_an_expired_host_certificate_is_refused_by_both_saying_when_it_expired(cluster: Cluster, tmp_path: Path,
                                                                               hermetic_env: Path) -> None:
    h03 = cluster.host("h03")
    certificate = cluster.workdir / "hosts" / "h03" / "ssh_host_ed25519_key-cert.pub"
    valid = certificate.read_bytes()
    try:  # h03 offers a certificate from the trusted CA whose validity ended in 2020
        subprocess.run(["ssh-keygen", "-q", "-s", str(cluster.workdir / "ca"), "-h", "-I", "h03", "-n", h03.ip,
                        "-V", "20200101:20200102", str(h03.host_key_pub)], check=True)
        cluster.stop_sshd(h03)
        cluster.start_sshd(h03)
        known = tmp_path / "known_hosts"
        known.write_text(f"@cert-authority 10.213.* ssh-ed25519 {ca_key(cluster)}\n")
        config, inventory = setup(cluster, tmp_path, f"Host *\n  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null",
                                  [h03.ip])
        refused = ssh_ok(config, h03.ip)
        assert refused.returncode != 0, refused.stderr
        node = ascendctl(inventory)[h03.ip]
        assert node["status"] == "host_key", node
        assert "expired at 2020-01-02" in node["error"], node["error"]  # e.g. "... is refused: it expired at 2020-01-02 ..."
    finally:
        certificate.write_bytes(valid)
        cluster.stop_sshd(h03)
        cluster.start_sshd(h03)
