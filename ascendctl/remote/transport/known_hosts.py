"""Host-key lookup as OpenSSH does it: which known_hosts files, which names, and what a file's lines say of a key.

Pure (no paramiko, no network): a key is its type and base64 blob. `remote/transport/ssh.py` asks `check_host_key`
for a verdict and turns it into a connection or a `HostKeyError`.

* Names tried (`host_key_names`): `HostKeyAlias` alone when set, else the name as written in the inventory and the
  `HostName` it dials (OpenSSH itself looks up only the latter); `[name]:port` when the port is not 22.
* Files (`known_hosts_files`): every `UserKnownHostsFile` and `GlobalKnownHostsFile` of the ssh config (`~`,
  `${VAR}` and the %-tokens expanded), else ~/.ssh/known_hosts, ~/.ssh/known_hosts2, /etc/ssh/ssh_known_hosts,
  /etc/ssh/ssh_known_hosts2.
* Lines: `[@marker] patterns keytype base64 [comment]`; patterns are `|1|salt|hash` (hashed) or a comma list with
  `*`, `?` and `!` (a matching negated pattern rules the line out, whatever else matches); `@revoked` refuses its key
  for the hosts it names, even where another line accepts it; `@cert-authority` names a CA whose host certificates
  are accepted (`parse_certificate`, `certificate_problem`; ssh.py verifies the CA's signature with paramiko).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import enum
import hashlib
import hmac
import os
import re
import socket
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_USER_FILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_FILES = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
MARKERS = ("@revoked", "@cert-authority")
_TOKEN = re.compile(r"%(.)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class HostKeyLine:
    """One entry of a known_hosts file."""

    line: int
    patterns: str  # `|1|salt|hash` or a comma list of (possibly negated) patterns
    key_type: str
    blob: str  # the key, base64 as written
    marker: str | None = None  # "@revoked" | "@cert-authority"

    def matches(self, name: str) -> bool:
        return host_matches(self.patterns, name)

    @property
    def key_bytes(self) -> bytes:
        return base64.b64decode(self.blob)


@dataclass(frozen=True, slots=True)
class KnownHostsFile:
    """A known_hosts file as read: its entries, lines that are not entries, or why it cannot be used at all."""

    path: str  # as configured (messages show it so)
    entries: tuple[HostKeyLine, ...] = ()
    bad_lines: tuple[int, ...] = ()
    problem: str | None = None  # "it is a directory", "it cannot be read (Permission denied)"
    # entries whose patterns are plain names, by name (1,000 nodes against a 1,000-line file: no quadratic scan) ...
    by_name: Mapping[str, tuple[HostKeyLine, ...]] = field(default_factory=dict, compare=False)
    # ... and the rest (wildcards, negations, hashes), matched one by one
    to_scan: tuple[HostKeyLine, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.entries and not self.by_name and not self.to_scan:
            by_name: dict[str, list[HostKeyLine]] = {}
            scan: list[HostKeyLine] = []
            for entry in self.entries:
                patterns = entry.patterns.lower().split(",")
                if entry.patterns.startswith("|") or any(c in entry.patterns for c in "*?!"):
                    scan.append(entry)
                    continue
                for pattern in dict.fromkeys(patterns):
                    by_name.setdefault(pattern, []).append(entry)
            object.__setattr__(self, "by_name", {k: tuple(v) for k, v in by_name.items()})
            object.__setattr__(self, "to_scan", tuple(scan))

    def matching(self, names: Sequence[str]) -> list[HostKeyLine]:
        """The entries that name any of `names`, in file order."""
        lowered = [n.lower() for n in names]
        found = {id(e): e for n in lowered for e in self.by_name.get(n, ())}
        found.update((id(e), e) for e in self.to_scan if any(e.matches(n) for n in lowered))
        return sorted(found.values(), key=lambda e: e.line)

    def with_entry(self, patterns: str, key_type: str, blob: str) -> "KnownHostsFile":
        last = max([e.line for e in self.entries] + list(self.bad_lines) + [0])
        return KnownHostsFile(self.path, self.entries + (HostKeyLine(last + 1, patterns, key_type, blob),), self.bad_lines,
                              self.problem)


class Verdict(str, enum.Enum):
    OK = "ok"
    REVOKED = "revoked"  # an @revoked line names this key for this host
    CHANGED = "changed"  # a line holds another key of the same type for this host
    OTHER_TYPES = "other_types"  # keys of other types only
    CERT_ONLY = "cert_only"  # only @cert-authority lines name the host
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class HostKeyCheck:
    """What the files say of a server key: the verdict and the lines that decided it (file path, line)."""

    verdict: Verdict
    lines: tuple[tuple[str, HostKeyLine], ...] = ()

    @property
    def known_types(self) -> tuple[str, ...]:
        return tuple(sorted({entry.key_type for _, entry in self.lines}))


# -- reading ------------------------------------------------------------------------------------------------------
def read_known_hosts(path: str) -> KnownHostsFile:
    """Read a known_hosts file; a missing one holds no keys, a line that is not an entry is counted, never fatal."""
    full = os.path.expanduser(path)
    try:
        mode = os.stat(full).st_mode
        if stat.S_ISCHR(mode) and os.path.realpath(full) == os.devnull:  # `GlobalKnownHostsFile /dev/null`: no keys
            return KnownHostsFile(path)
        if stat.S_ISDIR(mode):
            return KnownHostsFile(path, problem="it is a directory")
        if not stat.S_ISREG(mode):  # a FIFO would block the open, a device would never end
            return KnownHostsFile(path, problem="it is not a regular file")
        with open(full, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return KnownHostsFile(path)
    except OSError as exc:
        return KnownHostsFile(path, problem=f"it cannot be read ({exc.strerror or exc})")
    entries: list[HostKeyLine] = []
    bad: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        text = raw.decode("utf-8", errors="replace").strip()
        if not text or text.startswith("#"):
            continue
        entry = parse_line(text, number)
        if entry is None:
            bad.append(number)
        else:
            entries.append(entry)
    return KnownHostsFile(path, tuple(entries), tuple(bad))


def parse_line(text: str, number: int) -> HostKeyLine | None:
    """A known_hosts line as an entry; None when it is not one (too few fields, a key that is no key, bad hash)."""
    fields = text.split()
    marker = None
    if fields and fields[0].startswith("@"):
        if fields[0] not in MARKERS:
            return None
        marker, fields = fields[0], fields[1:]
    if len(fields) < 3:
        return None
    patterns, key_type, blob = fields[:3]
    if not _blob_is_key(key_type, blob):
        return None
    if patterns.startswith("|") and _hashed(patterns) is None:
        return None
    return HostKeyLine(number, patterns, key_type, blob, marker)


def _blob_is_key(key_type: str, blob: str) -> bool:
    """Whether `blob` is base64 of an SSH public key whose own type field says `key_type`."""
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(data) < 4:
        return False
    size = int.from_bytes(data[:4], "big")
    return data[4:4 + size] == key_type.encode("ascii", errors="replace")


def _hashed(patterns: str) -> tuple[bytes, bytes] | None:
    parts = patterns.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return None
    try:
        salt, digest = base64.b64decode(parts[2], validate=True), base64.b64decode(parts[3], validate=True)
    except (binascii.Error, ValueError):
        return None
    return (salt, digest) if len(salt) == 20 and len(digest) == 20 else None


def hash_host(name: str, salt: bytes | None = None) -> str:
    """`|1|salt|hash` of a host name, as `ssh-keygen -H` and `HashKnownHosts yes` write it."""
    salt = os.urandom(20) if salt is None else salt
    digest = hmac.new(salt, name.encode("utf-8"), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


# -- matching -----------------------------------------------------------------------------------------------------
def host_matches(patterns: str, name: str) -> bool:
    """Whether a known_hosts host field names `name` (already `[host]:port` where the port is not 22).

    Hashed fields compare the HMAC; pattern lists match case-insensitively with `*` and `?`, and a matching `!pattern`
    rules the line out whatever else matches (OpenSSH's match_hostname).
    """
    name = name.lower()
    if patterns.startswith("|"):
        hashed = _hashed(patterns)
        return hashed is not None and hmac.compare_digest(
            hmac.new(hashed[0], name.encode("utf-8"), hashlib.sha1).digest(), hashed[1])
    found = False
    for pattern in patterns.lower().split(","):
        negated = pattern.startswith("!")
        if negated:
            pattern = pattern[1:]
        if pattern and _wildcard(pattern).fullmatch(name):
            if negated:
                return False
            found = True
    return found


def _wildcard(pattern: str) -> re.Pattern[str]:
    """OpenSSH patterns: `*` any run, `?` one character, everything else literal (brackets too: `[host]:port`)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def host_key_names(alias: str, hostname: str, port: int, host_key_alias: str | None = None) -> tuple[str, ...]:
    """The names a host's key is looked up under: HostKeyAlias alone, else the name as written and the HostName."""
    if host_key_alias:
        return (host_key_alias.lower(),)
    names = dict.fromkeys(n.lower() for n in (hostname, alias))
    return tuple(n if port == 22 else f"[{n}]:{port}" for n in names)


def check_host_key(files: Sequence[KnownHostsFile], names: Sequence[str], key_type: str, blob: str) -> HostKeyCheck:
    """The verdict of every file together, as OpenSSH loads them all before deciding."""
    wanted = _base_type(key_type)
    hits = [(f.path, e) for f in files for e in f.matching(names)]
    revoked = [h for h in hits if h[1].marker == "@revoked" and _base_type(h[1].key_type) == wanted and h[1].blob == blob]
    if revoked:
        return HostKeyCheck(Verdict.REVOKED, tuple(revoked))
    plain = [h for h in hits if h[1].marker is None]
    same_type = [h for h in plain if _base_type(h[1].key_type) == wanted]
    accepted = [h for h in same_type if h[1].blob == blob]
    if accepted:
        return HostKeyCheck(Verdict.OK, tuple(accepted[:1]))
    if same_type:
        return HostKeyCheck(Verdict.CHANGED, tuple(same_type))
    if plain:
        return HostKeyCheck(Verdict.OTHER_TYPES, tuple(plain))
    authorities = [h for h in hits if h[1].marker == "@cert-authority"]
    if authorities:
        return HostKeyCheck(Verdict.CERT_ONLY, tuple(authorities))
    return HostKeyCheck(Verdict.UNKNOWN)


def known_key_types(files: Sequence[KnownHostsFile], names: Sequence[str]) -> set[str]:
    """The key types plain lines hold for the host: the ones to ask the server for first."""
    return {e.key_type for f in files for e in f.matching(names) if e.marker is None}


def _base_type(key_type: str) -> str:
    return "ssh-rsa" if key_type.startswith("rsa-sha2") else key_type


# -- which files --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KnownHostsFiles:
    """The files a host's key is looked up in; new keys go to the first user file (None: `UserKnownHostsFile none`)."""

    user: tuple[str, ...]
    system: tuple[str, ...]
    explicit: bool = False  # the inventory's `known_hosts`: a problem with it is an error (else, as ssh, a skipped file)

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.user + self.system))

    @property
    def write_to(self) -> str | None:
        return self.user[0] if self.user else None


def known_hosts_files(config: Mapping[str, object], tokens: Mapping[str, str]) -> KnownHostsFiles:
    """Files from an ssh config's (paramiko-style, lower-case keys) `UserKnownHostsFile`/`GlobalKnownHostsFile`.

    ValueError, naming the option, for an unknown %-token or an unset ${VAR}.
    """
    user = _file_list(config.get("userknownhostsfile"), "UserKnownHostsFile", tokens)
    system = _file_list(config.get("globalknownhostsfile"), "GlobalKnownHostsFile", tokens)
    return KnownHostsFiles(DEFAULT_USER_FILES if user is None else user, DEFAULT_GLOBAL_FILES if system is None else system)


def _file_list(value: object, option: str, tokens: Mapping[str, str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    words = value if isinstance(value, list) else str(value).split()
    if [str(w).lower() for w in words] == ["none"]:
        return ()
    return tuple(expand_path(str(w), option, tokens) for w in words)


def expand_path(value: str, option: str, tokens: Mapping[str, str], *, command: bool = False) -> str:
    """`~`, `${VAR}` and %-tokens of a file option, as ssh expands them (tokens: letter -> value).

    `command` (ProxyCommand): the %-tokens only; the shell that runs it expands the rest.
    """

    def sub(match: re.Match[str]) -> str:
        letter, var = match.group(1), match.group(2)
        if var is not None and command:
            return match.group(0)
        if var is not None:
            if var not in os.environ:
                raise ValueError(f"{option} {value}: environment variable {var} is not set")
            return os.environ[var]
        if letter == "%":
            return "%"
        if letter not in tokens:
            raise ValueError(f"{option} {value}: unknown token %{letter} (known: "
                             f"{' '.join('%' + t for t in sorted(tokens))})")
        return tokens[letter]

    expanded = _TOKEN.sub(sub, value)
    return expanded if command else os.path.expanduser(expanded)


def path_tokens(*, alias: str, hostname: str, port: int, user: str, local_user: str,
                host_key_alias: str | None = None, proxy_jump: str | None = None) -> dict[str, str]:
    """The %-tokens OpenSSH expands in UserKnownHostsFile (ssh_config(5) TOKENS)."""
    local = socket.gethostname()
    connection = f"{local}{hostname}{port}{user}{proxy_jump or ''}"
    return {
        "C": hashlib.sha1(connection.encode("utf-8")).hexdigest(),
        "d": os.path.expanduser("~"),
        "h": hostname,
        "i": str(os.getuid()),
        "k": host_key_alias or alias,
        "L": local.split(".")[0],
        "l": local,
        "n": alias,
        "p": str(port),
        "r": user,
        "u": local_user,
    }


# -- host certificates (PROTOCOL.certkeys) ------------------------------------------------------------------------
CERT_SUFFIX = "-cert-v01@openssh.com"
_CERT_KEY_FIELDS = {"ssh-ed25519": 1, "ecdsa-sha2-nistp256": 2, "ecdsa-sha2-nistp384": 2, "ecdsa-sha2-nistp521": 2,
                    "ssh-rsa": 2}  # the strings/mpints of the public key inside a certificate, after the nonce
HOST_CERT = 2  # SSH2_CERT_TYPE_HOST
FOREVER = 2**64 - 1
# CASignatureAlgorithms' default: SHA-1 RSA signatures (`ssh-rsa`) are refused, as by OpenSSH 8.2+
CA_SIGNATURE_ALGORITHMS = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                           "rsa-sha2-512", "rsa-sha2-256", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")


@dataclass(frozen=True, slots=True)
class HostCertificate:
    """The fields of an OpenSSH certificate that a client checks, and what the CA signed."""

    key_type: str  # of the certified key: ssh-ed25519, ssh-rsa, ...
    serial: int
    kind: int  # 1 user, 2 host
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    critical_options: tuple[str, ...]
    ca_key: bytes  # the CA's public key blob
    signed: bytes  # the certificate up to its signature
    signature: bytes  # the CA's signature blob (algorithm name, signature)
    public_key: bytes = b""  # the certified key as a plain public key blob (what a key file or agent holds)

    @property
    def signature_algorithm(self) -> str:
        return _Reader(self.signature).text()


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise ValueError("certificate is truncated")
        chunk, self.at = self.data[self.at:self.at + size], self.at + size
        return chunk

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def string(self) -> bytes:
        return self.take(self.uint(4))

    def text(self) -> str:
        return self.string().decode("utf-8", errors="replace")

    def strings(self) -> tuple[str, ...]:
        inner = _Reader(self.string())
        out = []
        while inner.at < len(inner.data):
            out.append(inner.text())
        return tuple(out)


def parse_certificate(blob: bytes) -> HostCertificate:
    """An OpenSSH certificate's fields; ValueError for a truncated one or a key type it cannot hold."""
    reader = _Reader(blob)
    cert_type = reader.text()
    key_type = cert_type.removesuffix(CERT_SUFFIX)
    if not cert_type.endswith(CERT_SUFFIX) or key_type not in _CERT_KEY_FIELDS:
        raise ValueError(f"not a certificate type this client knows: {cert_type}")
    reader.string()  # nonce
    start = reader.at
    for _ in range(_CERT_KEY_FIELDS[key_type]):
        reader.string()
    name = key_type.encode("ascii")
    public_key = len(name).to_bytes(4, "big") + name + blob[start:reader.at]
    serial, kind, key_id = reader.uint(8), reader.uint(4), reader.text()
    principals = reader.strings()
    valid_after, valid_before = reader.uint(8), reader.uint(8)
    critical = _Reader(reader.string())
    options = []
    while critical.at < len(critical.data):
        options.append(critical.text())
        critical.string()
    reader.string()  # extensions: none concern a host certificate
    reader.string()  # reserved
    ca_key = reader.string()
    signed = blob[:reader.at]
    signature = reader.string()
    return HostCertificate(key_type, serial, kind, key_id, principals, valid_after, valid_before, tuple(options), ca_key,
                           signed, signature, public_key)


def certificate_problem(cert: HostCertificate, names: Sequence[str], now: float) -> str | None:
    """Why OpenSSH would refuse this host certificate from a trusted CA (its signature aside); None if it would not.

    `names`: the host's names without a port (HostKeyAlias, or the HostName and the name as written).
    """
    if cert.kind != HOST_CERT:
        return "it is a user certificate, not a host certificate"
    if now < cert.valid_after:
        return f"it is not valid before {_when(cert.valid_after)}"
    if now >= cert.valid_before:
        return f"it expired at {_when(cert.valid_before)}"
    if cert.critical_options:
        return f"it has critical options a host certificate may not have ({', '.join(cert.critical_options)})"
    if cert.principals and not any(_wildcard(p.lower()).fullmatch(n.lower()) for p in cert.principals for n in names):
        return f"its principals ({', '.join(cert.principals)}) do not name {' or '.join(names)}"
    if cert.signature_algorithm not in CA_SIGNATURE_ALGORITHMS:
        return f"the CA signed it with {cert.signature_algorithm}, which is not accepted (CASignatureAlgorithms)"
    return None


def _when(stamp: int) -> str:
    if stamp >= FOREVER:
        return "forever"
    return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def trusted_authorities(files: Sequence[KnownHostsFile], names: Sequence[str]) -> list[tuple[str, HostKeyLine]]:
    """The @cert-authority lines (file path, line) for the host."""
    return [(f.path, e) for f in files for e in f.matching(names) if e.marker == "@cert-authority"]


def revoked_blobs(files: Sequence[KnownHostsFile], names: Sequence[str]) -> dict[bytes, tuple[str, HostKeyLine]]:
    """Keys @revoked for the host, by raw blob (for a certificate's CA key)."""
    return {e.key_bytes: (f.path, e) for f in files for e in f.matching(names) if e.marker == "@revoked"}
