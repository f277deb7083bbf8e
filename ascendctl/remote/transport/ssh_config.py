"""The text of the OpenSSH client config that `ssh NODE` would read, `Include`s inlined (paramiko has no Include).

`remote/transport/ssh.py` parses the result (paramiko's SSHConfig, first value wins) and is the only reader.
Pure: no paramiko. The user file comes first, then (when the inventory did not name a config, as `ssh` without
`-F`) the system-wide /etc/ssh/ssh_config.

Every option line is kept with its file and line (`ConfigText.lines`), and each `Host`/`Match` block gets a marker
line (`ascendctlblockN yes`, a keyword no ssh option has): paramiko keeps it like any option, so one lookup tells
which blocks applied to a host (`applied_lines`), and so where each value ascendctl took came from.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

SYSTEM_SSH_CONFIG = "/etc/ssh/ssh_config"
MAX_INCLUDE_DEPTH = 16  # as OpenSSH's READCONF_MAX_DEPTH
_KEYWORD = re.compile(r"\s*(\w+)(?:\s*=\s*|\s+)(.*)$")


BLOCK_MARK = "ascendctlblock"
# The options ascendctl takes from the ssh config, as ssh_config(5) spells them (for messages and `inventory show`).
OPTION_NAMES = {name.lower(): name for name in (
    "HostName", "User", "Port", "IdentityFile", "IdentitiesOnly", "IdentityAgent", "CertificateFile", "ProxyJump",
    "ProxyCommand", "HostKeyAlias", "UserKnownHostsFile", "GlobalKnownHostsFile", "HashKnownHosts",
    "StrictHostKeyChecking", "ConnectTimeout", "ServerAliveInterval", "ServerAliveCountMax")}


@dataclass(frozen=True, slots=True)
class ConfigLine:
    """One option line of the config: its keyword (lower case), its value as written (quotes removed), where."""

    keyword: str
    value: str
    path: str
    line: int
    block: int  # which Host/Match block (0: before the first); the marker of the block is `ascendctlblock<block>`
    order: int  # position among all option lines (ProxyJump and ProxyCommand: the first of them wins)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def option(self) -> str:
        return OPTION_NAMES.get(self.keyword, self.keyword)


@dataclass(frozen=True, slots=True)
class ConfigText:
    """The combined text and every file read into it, in order."""

    text: str
    files: tuple[str, ...]
    lines: tuple[ConfigLine, ...] = ()


def applied_lines(text: ConfigText, looked_up: Mapping[str, object]) -> dict[str, list[ConfigLine]]:
    """The option lines of the blocks that applied to a host (`looked_up`: paramiko's lookup of `text.text`), by
    keyword, in config order: the first is the value `ssh` uses (every one, for IdentityFile and CertificateFile)."""
    applied = {int(key[len(BLOCK_MARK):]) for key in looked_up if key.startswith(BLOCK_MARK)}
    found: dict[str, list[ConfigLine]] = {}
    for line in text.lines:
        if line.block in applied:
            found.setdefault(line.keyword, []).append(line)
    return found


def without_marks(looked_up: Mapping[str, Any]) -> dict[str, Any]:
    """paramiko's lookup without the block markers."""
    return {key: value for key, value in looked_up.items() if not key.startswith(BLOCK_MARK)}


def read_config_text(path: str, *, system: str | None = SYSTEM_SSH_CONFIG) -> ConfigText:
    """The user config at `path` (missing: empty), then `system` (None: not read), Includes inlined.

    A file that cannot be read (a directory, no permission) is logged and skipped; an Include glob that matches
    nothing is no error, as in ssh.
    """
    files: list[str] = []
    full = os.path.expanduser(path)
    rows: list[_Row] = []
    if os.path.exists(full):
        rows += _expand(full, os.path.expanduser("~/.ssh"), 0, files)
    if system is not None and os.path.exists(system):
        rows += [("Host *", system, 0)] + _expand(system, os.path.dirname(system), 0, files)
    return _marked(rows, files)


_Row = tuple[str, str, int]  # a line of the combined text, the file it came from, its line there (0: added here)


def _marked(rows: list[_Row], files: list[str]) -> ConfigText:
    """The combined text with a marker after each block header, and its option lines with where they came from."""
    text = [f"{BLOCK_MARK}0 yes"]
    block = 0
    found: list[ConfigLine] = []
    for line, path, number in rows:
        text.append(line)
        match = _KEYWORD.match(line)
        if match is None:
            continue
        keyword = match.group(1).lower()
        if keyword in ("host", "match"):
            block += 1
            text.append(f"{BLOCK_MARK}{block} yes")
        elif number:
            value = match.group(2).strip()
            if len(value) > 1 and value.startswith('"') and value.endswith('"'):
                value = value[1:-1]
            found.append(ConfigLine(keyword, value, path, number, block, len(found)))
    return ConfigText("\n".join(text) + "\n", tuple(files), tuple(found))


def _expand(path: str, base: str, depth: int, files: list[str]) -> list[_Row]:
    if not os.path.isfile(path):  # a directory; a FIFO would block the read
        log.warning("ssh config %s: not a regular file; ignored", path)
        return []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        log.warning("ssh config %s: cannot be read (%s); ignored", path, exc.strerror or exc)
        return []
    files.append(path)
    out: list[_Row] = []
    header = "Host *"  # the block a line belongs to; re-opened after an included file, which may open others
    for number, line in enumerate(lines, 1):
        match = _KEYWORD.match(line)
        keyword = match.group(1).lower() if match else ""
        if keyword in ("host", "match"):
            header = line.strip()
        if keyword != "include":
            out.append((line, path, number))
            continue
        assert match is not None
        if depth >= MAX_INCLUDE_DEPTH:
            log.warning("ssh config %s: Include nested deeper than %d; %s ignored", path, MAX_INCLUDE_DEPTH, line.strip())
            continue
        for pattern in match.group(2).split():
            pattern = os.path.expanduser(pattern)
            if not os.path.isabs(pattern):
                pattern = os.path.join(base, pattern)
            for included in sorted(glob.glob(pattern)):
                if os.path.isfile(included):
                    out += _expand(included, base, depth + 1, files)
        out.append((header, path, 0))
    return out


def mentions(text: str, keywords: tuple[str, ...]) -> set[str]:
    """Which of `keywords` (lowercase) a config text sets anywhere, in any block: a quick, per-file question.

    What a given host gets from them takes OpenSSH itself (`ssh -G`); this only says whether asking can matter.
    """
    wanted = set(keywords)
    found: set[str] = set()
    for line in text.splitlines():
        match = _KEYWORD.match(line)
        if match and match.group(1).lower() in wanted:
            found.add(match.group(1).lower())
    return found
