"""JSON Schemas (draft 2020-12) of every `--json` document, shipped as package data.

`envelope.schema.json` holds the keys every document has (and shared definitions); each command's
schema refers to it by `$id`, relative to `BASE_URI`; `error.schema.json` is the document of a
command that failed before it had a result. Pure data and a loader; must not import typer or rich.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

BASE_URI = "https://ascendctl.invalid/schemas/1/"
SUFFIX = ".schema.json"


def schema_names() -> tuple[str, ...]:
    """Every shipped schema by name (`exec`, `render-hostfile`, `launch-dry-run`, `envelope`, `error`, ...), sorted."""
    return tuple(sorted(item.name[: -len(SUFFIX)] for item in resources.files(__name__).iterdir() if item.name.endswith(SUFFIX)))


def schema_for(command: str) -> dict[str, Any]:
    """The schema of a command's document: `schema_for("render hostfile")`, `schema_for("launch --dry-run")`, `schema_for("error")`."""
    name = "-".join(word.lstrip("-") for word in command.split())
    if name not in schema_names():
        raise KeyError(f"no JSON schema for {command!r} (known: {', '.join(schema_names())})")
    loaded: dict[str, Any] = json.loads((resources.files(__name__) / f"{name}{SUFFIX}").read_text(encoding="utf-8"))
    return loaded
