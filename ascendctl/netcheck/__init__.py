"""Find the slow node or link before it slows the job: pair schedule, backends, verdict, and the run.

`run_netcheck(inventory, NetcheckOptions(...)) -> NetcheckReport`. Must not import typer or rich.
"""

from __future__ import annotations

from .run import NetcheckOptions, NetcheckReport, run_netcheck
from .verdict import Measurement, Verdict, judge

__all__ = ["NetcheckOptions", "NetcheckReport", "run_netcheck", "Measurement", "Verdict", "judge"]
