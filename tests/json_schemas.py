"""Validate `--json` documents against the schemas shipped in ascendctl/schemas (used by the unit and the real-host tests)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from ascendctl.schemas import schema_for, schema_names


@lru_cache(maxsize=1)
def registry() -> Registry:
    """Every shipped schema under its `$id`, so that `$ref`s between them resolve without any network."""
    return Registry().with_resources((schema_for(name)["$id"], Resource.from_contents(schema_for(name))) for name in schema_names())


def problems(name: str, document: Any) -> list[str]:
    """Every way `document` breaks schema `name`, as `path: message` lines (empty when it is valid)."""
    validator = Draft202012Validator(schema_for(name), registry=registry(), format_checker=Draft202012Validator.FORMAT_CHECKER)
    found = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in found]


def assert_valid(name: str, document: Any) -> None:
    found = problems(name, document)
    assert not found, f"not a valid {name} document:\n" + "\n".join(found[:20])
