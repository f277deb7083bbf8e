"""Real-test-host harness: N real "hosts" (network namespaces) on this machine.

Every host is a network namespace joined to a Linux bridge in the root
namespace by a veth pair, with its own hostname (UTS namespace), its own mount
namespace (private /run/chrony, per-host files and tools), a real ``sshd`` and
a real ``chronyd -x`` (never touches the system clock).

Addressing (traffic never leaves this machine; the bridge has no physical
port and IP forwarding is not touched):

* bridge ``asct-br0`` with 10.213.0.1/16 in the root namespace (shared by all
  clusters, created on first use, deleted when the last cluster is torn down);
* cluster ``k`` (1..254) host ``i`` (1..240) is 10.213.k.(10+i)/16;
* 10.213.k.254 is never assigned: it is the unreachable NTP server of
  ``chrony="unsynced"`` hosts and the unreachable nameserver of ``resolver="stalled"`` hosts;
* every host's /etc/hosts names every host of its cluster (``HostSpec.resolver``);
* extra addresses (``HostSpec.extra_addresses``: many SSH endpoints on few hosts) come from
  cluster k's block 10.216.0.0/13 + k*2048 (/21), as /32s on eth0, routed in the root
  namespace via the host's own address (one ARP entry per host, not per address).

Every namespace / interface name starts with ``asct`` so that
:func:`cleanup_leftovers` can find and remove leftovers by name.

Needs root on Linux; see README.md next to this file.
"""

from __future__ import annotations

import dataclasses
import fcntl
import glob
import ipaddress
import json
import os
import pwd
import re
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BRIDGE",
    "BRIDGE_IP",
    "NETWORK",
    "PREFIX",
    "TOOLS_DIR",
    "Cluster",
    "Host",
    "HostSpec",
    "build_cluster",
    "cleanup_leftovers",
    "faketime_library",
    "require_root_linux",
]

# --------------------------------------------------------------------------
# constants

PREFIX = "asct"
BRIDGE = "asct-br0"
BRIDGE_IP = "10.213.0.1"
NETWORK = ipaddress.IPv4Network("10.213.0.0/16")
BRIDGE_MTU = 9000
# Fixed (locally administered) bridge MAC: otherwise the bridge takes the lowest port MAC and
# changes it whenever ports come and go, which leaves stale ARP entries in live hosts.
BRIDGE_MAC = "02:a5:c7:00:00:01"
# The cluster network of hosts given a second NIC (HostSpec.cluster_nic): eth1 on bridge asct-br1,
# 10.214.k.(10+i)/16. The root namespace has no address on it: only the hosts talk there.
CLUSTER_BRIDGE = "asct-br1"
CLUSTER_BRIDGE_MAC = "02:a5:c7:00:00:02"
CLUSTER_NETWORK = ipaddress.IPv4Network("10.214.0.0/16")
HOST_OFFSET = 10            # host i of cluster k -> 10.213.k.(HOST_OFFSET + i)
MAX_HOSTS = 240             # -> last host is .250
MAX_CLUSTER_INDEX = 254
DEAD_SERVER_OCTET = 254     # 10.213.k.254: never assigned to any host
# Extra SSH endpoints (HostSpec.extra_addresses): cluster k owns EXTRA_NETWORK's k-th /21. Hosts hold them as /32s on
# eth0; the root namespace routes them via the host's 10.213 address, so 1,000 endpoints cost 20 ARP entries, not
# 1,000 (the default neighbour table holds 1,024 for the whole machine).
EXTRA_NETWORK = ipaddress.IPv4Network("10.216.0.0/13")
EXTRA_BLOCK = 2048
TOOLS_DIR = "/usr/local/sbin"   # per-host bin dir is bind-mounted over this
CHRONY_RUN_DIR = "/run/chrony"
SSHD_PRIVSEP_DIR = "/run/sshd"
SSHD_BIN = "/usr/sbin/sshd"
# cross-process state: several pytest processes may use the harness at the same time
STATE_DIR = Path("/run/asct-state")
GLOBAL_LOCK = STATE_DIR / "global.lock"          # flock: bridge, veths, placeholders, allocation
PLACEHOLDER_REGISTRY = STATE_DIR / "placeholders.json"   # {path: [cluster index, ...]}
DEFAULT_WORKDIR_PREFIX = "asct-c"
CHRONY_MODES = ("server", "client", "unsynced", "none")
RESOLVER_MODES = ("hosts", "stalled")

_DAEMON_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}
_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,62})$")
_TOOL_RE = re.compile(r"^[A-Za-z0-9._+-]+$")

# exact shapes of the names this harness creates (cleanup_leftovers removes only these, so
# other users of an "asct" prefix on the same machine are left alone)
NETNS_RE = re.compile(rf"^{PREFIX}-c\d+-[A-Za-z0-9.-]+$")
VETH_RE = re.compile(rf"^{PREFIX}\d+[vw]\d+$")

_LOCK = threading.RLock()
_LIVE: dict[int, Cluster] = {}          # cluster index -> live cluster (this process)
_TLS = threading.local()


# --------------------------------------------------------------------------
# data classes


@dataclass
class HostSpec:
    name: str                      # hostname inside, e.g. "h01"
    mtu: int = 9000
    bridge_mtu: int | None = None  # MTU of the bridge-side veth peer (default: mtu)
    sshd: bool = True
    authorize_key: bool = True
    known_host: bool = True
    chrony: str = "client"         # "server" | "client" | "unsynced" | "none"
    clock_offset: str | None = None  # libfaketime FAKETIME value for SSH sessions, e.g. "+30s"
    tools: dict[str, str] = field(default_factory=dict)
    files: dict[str, str | bytes] = field(default_factory=dict)
    sshd_config_extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)   # extra SetEnv for SSH sessions
    # a second NIC, eth1 (MTU 9000), on the cluster network (CLUSTER_BRIDGE); eth0 stays the management NIC
    cluster_nic: bool = False
    cluster_nic_ip: bool = True    # False: eth1 is up but has no IPv4 address
    # root's home directory (/root) is a per-host directory (like on real hosts); it starts with
    # Debian's stock dot.bashrc/dot.profile, so the test machine's ~/.bashrc (pyenv init, ...)
    # does not run in every SSH session. files= targets under /root are written into it.
    # False: /root is the machine's (its files, a Python under ~/.pyenv), but its shell start-up files are the stock
    # ones all the same (mounted over the machine's .bashrc, .profile, .bash_profile, .bash_login where they exist).
    private_home: bool = True
    # more IPv4 addresses on eth0 (sshd listens on all of them): many SSH endpoints from few namespaces
    extra_addresses: int = 0
    # name resolution inside the host: "hosts" (default): an /etc/hosts with every host's name and addresses;
    # "stalled": an /etc/hosts with only localhost and the host itself, and an /etc/resolv.conf whose only
    # nameserver is the cluster's dead address (10.213.k.254, nothing answers): every other lookup stalls.
    # A files= entry for /etc/hosts or /etc/resolv.conf wins over either.
    resolver: str = "hosts"
    # login users besides root (issue #29: a non-root user on the nodes): each gets a line in the host's own /etc/passwd
    # (uid/gid NONROOT_UID + i, shell /bin/sh), a home /home/<name> of its own (0700), and root's authorized keys
    users: tuple[str, ...] = ()


NONROOT_UID = 4200  # uids of HostSpec.users: not in the machine's /etc/passwd, so no file outside the hosts is theirs


@dataclass
class Host:
    spec: HostSpec
    name: str
    ip: str
    ns: str
    holder_pid: int
    workdir: Path
    sshd_pid: int | None = None
    chronyd_pid: int | None = None
    veth: str = ""                 # bridge-side veth name (root namespace)
    cluster_ip: str | None = None  # eth1's address (HostSpec.cluster_nic with cluster_nic_ip)
    index: int = 0                 # 1-based position in the cluster
    port: int = 22
    extra_ips: list[str] = field(default_factory=list)  # HostSpec.extra_addresses, on eth0 as /32
    _holder: subprocess.Popen[Any] | None = field(default=None, repr=False, compare=False)
    _sshd: subprocess.Popen[Any] | None = field(default=None, repr=False, compare=False)
    _chronyd: subprocess.Popen[Any] | None = field(default=None, repr=False, compare=False)
    # open fd of the network namespace: keeps its identity (inode) ours until teardown, so
    # processes in it are found even if its name was removed behind our back
    _ns_fd: int | None = field(default=None, repr=False, compare=False)

    # paths of the per-host artefacts
    @property
    def host_key(self) -> Path:
        return self.workdir / "ssh_host_ed25519_key"

    @property
    def host_key_pub(self) -> Path:
        return self.workdir / "ssh_host_ed25519_key.pub"

    @property
    def authorized_keys(self) -> Path:
        return self.workdir / "authorized_keys"

    @property
    def sshd_config(self) -> Path:
        return self.workdir / "sshd_config"

    @property
    def sshd_log(self) -> Path:
        return self.workdir / "sshd.log"

    @property
    def chrony_conf(self) -> Path:
        return self.workdir / "chrony.conf"

    @property
    def chronyd_log(self) -> Path:
        return self.workdir / "chronyd.log"

    @property
    def chrony_dir(self) -> Path:
        return self.workdir / "chrony"

    @property
    def bin_dir(self) -> Path:
        return self.workdir / "bin"

    @property
    def home_dir(self) -> Path:
        """Per-host directory mounted over /root (when spec.private_home)."""
        return self.workdir / "home"

    @property
    def holder_log(self) -> Path:
        return self.workdir / "holder.log"

    def host_key_line(self, ip: str | None = None) -> str:
        """``<ip> ssh-ed25519 AAAA...`` (``[ip]:port`` when port != 22); `ip`: one of the extra addresses."""
        typ, b64 = self.host_key_pub.read_text().split()[:2]
        ip = ip or self.ip
        addr = ip if self.port == 22 else f"[{ip}]:{self.port}"
        return f"{addr} {typ} {b64}"

    @property
    def addresses(self) -> list[str]:
        """Every address sshd answers on: the host's own, then the extra ones."""
        return [self.ip, *self.extra_ips]


# --------------------------------------------------------------------------
# small helpers


def _tail(path: Path, n: int = 4000) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return f"<{path}: {e}>"
    return data[-n:].decode("utf-8", "replace")


def _ip_batch(lines: Sequence[str], *, force: bool = False, netns: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``ip -batch -`` with the given lines (one ip command each, without 'ip')."""
    if not lines:
        return subprocess.CompletedProcess(["ip"], 0, "", "")
    cmd = ["ip"]
    if netns:
        cmd += ["-n", netns]
    if force:
        cmd.append("-force")
    cmd += ["-batch", "-"]
    p = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, check=False)
    if p.returncode != 0 and not force:
        raise RuntimeError(f"ip -batch failed (rc={p.returncode}): {p.stderr.strip()}\nbatch:\n" + "\n".join(lines))
    return p


def faketime_library() -> str | None:
    """Path of ``libfaketime.so.1`` (Debian package ``libfaketime``) or None."""
    candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        *sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")),
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ]
    for c in candidates:
        if os.path.exists(c):
            return c
    return None


def _ns_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _pids_in_netns(names: Iterable[str], fds: Iterable[tuple[str, int]] = ()) -> dict[str, list[int]]:
    """Equivalent of ``ip netns pids NAME`` for several namespaces in one /proc scan.
    ``fds``: (name, open fd of the namespace) pairs, which also find a namespace whose
    name is gone."""
    keys: dict[tuple[int, int], str] = {}
    for n, fd in fds:
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        keys[(st.st_dev, st.st_ino)] = n
    for n in names:
        k = _ns_key(f"/run/netns/{n}")
        if k is not None:
            keys.setdefault(k, n)
    out: dict[str, list[int]] = {n: [] for n in keys.values()}
    if not keys:
        return out
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if pid == me:
            continue
        k = _ns_key(f"/proc/{d}/ns/net")
        if k is not None and k in keys:
            out[keys[k]].append(pid)
    return out


def _kill_netns_processes(names: Iterable[str], timeout: float = 10.0, fds: Iterable[tuple[str, int]] = ()) -> None:
    """SIGKILL every process inside the given network namespaces (by name, and by open
    namespace fd), until none is left."""
    names = list(names)
    fds = list(fds)
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for lst in _pids_in_netns(names, fds).values() for p in lst]
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes survive SIGKILL in namespaces {names}: {pids}")
        time.sleep(0.02)


def _reap(p: subprocess.Popen[Any] | None, timeout: float = 5.0) -> None:
    if p is None:
        return
    try:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    for s in (p.stdout, p.stderr, p.stdin):
        if s is not None:
            try:
                s.close()
            except OSError:
                pass


def _existing_netns() -> list[str]:
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def _existing_links() -> list[str]:
    try:
        return sorted(os.listdir("/sys/class/net"))
    except FileNotFoundError:
        return []


# --------------------------------------------------------------------------
# placeholders (mount targets created in the root fs because they were missing)


class _global_lock:
    """Process-wide + machine-wide lock (flock on STATE_DIR/global.lock); re-entrant per thread."""

    def __enter__(self) -> _global_lock:
        _LOCK.acquire()
        depth = getattr(_TLS, "depth", 0)
        if depth == 0:
            STATE_DIR.mkdir(parents=True, exist_ok=True)
            fd = os.open(GLOBAL_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            _TLS.fd = fd
        _TLS.depth = depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        _TLS.depth -= 1
        if _TLS.depth == 0:
            os.close(_TLS.fd)        # releases the flock
            _TLS.fd = None
        _LOCK.release()


def _index_lock_path(k: int) -> Path:
    return STATE_DIR / f"c{k}.lock"


def _try_lock_index(k: int) -> int | None:
    """flock the index's lock file; the fd is held for the cluster's life. None if busy
    (a live cluster of this or another process owns the index)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(_index_lock_path(k), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError:
        pass
    return fd


def _registry_load() -> dict[str, list[int]]:
    try:
        data = json.loads(PLACEHOLDER_REGISTRY.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(p): sorted({int(x) for x in v}) for p, v in data.items() if isinstance(v, list)}


def _registry_save(reg: dict[str, list[int]]) -> None:
    if reg:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = PLACEHOLDER_REGISTRY.with_name(PLACEHOLDER_REGISTRY.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({p: sorted(set(v)) for p, v in sorted(reg.items())}))
        os.replace(tmp, PLACEHOLDER_REGISTRY)
    else:
        try:
            PLACEHOLDER_REGISTRY.unlink()
        except FileNotFoundError:
            pass


def _remove_if_placeholder(path: str) -> bool:
    """Remove an empty file / empty dir; return True if gone."""
    p = Path(path)
    try:
        if p.is_symlink():
            return False
        if p.is_dir():
            p.rmdir()            # only if empty
        elif p.is_file():
            if p.stat().st_size != 0:
                return False
            p.unlink()
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _acquire_target(target: str, *, is_dir: bool, owner: int) -> None:
    """Make sure a bind-mount target exists in the root fs.

    Paths the harness has to create (target and missing parents) are recorded in the
    placeholder registry together with the cluster indexes using them; they are removed
    when the last user releases them (see _release_targets)."""
    with _global_lock():
        reg = _registry_load()
        p = Path(target)
        missing = []
        q = p.parent
        while not q.exists():
            missing.append(q)
            q = q.parent
        for d in reversed(missing):
            d.mkdir()
            reg.setdefault(str(d), [])
        if not p.exists():
            if is_dir:
                p.mkdir()
            else:
                p.touch()
            reg.setdefault(str(p), [])
        elif p.is_dir() != is_dir:
            raise RuntimeError(f"bind-mount target {target} exists but is {'a dir' if p.is_dir() else 'not a dir'}")
        for c in [str(p)] + [str(a) for a in p.parents]:
            if c in reg and owner not in reg[c]:
                reg[c].append(owner)
        _registry_save(reg)


def _release_targets(owner: int) -> None:
    """Drop cluster `owner`'s use of placeholders; remove the ones nobody uses any more."""
    with _global_lock():
        reg = _registry_load()
        changed = False
        for path in sorted(reg, key=len, reverse=True):
            users = reg[path]
            if owner in users:
                users.remove(owner)
                changed = True
            if not users:
                _remove_if_placeholder(path)   # gone, or no longer a placeholder: forget it
                del reg[path]
                changed = True
        if changed:
            _registry_save(reg)


# --------------------------------------------------------------------------
# preconditions


def require_root_linux() -> None:
    """Raise RuntimeError (with everything that is missing) unless this is root on Linux
    with all the tools the harness needs."""
    problems: list[str] = []
    if not sys.platform.startswith("linux"):
        problems.append(f"platform is {sys.platform!r}, need Linux")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        problems.append(f"euid is {os.geteuid()}, need root (network namespaces, bridges, bind mounts)")
    for tool in ("ip", "unshare", "nsenter", "mount", "umount", "hostname", "ssh", "ssh-keygen",
                 "chronyd", "chronyc", "ping", "sleep", "sh"):
        if shutil.which(tool, path=_DAEMON_ENV["PATH"] + ":" + os.environ.get("PATH", "")) is None:
            problems.append(f"missing executable {tool!r}")
    if not os.access(SSHD_BIN, os.X_OK):
        problems.append(f"missing {SSHD_BIN} (apt-get install openssh-server)")
    if faketime_library() is None:
        problems.append("missing libfaketime.so.1 (apt-get install libfaketime)")
    if sys.platform.startswith("linux") and not os.path.exists("/proc/self/ns/net"):
        problems.append("kernel without network namespaces (/proc/self/ns/net missing)")
    if problems:
        raise RuntimeError(
            "tests/cluster harness cannot run here (these tests must run as root on Linux; "
            "they are not skipped on purpose):\n  - " + "\n  - ".join(problems)
        )


# --------------------------------------------------------------------------
# cluster


def _normalize_specs(specs: Sequence[HostSpec | str] | int) -> list[HostSpec]:
    if isinstance(specs, int):
        if specs < 1:
            raise ValueError("need at least one host")
        width = max(2, len(str(specs)))
        out = [HostSpec(name=f"h{i:0{width}d}") for i in range(1, specs + 1)]
    else:
        out = [HostSpec(name=s) if isinstance(s, str) else s for s in specs]
        out = [dataclasses.replace(s, tools=dict(s.tools), files=dict(s.files),
                                   sshd_config_extra=list(s.sshd_config_extra), env=dict(s.env))
               for s in out]
    if not out:
        raise ValueError("need at least one host")
    if len(out) > MAX_HOSTS:
        raise ValueError(f"at most {MAX_HOSTS} hosts per cluster")
    if sum(s.extra_addresses for s in out) > len(_extra_pool(1)):
        raise ValueError(f"at most {len(_extra_pool(1))} extra addresses per cluster")
    seen = set()
    for s in out:
        if not isinstance(s, HostSpec):
            raise TypeError(f"not a HostSpec: {s!r}")
        if not _HOSTNAME_RE.match(s.name):
            raise ValueError(f"bad host name {s.name!r}")
        if s.name in seen:
            raise ValueError(f"duplicate host name {s.name!r}")
        seen.add(s.name)
        if s.chrony not in CHRONY_MODES:
            raise ValueError(f"{s.name}: chrony must be one of {CHRONY_MODES}, not {s.chrony!r}")
        if s.resolver not in RESOLVER_MODES:
            raise ValueError(f"{s.name}: resolver must be one of {RESOLVER_MODES}, not {s.resolver!r}")
        for m in (s.mtu, s.bridge_mtu):
            if m is not None and not (68 <= int(m) <= 65535):
                raise ValueError(f"{s.name}: bad MTU {m}")
        for t in s.tools:
            if not _TOOL_RE.match(t):
                raise ValueError(f"{s.name}: bad tool name {t!r}")
        for f in s.files:
            if not f.startswith("/") or f.endswith("/") or "/../" in f or f.endswith("/.."):
                raise ValueError(f"{s.name}: files target must be an absolute file path: {f!r}")
            if f == CHRONY_RUN_DIR or f.startswith(CHRONY_RUN_DIR + "/"):
                raise ValueError(f"{s.name}: {CHRONY_RUN_DIR} is reserved")
        for k, v in s.env.items():
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) or "\n" in str(v):
                raise ValueError(f"{s.name}: bad env {k}={v!r}")
    # default time server: the first host, or the first "client" when the first host has another role
    if not any(s.chrony == "server" for s in out):
        for i, s in enumerate(out):
            if s.chrony == "client":
                out[i] = dataclasses.replace(s, chrony="server")
                break
    return out


def _extra_block(k: int) -> ipaddress.IPv4Network:
    """Cluster k's block of extra addresses (a /21 of EXTRA_NETWORK)."""
    base = int(EXTRA_NETWORK.network_address) + k * EXTRA_BLOCK
    return ipaddress.IPv4Network((base, 32 - (EXTRA_BLOCK - 1).bit_length()))


def _extra_pool(k: int) -> list[str]:
    """The block's usable addresses (no .0 or .255: some tools read those as network/broadcast)."""
    return [str(a) for a in _extra_block(k) if int(a) % 256 not in (0, 255)]


def _index_names(k: int) -> tuple[list[str], list[str]]:
    ns = [n for n in _existing_netns() if n.startswith(f"{PREFIX}-c{k}-") and NETNS_RE.match(n)]
    links = [n for n in _existing_links() if re.match(rf"^{PREFIX}{k}[vw]\d+$", n)]
    return ns, links


def _cleanup_index(k: int) -> list[str]:
    """Remove everything of cluster index k. Caller holds k's index lock (owner is dead)."""
    errors: list[str] = []
    ns, links = _index_names(k)
    try:
        _kill_netns_processes(ns)
    except Exception as e:
        errors.append(str(e))
    batch = [f"link del {n}" for n in links] + [f"netns del {n}" for n in ns]
    if os.path.exists(f"/sys/class/net/{BRIDGE}"):
        batch += [f"route flush root 10.213.{k}.0/24 dev {BRIDGE}", f"neigh flush to 10.213.{k}.0/24 dev {BRIDGE}",
                  f"route flush root {_extra_block(k)} dev {BRIDGE}"]
    _ip_batch(batch, force=True)
    ns, links = _index_names(k)
    if ns or links:
        errors.append(f"could not remove {ns + links}")
    _release_targets(k)
    for d in glob.glob(os.path.join(tempfile.gettempdir(), f"{DEFAULT_WORKDIR_PREFIX}{k}-*")):
        shutil.rmtree(d, ignore_errors=True)
    return errors


def _allocate_index(requested: int | None) -> tuple[int, int]:
    """Pick a free cluster index and lock it; returns (index, lock fd). Leftovers of a dead
    owner of that index are removed first."""
    with _global_lock():
        candidates = [requested] if requested is not None else range(1, MAX_CLUSTER_INDEX + 1)
        if requested is not None and not (1 <= requested <= MAX_CLUSTER_INDEX):
            raise ValueError(f"cluster index must be 1..{MAX_CLUSTER_INDEX}")
        for k in candidates:
            if k in _LIVE:
                continue
            fd = _try_lock_index(k)
            if fd is None:
                continue
            errors = _cleanup_index(k)
            if errors:
                os.close(fd)
                raise RuntimeError(f"cannot reuse cluster index {k}: " + "; ".join(errors))
            return k, fd
        if requested is not None:
            raise RuntimeError(f"cluster index {requested} is in use")
        raise RuntimeError("no free cluster index")


def _ensure_bridge() -> None:
    """Create (or repair) the shared bridge. Caller holds _LOCK."""
    if not os.path.exists(f"/sys/class/net/{BRIDGE}"):
        _ip_batch([
            f"link add {BRIDGE} address {BRIDGE_MAC} type bridge",
            f"link set {BRIDGE} mtu {BRIDGE_MTU} addrgenmode none",
            f"addr add {BRIDGE_IP}/{NETWORK.prefixlen} dev {BRIDGE}",
            f"link set {BRIDGE} up",
        ])
    else:
        try:
            mac = Path(f"/sys/class/net/{BRIDGE}/address").read_text().strip()
        except OSError:
            mac = BRIDGE_MAC
        _ip_batch(([] if mac == BRIDGE_MAC else [f"link set {BRIDGE} address {BRIDGE_MAC}"]) + [
            f"link set {BRIDGE} mtu {BRIDGE_MTU} up",
            f"addr replace {BRIDGE_IP}/{NETWORK.prefixlen} dev {BRIDGE}",
        ])


def _ensure_cluster_bridge() -> None:
    """Create the cluster-network bridge (no address in the root namespace). Caller holds _LOCK."""
    if not os.path.exists(f"/sys/class/net/{CLUSTER_BRIDGE}"):
        _ip_batch([
            f"link add {CLUSTER_BRIDGE} address {CLUSTER_BRIDGE_MAC} type bridge",
            f"link set {CLUSTER_BRIDGE} mtu {BRIDGE_MTU} addrgenmode none",
            f"link set {CLUSTER_BRIDGE} up",
        ])


def _delete_bridge_if_unused() -> None:
    """Delete the shared bridges when no port is left on them (no cluster of any process)."""
    with _global_lock():
        for bridge in (BRIDGE, CLUSTER_BRIDGE):
            if os.path.exists(f"/sys/class/net/{bridge}"):
                try:
                    ports = os.listdir(f"/sys/class/net/{bridge}/brif")
                except FileNotFoundError:
                    ports = []
                if not ports:
                    _ip_batch([f"link del {bridge}"], force=True)


def _route_devs(addrs: Sequence[str]) -> dict[str, str | None]:
    p = _ip_batch([f"route get {a}" for a in addrs], force=True)
    # iproute2 prints "<dst> dev <dev> src ..." (continuation lines start with whitespace)
    found: dict[str, str | None] = {a: None for a in addrs}
    for line in p.stdout.splitlines():
        m = re.match(r"^(?:local |broadcast |unicast )?(\d+\.\d+\.\d+\.\d+)\s.*?\bdev (\S+)", line)
        if m and m.group(1) in found and found[m.group(1)] is None:
            found[m.group(1)] = m.group(2)
    return found


def _path_mtu(spec: HostSpec) -> int:
    return min(spec.mtu, spec.bridge_mtu if spec.bridge_mtu is not None else spec.mtu)


def _sshd_port(spec: HostSpec) -> int:
    port = 22
    for line in spec.sshd_config_extra:
        parts = line.split()
        if len(parts) >= 2 and parts[0].lower() == "port":
            return int(parts[1])
        if parts and parts[0].lower() == "match":
            break
    return port


def _setenv_value(k: str, v: str) -> str:
    s = f"{k}={v}"
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Cluster:
    """A set of hosts built by :func:`build_cluster`. Use as a context manager or call teardown()."""

    def __init__(self, index: int, workdir: Path, owns_workdir: bool, lock_fd: int | None = None):
        self.index = index
        self._lock_fd = lock_fd
        self.hosts: list[Host] = []
        self.workdir = Path(workdir)
        self.client_key = self.workdir / "id_ed25519"
        self.known_hosts = self.workdir / "known_hosts"
        self.known_hosts_all = self.workdir / "known_hosts_all"
        self.unrelated_key = self.workdir / "unrelated_ed25519"
        self.bridge = BRIDGE
        self.bridge_ip = BRIDGE_IP
        self.subnet = str(NETWORK)
        self.dead_ip = f"10.213.{index}.{DEAD_SERVER_OCTET}"
        self.build_seconds: float | None = None
        self._owns_workdir = owns_workdir
        self._torn_down = False
        self._lock = threading.Lock()

    # -- lookup ------------------------------------------------------------
    def __repr__(self) -> str:
        return f"<Cluster index={self.index} hosts={[h.name for h in self.hosts]} workdir={self.workdir}>"

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host {name!r} in cluster {self.index} ({[h.name for h in self.hosts]})")

    def _h(self, host: Host | str) -> Host:
        return self.host(host) if isinstance(host, str) else host

    @property
    def server(self) -> Host | None:
        """The chrony time server of the cluster (first host with chrony == 'server')."""
        for h in self.hosts:
            if h.spec.chrony == "server":
                return h
        return None

    # -- running things ----------------------------------------------------
    def nsenter_argv(self, host: Host | str) -> list[str]:
        h = self._h(host)
        return ["nsenter", "-t", str(h.holder_pid), "-n", "-u", "-m", "--"]

    def run_on(self, host: Host | str, argv: list[str] | str, *, timeout: float = 30,
               input: str | bytes | None = None, text: bool = True, check: bool = False) -> subprocess.CompletedProcess[Any]:
        """Run argv inside the host's network/UTS/mount namespaces (str -> ``sh -c``)."""
        h = self._h(host)
        if isinstance(argv, str):
            argv = ["sh", "-c", argv]
        env = dict(os.environ)
        path = env.get("PATH", "")
        if TOOLS_DIR not in path.split(":"):
            env["PATH"] = TOOLS_DIR + (":" + path if path else "")
        return subprocess.run(self.nsenter_argv(h) + list(argv), capture_output=True, text=text,
                              input=input, timeout=timeout, check=check, env=env)

    def ssh_argv(self, host: Host | str, command: str | None = None, *, user: str = "root",
                 known_hosts: Path | str | None = None, identity: Path | str | None = None,
                 strict: bool = True, connect_timeout: int = 10, options: Sequence[str] = ()) -> list[str]:
        """argv for the real ``ssh`` client (BatchMode, no user/system config)."""
        h = self._h(host)
        argv = [
            "ssh", "-F", "/dev/null",
            "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={known_hosts or self.known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", f"StrictHostKeyChecking={'yes' if strict else 'no'}",
            "-o", "UpdateHostKeys=no",
            "-o", f"ConnectTimeout={connect_timeout}",
            "-o", "IdentitiesOnly=yes",
            "-i", str(identity or self.client_key),
            "-p", str(h.port),
        ]
        for o in options:
            argv += ["-o", o]
        argv.append(f"{user}@{h.ip}")
        if command is not None:
            argv.append(command)
        return argv

    def ssh(self, host: Host | str, command: str, *, timeout: float = 30, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.ssh_argv(host, command, **kw), capture_output=True, text=True, check=False,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    # -- sshd control ------------------------------------------------------
    def stop_sshd(self, host: Host | str, *, kill_sessions: bool = False) -> None:
        """Stop the host's sshd listener (like ``systemctl stop ssh``: open sessions survive
        unless kill_sessions=True)."""
        h = self._h(host)
        p = h._sshd
        if p is not None:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        h._sshd = None
        h.sshd_pid = None
        if kill_sessions:
            fds = [(h.ns, h._ns_fd)] if h._ns_fd is not None else []
            for pid in _pids_in_netns([h.ns], fds).get(h.ns, []):
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip().startswith("sshd"):
                        os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        # wait until the port is closed
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((h.ip, h.port), timeout=0.5):
                    pass
            except OSError:
                return
            time.sleep(0.02)
        raise RuntimeError(f"{h.name}: sshd port {h.port} still open after stop")

    def start_sshd(self, host: Host | str, *, timeout: float = 15) -> None:
        """(Re)start the host's sshd and wait until it accepts TCP connections."""
        h = self._h(host)
        if h._sshd is not None and h._sshd.poll() is None:
            return
        self._spawn_sshd(h)
        _wait_tcp([h], timeout)

    def _spawn_sshd(self, h: Host) -> None:
        log = open(h.sshd_log, "ab")
        try:
            p = subprocess.Popen(self.nsenter_argv(h) + [SSHD_BIN, "-D", "-e", "-f", str(h.sshd_config)],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 env=_DAEMON_ENV, start_new_session=True)
        finally:
            log.close()
        h._sshd = p
        h.sshd_pid = p.pid      # nsenter execs sshd (no fork without -p/-F), so this is sshd

    def _spawn_chronyd(self, h: Host) -> None:
        log = open(h.chronyd_log, "ab")
        try:
            p = subprocess.Popen(self.nsenter_argv(h) + ["chronyd", "-x", "-d", "-u", "root", "-f", str(h.chrony_conf)],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 env=_DAEMON_ENV, start_new_session=True)
        finally:
            log.close()
        h._chronyd = p
        h.chronyd_pid = p.pid

    # -- inventory -----------------------------------------------------------
    def endpoints(self, hosts: Sequence[Host] | None = None) -> list[tuple[str, str]]:
        """(node name, address) of every SSH endpoint: the hosts themselves (`h01`, `h02`, ...), then their extra
        addresses round-robin (`h01-001`, `h02-001`, ..., `h01-002`, ...), so neighbours in the list are on different
        sshds, as neighbouring nodes of a real cluster are."""
        hosts = self.hosts if hosts is None else hosts
        rounds = max((len(h.addresses) for h in hosts), default=0)
        return [(h.name if j == 0 else f"{h.name}-{j:03d}", h.addresses[j]) for j in range(rounds) for h in hosts
                if j < len(h.addresses)]

    def write_inventory(self, path: Path, *, hosts: list[str] | None = None, defaults: dict[str, Any] | None = None,
                        nodes_extra: dict[str, dict[str, Any]] | None = None, every_address: bool = False) -> Path:
        """An inventory of the hosts (or `hosts`); `every_address`: one node per SSH endpoint (see `endpoints`)."""
        import yaml

        def plain(v: Any) -> Any:
            if isinstance(v, Path):
                return str(v)
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [plain(x) for x in v]
            return v

        d: dict[str, Any] = {
            "user": "root",
            "port": 22,
            "identity_file": str(self.client_key),
            "known_hosts": str(self.known_hosts),
            "interface": "eth0",
            "slots": 8,
            "connect_timeout": 5,
            "command_timeout": 30,
        }
        if os.environ.get("ASCT_TRANSPORT"):  # run a real-host suite through another transport (tests/cluster/README.md)
            d["transport"] = os.environ["ASCT_TRANSPORT"]
        d.update(plain(defaults or {}))
        if hosts is not None:
            for n in hosts:
                self.host(n)  # KeyError for unknown names
            wanted = set(hosts)
            selected = [h for h in self.hosts if h.name in wanted]
        else:
            selected = list(self.hosts)
        extra = nodes_extra or {}
        unknown = set(extra) - {h.name for h in self.hosts}
        if unknown:
            raise KeyError(f"nodes_extra for unknown hosts: {sorted(unknown)}")
        nodes = []
        for h in selected:
            node: dict[str, Any] = {"host": h.ip, "name": h.name}
            node.update(plain(extra.get(h.name, {})))
            nodes.append(node)
        if every_address:
            nodes += [{"host": ip, "name": name} for name, ip in self.endpoints(selected)[len(selected):]]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"defaults": d, "nodes": nodes}, sort_keys=False, default_flow_style=False))
        return path

    # -- teardown ------------------------------------------------------------
    def teardown(self) -> None:
        """Kill every process of every host (by pid and by namespace), delete veths and
        namespaces, release placeholders, delete the bridge when no cluster is left.
        Idempotent; raises RuntimeError at the end if something could not be removed."""
        with self._lock:
            if self._torn_down:
                return
            self._torn_down = True
        errors: list[str] = []
        # 1. by pid
        for h in self.hosts:
            for p in (h._sshd, h._chronyd, h._holder):
                if p is not None and p.poll() is None:
                    try:
                        p.kill()
                    except ProcessLookupError:
                        pass
        # 2. by namespace (ssh sessions, run_on leftovers, anything else)
        ns_names = [h.ns for h in self.hosts]
        ns_fds = [(h.ns, h._ns_fd) for h in self.hosts if h._ns_fd is not None]
        try:
            _kill_netns_processes(ns_names, fds=ns_fds)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(str(e))
        for h in self.hosts:
            for p in (h._sshd, h._chronyd, h._holder):
                _reap(p)
            h._sshd = h._chronyd = None
            h.sshd_pid = h.chronyd_pid = None
        # 3. links first (synchronous), then namespaces
        links = set(_existing_links())
        netns = set(_existing_netns())
        batch = [f"link del {name}" for h in self.hosts for name in (h.veth, f"{PREFIX}{self.index}w{h.index}") if name in links]
        batch += [f"netns del {h.ns}" for h in self.hosts if h.ns in netns]
        if os.path.exists(f"/sys/class/net/{BRIDGE}"):
            batch += [f"route del {h.ip}/32 dev {BRIDGE}" for h in self.hosts if _path_mtu(h.spec) < BRIDGE_MTU]
            batch.append(f"neigh flush to 10.213.{self.index}.0/24 dev {BRIDGE}")
            if any(h.extra_ips for h in self.hosts):
                batch.append(f"route flush root {_extra_block(self.index)} dev {BRIDGE}")
        res = _ip_batch(batch, force=True)
        left_links = [h.veth for h in self.hosts if h.veth in set(_existing_links())]
        left_ns = [h.ns for h in self.hosts if h.ns in set(_existing_netns())]
        if left_links or left_ns:
            errors.append(f"could not delete links {left_links} / netns {left_ns}: {res.stderr.strip()}")
        for h in self.hosts:
            if h._ns_fd is not None:
                os.close(h._ns_fd)
                h._ns_fd = None
        # 4. placeholders, bridge
        try:
            _release_targets(self.index)
            _delete_bridge_if_unused()
        except Exception as e:
            errors.append(f"placeholders/bridge: {e}")
        with _LOCK:
            if _LIVE.get(self.index) is self:
                del _LIVE[self.index]
            if self._lock_fd is not None:
                os.close(self._lock_fd)      # the index is free again
                self._lock_fd = None
        # 5. workdir
        if self._owns_workdir and not os.environ.get("ASCT_KEEP_WORKDIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            raise RuntimeError(f"teardown of cluster {self.index} incomplete: " + "; ".join(errors))

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def __del__(self) -> None:  # last resort; fixtures/context managers are the real mechanism
        try:
            if not self._torn_down and self.hosts:
                self.teardown()
        except Exception:
            pass


# --------------------------------------------------------------------------
# build


def _wait_tcp(hosts: Sequence[Host], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(hosts)
    while pending:
        still = []
        for h in pending:
            if h._sshd is None or h._sshd.poll() is not None:
                rc = None if h._sshd is None else h._sshd.returncode
                raise RuntimeError(f"{h.name}: sshd is not running (rc={rc}); log:\n{_tail(h.sshd_log)}")
            try:
                with socket.create_connection((h.ip, h.port), timeout=0.5):
                    pass
            except OSError:
                still.append(h)
        pending = still
        if pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshd not accepting connections after {timeout}s on "
                                   f"{[h.name for h in pending]}; log of {pending[0].name}:\n{_tail(pending[0].sshd_log)}")
            time.sleep(0.02)


_LEAP_RE = re.compile(r"^Leap status\s*:\s*(.+?)\s*$", re.MULTILINE)


def _wait_chrony(cluster: Cluster, hosts: Sequence[Host], timeout: float) -> None:
    """Wait until chronyc answers on every host, and reports 'Leap status : Normal' on
    server/client hosts."""
    deadline = time.monotonic() + timeout
    pending = list(hosts)
    last: dict[str, str] = {}
    while pending:
        procs = []
        for h in pending:
            if h._chronyd is None or h._chronyd.poll() is not None:
                raise RuntimeError(f"{h.name}: chronyd died; log:\n{_tail(h.chronyd_log)}")
            procs.append((h, subprocess.Popen(cluster.nsenter_argv(h) + ["chronyc", "-n", "tracking"],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True, env=_DAEMON_ENV)))
        still = []
        for h, p in procs:
            try:
                out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            last[h.name] = out
            m = _LEAP_RE.search(out or "")
            ok = p.returncode == 0 and m is not None
            if m is not None and ok and h.spec.chrony in ("server", "client"):
                ok = m.group(1) == "Normal"
            if not ok:
                still.append(h)
        pending = still
        if pending:
            if time.monotonic() > deadline:
                h = pending[0]
                raise RuntimeError(f"chrony not ready after {timeout}s on {[x.name for x in pending]}; "
                                   f"{h.name}: chronyc tracking ->\n{last.get(h.name)}\nchronyd log:\n{_tail(h.chronyd_log)}")
            time.sleep(0.1)


def _wait_ready(hosts: Sequence[Host], timeout: float) -> None:
    """Wait for the READY line of every holder script."""
    sel = selectors.DefaultSelector()
    bufs: dict[int, bytes] = {}
    for h in hosts:
        assert h._holder is not None and h._holder.stdout is not None
        sel.register(h._holder.stdout, selectors.EVENT_READ, h)
        bufs[id(h)] = b""
    pending = len(hosts)
    deadline = time.monotonic() + timeout
    try:
        while pending:
            rem = deadline - time.monotonic()
            if rem <= 0:
                left = [key.data.name for key in sel.get_map().values()]
                raise RuntimeError(f"host setup timed out on {left}")
            for key, _ in sel.select(rem):
                h = key.data
                chunk = os.read(key.fd, 4096)
                bufs[id(h)] += chunk
                if not chunk or b"READY\n" in bufs[id(h)]:
                    sel.unregister(key.fileobj)
                    h._holder.stdout.close()
                    pending -= 1
                    if not chunk:
                        h._holder.wait(timeout=5)
                        raise RuntimeError(f"{h.name}: host setup failed (rc={h._holder.returncode}):\n"
                                           f"{_tail(h.holder_log)}")
    finally:
        sel.close()


def _write(path: Path, content: str | bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else bytes(content)
    path.write_bytes(data)
    os.chmod(path, mode)


def _is_executable_content(content: str | bytes) -> bool:
    return (content[:2] == "#!") if isinstance(content, str) else (bytes(content[:2]) == b"#!")


def _sshd_config_text(c: Cluster, h: Host, faketime_lib: str | None) -> str:
    spec = h.spec
    env: dict[str, str] = {}
    if spec.clock_offset:
        if faketime_lib is None:
            raise RuntimeError("clock_offset needs libfaketime (apt-get install libfaketime)")
        env["LD_PRELOAD"] = faketime_lib
        env["FAKETIME"] = spec.clock_offset
    env.update(spec.env)
    # sshd uses the first value of a keyword, and only the first SetEnv line counts, so
    # the user's extra lines come first (they win), SetEnv lines are merged, Match blocks go last.
    head: list[str] = []
    tail: list[str] = []
    extra_setenv: list[str] = []
    in_match = False
    for line in spec.sshd_config_extra:
        words = line.split()
        if words and words[0].lower() == "match":
            in_match = True
        if in_match:
            tail.append(line)
        elif words and words[0].lower() == "setenv":
            extra_setenv += shlex.split(line)[1:]
        else:
            head.append(line)
    setenv = [_setenv_value(k, v) for k, v in env.items()] + [_setenv_value(*s.split("=", 1)) for s in extra_setenv]
    lines = ["# generated by tests/cluster/harness.py", *head,
             # sshd takes at most 16 ListenAddress sockets: a host with extra addresses listens on all of them
             f"ListenAddress {'0.0.0.0' if h.extra_ips else h.ip}",
             f"Port {h.port}",
             f"HostKey {h.host_key}",
             f"PidFile {h.workdir / 'sshd.pid'}",
             f"AuthorizedKeysFile {h.authorized_keys}",
             # a non-root user cannot read the key file inside the test's private work dir: sshd reads it as root
             *([f"AuthorizedKeysCommand /bin/cat {h.authorized_keys}", "AuthorizedKeysCommandUser root"] if spec.users else []),
             "PasswordAuthentication no",
             "KbdInteractiveAuthentication no",
             "PubkeyAuthentication yes",
             "PermitRootLogin prohibit-password",
             "StrictModes no",
             "UsePAM no",
             "UseDNS no",
             "LogLevel VERBOSE",
             "Subsystem sftp internal-sftp"]
    if setenv:
        lines.append("SetEnv " + " ".join(setenv))
    lines += tail
    return "\n".join(lines) + "\n"


def _covering(ips: Sequence[str]) -> list[ipaddress.IPv4Network]:
    """The fewest networks that cover exactly `ips` (ascending, gaps allowed)."""
    nets: list[ipaddress.IPv4Network] = []
    ints = sorted(int(ipaddress.IPv4Address(ip)) for ip in ips)
    start = 0
    for i in range(1, len(ints) + 1):
        if i == len(ints) or ints[i] != ints[i - 1] + 1:
            nets += ipaddress.summarize_address_range(ipaddress.IPv4Address(ints[start]), ipaddress.IPv4Address(ints[i - 1]))
            start = i
    return nets


def _chrony_conf_text(c: Cluster, h: Host, server: Host | None) -> str:
    lines = ["# generated by tests/cluster/harness.py",
             f"pidfile {h.workdir / 'chronyd.pid'}",
             f"bindcmdaddress {CHRONY_RUN_DIR}/chronyd.sock"]
    mode = h.spec.chrony
    if mode == "server":
        lines += ["local stratum 8", f"allow {NETWORK}"]
    elif mode == "client":
        if server is None:  # cannot happen: _normalize_specs promotes a client
            raise RuntimeError("no chrony server in cluster")
        lines += [f"server {server.ip} iburst minpoll -4 maxpoll 0"]
    elif mode == "unsynced":
        # an address on the bridge subnet that no host has: never answers, stays on the bridge
        lines += [f"server {c.dead_ip} iburst minpoll 0 maxpoll 4"]
    return "\n".join(lines) + "\n"


def _etc_hosts_text(hosts: Sequence[Host]) -> str:
    """An /etc/hosts naming every address of these hosts (eth0, eth1, extra addresses), as a cluster's nodes have."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    for h in hosts:
        lines += [f"{ip} {h.name}" for ip in (h.ip, *([h.cluster_ip] if h.cluster_ip else []), *h.extra_ips)]
    return "\n".join(lines) + "\n"


def _stock_dotfiles() -> dict[str, bytes]:
    """root's shell start-up files on a test host: Debian's stock ones (empty where the skeleton is missing); the
    login-shell names a machine may also carry read .profile's stock text."""
    skel = Path("/usr/share/base-files")
    profile = (skel / "dot.profile").read_bytes() if (skel / "dot.profile").exists() else b""
    return {".bashrc": (skel / "dot.bashrc").read_bytes() if (skel / "dot.bashrc").exists() else b"",
            ".profile": profile, ".bash_profile": profile, ".bash_login": profile}


def _holder_script(h: Host, mounts: list[tuple[str, str]]) -> str:
    q = shlex.quote
    ipb = "\n".join([
        "link set lo up",
        "link set eth0 addrgenmode none",
        f"addr add {h.ip}/{NETWORK.prefixlen} dev eth0",
        *(f"addr add {ip}/32 dev eth0" for ip in h.extra_ips),
        "link set eth0 up",
    ] + ([
        "link set eth1 addrgenmode none",
        *([f"addr add {h.cluster_ip}/{CLUSTER_NETWORK.prefixlen} dev eth1"] if h.cluster_ip else []),
        "link set eth1 up",
    ] if h.spec.cluster_nic else []))
    parts = [
        "set -e",
        # drop this mount namespace's copies of /run/netns/* (they would pin other namespaces)
        "umount -l /run/netns 2>/dev/null || true",
        f"hostname {q(h.name)}",
        f"ip -batch - <<'ASCT_EOF'\n{ipb}\nASCT_EOF",
    ]
    for src, dst in mounts:
        parts.append(f"mount --bind {q(src)} {q(dst)}")
    parts += ["echo READY", "exec sleep infinity"]
    return "\n".join(parts) + "\n"


def build_cluster(specs: list[HostSpec] | int, *, workdir: Path | None = None, wait_chrony: bool = True,
                  index: int | None = None, chrony_timeout: float = 30.0, sshd_timeout: float = 20.0) -> Cluster:
    """Build a cluster of real hosts; see the module docstring. ``int n`` -> n default hosts h01..hNN."""
    require_root_linux()
    t0 = time.monotonic()
    specs_n = _normalize_specs(specs)
    faketime_lib = faketime_library()
    with _LOCK:
        k, lock_fd = _allocate_index(index)
        if workdir is None:
            wd = Path(tempfile.mkdtemp(prefix=f"{DEFAULT_WORKDIR_PREFIX}{k}-"))
            owns = True
        else:
            wd = Path(workdir).absolute()
            wd.mkdir(parents=True, exist_ok=True)
            owns = False
        cluster = Cluster(k, wd, owns, lock_fd)
        _LIVE[k] = cluster
    try:
        _build(cluster, specs_n, faketime_lib, wait_chrony, chrony_timeout, sshd_timeout)
    except BaseException:
        try:
            cluster.teardown()
        except Exception:
            pass
        raise
    cluster.build_seconds = time.monotonic() - t0
    return cluster


def _keygen(path: Path, comment: str) -> subprocess.Popen[bytes]:
    for p in (path, path.with_name(path.name + ".pub")):
        if p.exists():
            p.unlink()
    return subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _build(c: Cluster, specs: list[HostSpec], faketime_lib: str | None, wait_chrony: bool,
           chrony_timeout: float, sshd_timeout: float) -> None:
    k = c.index
    # ---- plan hosts
    for i, s in enumerate(specs, start=1):
        hd = c.workdir / "hosts" / s.name
        if hd.exists():
            shutil.rmtree(hd)
        hd.mkdir(parents=True)
        c.hosts.append(Host(spec=s, name=s.name, ip=f"10.213.{k}.{HOST_OFFSET + i}", ns=f"{PREFIX}-c{k}-{s.name}",
                            holder_pid=0, workdir=hd, veth=f"{PREFIX}{k}v{i}", index=i, port=_sshd_port(s),
                            cluster_ip=f"10.214.{k}.{HOST_OFFSET + i}" if s.cluster_nic and s.cluster_nic_ip else None))
    hosts = c.hosts
    server = c.server
    pool = iter(_extra_pool(k))
    for h in hosts:
        h.extra_ips = [next(pool) for _ in range(h.spec.extra_addresses)]

    # ---- keys (in parallel, while the network is being set up)
    keygens = [_keygen(c.client_key, f"asct cluster {k} client"),
               _keygen(c.unrelated_key, f"asct cluster {k} unrelated")]
    keygens += [_keygen(h.host_key, f"asct {h.name}") for h in hosts]

    # ---- root-fs prerequisites (mount targets, privsep dir)
    _acquire_target(CHRONY_RUN_DIR, is_dir=True, owner=k)
    _acquire_target(SSHD_PRIVSEP_DIR, is_dir=True, owner=k)
    if any(h.spec.tools for h in hosts):
        _acquire_target(TOOLS_DIR, is_dir=True, owner=k)
    home = pwd.getpwuid(0).pw_dir.rstrip("/") or "/root"

    def overlay(h: Host, target: str) -> Path | None:
        """Per-host file for targets inside a directory that is itself bind-mounted per host."""
        for mounted, src in ((home, h.home_dir if h.spec.private_home else None),
                             (TOOLS_DIR, h.bin_dir if h.spec.tools else None)):
            if src is not None and target.startswith(mounted + "/"):
                return src / target[len(mounted) + 1:]
        return None

    for target in sorted({f for h in hosts for f in h.spec.files if overlay(h, f) is None}):
        _acquire_target(target, is_dir=False, owner=k)
    for user in sorted({u for h in hosts for u in h.spec.users}):
        _acquire_target(f"/home/{user}", is_dir=True, owner=k)
    etc_hosts = _etc_hosts_text(hosts)

    # ---- per-host files
    mounts: dict[str, list[tuple[str, str]]] = {}
    dotfiles = _stock_dotfiles()
    for h in hosts:
        h.chrony_dir.mkdir()
        os.chmod(h.chrony_dir, 0o770)
        m = [(str(h.chrony_dir), CHRONY_RUN_DIR)]
        if h.spec.private_home:
            h.home_dir.mkdir()
            os.chmod(h.home_dir, 0o700)
            for dot in (".bashrc", ".profile"):
                (h.home_dir / dot).write_bytes(dotfiles[dot])
            m.append((str(h.home_dir), home))
        else:
            # the machine's /root is the host's, but not its shell start-up files: a test host must not run the test
            # machine's ~/.bashrc in every SSH session (pyenv's `rehash` there waits up to 60 s on a lock file that a
            # session killed by an earlier test left behind, and then every command of the test stalls)
            for dot, content in dotfiles.items():
                if os.path.isfile(os.path.join(home, dot)) and f"{home}/{dot}" not in h.spec.files:
                    source = h.workdir / f"home_{dot}"
                    _write(source, content, 0o644)
                    m.append((str(source), f"{home}/{dot}"))
        if h.spec.tools:
            h.bin_dir.mkdir()
            for tool, script in h.spec.tools.items():
                _write(h.bin_dir / tool, script, 0o755)
            m.append((str(h.bin_dir), TOOLS_DIR))
        if h.spec.users:
            passwd = Path("/etc/passwd").read_text(encoding="utf-8").rstrip("\n").split("\n")
            for i, user in enumerate(h.spec.users):
                uid = NONROOT_UID + i
                passwd.append(f"{user}:*:{uid}:{uid}::/home/{user}:/bin/sh")
                user_home = h.workdir / f"home-{user}"
                user_home.mkdir()
                os.chown(user_home, uid, uid)
                os.chmod(user_home, 0o700)
                m.append((str(user_home), f"/home/{user}"))
            source = h.workdir / "etc_passwd"
            _write(source, "\n".join(passwd) + "\n", 0o644)
            m.append((str(source), "/etc/passwd"))
        resolver = {"/etc/hosts": etc_hosts}
        if h.spec.resolver == "stalled":
            resolver = {"/etc/hosts": _etc_hosts_text([h]), "/etc/resolv.conf": f"nameserver {c.dead_ip}\n"}
        for target, content in resolver.items():
            if target not in h.spec.files and os.path.exists(target):  # files= wins; never a placeholder in /etc
                source = h.workdir / target.replace("/", "_")
                _write(source, content, 0o644)
                m.append((str(source), target))
        for j, (target, content) in enumerate(sorted(h.spec.files.items())):
            mode = 0o755 if _is_executable_content(content) else 0o644
            direct = overlay(h, target)
            if direct is not None:
                _write(direct, content, mode)
                continue
            source = h.workdir / "files" / f"{j:03d}{target.replace('/', '_')}"
            _write(source, content, mode)
            m.append((str(source), target))
        mounts[h.name] = m
        h.chrony_conf.write_text(_chrony_conf_text(c, h, server))
        h.sshd_config.write_text(_sshd_config_text(c, h, faketime_lib))

    # ---- network: bridge, namespaces, veth pairs (one ip -batch)
    with _global_lock():
        _ensure_bridge()
        if any(h.spec.cluster_nic for h in hosts):
            _ensure_cluster_bridge()
        # a cluster index is reused (by this or another process) while the bridge stays up:
        # forget the root namespace's ARP entries for the old hosts' MACs
        batch = [f"neigh flush to 10.213.{k}.0/24 dev {BRIDGE}"]
        for h in hosts:
            bmtu = h.spec.bridge_mtu if h.spec.bridge_mtu is not None else h.spec.mtu
            batch += [
                f"netns add {h.ns}",
                f"link add {h.veth} mtu {bmtu} type veth peer name eth0 mtu {h.spec.mtu} netns {h.ns}",
                f"link set {h.veth} master {BRIDGE} addrgenmode none up",
            ]
            if h.spec.cluster_nic:
                batch += [
                    f"link add {PREFIX}{k}w{h.index} mtu {BRIDGE_MTU} type veth peer name eth1 mtu {BRIDGE_MTU} netns {h.ns}",
                    f"link set {PREFIX}{k}w{h.index} master {CLUSTER_BRIDGE} addrgenmode none up",
                ]
            if _path_mtu(h.spec) < BRIDGE_MTU:
                # the test process plays the management node: its path to the host has the
                # host's path MTU (TCP MSS follows), so SSH works; host<->host stays a black hole
                batch.append(f"route replace {h.ip}/32 dev {BRIDGE} src {BRIDGE_IP} mtu {_path_mtu(h.spec)}")
        for h in hosts:  # after the veths: a gateway must be on a link that is up
            batch += [f"route replace {net} via {h.ip} dev {BRIDGE} src {BRIDGE_IP}" for net in _covering(h.extra_ips)]
        _ip_batch(batch)
        for h in hosts:
            h._ns_fd = os.open(f"/run/netns/{h.ns}", os.O_RDONLY | os.O_CLOEXEC)

    # ---- safety: every address we will talk to must route via the bridge
    addrs = [h.ip for h in hosts] + [c.dead_ip] + [ip for h in hosts for ip in h.extra_ips[:1] + h.extra_ips[-1:]]
    devs = _route_devs(addrs)
    bad = {a: d for a, d in devs.items() if d != BRIDGE}
    if bad:
        raise RuntimeError(f"refusing to use cluster {k}: these addresses do not route via {BRIDGE} "
                           f"in the root namespace: {bad}")

    # ---- holders: one per host, own UTS + mount namespace inside the netns
    for h in hosts:
        log = open(h.holder_log, "wb")
        try:
            h._holder = subprocess.Popen(
                ["ip", "netns", "exec", h.ns, "unshare", "-u", "-m", "--propagation", "private",
                 "sh", "-c", _holder_script(h, mounts[h.name])],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=_DAEMON_ENV,
                start_new_session=True)
        finally:
            log.close()
        h.holder_pid = h._holder.pid   # ip netns exec and unshare exec (no fork); sh execs sleep

    # ---- keys done -> authorized_keys, known_hosts
    for p in keygens:
        out, _ = p.communicate(timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"ssh-keygen failed: {out!r}")
    client_pub = c.client_key.with_name(c.client_key.name + ".pub").read_text()
    unrelated_pub = c.unrelated_key.with_name(c.unrelated_key.name + ".pub").read_text()
    kh, kh_all = [], []
    for h in hosts:
        h.authorized_keys.write_text(client_pub if h.spec.authorize_key else unrelated_pub)
        lines = [h.host_key_line(ip) for ip in h.addresses]
        kh_all += lines
        if h.spec.known_host:
            kh += lines
    c.known_hosts.write_text("".join(x + "\n" for x in kh))
    c.known_hosts_all.write_text("".join(x + "\n" for x in kh_all))

    # ---- wait for hosts, then daemons
    _wait_ready(hosts, timeout=60)
    for h in hosts:
        if h.spec.chrony != "none":
            c._spawn_chronyd(h)
        if h.spec.sshd:
            c._spawn_sshd(h)
    _wait_tcp([h for h in hosts if h.spec.sshd], sshd_timeout)
    chrony_hosts = [h for h in hosts if h.spec.chrony != "none"]
    if wait_chrony and chrony_hosts:
        _wait_chrony(c, chrony_hosts, chrony_timeout)


# --------------------------------------------------------------------------
# leftovers


def teardown_live() -> list[str]:
    """Tear down every cluster this process built and has not torn down yet; the errors, one line each."""
    errors: list[str] = []
    with _LOCK:
        live = list(_LIVE.values())
    for c in live:
        try:
            c.teardown()
        except Exception as e:
            errors.append(str(e))
    return errors


TEARDOWN_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def teardown_on_signals() -> None:
    """SIGTERM or SIGHUP (a CI timeout, a closed terminal, scripts/test.sh stopping its lanes) end a pytest process without
    running its fixtures' finalizers: tear this process's clusters down first, then end as the signal would have. A
    handler someone else installed is left alone. SIGINT needs nothing: pytest unwinds its fixtures on Ctrl-C."""
    def handler(signum: int, _frame: object) -> None:
        for sig in TEARDOWN_SIGNALS:  # a second signal (scripts/test.sh forwards one to a lane the group already got)
            signal.signal(sig, signal.SIG_IGN)  # must not end the process halfway through the teardown
        try:
            for error in teardown_live():
                print(f"harness: teardown on {signal.Signals(signum).name}: {error}", file=sys.stderr, flush=True)
        finally:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for sig in TEARDOWN_SIGNALS:
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, handler)


def cleanup_leftovers() -> None:
    """Remove what crashed harness users left behind: clusters of this process are torn
    down; for every other cluster index found (namespaces ``asct-c<k>-<host>``, veths
    ``asct<k>v<i>``, lock files, placeholder users, default work dirs ``$TMPDIR/asct-c<k>-*``)
    everything is removed unless a live process still holds the index lock (so concurrent
    pytest processes using the harness are left alone). Then the bridge ``asct-br0`` is
    deleted if no port is left on it, and unused placeholders are removed."""
    errors = teardown_live()
    with _global_lock():
        indexes: set[int] = set()
        for n in _existing_netns():
            m = re.match(rf"^{PREFIX}-c(\d+)-", n)
            if m and NETNS_RE.match(n):
                indexes.add(int(m.group(1)))
        for n in _existing_links():
            m = VETH_RE.match(n) and re.match(rf"^{PREFIX}(\d+)[vw]", n)
            if m:
                indexes.add(int(m.group(1)))
        for f in glob.glob(str(STATE_DIR / "c*.lock")):
            m = re.match(r"^c(\d+)\.lock$", os.path.basename(f))
            if m:
                indexes.add(int(m.group(1)))
        for users in _registry_load().values():
            indexes.update(users)
        for d in glob.glob(os.path.join(tempfile.gettempdir(), f"{DEFAULT_WORKDIR_PREFIX}[0-9]*-*")):
            m = re.match(rf"^{DEFAULT_WORKDIR_PREFIX}(\d+)-", os.path.basename(d))
            if m:
                indexes.add(int(m.group(1)))
        for k in sorted(indexes):
            if not (1 <= k <= MAX_CLUSTER_INDEX) or k in _LIVE:
                continue
            fd = _try_lock_index(k)
            if fd is None:
                continue            # owned by a live cluster (maybe of another process)
            try:
                errors += _cleanup_index(k)
            finally:
                os.close(fd)
        _release_targets(0)     # 0 is never a cluster index: just drops unused placeholders
        _delete_bridge_if_unused()
    if errors:
        raise RuntimeError("cleanup_leftovers: " + "; ".join(errors))
