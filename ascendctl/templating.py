"""Text templates (hostfile forms, sbatch script, the HTML report's page): where they are looked up (the user's
directory first, then the copy shipped with ascendctl) and strict `${var}` substitution."""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ascendctl.errors import TemplateError

if TYPE_CHECKING:  # only the annotation needs it (importlib.abc has it on 3.10, where the floor is)
    from importlib.abc import Traversable

_REPO_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@dataclass(frozen=True, slots=True)
class Template:
    """A text template and how messages should name it."""

    text: str
    label: str  # e.g. templates/hostfile-openmpi.tmpl, or the user's path


def template_dirs(templates: str | os.PathLike[str] | None = None) -> list[tuple[Traversable, str]]:
    """Where templates are looked up, in order, with the label used in messages."""
    found: list[tuple[Traversable, str]] = []
    if templates is not None:
        found.append((Path(templates), os.fspath(templates)))
    packaged = resources.files("ascendctl") / "templates"
    if packaged.is_dir():  # a wheel install: force-included by pyproject.toml
        found.append((packaged, "templates"))
    elif _REPO_TEMPLATES.is_dir():  # a source checkout or editable install
        found.append((_REPO_TEMPLATES, "templates"))
    return found


def load_template(name: str, templates: str | os.PathLike[str] | None = None) -> Template:
    """Read template `name`: from `templates` first, then the copy shipped with ascendctl."""
    if templates is not None and not Path(templates).is_dir():
        raise TemplateError(f"{os.fspath(templates)}: templates directory not found")
    for directory, label in template_dirs(templates):
        candidate = directory / name
        if candidate.is_file():
            try:
                return Template(candidate.read_text(encoding="utf-8"), f"{label}/{name}")
            except (OSError, UnicodeDecodeError) as exc:
                raise TemplateError(f"{label}/{name}: cannot read: {exc}") from None
    where = " or ".join(label for _, label in template_dirs(templates)) or "templates"
    raise TemplateError(f"{name}: template not found in {where}", hint="pass --templates DIR holding your own copy")


def render_template(template: Template, values: Mapping[str, object]) -> str:
    """Strict `${var}` substitution: an unknown variable is a TemplateError naming file and variable."""
    try:
        return string.Template(template.text).substitute(values)
    except KeyError as exc:
        known = ", ".join("${" + key + "}" for key in values)
        raise TemplateError(f"{template.label}: unknown variable ${{{exc.args[0]}}}", hint=f"known variables: {known}") from None
    except ValueError as exc:  # `$` not followed by a name: the message carries line and column
        raise TemplateError(f"{template.label}: {exc}", hint="write a literal $ as $$") from None
