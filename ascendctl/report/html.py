"""Render the report's view models with templates/report.html.j2: the only module that imports jinja2.

Autoescaping is on for the whole template, so every string from a node (log lines, file names,
node names) is text in the page, in HTML and in the inline SVG alike. Must not import typer or rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import time

from jinja2 import Environment, StrictUndefined

from ascendctl.version import __version__
from ascendctl.templating import load_template
from ascendctl.report.views import MARK_NAMES

if TYPE_CHECKING:
    from ascendctl.report.views import Report

TEMPLATE = "report.html.j2"


def render_html(report: Report) -> str:
    """The whole page as one string: inline CSS, inline SVG, an optional inline script; nothing fetched."""
    template = load_template(TEMPLATE)
    env = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    return env.from_string(template.text).render(
        r=report, marks=MARK_NAMES, version=__version__,
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
