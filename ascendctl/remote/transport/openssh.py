"""The `openssh` transport: the system `ssh` client, one multiplexed connection per node.

For what Paramiko cannot do (GSSAPI/Kerberos, PKCS#11 or FIDO keys, a ControlPath the site relies on) and for
`transport: openssh` in the inventory. Every command is `ssh` with BatchMode=yes (never a prompt), the inventory's
settings as `-o` options (each value quoted for ssh's own parser: no shell ever sees the argv) and ControlMaster=auto
with a ControlPath in a private 0700 directory of ours, so the first command to a node opens its connection and the
rest share it; `ssh -O exit` closes it when the group closes. Host keys: StrictHostKeyChecking=yes, accept-new only
with `accept_new_host_keys`; the inventory's `known_hosts`, when set, is the only file (UserKnownHostsFile), else the
files ssh itself uses. Commands run under the node's `timeout` as over Paramiko (base.node_bounded), so the same
statuses, exit codes and probe answers come back. No secret is put in the argv: job environments go on stdin.
Must not import typer, rich or paramiko.
"""

from __future__ import annotations

import logging
import math
import os
import random
import re
import selectors
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ascendctl.errors import (AuthError, CommandTimeoutError, ConnectError, HostKeyError, NodeSilentError,
                              TransientConnectError, TransportError)
from ascendctl.models import CommandResult
from ascendctl.remote.transport import ssh_config as config_files
from ascendctl.remote.transport.base import ANSWER_SLACK, KILL_GRACE, node_bounded, stopped_at_limit
from ascendctl.remote.transport.local import LocalSpawned

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory, Node

log = logging.getLogger(__name__)

SSH = "ssh"
# How long a node's connection stays up with no command on it. The group closes it (`ssh -O exit`) when it is done;
# this bounds how long one outlives an ascendctl that was killed. A command after the pause simply opens a new one.
CONTROL_PERSIST = 60
KEEPALIVE = 15  # ServerAliveInterval, as the Paramiko transport's keepalive
KEEPALIVE_COUNT = 3
EXIT_WAIT = 5.0  # seconds `ssh -O exit` may take
STDERR_TAIL = 8192  # bytes of a command's stderr kept to tell ssh's own errors from the command's
# ssh's own last words when it, not the remote command, ends with status 255
_SSH_FAILURE = re.compile(
    r"^(ssh: |ssh_exchange_identification|kex_exchange_identification|mux_client_|control_persist_detach|client_loop: |"
    r"Connection to \S+ closed|Connection closed by |Connection reset by |Host key verification failed|"
    r"[^\s@]+@[^\s:]+: Permission denied \(|Received disconnect from |Bad owner or permissions|"
    r"Timeout, server \S+ not responding|Control socket connect)")
# Options of the user's ssh config that only the system ssh honours: any of them, for a node, selects this transport
# when the inventory does not name one. Keys are `ssh -G` names.
OPENSSH_ONLY = ("gssapiauthentication", "pkcs11provider", "securitykeyprovider", "controlpath")


def quote(value: str) -> str:
    """`value` as one word for ssh's config parser (the text of a `-o Key=VALUE`): double quotes, `\\` and `"` escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def path_value(path: str) -> str:
    """A file path for an option that expands %-tokens (files, ControlPath): `~` expanded, `%` kept literal, quoted."""
    return quote(os.path.expanduser(path).replace("%", "%%"))


class OpenSSHConnector:
    """Connects an inventory's nodes with the system ssh; owns the private ControlPath directory."""

    def __init__(self, inventory: Inventory, *, ssh: str | None = None) -> None:
        self.inventory = inventory
        self.ssh = ssh or shutil.which(SSH) or ""
        self._lock = threading.Lock()
        self._dir: str | None = None  # made on first connect (0700), removed on close
        self._resolved: dict[tuple[str, ...], dict[str, str]] = {}
        self._mentioned: frozenset[str] | None = None

    # -- the argv ------------------------------------------------------------------------------
    def control_dir(self) -> str:
        with self._lock:
            if self._dir is None:
                base = os.environ.get("XDG_RUNTIME_DIR")
                self._dir = tempfile.mkdtemp(prefix="ascendctl-ssh-", dir=base if base and os.path.isdir(base) else None)
                os.chmod(self._dir, 0o700)  # mkdtemp makes it so; said here for the reader
            return self._dir

    def config_options(self) -> list[str]:
        """`-F FILE` when the inventory names its ssh config (read alone, as the Paramiko transport reads it)."""
        if self.inventory.sources.get("ssh_config", "default") == "default":
            return []
        named = os.path.expanduser(self.inventory.ssh_config)
        return ["-F", named if os.path.exists(named) else os.devnull]  # ssh refuses a missing -F; Paramiko reads none

    def options(self, node: Node, *, control: bool = True) -> list[str]:
        """The `-o` options for `node`: batch mode, host-key policy, timeouts, multiplexing, the inventory's settings."""
        opts = ["-o", "BatchMode=yes",
                "-o", f"StrictHostKeyChecking={'accept-new' if node.accept_new_host_keys else 'yes'}",
                "-o", "UpdateHostKeys=no",
                "-o", f"ConnectTimeout={max(1, math.ceil(node.connect_timeout))}",
                "-o", f"ServerAliveInterval={KEEPALIVE}",
                "-o", f"ServerAliveCountMax={KEEPALIVE_COUNT}",
                "-o", "LogLevel=ERROR",
                # what a user's config may add that has no place in a batch command: a terminal, another remote
                # command, local commands, port forwardings (a LocalForward already bound would fail every command)
                "-o", "RequestTTY=no", "-o", "RemoteCommand=none", "-o", "PermitLocalCommand=no",
                "-o", "ClearAllForwardings=yes"]
        if control:
            opts += ["-o", "ControlMaster=auto", "-o", f"ControlPersist={CONTROL_PERSIST}",
                     "-o", f"ControlPath={quote(self.control_dir().replace('%', '%%') + '/%C')}"]  # %C: a hash per destination
        if _explicit(node, "known_hosts"):
            opts += ["-o", f"UserKnownHostsFile={path_value(node.known_hosts)}", "-o", "GlobalKnownHostsFile=none"]
        if _explicit(node, "user") and node.user:
            opts += ["-o", f"User={quote(node.user)}"]
        if _explicit(node, "port"):
            opts += ["-o", f"Port={node.port}"]
        if _explicit(node, "identity_file") and node.identity_file:
            opts += ["-o", f"IdentityFile={path_value(node.identity_file)}"]
        if _explicit(node, "jump_host") and node.jump_host:
            opts += ["-o", f"ProxyJump={quote(node.jump_host)}"]
        return opts

    def argv(self, node: Node, *, control: bool = True) -> list[str]:
        """`ssh` and every option for `node`, up to and including the destination (the command follows)."""
        return [self.ssh or SSH, *self.config_options(), *self.options(node, control=control), "--", node.host]

    # -- what the ssh config says --------------------------------------------------------------
    def mentioned(self) -> frozenset[str]:
        """Which of OPENSSH_ONLY the ssh config ascendctl reads mentions at all (read once)."""
        with self._lock:
            if self._mentioned is None:
                system = config_files.SYSTEM_SSH_CONFIG if not self.config_options() else None
                text = config_files.read_config_text(self.inventory.ssh_config, system=system).text
                self._mentioned = frozenset(config_files.mentions(text, OPENSSH_ONLY))
            return self._mentioned

    def resolved(self, node: Node, *, extra: Sequence[str] = ()) -> dict[str, str]:
        """`ssh -G` for the node: the options ssh itself would use (lowercase keys); {} when it cannot say."""
        argv = [self.ssh or SSH, *self.config_options(), *extra, "-G", "--", node.host]
        key = tuple(argv)
        with self._lock:
            if key in self._resolved:
                return self._resolved[key]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        found: dict[str, str] = {}
        for line in out.splitlines():
            name, _, value = line.partition(" ")
            found.setdefault(name.lower(), value.strip())
        with self._lock:
            self._resolved[key] = found
        return found

    def reason(self, node: Node) -> str | None:
        """Why `node` must be reached with the system ssh, or None. `ssh -G` is asked only when the config mentions
        one of OPENSSH_ONLY that could matter (GSSAPIAuthentication only with a Kerberos ticket), so an ordinary
        config, Debian's `GSSAPIAuthentication yes` for every host included, costs nothing per node."""
        if not self.ssh:
            return None
        mattering = self.mentioned() - (set() if kerberos_ticket() else {"gssapiauthentication"})
        if not mattering:
            return None
        return openssh_reason(self.resolved(node))

    def site_control_path(self, node: Node) -> bool:
        """Whether the user's ssh config gives the node a ControlPath: then the site's masters are used, not ours."""
        if "controlpath" not in self.mentioned():
            return False
        return self.resolved(node).get("controlpath", "none").lower() not in ("none", "")

    def known_hosts_files(self, node: Node) -> list[str]:
        """Every file ssh searched for the node's host key (`ssh -G`: its own answer), for the error that names them."""
        if _explicit(node, "known_hosts"):
            return [os.path.expanduser(node.known_hosts)]
        cfg = self.resolved(node, extra=self.options(node, control=False))  # -G prints paths unquoted: split on blanks
        files = [*cfg.get("userknownhostsfile", "").split(), *cfg.get("globalknownhostsfile", "").split()]
        return [os.path.expanduser(f) for f in files if f.lower() != "none"]

    # -- connecting ----------------------------------------------------------------------------
    def connect(self, node: Node) -> "OpenSSHTransport":
        """Open the node's master connection (`true` through it), retrying transient drops as the Paramiko transport."""
        if not self.ssh:
            raise ConnectError("no `ssh` client on this machine (transport openssh)",
                               hint="install openssh-client, or set `transport: ssh` (Paramiko) in the inventory")
        site = self.site_control_path(node)
        transport = OpenSSHTransport(node, self.argv(node, control=not site), exit_argv=None if site else self.argv(node))
        attempts = self.inventory.connect_retries + 1
        for attempt in range(attempts):
            try:
                transport.open()
                return transport
            except HostKeyError as exc:
                searched = ", ".join(self.known_hosts_files(node)) or "no file (UserKnownHostsFile and GlobalKnownHostsFile are none)"
                raise HostKeyError(f"{exc.message}; searched {searched}", hint=exc.hint) from None
            except TransientConnectError as exc:
                if attempt + 1 >= attempts:
                    raise ConnectError(
                        f"{exc.message} (after {attempts} attempts)",
                        hint="sshd dropped the connection repeatedly: check MaxStartups on the node or lower `fanout`",
                    ) from None
                pause = min(0.25 * 2**attempt, 4.0) * random.uniform(0.5, 1.5)
                log.debug("%s: transient connect failure (%s); retry %d in %.2fs", node.name, exc.message, attempt + 1, pause)
                time.sleep(pause)
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            folder, self._dir = self._dir, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _explicit(node: Node, setting: str) -> bool:
    return node.sources.get(setting, "default") != "default"


def kerberos_ticket(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this user has a Kerberos credential cache (KRB5CCNAME, or the default /tmp/krb5cc_UID).

    `GSSAPIAuthentication yes` alone selects nothing: Debian and Ubuntu ship it in /etc/ssh/ssh_config for every
    host, where keys do the work. With a ticket, GSSAPI is what the site's ssh uses first.
    """
    cache = environ.get("KRB5CCNAME")
    if cache:
        kind, _, where = cache.partition(":")
        return kind.upper() in ("KEYRING", "KCM", "API") or os.path.exists(where or cache)
    return os.path.exists(f"/tmp/krb5cc_{os.getuid()}")


def openssh_reason(settings: Mapping[str, str]) -> str | None:
    """Why `ssh -G`'s settings for a node need the system ssh (what Paramiko cannot do), or None."""
    if settings.get("gssapiauthentication", "no").lower() == "yes" and kerberos_ticket():
        return "GSSAPIAuthentication yes, with a Kerberos ticket"
    provider = settings.get("pkcs11provider", "none")
    if provider.lower() != "none":
        return f"PKCS11Provider {provider} (keys on a smart card or token)"
    sk = settings.get("securitykeyprovider", "internal")
    if sk.lower() != "internal":
        return f"SecurityKeyProvider {sk} (FIDO keys)"
    control = settings.get("controlpath", "none")
    if control.lower() != "none":
        return f"ControlPath {control} (the site's shared connections)"
    return None


class OpenSSHTransport:
    """One node through the system ssh: every command is a client on the node's shared (multiplexed) connection."""

    def __init__(self, node: Node, argv: list[str], *, exit_argv: list[str] | None) -> None:
        self.node = node
        self._argv = argv  # up to the destination
        self._exit_argv = exit_argv  # our ControlPath's argv for `ssh -O exit`; None: the site's masters, left alone
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def label(self) -> str:
        return self.node.address

    def command_argv(self, command: str) -> list[str]:
        return [*self._argv, command]

    def open(self) -> None:
        """Connect and authenticate; the errors say why it failed.

        Our own master is started with `-f -N`: ssh goes to the background once authenticated, with no session and
        no command on the node. Through the site's ControlPath, `true` is run instead (its masters are its own).
        """
        limit = self.node.connect_timeout
        started = time.monotonic()
        argv = [*self._argv[:-2], "-f", "-N", *self._argv[-2:]] if self._exit_argv is not None else self.command_argv("true")
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=limit * 2 + 5,
                                  stdin=subprocess.DEVNULL, start_new_session=True, env=batch_env())
        except subprocess.TimeoutExpired:
            raise ConnectError(f"connect to {self.label} timed out after {time.monotonic() - started:.0f}s (ssh)",
                               hint="is the node up and the address right? raise connect_timeout for slow networks") from None
        if proc.returncode != 0:
            error = connect_error(self.label, proc.returncode, proc.stderr.decode("utf-8", "replace"), limit)
            if isinstance(error, HostKeyError) and error.message.startswith("unknown host key"):
                error = self._with_offered_key(error, argv, limit)
            raise error

    def _with_offered_key(self, error: HostKeyError, argv: list[str], limit: float) -> HostKeyError:
        """ssh names no key when it refuses an unknown one: ask it again, verbosely, which key the node offered, so the
        message carries the fingerprint to verify (as the Paramiko transport's does). One more refused connection."""
        verbose = [argv[0], "-v", *argv[1:]]
        try:
            proc = subprocess.run(verbose, capture_output=True, timeout=limit * 2 + 5, stdin=subprocess.DEVNULL,
                                  start_new_session=True, env=batch_env())
        except (OSError, subprocess.TimeoutExpired):
            return error
        offered = _OFFERED_KEY_RX.search(proc.stderr.decode("utf-8", "replace"))
        if offered is None:
            return error
        message = error.message.replace(f"unknown host key for {self.label}",
                                        f"unknown host key for {self.label} ({offered['type']} {offered['fp']})", 1)
        return HostKeyError(message, hint=error.hint)

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
        """Run `command` under the node's `timeout`, handing output to the callbacks as it arrives."""
        limit = self.node.command_timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + limit + KILL_GRACE + ANSWER_SLACK  # the node stops it at `limit` and says so
        proc = self._popen(node_bounded(command, limit), stdin, stderr=True)
        out: list[bytes] = []
        err: list[bytes] = []
        tail = bytearray()
        to_out = on_stdout or out.append
        to_err = on_stderr or err.append
        heard = started
        try:
            with selectors.DefaultSelector() as selector:
                for pipe in (proc.stdout, proc.stderr):
                    assert pipe is not None
                    selector.register(pipe, selectors.EVENT_READ)
                while selector.get_map():
                    now = time.monotonic()
                    remaining = deadline - now
                    if remaining <= 0:
                        raise NodeSilentError(f"{self.label} stopped answering: no output and no exit status "
                                              f"{limit + KILL_GRACE + ANSWER_SLACK:g}s into a command limited to {limit:g}s",
                                              hint="is the node (or its network) down? `ascendctl preflight -i ... --only ssh`")
                    if idle is not None:
                        if now - heard >= idle:
                            raise NodeSilentError(f"{self.label} stopped answering: nothing received for {idle:g}s "
                                                  "(command_timeout)", hint="is the node (or its network) down?")
                        remaining = min(remaining, idle - (now - heard))
                    for key, _ in selector.select(min(remaining, 0.5)):
                        chunk = os.read(key.fd, 1 << 20)
                        if not chunk:
                            selector.unregister(key.fileobj)
                            continue
                        heard = time.monotonic()
                        if key.fileobj is proc.stdout:
                            to_out(chunk)
                        else:
                            tail.extend(chunk)
                            del tail[:-STDERR_TAIL]
                            to_err(chunk)
            status = proc.wait()
        finally:
            self._finish(proc)
        elapsed = time.monotonic() - started
        if status == 255 and ssh_failed(tail.decode("utf-8", "replace")):
            raise lost_connection(self.label, tail.decode("utf-8", "replace"))
        if stopped_at_limit(status, elapsed, limit):
            raise CommandTimeoutError.after(limit, _text(out), _text(err))
        return CommandResult(command, status, _text(out), _text(err), elapsed)

    def spawn(self, command: str, *, stdin: bytes | None = None) -> LocalSpawned:
        proc = self._popen(command, stdin, stderr=False)
        return LocalSpawned(proc, self._procs)

    def put(self, local: Path, remote: str) -> None:
        mode = os.stat(local).st_mode & 0o7777
        target = shlex.quote(remote)
        with open(local, "rb") as data:
            self._transfer(f"cat > {target} && chmod {mode:o} {target}", stdin=data, stdout=subprocess.DEVNULL)

    def get(self, remote: str, local: Path) -> None:
        with open(local, "wb") as data:
            self._transfer(f"cat -- {shlex.quote(remote)}", stdin=subprocess.DEVNULL, stdout=data)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            procs = list(self._procs)
        for proc in procs:
            _kill(proc)
        if self._exit_argv is not None:
            argv = [*self._exit_argv[:-2], "-O", "exit", *self._exit_argv[-2:]]
            try:
                subprocess.run(argv, capture_output=True, timeout=EXIT_WAIT, stdin=subprocess.DEVNULL, start_new_session=True)
            except (OSError, subprocess.TimeoutExpired):
                pass

    # -- helpers ---------------------------------------------------------------------------
    def _popen(self, command: str, stdin: bytes | None, *, stderr: bool) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._closed:
                raise ConnectError(f"connection to {self.label} closed")
            proc = subprocess.Popen(self.command_argv(command),
                                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
                                    start_new_session=True, env=batch_env())
            self._procs.add(proc)
        if stdin is not None and proc.stdin is not None:
            threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        return proc

    def _finish(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            _kill(proc)
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        with self._lock:
            self._procs.discard(proc)

    def _transfer(self, command: str, *, stdin: IO[Any] | int, stdout: IO[Any] | int) -> None:
        limit = self.node.command_timeout
        proc = subprocess.Popen(self.command_argv(node_bounded(command, limit)), stdin=stdin, stdout=stdout,
                                stderr=subprocess.PIPE, start_new_session=True, env=batch_env())
        with self._lock:
            self._procs.add(proc)
        try:
            _, err = proc.communicate(timeout=limit + KILL_GRACE + ANSWER_SLACK)
        except subprocess.TimeoutExpired:
            raise CommandTimeoutError.after(limit) from None
        finally:
            self._finish(proc)
        text = err.decode("utf-8", "replace")
        if proc.returncode == 255 and ssh_failed(text):
            raise lost_connection(self.label, text)
        if proc.returncode != 0:
            raise TransportError(f"copy on {self.label} failed (exit {proc.returncode}): {_last_line(text)}")


def batch_env() -> dict[str, str]:
    """The environment of every ssh we start: never an askpass program (with no terminal, start_new_session, ssh
    could otherwise open one on $DISPLAY), also for the jump hosts ProxyJump starts, which BatchMode does not reach."""
    return {**os.environ, "SSH_ASKPASS_REQUIRE": "never"}


def _feed(pipe: object, data: bytes) -> None:
    try:
        pipe.write(data)  # type: ignore[attr-defined]
        pipe.close()  # type: ignore[attr-defined]
    except (BrokenPipeError, OSError, ValueError):
        pass


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Stop the local ssh client (its session: nothing of it is left); the remote command gets the hangup."""
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass


def ssh_failed(stderr: str) -> bool:
    """Whether stderr's last line is ssh's own error (status 255 then means the connection, not the command)."""
    return bool(_SSH_FAILURE.match(_last_line(stderr)))


# `ssh -v`: "debug1: Server host key: ssh-ed25519 SHA256:..." (the key the node offered, before it is refused)
_OFFERED_KEY_RX = re.compile(r"Server host key: (?P<type>\S+) (?P<fp>SHA256:[A-Za-z0-9+/=]+)")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def lost_connection(label: str, stderr: str) -> ConnectError:
    return ConnectError(f"lost connection to {label}: {_last_line(stderr)}",
                        hint="is the node (or its network) down? `ascendctl preflight -i ... --only ssh`")


def connect_error(label: str, status: int, stderr: str, connect_timeout: float) -> TransportError:
    """The error for a failed first connection, from ssh's status and its words (one status per kind, as Paramiko's)."""
    text = stderr.replace("\r", "")
    last = _last_line(text) or f"ssh exited with status {status}"
    if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        offending = re.findall(r"Offending \S+ key (?:for IP )?in (\S+):(\d+)", text)
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
            where = "; ".join(f"{path} line {line}" for path, line in offending) or "a known_hosts file"
            return HostKeyError(f"host key for {label} has CHANGED; refusing to connect (ssh: {where} holds another key)",
                                hint="if the node was reinstalled, remove the old key (ssh-keygen -R HOST -f FILE)")
        return HostKeyError(f"unknown host key for {label} (ssh: Host key verification failed)",
                            hint="add it with `ssh-keyscan` after verifying it, or opt in with "
                            "`accept_new_host_keys: true` / --accept-new-host-keys")
    if "Permission denied" in text or "Too many authentication failures" in text:
        return AuthError(f"ssh auth failed for {label} ({last})",
                         hint=f"check `identity_file`/`user` in the inventory, or run: ssh {label} true")
    if "Connection refused" in text:
        return ConnectError(f"connection refused by {label} ({last})", hint="is sshd running on the node?")
    if "Could not resolve hostname" in text or "Name or service not known" in text:
        return ConnectError(f"cannot resolve {label}: {last}", hint="check `host` in the inventory")
    if "timed out" in text:
        return ConnectError(f"connect to {label} timed out after {connect_timeout:g}s ({last})",
                            hint="is the node up and the address right? raise connect_timeout for slow networks")
    if re.search(r"Connection (closed|reset) by|kex_exchange_identification|ssh_exchange_identification", text):
        return TransientConnectError(f"{label} dropped the connection during the SSH handshake ({last})")
    if status == 255:
        return ConnectError(f"ssh to {label} failed: {last}")
    return ConnectError(f"ssh to {label} failed (status {status}): {last}")


def _text(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", errors="replace")
