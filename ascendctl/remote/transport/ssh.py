"""SSH transport on Paramiko: host-key verification, key auth, timeouts, retries, jump hosts.

Never prompts and never uses passwords: batch mode, as `ssh -oBatchMode=yes`.
The only module that imports paramiko. Must not import typer or rich.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import fcntl
import logging
import os
import random
import re
import select
import shlex
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

def _import_paramiko_without_invoke() -> None:
    """Import paramiko without `invoke`, which it loads only for `Match exec` in ssh config.

    invoke (and the unittest.mock it imports) costs ~100 ms of CPU at startup, a third of
    a whole 16-node run. A `Match exec` line then fails to evaluate and is reported.
    """
    if "invoke" in sys.modules or "paramiko" in sys.modules:
        return
    sys.modules["invoke"] = None  # type: ignore[assignment]  # makes `import invoke` raise ImportError
    try:
        import paramiko  # noqa: F401
    finally:
        del sys.modules["invoke"]


_import_paramiko_without_invoke()
import paramiko  # noqa: E402
from paramiko.pkey import PublicBlob  # noqa: E402

from ascendctl.errors import (AuthError, CommandTimeoutError, ConnectError, HostKeyError, NodeSilentError, SSHProtocolError,
                      TransientConnectError, TransportError)
from ascendctl.models import CommandResult
from ascendctl.remote.transport import ssh_config as config_files
from ascendctl.remote.transport.ssh_config import ConfigLine
from ascendctl.remote.transport.base import ANSWER_SLACK, KILL_GRACE, node_bounded, stopped_at_limit
from ascendctl.remote.transport.known_hosts import (CERT_SUFFIX, HostCertificate, HostKeyCheck, KnownHostsFile, KnownHostsFiles,
                                                    Verdict, certificate_problem, check_host_key, expand_path,
                                                    hash_host, host_key_names, known_hosts_files, known_key_types,
                                                    parse_certificate, path_tokens,
                                                    read_known_hosts, revoked_blobs, trusted_authorities)
from ascendctl.paths import current_user

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, Node

log = logging.getLogger(__name__)

# Errors that sshd's MaxStartups (or a busy accept queue) produces: the connection
# is dropped before or during the banner. Retrying after a jittered pause succeeds.
TRANSIENT_MARKERS = ("Error reading SSH protocol banner", "Connection reset by peer", "EOF during negotiation")
# What sshd says instead of its banner when it turns a connection away: past MaxStartups (OpenSSH 8.x+) and
# under PerSourcePenalties (9.8+). Dropped connections, like the silent drops above: retried.
SSHD_REFUSALS = (b"Exceeded MaxStartups", b"Not allowed at this time")
BANNER_PREVIEW = 256  # bytes of the server's first line looked at (without taking them) before paramiko reads it
# Asked for first (OpenSSH servers offer them by default): AES-GCM authenticates while it decrypts, one pass per
# packet, which costs this client a quarter less CPU per byte than paramiko's default aes128-ctr + hmac-sha2-256
# (collect streams gigabytes). A server that disallows them gets the rest of paramiko's list.
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
# An SSH keepalive (a global request, as OpenSSH's ServerAliveInterval sends) after this many seconds in which we sent
# nothing: an idle connection keeps its state in NATs and firewalls, and a dead link under a quiet command shows up
# as unacknowledged data, so the kernel ends the connection (tcp_retries2) instead of waiting on it for ever.
KEEPALIVE = 15
SERVER_ALIVE_COUNT = 3  # OpenSSH's default ServerAliveCountMax
PROXY_TOKENS = "hnpr"  # the %-tokens ssh expands in ProxyCommand (and %%)
SILENT_HINT = ("is the node (or its network) down? a node that is only slow needs a larger command_timeout "
               "(--command-timeout); `ascendctl preflight -i ... --only ssh`")


@dataclass(frozen=True, slots=True)
class SSHEndpoint:
    """Where and as whom to connect, after the inventory and ~/.ssh/config are combined."""

    alias: str  # the name as written (what messages use)
    hostname: str  # what is actually dialled
    port: int
    user: str
    identity_files: tuple[str, ...]
    proxy_jump: str | None
    connect_timeout: float
    host_key_alias: str | None = None  # ssh config HostKeyAlias
    proxy_command: str | None = None  # ssh config ProxyCommand, %-tokens expanded (run by /bin/sh)
    identities_only: bool = False  # ssh config IdentitiesOnly: agent keys only where an identity or certificate holds them
    identity_agent: str | None = None  # the agent's socket (ssh config IdentityAgent, else SSH_AUTH_SOCK); None: no agent
    certificate_files: tuple[tuple[str, str], ...] = ()  # ssh config CertificateFile, expanded, and its file:line
    accept_new: bool = False  # record unknown host keys: the inventory's accept_new_host_keys, else StrictHostKeyChecking
    keepalive: int = KEEPALIVE  # seconds of quiet before a keepalive (ServerAliveInterval; 0: none)
    alive_count: int = 0  # unanswered keepalives that end the connection (ServerAliveCountMax; 0: never)
    problem: TransportError | None = field(default=None, compare=False)  # an ssh config value that cannot be used
    taken: Mapping[str, tuple[ConfigLine, ...]] = field(default_factory=dict, compare=False)  # what the ssh config decided

    def where(self, keyword: str) -> str:
        """`file:line` of the ssh config line that set `keyword` (lower case) for this host."""
        lines = self.taken.get(keyword)
        return lines[0].where if lines else "ssh config"

    @property
    def host_key_names(self) -> tuple[str, ...]:
        """The names known_hosts is searched under; new keys are recorded under the first (as `ssh` records them)."""
        return host_key_names(self.alias, self.hostname, self.port, self.host_key_alias)

    @property
    def label(self) -> str:
        port = "" if self.port == 22 else f":{self.port}"
        return f"{self.user}@{self.alias}{port}"


class SSHConnector:
    """Connects nodes of one inventory; caches known_hosts, keys, ssh config and jump hosts."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._lock = threading.Lock()
        self._host_keys: dict[str, KnownHostsFile] = {}  # by expanded path
        self._keys: dict[str, paramiko.PKey | Exception] = {}
        self._agents: dict[str, list[Any] | str] = {}  # by socket path: its keys, or why it cannot be used
        self._lookups: dict[str, tuple[dict[str, Any], dict[str, list[ConfigLine]]]] = {}
        self._jumps: dict[tuple[str, int, str], paramiko.Transport] = {}
        self._jump_locks: dict[tuple[str, int, str], threading.Lock] = {}
        # as `ssh` without -F: the user's config, then the system-wide one; a config the inventory names is alone (-F)
        system = config_files.SYSTEM_SSH_CONFIG if inventory.sources.get("ssh_config", "default") == "default" else None
        self._ssh_config, self._ssh_config_text = _load_ssh_config(inventory.ssh_config, system=system)
        self._ssh_config_files = self._ssh_config_text.files

    # -- public ---------------------------------------------------------------------------
    def connect(self, node: Node) -> "SSHTransport":
        """Connect and authenticate, retrying transient drops with jittered backoff."""
        endpoint = self.endpoint(node)
        attempts = self.inventory.connect_retries + 1
        for attempt in range(attempts):
            try:
                transport = self._connect_once(node, endpoint)
                return SSHTransport(node, transport, endpoint)
            except TransientConnectError as exc:
                if attempt + 1 >= attempts:
                    raise ConnectError(
                        f"{exc.message} (after {attempts} attempts)",
                        hint="sshd dropped the connection repeatedly: check MaxStartups on the node or lower `fanout` "
                        "(sshd refusing this client, e.g. PerSourcePenalties or tcp_wrappers, looks the same)",
                    ) from None
                pause = min(0.25 * 2**attempt, 4.0) * random.uniform(0.5, 1.5)
                log.debug("%s: transient connect failure (%s); retry %d in %.2fs", node.name, exc.message, attempt + 1, pause)
                time.sleep(pause)
        raise AssertionError("unreachable")

    def endpoint(self, node: Node) -> SSHEndpoint:
        """Combine the node's settings with ~/.ssh/config; explicit inventory values win.

        A config value that cannot be used is kept as `problem` (raised when the node is connected, naming the file,
        line and option), so `inventory show` can still say what was read.
        """
        cfg, lines = self._lookup(node.host)
        taken: dict[str, tuple[ConfigLine, ...]] = {}
        problems: list[TransportError] = []

        def inventory_sets(setting: str) -> bool:
            return node.sources.get(setting, "default") != "default"

        def first(keyword: str) -> ConfigLine | None:
            """The line that decides `keyword`, recorded as taken."""
            found = lines.get(keyword)
            if not found:
                return None
            taken[keyword] = tuple(found) if keyword in ("identityfile", "certificatefile") else (found[0],)
            return found[0]

        def pick(setting: str, cfg_key: str, fallback: Any) -> Any:
            if inventory_sets(setting):
                return getattr(node, setting)
            if cfg_key in cfg:
                first(cfg_key)
                return cfg[cfg_key]
            value = getattr(node, setting)
            return fallback if value is None else value

        def number(keyword: str, minimum: float, what: str = "seconds") -> float | None:
            line = first(keyword)
            if line is None:
                return None
            try:
                value = float(line.value)
            except ValueError:
                value = minimum - 1
            if value < minimum or value != value:
                problems.append(ConnectError(f"ssh config {line.where}: {line.option} {line.value!r} is not a number "
                                             f"of {what}{' (0 or more)' if minimum == 0 else ''}",
                                             hint=f"fix {line.option} in {line.path}"))
                return None
            return value

        user = pick("user", "user", None) or current_user()
        port = int(pick("port", "port", 22))
        identity = pick("identity_file", "identityfile", None)
        if isinstance(identity, str):
            identity_files: tuple[str, ...] = (identity,)
        elif identity:
            identity_files = tuple(identity)
        else:
            identity_files = ()
        hostname = str(cfg.get("hostname", node.host))
        if "hostname" in cfg:
            first("hostname")
        alias = cfg.get("hostkeyalias")
        if alias:
            first("hostkeyalias")
        host_key_alias = str(alias) if alias and str(alias).lower() != "none" else None
        # ProxyJump and ProxyCommand: whichever the config names first wins (`none` included), as in ssh
        jump: str | None = node.jump_host
        proxy_line: ConfigLine | None = None
        if not inventory_sets("jump_host"):
            proxies = [found[0] for key in ("proxyjump", "proxycommand") if (found := lines.get(key))]
            chosen = min(proxies, key=lambda line: line.order, default=None)
            if chosen is not None:
                first(chosen.keyword)
                jump = None
                if chosen.value.lower() != "none":
                    if chosen.keyword == "proxyjump":
                        jump = str(cfg.get("proxyjump", chosen.value))
                    else:
                        proxy_line = chosen
        local_user = current_user()

        def tokens() -> dict[str, str]:
            return path_tokens(alias=node.host, hostname=hostname, port=port, user=str(user), local_user=local_user,
                               host_key_alias=host_key_alias, proxy_jump=jump)

        def expanded(line: ConfigLine, **kw: Any) -> str | None:
            try:
                return expand_path(line.value, line.option, kw.pop("only", None) or tokens(), **kw)
            except ValueError as exc:
                problems.append(ConnectError(f"ssh config {line.where}: {exc}", hint=f"fix {line.option} in {line.path}"))
                return None

        proxy_command = None
        if proxy_line is not None:
            proxy_command = expanded(proxy_line, only={k: v for k, v in tokens().items() if k in PROXY_TOKENS},
                                     command=True)
        connect_timeout = node.connect_timeout
        if not inventory_sets("connect_timeout"):
            connect_timeout = number("connecttimeout", 0.001) or connect_timeout
        keepalive, alive_count = KEEPALIVE, 0
        interval = number("serveraliveinterval", 0)
        if interval is not None:
            keepalive = int(interval)
            count = number("serveralivecountmax", 1, "keepalives") if keepalive else None
            alive_count = int(count or SERVER_ALIVE_COUNT) if keepalive else 0
        only = first("identitiesonly")
        identities_only = only is not None and only.value.lower() in ("yes", "true")
        agent_line = first("identityagent")
        agent = os.environ.get("SSH_AUTH_SOCK") or None
        if agent_line is not None:
            agent = _agent_socket(agent_line, expanded, problems)
        certificates: list[tuple[str, str]] = []
        if first("certificatefile"):
            certificates = [(path, line.where) for line in taken["certificatefile"] if (path := expanded(line))]
        accept_new = node.accept_new_host_keys
        strict = None if inventory_sets("accept_new_host_keys") else first("stricthostkeychecking")
        if strict is not None:
            accept_new = _accepts_new_keys(strict, problems) or accept_new
        if not inventory_sets("known_hosts"):
            for keyword in ("userknownhostsfile", "globalknownhostsfile"):
                first(keyword)
            if "hashknownhosts" in cfg:
                first("hashknownhosts")
        return SSHEndpoint(
            alias=node.host,
            hostname=hostname,
            port=port,
            user=str(user),
            identity_files=identity_files,
            proxy_jump=jump,
            connect_timeout=connect_timeout,
            host_key_alias=host_key_alias,
            proxy_command=proxy_command,
            identities_only=identities_only,
            identity_agent=agent,
            certificate_files=tuple(certificates),
            accept_new=accept_new,
            keepalive=keepalive,
            alive_count=alive_count,
            problem=problems[0] if problems else None,
            taken=taken,
        )

    def _lookup(self, host: str) -> tuple[dict[str, Any], dict[str, list[ConfigLine]]]:
        """paramiko's lookup of `host` in the ssh config, and the lines of the blocks that applied (cached per host)."""
        with self._lock:
            cached = self._lookups.get(host)
        if cached is not None:
            return cached
        found: tuple[dict[str, Any], dict[str, list[ConfigLine]]] = ({}, {})
        if self._ssh_config is not None:
            try:
                raw = dict(self._ssh_config.lookup(host))
                found = (config_files.without_marks(raw), config_files.applied_lines(self._ssh_config_text, raw))
            except (ImportError, paramiko.SSHException, ValueError) as exc:
                log.warning("ignoring %s for %s: %s", self.inventory.ssh_config, host, exc or "`Match exec` is not supported")
        with self._lock:
            self._lookups[host] = found
        return found

    def _lookup_config(self, host: str) -> dict[str, Any]:
        return self._lookup(host)[0]

    def close(self) -> None:
        with self._lock:
            jumps, self._jumps = self._jumps, {}
        for transport in jumps.values():
            transport.close()

    # -- connection steps -----------------------------------------------------------------
    def _connect_once(self, node: Node, ep: SSHEndpoint) -> paramiko.Transport:
        if ep.problem is not None:  # an ssh config value that cannot be used (StrictHostKeyChecking no, ...)
            raise ep.problem
        files = self._host_key_files(node, ep)  # first: an unusable known_hosts fails the node before any connection
        known = known_key_types(files[1], ep.host_key_names)
        sock = self._open_socket(node, ep)
        preview: bytes | None = None
        if isinstance(sock, socket.socket):  # a jump host's channel cannot be peeked at; paramiko's error has to do
            try:
                preview = _peek_first_line(sock, ep.connect_timeout)
            except OSError as exc:
                sock.close()
                raise TransientConnectError(f"{ep.hostname}:{ep.port} dropped the connection before its SSH banner "
                                            f"({exc.strerror or exc})") from None
            except _UnfinishedBanner as exc:
                sock.close()
                raise _slow_banner_error(ep, exc.seen) from None
            if not preview or preview.startswith(SSHD_REFUSALS):
                sock.close()
                raise _no_banner_error(ep, closed=preview is not None, said=preview)
        transport = _Transport(sock)
        transport.banner_timeout = ep.connect_timeout
        transport.handshake_timeout = ep.connect_timeout
        transport.auth_timeout = ep.connect_timeout
        options = transport.get_security_options()
        offered = [c for c in PREFERRED_CIPHERS if c in options.ciphers]
        options.ciphers = offered + [c for c in options.ciphers if c not in offered]
        if known:
            # Ask for the key types we can verify, as OpenSSH does, so a host with an
            # ed25519 key in known_hosts is not reported unknown for offering ecdsa first.
            wanted = [t for t in options.key_types if _base_key_type(t) in known]
            if wanted:
                options.key_types = wanted + [t for t in options.key_types if t not in wanted]
        if trusted_authorities(files[1], ep.host_key_names):
            # a CA is trusted for the host: ask for host certificates first, as OpenSSH does
            certificates = [t + CERT_SUFFIX for t in options.key_types if t + CERT_SUFFIX in _CERTIFICATE_TYPES]
            options.key_types = certificates + [t for t in options.key_types if t not in certificates]
        started = time.monotonic()
        try:
            transport.start_client(timeout=ep.connect_timeout)
            # start_client can return on a handshake that its own timer gave up on
            server_key = transport.get_remote_server_key()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            error = _proxy_error(sock, ep) if isinstance(sock, paramiko.ProxyCommand) else None
            transport.close()
            raise error or _handshake_error(exc, ep, time.monotonic() - started, preview,
                                            banner_read=bool(transport.remote_version)) from None
        try:
            self._verify_host_key(node, ep, files, server_key)
            self._authenticate(node, ep, transport)
        except BaseException:
            transport.close()
            raise
        transport.server_alive(ep.keepalive, ep.alive_count)
        return transport

    def _open_socket(self, node: Node, ep: SSHEndpoint) -> Any:
        if ep.proxy_jump:
            return self._jump_channel(node, ep)
        if ep.proxy_command:  # as ssh runs it: `exec COMMAND` by the shell, its stdin and stdout the connection
            try:
                return _ProxyCommand(shlex.join(["/bin/sh", "-c", "exec " + ep.proxy_command]))
            except (OSError, paramiko.SSHException) as exc:
                raise ConnectError(f"ssh config {ep.where('proxycommand')}: ProxyCommand cannot be started: {exc}") from None
        try:
            return socket.create_connection((ep.hostname, ep.port), timeout=ep.connect_timeout)
        except socket.timeout:
            raise ConnectError(
                f"connect to {ep.hostname}:{ep.port} timed out after {ep.connect_timeout:g}s",
                hint="is the node up and the address right? raise connect_timeout for slow networks",
            ) from None
        except ConnectionRefusedError:
            raise ConnectError(
                f"connection refused by {ep.hostname}:{ep.port}",
                hint=f"is sshd running on the node and listening on port {ep.port}?",
            ) from None
        except socket.gaierror as exc:
            raise ConnectError(f"cannot resolve {ep.hostname}: {exc.strerror}", hint="check `host` in the inventory") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {ep.hostname}:{ep.port}: {exc.strerror or exc}") from None

    def _jump_channel(self, node: Node, ep: SSHEndpoint) -> paramiko.Channel:
        assert ep.proxy_jump
        # ProxyJump may list several hops; we tunnel through the last, reached via the others.
        hops = [h.strip() for h in ep.proxy_jump.split(",") if h.strip()]
        jump_t = self._jump_transport(node, hops, ep)
        try:
            return jump_t.open_channel(
                "direct-tcpip", (ep.hostname, ep.port), ("127.0.0.1", 0), timeout=ep.connect_timeout
            )
        except paramiko.ChannelException as exc:
            raise ConnectError(
                f"jump host {hops[-1]} could not reach {ep.hostname}:{ep.port}: {exc.text}",
                hint="check that the jump host can reach the node and allows TCP forwarding",
            ) from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise ConnectError(f"jump host {hops[-1]}: {exc}") from None

    def _jump_transport(self, node: Node, hops: list[str], target: SSHEndpoint) -> paramiko.Transport:
        """The shared connection to the last hop; keys not configured for it default to the target's."""
        spec = hops[-1]
        user, host, port = _parse_jump(spec, default_user=None)
        cfg = self._lookup_config(host)
        # the target node with the hop's address and SSH settings (only those reach `endpoint`)
        jump_node = dataclasses.replace(
            node,
            name=f"{node.name} via {spec}",
            host=host,
            index=node.index,
            user=user or cfg.get("user") or node.user,
            port=port or int(cfg.get("port", 22)),
            identity_file=target.identity_files[0] if target.identity_files else None,
            known_hosts=node.known_hosts,
            accept_new_host_keys=node.accept_new_host_keys,
            jump_host=",".join(hops[:-1]) or None,
            connect_timeout=node.connect_timeout,
            # identity_file stays "default": the jump host's own ~/.ssh/config entry wins over it.
            sources={"user": "inventory", "port": "inventory", "jump_host": "inventory",
                     "known_hosts": node.sources.get("known_hosts", "default"),
                     "accept_new_host_keys": node.sources.get("accept_new_host_keys", "default"),
                     "connect_timeout": node.sources.get("connect_timeout", "default")},
        )
        ep = self.endpoint(jump_node)
        key = (ep.hostname, ep.port, ep.user)
        with self._lock:
            lock = self._jump_locks.setdefault(key, threading.Lock())
        with lock:  # one connection per jump host, shared by every node behind it
            existing = self._jumps.get(key)
            if existing is not None and existing.is_active():
                return existing
            try:
                transport = self.connect(jump_node)._transport
            except TransportError as exc:
                raise type(exc)(f"jump host {spec}: {exc.message}", hint=exc.hint) from None
            self._jumps[key] = transport
            return transport

    def _known_hosts_where(self, node: Node, ep: SSHEndpoint) -> KnownHostsFiles:
        """The files searched for the node's key: the inventory's `known_hosts` alone when set, else as `ssh` does."""
        if node.sources.get("known_hosts", "default") != "default":
            return KnownHostsFiles((node.known_hosts,), (), explicit=True)
        tokens = path_tokens(alias=node.host, hostname=ep.hostname, port=ep.port, user=ep.user, local_user=current_user(),
                             host_key_alias=ep.host_key_alias, proxy_jump=ep.proxy_jump)
        try:
            return known_hosts_files(self._lookup_config(node.host), tokens)
        except ValueError as exc:
            raise HostKeyError(f"ssh config ({', '.join(self._ssh_config_files) or self.inventory.ssh_config}): {exc}",
                               hint="fix the option in the ssh config, or set `known_hosts` in the inventory") from None

    def _host_key_files(self, node: Node, ep: SSHEndpoint) -> tuple[KnownHostsFiles, list[KnownHostsFile]]:
        """Where to look and every file there, read once per connector; HostKeyError when a named file cannot be used."""
        where = self._known_hosts_where(node, ep)
        files: list[KnownHostsFile] = []
        for path in where.all:
            read = self._read_known_hosts(path, explicit=where.explicit)
            if read.problem and where.explicit:
                raise HostKeyError(
                    f"cannot use known_hosts {path}: {read.problem}",
                    hint="`known_hosts` (inventory) must name a readable file of `HOST KEYTYPE BASE64` lines; "
                    "fix or replace it, then add the nodes' keys after verifying them (`ssh-keyscan`)",
                )
            if not read.problem:
                files.append(read)
        return where, files

    def _read_known_hosts(self, path: str, *, explicit: bool) -> KnownHostsFile:
        full = os.path.expanduser(path)
        with self._lock:
            cached = self._host_keys.get(full)
            if cached is None:
                cached = self._host_keys[full] = read_known_hosts(path)
                if cached.bad_lines:
                    log.warning("known_hosts %s: %s not in known_hosts format (ignored)", path, _lines(cached.bad_lines))
                if cached.problem and not explicit:
                    log.warning("known_hosts %s: %s (skipped)", path, cached.problem)
            return cached

    def _verify_host_key(self, node: Node, ep: SSHEndpoint, found: tuple[KnownHostsFiles, list[KnownHostsFile]],
                         key: paramiko.PKey) -> None:
        where, files = found
        names = ep.host_key_names
        name = names[0]
        certificate = getattr(key, "public_blob", None)
        if certificate is not None and str(certificate.key_type).endswith(CERT_SUFFIX):
            if _certificate_accepted(ep, files, key, bytes(certificate.key_blob)):
                return
            # signed by no CA trusted for the host: judge the plain key inside, as OpenSSH ("Retry with plain key")
        check = check_host_key(files, names, key.get_name(), key.get_base64())
        if check.verdict is Verdict.OK:
            return
        offered = f"{key.get_name()} {key.fingerprint}"
        searched = ", ".join(where.all) or "no file (UserKnownHostsFile and GlobalKnownHostsFile are none)"
        if check.verdict is not Verdict.UNKNOWN:
            raise _host_key_refusal(check, names, offered, searched)
        with_bad = [f for f in files if f.bad_lines]
        if with_bad and not ep.accept_new:
            if len(where.all) == 1:
                message = (f"known_hosts {with_bad[0].path} holds no key for {name} ({offered}), and its "
                           f"{_lines(with_bad[0].bad_lines)} not in known_hosts format")
            else:
                message = (f"known_hosts files {searched} hold no key for {name} ({offered}), and "
                           + "; ".join(f"{f.path} {_lines(f.bad_lines)}" for f in with_bad) + " are not in known_hosts format")
            raise HostKeyError(
                message,
                hint="fix or remove those lines (format: `HOST KEYTYPE BASE64`), then add the node's key after verifying it "
                "(`ssh-keyscan`), or opt in with `accept_new_host_keys: true` / --accept-new-host-keys",
            )
        if not ep.accept_new:
            raise HostKeyError(
                f"unknown host key for {name} ({offered}); not in {searched}",
                hint="add it with `ssh-keyscan` after verifying it, or opt in with "
                "`accept_new_host_keys: true` / --accept-new-host-keys",
            )
        if where.write_to is None:
            raise HostKeyError(f"cannot record the host key of {name} ({offered}): UserKnownHostsFile is none",
                               hint="name a UserKnownHostsFile in the ssh config, or set `known_hosts` in the inventory")
        self._record_host_key(where.write_to, name, key, hash_it=self._hash_known_hosts(node.host))

    def _hash_known_hosts(self, host: str) -> bool:
        return str(self._lookup_config(host).get("hashknownhosts", "")).lower() == "yes"

    def _record_host_key(self, path: str, name: str, key: paramiko.PKey, *, hash_it: bool) -> None:
        """Append an accepted key to a known_hosts file (the first user file, as `ssh`); a file lock keeps writers apart.

        Hashed (`|1|salt|hash`, as `ssh-keygen -H` writes) when the file already hides its names or ssh_config says
        `HashKnownHosts yes`: one clear-text entry would give away the host list the user chose to hide.
        """
        full = os.path.expanduser(path)
        with self._lock:
            try:
                os.makedirs(os.path.dirname(full) or ".", exist_ok=True)
                with open(full, "a+", encoding="utf-8") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX)
                    handle.seek(0)
                    hashed = hash_it or any(line.startswith("|1|") for line in handle)
                    entry = hash_host(name) if hashed else name
                    handle.seek(0, os.SEEK_END)
                    handle.write(f"{entry} {key.get_name()} {key.get_base64()}\n")
            except OSError as exc:
                raise HostKeyError(f"cannot record the host key of {name} in known_hosts {path}: {exc.strerror or exc}",
                                   hint="make the file (and its directory) writable, or set `known_hosts` in the inventory") from None
            cached = self._host_keys.get(full) or read_known_hosts(path)
            self._host_keys[full] = cached.with_entry(entry, key.get_name(), key.get_base64())
        log.info("accepted new host key for %s (%s %s) into %s", name, key.get_name(), key.fingerprint, path)

    def _authenticate(self, node: Node, ep: SSHEndpoint, transport: paramiko.Transport) -> None:
        candidates, problems = self._credentials(ep)
        if not candidates:
            detail = "; ".join(problems) or "no key files and no ssh-agent keys"
            raise AuthError(
                f"no usable SSH key for {ep.label}: {detail}",
                hint="set `identity_file` in the inventory or load a key into ssh-agent",
            )
        tried: list[str] = []
        for label, key in candidates:
            try:
                transport.auth_publickey(ep.user, key)
            except paramiko.BadAuthenticationType as exc:
                raise AuthError(
                    f"{ep.label} does not accept public keys (allows: {', '.join(exc.allowed_types)})",
                    hint="enable PubkeyAuthentication on the node; ascendctl never uses passwords",
                ) from None
            except paramiko.AuthenticationException:
                tried.append(label)
                continue
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise ConnectError(f"connection to {ep.label} lost during authentication: {exc}") from None
            if transport.is_authenticated():
                return
        raise AuthError(
            f"ssh auth failed for {ep.label} (tried {', '.join(tried)})" + "".join(f"; {p}" for p in problems),
            hint=f"check `identity_file`/`user` in the inventory, or run: ssh -i KEY {ep.label} true",
        )

    def _load_key(self, path: str, *, explicit: bool) -> paramiko.PKey | Exception:
        full = os.path.expanduser(path)
        with self._lock:
            if full in self._keys:
                return self._keys[full]
        result: paramiko.PKey | Exception
        try:
            result = paramiko.PKey.from_path(full)
        except FileNotFoundError:
            result = FileNotFoundError(f"key file {path} not found")
        except paramiko.PasswordRequiredException:
            result = PermissionError(f"key {path} is passphrase-protected (load it into ssh-agent; ascendctl never prompts)")
        except (paramiko.SSHException, OSError, ValueError, TypeError) as exc:
            result = ValueError(f"cannot load key {path}: {exc}")
        with self._lock:
            self._keys[full] = result
        return result

    def _credentials(self, ep: SSHEndpoint) -> tuple[list[tuple[str, Any]], list[str]]:
        """The keys to offer, in order (certificates first, then key files, then the agent's, those an IdentityFile's
        .pub names first), and what was unusable.

        IdentitiesOnly: agent keys only where an IdentityFile (its key or its .pub) or a CertificateFile holds them.
        """
        candidates: list[tuple[str, Any]] = []
        problems: list[str] = []
        paths = ep.identity_files or _default_identity_files()
        for path in paths:
            loaded = self._load_key(path, explicit=bool(ep.identity_files))
            if isinstance(loaded, Exception):
                if ep.identity_files:
                    problems.append(str(loaded))
                continue
            candidates.append((path, loaded))
        certificates: list[tuple[str, str, bytes]] = []  # the file, its config line, the key it certifies
        for path, where in ep.certificate_files:
            try:
                certificates.append((path, where, parse_certificate(PublicBlob.from_file(path).key_blob).public_key))
            except (OSError, ValueError, paramiko.SSHException) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                problems.append(f"CertificateFile {path} ({where}) cannot be read: {reason}")
        agent = self._agent(ep.identity_agent)
        if isinstance(agent, str):
            if "identityagent" in ep.taken:
                problems.append(f"IdentityAgent {ep.identity_agent} ({ep.where('identityagent')}): {agent}")
            agent = []
        configured = {blob for path in paths if (blob := _public_key_of(path)) is not None}  # IDENTITY.pub
        if ep.identities_only:
            allowed = {key.asbytes() for _, key in candidates} | {key for _, _, key in certificates} | configured
            agent = [key for key in agent if key.asbytes() in allowed]
        agent = sorted(agent, key=lambda key: key.asbytes() not in configured)  # as ssh: the IdentityFiles' keys first
        candidates.extend(("ssh-agent", key) for key in agent)
        certified: list[tuple[str, Any]] = []
        for path, where, certifies in certificates:
            holder = next((key for _, key in candidates if key.asbytes() == certifies), None)
            if holder is None:
                problems.append(f"CertificateFile {path} ({where}): no IdentityFile or agent key "
                                "holds its key")
                continue
            with_cert = paramiko.AgentKey(holder.agent, holder.blob, holder.comment) if isinstance(holder, paramiko.AgentKey) \
                else copy.copy(holder)
            with_cert.load_certificate(path)
            certified.append((f"certificate {path}", with_cert))
        return certified + candidates, problems

    def _agent(self, path: str | None) -> list[Any] | str:
        """The keys of the agent at `path` (none without one), or why it cannot be used; asked once per connector."""
        if not path:
            return []
        with self._lock:
            cached = self._agents.get(path)
            if cached is None:
                try:
                    cached = list(_AgentAt(path).get_keys())
                except (paramiko.SSHException, OSError) as exc:
                    cached = f"cannot use the agent: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
                self._agents[path] = cached
            return cached


# Read a channel's whole buffer at once: Paramiko keeps it in an array and `del`s what a read took from its
# front, moving the rest; reading less than all of it (64 KiB of a 2 MiB window) made a bulk stream
# quadratic in that copying and held the GIL for most of a collect. More than the channel's window (2 MiB).
TAKE_ALL = 4 * 1024 * 1024


class SSHTransport:
    """An authenticated Paramiko connection to one node."""

    def __init__(self, node: Node, transport: paramiko.Transport, endpoint: SSHEndpoint) -> None:
        self.node = node
        self._transport = transport
        self.endpoint = endpoint

    def run(self, command: str, *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        return self.stream(command, timeout=timeout, stdin=stdin)

    def stream(
        self,
        command: str,
        *,
        on_stdout: Callable[[bytes], None] | None = None,
        on_stderr: Callable[[bytes], None] | None = None,
        timeout: float | None = None,
        idle: float | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run `command`, handing output to the callbacks as it arrives (kept in the result otherwise)."""
        limit = self.node.command_timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + limit + KILL_GRACE + ANSWER_SLACK  # the node stops it at `limit` and says so
        chan = self._start(node_bounded(command, limit), stdin)
        out: list[bytes] = []
        err: list[bytes] = []
        to_out = on_stdout or out.append
        to_err = on_stderr or err.append
        heard = started  # when the last byte arrived (the `idle` clock)
        try:
            while True:
                if chan.recv_ready():
                    to_out(chan.recv(TAKE_ALL))
                    heard = time.monotonic()
                    continue
                if chan.recv_stderr_ready():
                    to_err(chan.recv_stderr(TAKE_ALL))
                    heard = time.monotonic()
                    continue
                if chan.exit_status_ready() and chan.eof_received:
                    break
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    raise NodeSilentError(f"{self.endpoint.label} stopped answering: no output and no exit status "
                                          f"{limit + KILL_GRACE + ANSWER_SLACK:g}s into a command limited to {limit:g}s",
                                          hint="is the node (or its network) down? `ascendctl preflight -i ... --only ssh`")
                if idle is not None:
                    quiet = now - heard
                    if quiet >= idle:
                        raise NodeSilentError(f"{self.endpoint.label} stopped answering: nothing received for {idle:g}s "
                                              "(command_timeout)", hint=SILENT_HINT)
                    remaining = min(remaining, idle - quiet)
                if chan.closed or not self._transport.is_active():
                    if chan.exit_status_ready():
                        break
                    raise ConnectError(f"connection to {self.endpoint.label} closed before the command finished")
                if chan.eof_received:  # all output read; only the exit status is still on its way
                    chan.status_event.wait(min(remaining, 0.05))
                else:
                    select.select([chan], [], [], min(remaining, 0.5))
            status = chan.recv_exit_status()
        finally:
            chan.close()
        gave_up = getattr(self._transport, "gave_up", None)
        if gave_up:  # the connection was closed under the command: its status is no answer
            raise NodeSilentError(f"{self.endpoint.label} stopped answering: {gave_up}", hint=SILENT_HINT)
        elapsed = time.monotonic() - started
        if stopped_at_limit(status, elapsed, limit):
            raise CommandTimeoutError.after(limit, _text(out), _text(err))
        return CommandResult(command, status, _text(out), _text(err), elapsed)

    def spawn(self, command: str, *, stdin: bytes | None = None) -> "SSHSpawned":
        return SSHSpawned(self._start(command, stdin), self._transport)

    def _start(self, command: str, stdin: bytes | None) -> paramiko.Channel:
        """A new session channel running `command`, with `stdin` sent and the write side closed."""
        try:
            chan = self._transport.open_session(timeout=self.endpoint.connect_timeout)
            chan.exec_command(command)
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise ConnectError(f"lost connection to {self.endpoint.label}: {exc}") from None
        return chan

    def put(self, local: Path, remote: str) -> None:
        with self._transport.open_sftp_client() as sftp:
            sftp.put(str(local), remote)
            mode = os.stat(local).st_mode
            sftp.chmod(remote, stat.S_IMODE(mode))

    def get(self, remote: str, local: Path) -> None:
        with self._transport.open_sftp_client() as sftp:
            sftp.get(remote, str(local))

    def close(self) -> None:
        self._transport.close()


class SSHSpawned:
    """A remote command's stdout over one channel, read without blocking (paramiko's channel fileno works with select)."""

    def __init__(self, chan: paramiko.Channel, transport: paramiko.Transport) -> None:
        self._chan = chan
        self._transport = transport
        self._fd = chan.fileno()

    def fileno(self) -> int:
        return self._fd

    def read(self) -> bytes:
        out = bytearray()
        try:
            # at most about TAKE_ALL a call: the window refills while we read, and a fast sender would never leave the
            # channel empty (the rest stays readable for the next call)
            while len(out) < TAKE_ALL and self._chan.recv_ready():
                out += self._chan.recv(TAKE_ALL)
            drained = 0
            while drained < TAKE_ALL and self._chan.recv_stderr_ready():
                drained += len(self._chan.recv_stderr(TAKE_ALL))
        except (OSError, EOFError, paramiko.SSHException):
            pass
        return bytes(out)

    def finished(self) -> bool:
        if self._chan.recv_ready():
            return False
        if self._chan.exit_status_ready() and self._chan.eof_received:
            return True
        return self._chan.closed or not self._transport.is_active()

    def close(self) -> None:
        self._chan.close()


class _UnfinishedBanner(Exception):
    """The start of an SSH banner (or of sshd's refusal) arrived, but not its line end, within the connect timeout."""

    def __init__(self, seen: bytes) -> None:
        super().__init__(seen)
        self.seen = seen


_LINE_STARTS = (b"SSH-", *SSHD_REFUSALS)  # the first lines an SSH server sends: its banner, or why it turns us away
_POLLRDHUP = getattr(select, "POLLRDHUP", 0)  # Linux: the peer closed its side; seen even while unread bytes wait


def _may_become(data: bytes, starts: tuple[bytes, ...] = _LINE_STARTS) -> bool:
    """Whether `data`, the first bytes of a line still arriving, may yet turn into a line starting with one of `starts`."""
    return any(data[:len(start)] == start[:len(data)] for start in starts)


def _peer_closed(sock: socket.socket) -> bool:
    if not _POLLRDHUP:
        return False
    poller = select.poll()
    poller.register(sock, _POLLRDHUP)
    return bool(poller.poll(0))


def _peek_first_line(sock: socket.socket, timeout: float) -> bytes | None:
    """The server's first bytes, up to its first line end, left in the socket for paramiko (MSG_PEEK).

    None: nothing came within `timeout`; b"": the server closed the connection first. A banner (or sshd's refusal) that
    arrives in pieces, however slowly, is waited for until its line end or `timeout`; past `timeout` it is
    _UnfinishedBanner, a slow server rather than a foreign one. Other text that stops growing is returned as it is, for
    paramiko and _handshake_error to judge; so is whatever was sent before the server closed the connection.
    """
    deadline = time.monotonic() + timeout
    seen, changed = b"", time.monotonic()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
            if seen and _may_become(seen):
                raise _UnfinishedBanner(seen)
            return seen or None
        data = sock.recv(BANNER_PREVIEW, socket.MSG_PEEK)
        if not data or b"\n" in data or len(data) >= BANNER_PREVIEW:
            return data
        if data != seen:
            seen, changed = data, time.monotonic()
        elif _peer_closed(sock) or not _may_become(data) and time.monotonic() - changed > 0.25:
            return data  # closed mid-line, or text that is no banner and stopped growing: paramiko judges it
        # the socket stays readable while unread bytes wait: don't spin
        time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))


def _slow_banner_error(ep: SSHEndpoint, seen: bytes) -> ConnectError:
    """A banner that began but did not end within connect_timeout: a slow server or path, not a foreign service."""
    return ConnectError(
        f"SSH banner from {ep.hostname}:{ep.port} timed out after {ep.connect_timeout:g}s: it was still arriving "
        f"({_first_line(seen)} so far)",
        hint="the server (or a proxy or link on the way) sends its banner this slowly: a loaded sshd or a slow path; "
        "raise connect_timeout in the inventory if it is only slow",
    )


def _no_banner_error(ep: SSHEndpoint, *, closed: bool, said: bytes | None = None) -> TransportError:
    where = f"{ep.hostname}:{ep.port}"
    if closed:  # what sshd does past MaxStartups: retried, then the hint names it
        return TransientConnectError(f"{where} dropped the connection before its SSH banner"
                                     + (f" (it said {_first_line(said)})" if said else ""))
    return SSHProtocolError(
        f"SSH protocol error: no SSH banner from {where} within {ep.connect_timeout:g}s (is this port an SSH server?)",
        hint=f"something accepted the TCP connection on port {ep.port} but never spoke SSH: check `port` in the inventory "
        "and that sshd (not another service) listens there; a hung sshd looks the same",
    )


def _handshake_error(exc: BaseException, ep: SSHEndpoint, elapsed: float, preview: bytes | None, *,
                     banner_read: bool) -> TransportError:
    """Name what failed: no or a foreign banner (protocol error), a stall after the banner (MTU), a drop (retried)."""
    text = str(exc) or type(exc).__name__
    where = f"{ep.hostname}:{ep.port}"
    if not banner_read and preview is not None and not _may_become(preview, (b"SSH-",)):  # a banner's start is no foreign text
        return SSHProtocolError(
            f"SSH protocol error: {where} sent {_first_line(preview)} instead of an SSH banner",
            hint=f"another service answers on port {ep.port}: check `port` in the inventory and that sshd listens there",
        )
    if not banner_read and elapsed >= ep.connect_timeout * 0.9:  # through a jump host: nothing to peek at
        return _no_banner_error(ep, closed=False)
    if elapsed >= ep.connect_timeout * 0.9:
        return ConnectError(
            f"TCP connected to {ep.hostname}:{ep.port} but the SSH handshake stalled for {elapsed:.0f}s",
            hint="a stall after connect often means an MTU black hole on the path (jumbo frames dropped); "
            "check the MTU of every hop, or sshd load on the node",
        )
    if any(marker in text for marker in TRANSIENT_MARKERS) or isinstance(exc, (EOFError, ConnectionResetError)):
        return TransientConnectError(f"{where} dropped the connection during the SSH handshake ({text.strip()})")
    if isinstance(exc, paramiko.SSHException):
        return SSHProtocolError(
            f"SSH protocol error: handshake with {where} failed: {text}",
            hint="the server speaks SSH, but no protocol version or algorithm matched (KexAlgorithms, Ciphers, MACs, "
            "HostKeyAlgorithms in its sshd_config)",
        )
    return ConnectError(f"SSH handshake with {where} failed: {text}")


def _first_line(data: bytes, limit: int = 60) -> str:
    line = (data.decode("utf-8", errors="replace").splitlines() or [""])[0]
    return repr(line[:limit] + "..." if len(line) > limit else line)


_CERTIFICATE_TYPES = frozenset(t for t in getattr(paramiko.Transport, "_key_info", {}) if t.endswith(CERT_SUFFIX))


def _certificate_accepted(ep: SSHEndpoint, files: list[KnownHostsFile], key: paramiko.PKey, blob: bytes) -> bool:
    """Whether a host certificate is signed by a CA trusted for the host (@cert-authority) and valid for it.

    False: no trusted CA signed it (the caller judges the plain key). HostKeyError: a trusted CA signed it but OpenSSH
    would refuse it (expired, not yet valid, another host's, a user certificate, critical options, a bad or SHA-1
    signature), or its CA or key is @revoked.
    """
    names = ep.host_key_names
    name = names[0]
    try:
        cert = parse_certificate(blob)
    except ValueError as exc:
        raise HostKeyError(f"the host certificate of {name} cannot be read: {exc}",
                           hint="check the node's sshd HostCertificate") from None
    revoked = revoked_blobs(files, names).get(cert.ca_key)
    plain = check_host_key(files, names, key.get_name(), key.get_base64())
    if revoked is not None or plain.verdict is Verdict.REVOKED:
        path, entry = revoked if revoked is not None else plain.lines[0]
        what = "its certificate's CA key" if revoked is not None else "its key"
        raise HostKeyError(
            f"host key for {name} is REVOKED ({what}, {key.get_name()} {key.fingerprint}): @revoked in {path} line "
            f"{entry.line}; refusing to connect",
            hint="a revoked key is never accepted (not even with --accept-new-host-keys): give the node a new host key "
            "or certificate",
        )
    trusted = [(p, e) for p, e in trusted_authorities(files, names) if e.key_bytes == cert.ca_key]
    if not trusted:
        return False
    path, entry = trusted[0]
    bare = (ep.host_key_alias,) if ep.host_key_alias else tuple(dict.fromkeys((ep.hostname, ep.alias)))
    problem = certificate_problem(cert, bare, time.time())
    if problem is None and not _signed_by(entry.key_type, entry.key_bytes, cert):
        problem = "the CA's signature on it does not verify"
    if problem is not None:
        raise HostKeyError(
            f"host certificate of {name} (id {cert.key_id!r}, serial {cert.serial}, CA of {path} line {entry.line}) "
            f"is refused: {problem}",
            hint="have the node's host certificate re-signed for its name (ssh-keygen -s CA -h -n NAME) and reload sshd",
        )
    return True


def _signed_by(ca_type: str, ca_blob: bytes, cert: HostCertificate) -> bool:
    try:
        ca = paramiko.PKey.from_type_string(ca_type, ca_blob)
        return bool(ca.verify_ssh_sig(cert.signed, paramiko.Message(cert.signature)))
    except Exception:  # noqa: BLE001  (an unknown CA key type, a malformed signature: not verified either way)
        return False


def _host_key_refusal(check: HostKeyCheck, names: tuple[str, ...], offered: str, searched: str) -> HostKeyError:
    """The error for a key the files refuse (revoked, changed), cannot judge (certificates) or know other types of."""
    path, entry = check.lines[0]
    name = names[0]
    matched = next((n for n in names if entry.matches(n)), name)  # the name `ssh-keygen -R` finds the line under
    where = f"{path} line {entry.line}"
    if check.verdict is Verdict.REVOKED:
        return HostKeyError(
            f"host key for {name} is REVOKED ({offered}): @revoked in {where}; refusing to connect",
            hint="a revoked key is never accepted (not even with --accept-new-host-keys): give the node a new host key, "
            f"or remove the @revoked line from {path} if it names the key by mistake",
        )
    if check.verdict is Verdict.CHANGED:
        return HostKeyError(
            f"host key for {name} has CHANGED ({offered}); refusing to connect ({where} holds another "
            f"{entry.key_type} key; searched {searched})",
            hint=f"if the node was reinstalled, remove the old key: ssh-keygen -R {matched} -f {path}",
        )
    if check.verdict is Verdict.CERT_ONLY:
        return HostKeyError(
            f"{name} is known only through @cert-authority ({where}), but it offered no host certificate signed by "
            f"that CA ({offered}; searched {searched})",
            hint="give the node a host certificate signed by that CA (sshd HostCertificate), or add its own host key "
            "to a known_hosts file after verifying it (`ssh-keyscan`)",
        )
    holders = ", ".join(dict.fromkeys(p for p, _ in check.lines))
    return HostKeyError(
        f"{name} offered a {offered.split()[0]} key but {holders} holds only {', '.join(check.known_types)} for it",
        hint=f"verify the node, then update {path} (ssh-keygen -R {matched} -f {path})",
    )


def _lines(numbers: tuple[int, ...]) -> str:
    shown = ", ".join(str(n) for n in numbers[:5]) + (f" (+{len(numbers) - 5} more)" if len(numbers) > 5 else "")
    return f"line {shown}" if len(numbers) == 1 else f"lines {shown}"


def _base_key_type(key_type: str) -> str:
    return "ssh-rsa" if key_type.startswith("rsa-sha2") else key_type


def _parse_jump(spec: str, default_user: str | None) -> tuple[str | None, str, int | None]:
    """Split `[user@]host[:port]` (ssh -J syntax)."""
    user = default_user
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port: int | None = None
    if spec.startswith("["):  # [v6addr]:port
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        return user, host, port
    if spec.count(":") == 1:
        host, port_text = spec.split(":")
        if port_text.isdigit():
            return user, host, int(port_text)
    return user, spec, port


def _agent_socket(line: ConfigLine, expand: Callable[[ConfigLine], str | None],
                  problems: list[TransportError]) -> str | None:
    """IdentityAgent: None for `none` (or an unset $VAR, a problem); SSH_AUTH_SOCK's or $VAR's socket; else a path,
    expanded as any file option."""
    value = line.value
    if value.lower() == "none":
        return None
    if value == "SSH_AUTH_SOCK":
        return os.environ.get("SSH_AUTH_SOCK") or None
    if value.startswith("$") and value != "$":
        name = value[1:].strip("{}")
        if name not in os.environ:
            problems.append(AuthError(f"ssh config {line.where}: IdentityAgent {value}: environment variable {name} is "
                                      "not set", hint="set it (start the agent), or change IdentityAgent"))
        return os.environ.get(name) or None
    return expand(line)


def _accepts_new_keys(line: ConfigLine, problems: list[TransportError]) -> bool:
    """StrictHostKeyChecking: whether unknown keys are recorded (`accept-new`); `no` is refused (a problem), saying why."""
    policy = line.value.lower()
    if policy in ("no", "off", "false"):
        problems.append(HostKeyError(
            f"ssh config {line.where}: StrictHostKeyChecking {line.value} is refused: it would accept any host key, a "
            "changed one too, so a machine in the middle could take the connection unnoticed",
            hint="for these hosts use `StrictHostKeyChecking accept-new` (records unknown keys, refuses changed ones), or "
            "set `accept_new_host_keys` in the inventory / pass --accept-new-host-keys, which then decides instead of "
            "the ssh config"))
    elif policy not in ("yes", "true", "ask", "accept-new"):
        problems.append(HostKeyError(f"ssh config {line.where}: StrictHostKeyChecking {line.value!r} is not yes, "
                                     "accept-new, ask or no", hint=f"fix it in {line.path}"))
    return policy == "accept-new"


def _load_ssh_config(path: str, *, system: str | None) -> tuple[paramiko.SSHConfig | None, config_files.ConfigText]:
    """The one ssh config reader: `path`, then `system`, Includes followed; None when neither exists or parses."""
    text = config_files.read_config_text(path, system=system)
    if not text.files:
        return None, text
    try:
        return paramiko.SSHConfig.from_text(text.text), text
    except (paramiko.SSHException, ValueError) as exc:
        log.warning("ignoring unusable ssh config %s: %s", ", ".join(text.files), exc)
        return None, text


def ssh_config_taken(inventory: Inventory) -> dict[str, tuple[ConfigLine, ...]]:
    """What the ssh config decides for each SSH node (by name), every line with its file and line (`inventory show`)."""
    connector = SSHConnector(inventory)
    return {node.name: tuple(line for lines in connector.endpoint(node).taken.values() for line in lines)
            for node in inventory.nodes if node.transport == "ssh"}


class _Transport(paramiko.Transport):
    """paramiko's Transport with OpenSSH's ServerAliveInterval/ServerAliveCountMax: after `count` keepalives the server
    left unanswered, the connection is closed (paramiko's own keepalive asks for no answer)."""

    unanswered = 0
    gave_up: str | None = None  # why the connection was closed for want of answers

    def server_alive(self, interval: int, count: int) -> None:
        if not count:
            self.set_keepalive(interval)
            return

        def probe() -> None:
            if self.unanswered >= count:
                self.gave_up = f"no answer to {count} keepalives {interval}s apart (ServerAliveCountMax)"
                self.close()
                return
            self.unanswered += 1
            message = paramiko.Message()
            message.add_byte(paramiko.common.cMSG_GLOBAL_REQUEST)
            message.add_string("keepalive@openssh.com")
            message.add_boolean(True)  # want_reply: sshd answers (with a failure), which shows it is alive
            getattr(self, "_send_user_message")(message)  # paramiko's own way out, as its global_request

        self.packetizer.set_keepalive(interval, probe)

    def _parse_request_success(self, m: paramiko.Message) -> None:
        self.unanswered = 0
        getattr(super(), "_parse_request_success")(m)

    def _parse_request_failure(self, m: paramiko.Message) -> None:
        self.unanswered = 0
        getattr(super(), "_parse_request_failure")(m)


class _ProxyCommand(paramiko.ProxyCommand):
    """paramiko's ProxyCommand, where the command's end is the connection's end: paramiko's own reads spin on the
    closed pipe until their timeout (a proxy that failed at once took connect_timeout of busy CPU to be reported)."""

    def recv(self, size: int) -> bytes:
        buffer = b""
        started = time.monotonic()
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while len(buffer) < size:
                wait = None
                if self.timeout is not None:
                    wait = self.timeout - (time.monotonic() - started)
                    if wait <= 0:
                        if buffer:
                            return buffer
                        raise socket.timeout()
                if select.select([stdout], [], [], wait)[0]:
                    chunk = os.read(stdout.fileno(), size - len(buffer))
                    if not chunk:
                        return buffer  # the command ended: b"" next time, which paramiko takes for the connection's end
                    buffer += chunk
            return buffer
        except socket.timeout:
            raise
        except OSError as exc:
            raise paramiko.ProxyCommandFailure(" ".join(self.cmd), exc.strerror or str(exc)) from None

    def close(self) -> None:
        """Stop the command and reap it (paramiko's close signals a pid that may be reaped already, and leaves zombies)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class _AgentAt(paramiko.agent.AgentSSH):
    """An ssh-agent at a socket path (IdentityAgent); paramiko's Agent reads only SSH_AUTH_SOCK."""

    def __init__(self, path: str) -> None:
        super().__init__()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(10)
        try:
            conn.connect(path)
        except OSError:
            conn.close()
            raise
        getattr(self, "_connect")(conn)  # paramiko's Agent does the same with SSH_AUTH_SOCK's socket


def _public_key_of(identity: str) -> bytes | None:
    """The key blob of IDENTITY.pub, when there is one (an encrypted key's public half, to find it in the agent)."""
    try:
        return base64.b64decode(Path(f"{identity}.pub").expanduser().read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _proxy_error(sock: paramiko.ProxyCommand, ep: SSHEndpoint) -> TransportError | None:
    """The ProxyCommand ended before the handshake did: its status and the last line it wrote to stderr."""
    try:
        code = sock.process.wait(timeout=1)
    except subprocess.TimeoutExpired:
        return None  # still running: the handshake itself failed
    if code < 0:
        return None  # killed: paramiko closed it when the handshake failed
    said = ""
    stderr = sock.process.stderr
    if stderr is not None and select.select([stderr], [], [], 0)[0]:
        lines = os.read(stderr.fileno(), 4096).decode("utf-8", errors="replace").strip().splitlines()
        said = f": {lines[-1].strip()}" if lines else ""
    return ConnectError(
        f"ProxyCommand for {ep.alias} ({ep.where('proxycommand')}) exited with status {code} before the SSH "
        f"handshake{said}",
        hint=f"it must connect its stdin and stdout to the node's sshd: run `{ep.proxy_command}` by hand, or "
        f"`ssh -o BatchMode=yes {ep.alias} true`, which runs it the same way",
    )


def _default_identity_files() -> tuple[str, ...]:
    return tuple(f"~/.ssh/{name}" for name in ("id_ed25519", "id_ecdsa", "id_rsa") if Path(f"~/.ssh/{name}").expanduser().exists())


def _text(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", errors="replace")
