"""Parsers for software versions: Ascend ``version.info`` / ``*_install.info`` files and ``pip list`` lines.

Pure functions over text; must not import typer, rich, paramiko or transport code.
"""

from __future__ import annotations

import re

from ascendctl.facts.parsers import ParseError, body_lines, excerpt

__all__ = ["parse_version_info", "parse_pip_versions", "package_version"]

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_PIP_ROW = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s+(\S+)(?:\s+\S.*)?$")
_PIP_FREEZE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)$")


def parse_version_info(text: str) -> dict[str, str]:
    """Parse ``key=value`` lines of an Ascend version file; keys are lower-cased ('Version' -> 'version').

    Driver and firmware files say ``Version=`` and ``Innerversion=``; toolkit and nnae
    ``*_install.info`` files say ``version=`` and ``innerversion=``. Lower-casing lets callers read
    ``info["version"]`` for all of them.
    """
    fields: dict[str, str] = {}
    for line in body_lines(text):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not _KEY.match(key.strip()):
            raise ParseError(f"expected 'key=value' lines in an Ascend version.info file, got {line.strip()!r}")
        fields[key.strip().lower()] = value.strip()
    if not fields:
        raise ParseError(f"expected 'key=value' lines in an Ascend version.info file, got {excerpt(text)}")
    return fields


def package_version(info: dict[str, str]) -> str | None:
    """The package version a parsed version file declares ('version', else 'package_version')."""
    return info.get("version") or info.get("package_version")


def parse_pip_versions(text: str) -> dict[str, str]:
    """Parse ``pip list`` rows (``torch  2.1.0``, also ``name==ver``) into {normalised name: version}.

    Names are normalised as PEP 503 does (lower case, runs of ``-_.`` become ``-``), so ``torch_npu``
    and ``torch-npu`` are the same key. The ``Package Version`` header and its dashes are skipped.
    """
    packages: dict[str, str] = {}
    for line in body_lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith("-") or stripped.split()[:2] == ["Package", "Version"]:
            continue
        if stripped.startswith(("WARNING:", "DEPRECATION:", "[notice]")):
            continue  # pip's own chatter when stderr is merged into stdout
        match = _PIP_FREEZE.match(stripped) or _PIP_ROW.match(stripped)
        if match is None or not re.match(r"^\d", match.group(2)):
            raise ParseError(f"expected a 'pip list' row '<package> <version>', got {stripped!r}")
        packages[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    if not packages:
        raise ParseError(f"expected at least one 'pip list' row '<package> <version>', got {excerpt(text)}")
    return packages
