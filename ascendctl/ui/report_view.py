"""Rendering of `ascendctl report` (and of `--html` on triage and preflight): where the page went, what it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascendctl.ui import err

if TYPE_CHECKING:
    from ascendctl.report import WrittenReport


def show_written(written: WrittenReport) -> None:
    """One line on stderr (stdout stays the command's own result): the file, its size and its views."""
    err.print(f"report: wrote {written.path} ({written.bytes / 1024:.0f} KiB): {', '.join(written.views)}"
              + (f"; {len(written.notes)} fold(s) noted in the page" if written.notes else ""), markup=False)
