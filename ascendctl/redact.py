"""The one redaction policy: what counts as a secret, and how it is hidden wherever ascendctl writes or prints.

Applied to job records, bundles (facts, the job record copy), JSON documents, dry-run plans, rendered
environments and logs. Names: any variable whose name has a secret word as one of its `_` parts
(HCCL_DB_PASSWD, HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY; not TOKENIZERS_PARALLELISM).
Values: credentials inside URLs, signed-URL and token query parameters, bearer tokens, and the shapes
of common API tokens, whatever the variable is called. Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

REDACTED = "<redacted>"

# a name part that marks a secret (parts are split on "_"; matched case-insensitively)
SECRET_PARTS = frozenset({
    "PASSWORD", "PASSWD", "PASS", "PWD", "SECRET", "SECRETS", "TOKEN", "TOKENS", "CREDENTIAL", "CREDENTIALS", "KEY",
    "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY", "AUTH", "COOKIE", "SAS", "SK", "AK",
})
# a PWD part is the working directory in a shell's environment: only a secret when the name is not exactly PWD/OLDPWD
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})

_VALUE_RXS = (
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+(@)"),  # scheme://user:SECRET@host
    re.compile(r"(?i)([?&](?:access_token|token|auth|sig|signature|api_key|apikey|key|password|passwd|secret|"
               r"x-amz-signature|x-amz-credential|x-amz-security-token|sv|se)=)[^&\s\"']+"),
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"()\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{20,}|"
               r"xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,})\b"),
)
# NAME=value inside free text (a shell line, an `env` dump, a command line)
_ASSIGNMENT_RX = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s\"']+)")
_FLAG_RX = re.compile(r"(?i)(--?(?:[a-z0-9]+[-_])*(?:password|passwd|token|secret|api[-_]?key|access[-_]?key)[= ])(\S+)")


def is_secret_name(name: str) -> bool:
    """Does this variable name say it holds a secret?"""
    upper = name.upper()
    if upper in _NOT_SECRET:
        return False
    parts = [p for p in upper.split("_") if p]
    joined = {a + b for a, b in zip(parts, parts[1:])}  # API_KEY -> APIKEY
    return any(p in SECRET_PARTS for p in parts) or any(j in SECRET_PARTS for j in joined)


def redact_value(value: str) -> str:
    """A value with any credential it carries (URL passwords, token parameters, API tokens) replaced."""
    for rx in _VALUE_RXS:
        value = rx.sub(lambda m: (m.group(1) if m.lastindex else "") + REDACTED + (m.group(2) if (m.lastindex or 0) >= 2 else ""),
                       value)
    return value


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """An environment with secret-named variables replaced and credentials removed from the other values."""
    return {name: REDACTED if is_secret_name(name) else redact_value(str(value)) for name, value in env.items()}


def redact_text(text: str) -> str:
    """Free text (a command line, a log line, a shell snippet) with secret assignments, flags and credentials hidden."""
    text = _ASSIGNMENT_RX.sub(lambda m: f"{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0), text)
    text = _FLAG_RX.sub(lambda m: m.group(1) + REDACTED, text)
    return redact_value(text)


def redact_document(value: Any) -> Any:
    """A JSON-like document with every secret-named key's value and every credential in a string redacted."""
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and is_secret_name(k) and isinstance(v, (str, int, float)) and v != ""
                    else redact_document(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_document(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_document(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value
