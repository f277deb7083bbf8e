"""The text of the OpenSSH client config that `ssh NODE` would read, `Include`s inlined (paramiko has no Include).

`remote/transport/ssh.py` parses the result (paramiko's SSHConfig, first value wins) and is the only reader.
Pure: no paramiko. The user file comes first, then (when the inventory did not name a config, as `ssh` without
`-F`) the system-wide /etc/ssh/ssh_config.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

SYSTEM_SSH_CONFIG = "/etc/ssh/ssh_config"
MAX_INCLUDE_DEPTH = 16  # as OpenSSH's READCONF_MAX_DEPTH
_KEYWORD = re.compile(r"\s*(\w+)(?:\s*=\s*|\s+)(.*)$")


@dataclass(frozen=True, slots=True)
class ConfigText:
    """The combined text and every file read into it, in order."""

    text: str
    files: tuple[str, ...]


def read_config_text(path: str, *, system: str | None = SYSTEM_SSH_CONFIG) -> ConfigText:
    """The user config at `path` (missing: empty), then `system` (None: not read), Includes inlined.

    A file that cannot be read (a directory, no permission) is logged and skipped; an Include glob that matches
    nothing is no error, as in ssh.
    """
    files: list[str] = []
    full = os.path.expanduser(path)
    parts: list[str] = []
    if os.path.exists(full):
        parts.append(_expand(full, os.path.expanduser("~/.ssh"), 0, files))
    if system is not None and os.path.exists(system):
        parts.append("Host *\n" + _expand(system, os.path.dirname(system), 0, files))
    return ConfigText("\n".join(parts), tuple(files))


def _expand(path: str, base: str, depth: int, files: list[str]) -> str:
    if not os.path.isfile(path):  # a directory; a FIFO would block the read
        log.warning("ssh config %s: not a regular file; ignored", path)
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        log.warning("ssh config %s: cannot be read (%s); ignored", path, exc.strerror or exc)
        return ""
    files.append(path)
    out: list[str] = []
    header = "Host *"  # the block a line belongs to; re-opened after an included file, which may open others
    for line in lines:
        match = _KEYWORD.match(line)
        keyword = match.group(1).lower() if match else ""
        if keyword in ("host", "match"):
            header = line.strip()
        if keyword != "include":
            out.append(line)
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
                    out.append(_expand(included, base, depth + 1, files))
        out.append(header)
    return "\n".join(out) + "\n"
