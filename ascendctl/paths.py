"""Paths built from names that come from input (node names): what a safe name is, and the one join that proves it.

`name_problem` is the rule the inventory applies to node names, and `hidden_char` the one it applies to every string
it takes (names, hosts, users, paths): no character a terminal would hide, act on or reorder. `child(root, name)` is how every
path made from such a name is built (collect bundle directories, launch log directories on the
nodes): it refuses a name that is not a single plain component and checks the result stays under
`root`. Also `state_dir()`, where ascendctl keeps its own records (jobs, retry records), through `xdg_base`, the
one reader of XDG base-directory variables (a relative value is ignored, as the spec says); importing it costs
nothing. Pure apart from resolving symlinks of a local root; must not import typer or rich.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path, PurePath
from typing import TypeVar

from ascendctl.errors import AscendctlError, PathEscapeError

P = TypeVar("P", bound=PurePath)
_NODESET_SPECIAL = frozenset(",@[]!&^* ")
# What a terminal hides, acts on or reorders instead of showing: Cc (C0 controls, DEL, C1 controls such as U+0085 NEL),
# Cf (format characters: the bidi marks, embeddings, overrides and isolates U+200E/F, U+202A-E, U+2066-9, U+061C,
# zero-width characters, the BOM), Cs (lone surrogates: undecodable bytes), Zl and Zp (line and paragraph separators).
# ui/terminal.py shows the same class escaped.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_KINDS = {"Cc": "a control character", "Cf": "an invisible format character", "Cs": "a lone surrogate",
          "Zl": "a line separator", "Zp": "a paragraph separator"}


def hidden_char(text: str) -> str | None:
    """The first character of `text` in the hidden class, named (`U+202E, a bidirectional control character`), or None."""
    if text.isprintable():  # at C speed; nothing in the class is printable (some printable-false characters are allowed)
        return None
    for char in text:
        category = unicodedata.category(char)
        if category in HIDDEN_CATEGORIES:
            kind = "a bidirectional control character" if char in _BIDI else _KINDS[category]
            return f"U+{ord(char):04X}, {kind}"
    return None


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a node name (it becomes a directory name), or None when it can."""
    if not name:
        return "a name cannot be empty"
    hidden = hidden_char(name)
    if hidden is not None:
        return f"a name cannot contain control or invisible characters ({hidden})"
    if "/" in name or "\\" in name:
        return "a name cannot contain '/' or '\\'"
    if ".." in name or name == ".":
        return "a name cannot be '.' or contain '..'"
    special = sorted(_NODESET_SPECIAL.intersection(name))
    if special:  # folded names go through ClusterShell's NodeSet, which reads these as lists, operators or @groups
        return f"a name cannot contain {special[0]!r} (or any of {''.join(sorted(_NODESET_SPECIAL))!r}, or whitespace)"
    if name.startswith("-"):
        return "a name cannot start with '-'"
    return None


def child(root: P, name: str) -> P:
    """`root / name`, refused (PathEscapeError) unless `name` is one plain component that stays under `root`."""
    problem = name_problem(name)
    path = root / name
    if problem is None and path.parent != root:
        problem = "it does not stay a direct child of the directory"
    if problem is None and isinstance(path, Path) and path.is_symlink():
        problem = "it is a symbolic link"  # following it could write anywhere
    if problem is not None:
        raise PathEscapeError(f"{root}: refusing the path for {name!r}: {problem}")
    return path


def xdg_base(variable: str, default: str) -> Path:
    """An XDG base directory: `$variable` when it is an absolute path, else `~/default`.

    The XDG Base Directory spec: "All paths set in these environment variables must be absolute. If an
    implementation encounters a relative path in any of these variables it should consider the path invalid
    and ignore it." A relative one would name another directory from every working directory.
    """
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else Path.home() / default


def state_dir() -> Path:
    """$XDG_STATE_HOME/ascendctl (~/.local/state/ascendctl when XDG_STATE_HOME is unset, empty or relative)."""
    return xdg_base("XDG_STATE_HOME", ".local/state") / "ascendctl"


def write_atomic(path: str | os.PathLike[str], text: str, *, private: bool = False) -> None:
    """Write `text` to `path` through a temporary file beside it and a rename, so that a reader never sees half a
    file (a rank table, a job record, a report); `private`: only the owner may read it (it may hold secrets), from
    the first byte. The one atomic write; an OSError leaves no temporary behind and is the caller's to report."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if private:
            os.chmod(tmp, 0o600)  # an existing temporary keeps its mode through O_CREAT
        os.replace(tmp, target)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)  # a half-written temporary holds the space a retry needs
        except OSError:
            pass
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str, *, private: bool = False) -> None:
    """write_atomic for the files a command was asked to write: a failure is an AscendctlError naming the file."""
    try:
        write_atomic(path, text, private=private)
    except OSError as exc:
        raise AscendctlError(f"{os.fspath(path)}: cannot write: {exc.strerror or exc}") from None


def current_user() -> str:
    """This process's user name, or its uid where the uid has no name (a container): never an exception."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
