"""Tests of the real-test-host harness itself (needs root on Linux; never skipped)."""

from __future__ import annotations

import base64
import concurrent.futures
import os
import pwd
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import paramiko
import pytest
import yaml

from . import harness
from .harness import BRIDGE, HostSpec, build_cluster, cleanup_leftovers

NPU_SMI = "#!/bin/sh\necho \"+ npu-smi 23.0.0 fake on $(hostname) args: $*\"\n"


def _leap(text: str) -> str | None:
    m = re.search(r"^Leap status\s*:\s*(.+?)\s*$", text, re.MULTILINE)
    return m.group(1) if m else None


def _stat(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()   # fields from 3 (state) on


def _alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _ident(pid: int) -> tuple[int, str]:
    """(pid, start time): survives PID reuse (pid_max may be small and tests fork a lot)."""
    st = _stat(pid)
    return (pid, st[19] if st else "")


def _still_alive(ident: tuple[int, str]) -> bool:
    st = _stat(ident[0])
    return st is not None and st[0] != "Z" and st[19] == ident[1]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ssh_ok(c: harness.Cluster, host: harness.Host | str, cmd: str = "true") -> str:
    r = c.ssh(host, cmd, timeout=30)
    assert r.returncode == 0, f"ssh {host} {cmd!r}: rc={r.returncode} stderr={r.stderr}"
    return str(r.stdout)


# ---------------------------------------------------------------------------


def test_three_hosts_hostname_mtu_chrony_inventory(cluster_factory: Any, tmp_path: Path) -> None:
    c = cluster_factory(3)
    assert [h.name for h in c.hosts] == ["h01", "h02", "h03"]
    assert len({h.ip for h in c.hosts}) == 3
    server = c.host("h01")
    assert server.spec.chrony == "server" and c.server is server
    for h in c.hosts:
        assert h.ip.startswith(f"10.213.{c.index}.")
        out = _ssh_ok(c, h, "hostname; ip -o link show eth0; ip -o -4 addr show dev eth0")
        lines = out.splitlines()
        assert lines[0] == h.name
        assert re.search(r"\bmtu 9000\b", lines[1]), lines[1]
        assert f"inet {h.ip}/16" in lines[2], lines[2]
    for name in ("h02", "h03"):
        out = _ssh_ok(c, name, "chronyc tracking")
        assert _leap(out) == "Normal", out
        ref = re.search(r"^Reference ID\s*:\s*(\S+)\s*\((.*)\)", out, re.MULTILINE)
        # chronyc names the server when its address resolves (every host's /etc/hosts names every host)
        assert ref and ref.group(2) in (server.ip, server.name), out
        assert ref.group(1) == "".join(f"{int(octet):02X}" for octet in server.ip.split(".")), out
    # the test process reaches the hosts through the bridge, and only through it
    r = subprocess.run(["ip", "-o", "route", "get", c.hosts[0].ip], capture_output=True, text=True, check=False)
    assert f"dev {BRIDGE}" in r.stdout

    inv = c.write_inventory(tmp_path / "inv.yaml", hosts=["h03", "h01"], defaults={"slots": 4},
                            nodes_extra={"h01": {"rank": 0}})
    data = yaml.safe_load(inv.read_text())
    assert data["defaults"] == {
        "user": "root", "port": 22, "identity_file": str(c.client_key), "known_hosts": str(c.known_hosts),
        "interface": "eth0", "slots": 4, "connect_timeout": 5, "command_timeout": 30,
    }
    assert data["nodes"] == [{"host": c.host("h01").ip, "name": "h01", "rank": 0},
                             {"host": c.host("h03").ip, "name": "h03"}]
    full = yaml.safe_load(c.write_inventory(tmp_path / "all.yaml").read_text())
    assert [n["name"] for n in full["nodes"]] == ["h01", "h02", "h03"]


def test_unsynced_host_reports_not_synchronised(cluster_factory: Any) -> None:
    c = cluster_factory([HostSpec("h01"), HostSpec("h02", chrony="unsynced"), HostSpec("h03", chrony="none")])
    out = _ssh_ok(c, "h02", "chronyc -n tracking")
    assert _leap(out) == "Not synchronised", out
    # its (unreachable) server is on the bridge subnet, not anywhere else
    assert c.dead_ip in c.host("h02").chrony_conf.read_text()
    # chrony="none": no chronyd, chronyc cannot reach a daemon
    r = c.ssh("h03", "chronyc -n tracking")
    assert r.returncode != 0 and c.host("h03").chronyd_pid is None


def test_clock_offset_seen_by_ssh_sessions_only(cluster_factory: Any) -> None:
    c = cluster_factory([HostSpec("h01"), HostSpec("h02", clock_offset="+30s")])
    for name, lo, hi in (("h02", 25, 35), ("h01", -2, 2)):
        before = time.time()
        out = _ssh_ok(c, name, "date +%s")
        after = time.time()
        remote = int(out.strip())
        assert lo <= remote - before and remote - after <= hi, (name, remote, before, after)
    # chronyd itself is not affected and still reports synchronised
    assert _leap(_ssh_ok(c, "h02", "chronyc -n tracking")) == "Normal"


def test_jumbo_frame_black_hole_and_small_mtu(cluster_factory: Any) -> None:
    c = cluster_factory([HostSpec("h01"), HostSpec("h02"), HostSpec("h03", bridge_mtu=1500),
                         HostSpec("h04", mtu=1500)])
    h3 = c.host("h03")

    def ping(src: str, dst: harness.Host, size: int, df: bool = True) -> subprocess.CompletedProcess[Any]:
        argv = ["ping", "-n", "-c1", "-W1"] + (["-M", "do"] if df else []) + ["-s", str(size), dst.ip]
        r: subprocess.CompletedProcess[Any] = c.run_on(src, argv, timeout=10)
        return r

    assert ping("h01", c.host("h02"), 8972).returncode == 0          # healthy jumbo path
    assert ping("h01", h3, 8972).returncode != 0                      # black hole, silently dropped
    assert ping("h01", h3, 1400).returncode == 0
    assert ping("h03", c.host("h01"), 8972).returncode != 0           # both directions
    # the management path (test process -> host) still works, also for full-size segments
    out = _ssh_ok(c, "h03", "hostname; head -c 300000 /dev/zero | base64 | wc -c")
    assert out.split() == ["h03", str(len(base64.encodebytes(bytes(300000))))]
    r = c.run_on("h03", "ip -o link show eth0")
    assert "mtu 9000" in r.stdout                                      # the host believes in 9000
    r = subprocess.run(["ip", "-o", "link", "show", h3.veth], capture_output=True, text=True, check=False)
    assert "mtu 1500" in r.stdout and f"master {BRIDGE}" in r.stdout
    # mtu=1500 host: the kernel refuses the big DF packet locally
    assert "mtu 1500" in c.run_on("h04", "ip -o link show eth0").stdout
    assert ping("h04", c.host("h01"), 8972).returncode != 0
    assert ping("h04", c.host("h01"), 1400).returncode == 0


def test_ssh_faults(cluster_factory: Any) -> None:
    c = cluster_factory([
        HostSpec("h01"),
        HostSpec("h02", authorize_key=False),
        HostSpec("h03", known_host=False),
        HostSpec("h04", sshd=False),
    ])
    assert _ssh_ok(c, "h01", "hostname").strip() == "h01"

    r = c.ssh("h02", "true")
    assert r.returncode == 255 and "Permission denied" in r.stderr, r.stderr
    assert c.host("h02").authorized_keys.read_text() != c.client_key.with_suffix(".pub").read_text()

    r = c.ssh("h03", "true")
    assert r.returncode == 255 and "Host key verification failed" in r.stderr, r.stderr
    assert c.host("h03").ip not in c.known_hosts.read_text()
    # ... while the key in known_hosts_all is the right one
    r = c.ssh("h03", "hostname", known_hosts=c.known_hosts_all)
    assert r.returncode == 0 and r.stdout.strip() == "h03", r.stderr

    r = c.ssh("h04", "true")
    assert r.returncode == 255 and "Connection refused" in r.stderr, r.stderr
    assert c.host("h04").sshd_pid is None


def test_sshd_config_defaults_and_extra(cluster_factory: Any) -> None:
    c = cluster_factory([HostSpec("h01"),
                         HostSpec("h02", sshd_config_extra=["MaxStartups 2:50:4", "ClientAliveInterval 7"],
                                  env={"ASCT_MARK": "a b"})])

    def effective(h: str) -> str:
        r = c.run_on(h, [harness.SSHD_BIN, "-T", "-f", str(c.host(h).sshd_config)])
        assert r.returncode == 0, r.stderr
        return str(r.stdout)

    t1, t2 = effective("h01"), effective("h02")
    assert "maxstartups 10:30:100" in t1 and "passwordauthentication no" in t1 and "usepam no" in t1
    assert "maxstartups 2:50:4" in t2 and "clientaliveinterval 7" in t2
    assert _ssh_ok(c, "h02", 'echo "[$ASCT_MARK]"').strip() == "[a b]"
    assert _ssh_ok(c, "h01", 'echo "[${ASCT_MARK-}]"').strip() == "[]"


def test_tools_on_path_only_where_given(cluster_factory: Any) -> None:
    c = cluster_factory([HostSpec("h01", tools={"npu-smi": NPU_SMI}), HostSpec("h02")])
    out = _ssh_ok(c, "h01", "command -v npu-smi; npu-smi info -l")
    assert out.splitlines() == [f"{harness.TOOLS_DIR}/npu-smi", "+ npu-smi 23.0.0 fake on h01 args: info -l"]
    # also for a login shell (profile resets PATH) and via run_on
    assert "fake on h01" in _ssh_ok(c, "h01", "bash -lc 'npu-smi'")
    assert "fake on h01" in c.run_on("h01", "npu-smi").stdout
    r = c.ssh("h02", "npu-smi info")
    assert r.returncode == 127 and "not found" in r.stderr, (r.returncode, r.stderr)
    assert not os.path.exists(os.path.join(harness.TOOLS_DIR, "npu-smi"))   # root fs untouched


def test_files_are_per_host(cluster_factory: Any) -> None:
    target = "/etc/hccn.conf"
    deep = "/usr/local/Ascend/driver/version.info"
    # an empty placeholder of a concurrent harness user does not count as existing
    placeholders = harness._registry_load()
    existed = os.path.exists(target) and target not in placeholders
    before = Path(target).read_bytes() if existed else None
    deep_root = "/usr/local/Ascend"
    deep_existed = os.path.exists(deep_root) and deep_root not in placeholders
    c = cluster_factory([
        HostSpec("h01", files={target: "address_0=192.168.100.1\n", deep: b"Version=23.0.0\n"}),
        HostSpec("h02", files={target: "address_0=192.168.100.2\n", "/root/.asct_note": "mine\n"}),
        HostSpec("h03"),
    ])
    assert _ssh_ok(c, "h01", f"cat {target}") == "address_0=192.168.100.1\n"
    assert _ssh_ok(c, "h02", f"cat {target}") == "address_0=192.168.100.2\n"
    assert _ssh_ok(c, "h03", f"cat {target}") == ((before or b"").decode() if existed else "")
    assert _ssh_ok(c, "h01", f"cat {deep}") == "Version=23.0.0\n"
    assert _ssh_ok(c, "h02", "cat ~/.asct_note") == "mine\n"
    assert c.ssh("h01", "cat ~/.asct_note").returncode != 0           # private home per host
    # the root namespace never sees the content
    if existed:
        assert Path(target).read_bytes() == before
    else:
        assert Path(target).read_bytes() == b""                        # empty placeholder (mount target)
    assert not os.path.exists("/root/.asct_note")
    c.teardown()
    # placeholders are released; they are gone unless a concurrent test process uses them too
    reg = harness._registry_load()
    assert all(c.index not in users for users in reg.values()), reg
    if existed:
        assert Path(target).read_bytes() == before
    else:
        assert not os.path.exists(target) or reg.get(target), reg
    if not deep_existed:
        assert not os.path.exists(deep_root) or reg.get(deep_root), reg


def test_shared_home_hosts_run_stock_shell_start_up_files(cluster_factory: Any) -> None:
    """private_home=False shares the machine's /root (its files, the venv's Python under ~/.pyenv), not its ~/.bashrc:
    a machine's pyenv init there ran `pyenv rehash` in every SSH session, which waits 60 s on a lock file a killed
    session left behind (CI once stalled every command of the later tests that way)."""
    home = Path(pwd.getpwuid(0).pw_dir)
    shared = home / f".asct-shared-{os.getpid()}"
    shared.write_text("the machine's\n")
    before = {d: (home / d).read_bytes() for d in (".bashrc", ".profile") if (home / d).is_file()}
    try:
        c = cluster_factory([HostSpec("h01", private_home=False)])
        assert _ssh_ok(c, "h01", f"cat ~/{shared.name}") == "the machine's\n"
        skel = Path("/usr/share/base-files")
        stock = {".bashrc": skel / "dot.bashrc", ".profile": skel / "dot.profile"}
        for dot, source in stock.items():
            if (home / dot).is_file():
                assert _ssh_ok(c, "h01", f"cat ~/{dot}") == (source.read_text() if source.exists() else ""), dot
        # what a machine's ~/.bashrc sets (pyenv init: PYENV_SHELL) is not in the session
        assert _ssh_ok(c, "h01", "echo ${PYENV_SHELL-none}").strip() == "none"
        # the machine's own files are left as they were
        assert {d: (home / d).read_bytes() for d in stock if (home / d).is_file()} == before
    finally:
        shared.unlink()


def test_stop_and_start_sshd(cluster_factory: Any) -> None:
    c = cluster_factory(2)
    h2 = c.host("h02")
    old_pid = h2.sshd_pid
    assert old_pid and _alive(old_pid)
    old_ident = _ident(old_pid)
    # an open session survives stopping the listener (like systemctl stop ssh)
    client = paramiko.SSHClient()
    client.load_host_keys(str(c.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(h2.ip, username="root", key_filename=str(c.client_key), look_for_keys=False,
                   allow_agent=False, timeout=10)
    try:
        c.stop_sshd(h2)
        assert h2.sshd_pid is None and not _still_alive(old_ident)
        r = c.ssh(h2, "true")
        assert r.returncode == 255 and "Connection refused" in r.stderr, r.stderr
        _, stdout, _ = client.exec_command("hostname", timeout=10)
        assert stdout.read().decode().strip() == "h02"
    finally:
        client.close()
    assert _ssh_ok(c, "h01", "hostname").strip() == "h01"
    c.start_sshd(h2)
    assert h2.sshd_pid and h2.sshd_pid != old_pid
    assert _ssh_ok(c, h2, "hostname").strip() == "h02"


def test_paramiko_exec_and_sftp(cluster_factory: Any, tmp_path: Path) -> None:
    c = cluster_factory(2)
    h = c.host("h02")
    client = paramiko.SSHClient()
    client.load_host_keys(str(c.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(h.ip, username="root", key_filename=str(c.client_key), look_for_keys=False,
                   allow_agent=False, timeout=10)
    try:
        _, stdout, _ = client.exec_command("hostname && chronyc -n tracking", timeout=10)
        out = stdout.read().decode()
        assert stdout.channel.recv_exit_status() == 0
        assert out.splitlines()[0] == "h02" and _leap(out) == "Normal"
        src = tmp_path / "payload.txt"
        src.write_text("hello over sftp\n")
        with client.open_sftp() as sftp:
            sftp.put(str(src), "/tmp/asct-sftp-payload.txt")
            assert sftp.stat("/tmp/asct-sftp-payload.txt").st_size == src.stat().st_size
            sftp.remove("/tmp/asct-sftp-payload.txt")
    finally:
        client.close()


def test_two_clusters_coexist(cluster_factory: Any) -> None:
    a = cluster_factory(2)
    b = cluster_factory(2)
    assert a.index != b.index
    assert {h.ip for h in a.hosts}.isdisjoint({h.ip for h in b.hosts})
    assert _ssh_ok(a, "h01", "hostname").strip() == "h01"
    a_macs = {c_out.strip() for c_out in (a.run_on(h, "cat /sys/class/net/eth0/address").stdout for h in a.hosts)}
    neigh = subprocess.run(["ip", "neigh", "show", "dev", BRIDGE], capture_output=True, text=True, check=True).stdout
    assert any(mac in neigh for mac in a_macs), neigh       # the root namespace has ARP entries for a's hosts
    a.teardown()
    assert os.path.exists(f"/sys/class/net/{BRIDGE}")        # still used by b
    # ... and the entries are gone, so a later cluster reusing a's index is reachable at once
    neigh = subprocess.run(["ip", "neigh", "show", "dev", BRIDGE], capture_output=True, text=True, check=True).stdout
    assert not any(mac in neigh for mac in a_macs), neigh
    # the bridge MAC is fixed (a bridge otherwise takes the lowest port MAC: hosts' ARP entries go stale)
    assert Path(f"/sys/class/net/{BRIDGE}/address").read_text().strip() == harness.BRIDGE_MAC
    assert _ssh_ok(b, "h02", "hostname").strip() == "h02"
    assert _leap(_ssh_ok(b, "h02", "chronyc -n tracking")) == "Normal"


def test_teardown_leaves_nothing(cluster_factory: Any) -> None:
    c = cluster_factory([HostSpec("h01"), HostSpec("h02", tools={"npu-smi": NPU_SMI})])
    # strays: a process started with run_on-style nsenter and an ssh session that never ends
    stray = subprocess.Popen(c.nsenter_argv("h01") + ["sleep", "1000"])
    session = subprocess.Popen(c.ssh_argv("h02", "sleep 1000"), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        if any(_cmdline(p) == "sleep 1000"
               for p in harness._pids_in_netns([c.host("h02").ns])[c.host("h02").ns] if _alive(p)):
            break
        time.sleep(0.05)
    pids = [p for h in c.hosts for p in (h.holder_pid, h.sshd_pid, h.chronyd_pid)] + [stray.pid]
    assert all(_alive(p) for p in pids)
    idents = [_ident(p) for p in pids]
    ns_pids = [p for lst in harness._pids_in_netns([h.ns for h in c.hosts]).values() for p in lst]
    idents += [_ident(p) for p in ns_pids]
    assert len(ns_pids) >= len(pids) + 1
    names = [h.ns for h in c.hosts]
    veths = [h.veth for h in c.hosts]
    workdir = str(c.workdir)
    # even when a namespace's name vanished behind the harness's back, its processes are found
    subprocess.run(["ip", "netns", "del", c.host("h02").ns], check=True)

    c.teardown()
    c.teardown()  # idempotent
    stray.wait(timeout=5)
    try:
        session.wait(timeout=10)      # the client (root namespace) sees the connection die
    except subprocess.TimeoutExpired:
        session.kill()
        session.wait()
    assert not [i for i in idents if _still_alive(i)]
    assert not set(names) & set(os.listdir("/run/netns"))
    assert not set(veths) & set(os.listdir("/sys/class/net"))
    # last cluster gone -> bridge gone (unless another process's clusters still use it)
    assert not os.path.exists(f"/sys/class/net/{BRIDGE}") or os.listdir(f"/sys/class/net/{BRIDGE}/brif")
    for p in os.listdir("/proc"):
        if p.isdigit() and _alive(int(p)):
            cmd = _cmdline(int(p))
            assert workdir not in cmd, f"process {p} survived teardown: {cmd}"
            try:
                fds = [os.readlink(f"/proc/{p}/fd/{fd}") for fd in os.listdir(f"/proc/{p}/fd")]
            except OSError:
                continue
            assert not [f for f in fds if f.startswith(workdir)], f"process {p} ({cmd}) still has files of the cluster open"
    assert harness._LIVE == {}


def test_cleanup_leftovers_removes_only_harness_names(tmp_path: Path) -> None:
    k = _free_index(220)
    leftover_ns, leftover_veth, foreign = f"asct-c{k}-h01", f"asct{k}v1", f"asct-keep-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", leftover_ns], check=True)
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        subprocess.run(["ip", "link", "add", leftover_veth, "type", "veth", "peer", "name", "eth0",
                        "netns", leftover_ns], check=True)
        orphan = subprocess.Popen(["ip", "netns", "exec", leftover_ns, "sleep", "1000"], start_new_session=True)
        deadline = time.time() + 5
        while not harness._pids_in_netns([leftover_ns])[leftover_ns] and time.time() < deadline:
            time.sleep(0.02)
        cleanup_leftovers()
        orphan.wait(timeout=5)
        assert orphan.returncode == -9
        assert leftover_ns not in os.listdir("/run/netns")
        assert leftover_veth not in os.listdir("/sys/class/net")
        assert foreign in os.listdir("/run/netns")      # not a harness name: left alone
    finally:
        subprocess.run(["ip", "netns", "del", foreign], check=False)
        subprocess.run(["ip", "netns", "del", leftover_ns], stderr=subprocess.DEVNULL, check=False)


def _free_index(start: int) -> int:
    for k in range(start, harness.MAX_CLUSTER_INDEX + 1):
        fd = harness._try_lock_index(k)
        if fd is not None:
            os.close(fd)
            return k
    raise AssertionError("no free cluster index")


def test_refuses_cluster_whose_addresses_do_not_route_via_bridge(tmp_path: Path) -> None:
    k = _free_index(200)
    bad_ip = f"10.213.{k}.12"
    subprocess.run(["ip", "route", "add", "blackhole", f"{bad_ip}/32"], check=True)
    try:
        with pytest.raises(RuntimeError, match="do not route via"):
            build_cluster(2, workdir=tmp_path / "c", index=k)
    finally:
        subprocess.run(["ip", "route", "del", "blackhole", f"{bad_ip}/32"], check=True)
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"asct-c{k}-")]
    assert not [n for n in os.listdir("/sys/class/net") if n.startswith(f"asct{k}v")]
    assert harness._LIVE == {}


def test_64_hosts(cluster_factory: Any) -> None:
    c = cluster_factory(64)
    assert len(c.hosts) == 64 and len({h.ip for h in c.hosts}) == 64
    assert c.build_seconds < 30, c.build_seconds

    def one(h: harness.Host) -> tuple[str, int, str, str]:
        r = c.ssh(h, "hostname", timeout=60)
        return h.name, r.returncode, r.stdout.strip(), r.stderr

    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as ex:
        results = list(ex.map(one, c.hosts))
    bad = [r for r in results if r[1] != 0 or r[2] != r[0]]
    assert not bad, bad[:5]


SIGNALLED = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.cluster.harness import HostSpec, build_cluster, teardown_on_signals
teardown_on_signals()
c = build_cluster([HostSpec("h01", chrony="none")], workdir=__import__("pathlib").Path(sys.argv[2]), wait_chrony=False)
print(c.hosts[0].ns, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_pytest_ended_by_a_signal_removes_its_hosts_first(tmp_path: Path, signame: str) -> None:
    """A CI timeout or scripts/test.sh stopping a lane sends SIGTERM (a closed terminal SIGHUP): no fixture finalizer
    runs then, so the harness tears its clusters down in the handler, and the process still ends by that signal."""
    import signal

    repo = Path(__file__).resolve().parents[2]
    child = subprocess.Popen([os.environ.get("PYTHON", __import__("sys").executable), "-c", SIGNALLED, str(repo),
                              str(tmp_path / "c")], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        ns = child.stdout.readline().strip()
        assert ns.startswith("asct-c") and ns in os.listdir("/run/netns"), ns
        child.send_signal(getattr(signal, signame))
        time.sleep(0.05)
        child.send_signal(getattr(signal, signame))  # a second one (a lane's process group, then scripts/test.sh) is no cut
        assert child.wait(timeout=60) == -getattr(signal, signame)
        assert ns not in os.listdir("/run/netns")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        cleanup_leftovers()  # whatever a failed run of this test left
