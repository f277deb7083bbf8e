"""Find the slow node or link before it slows the job: pair schedule, backends, verdict, and the run.

`run_netcheck(inventory, NetcheckOptions(...)) -> NetcheckReport`. Must not import typer or rich.
"""

from __future__ import annotations

from ascendctl.netcheck.run import NetcheckOptions, NetcheckReport, run_netcheck
from ascendctl.netcheck.verdict import Measurement, NetcheckVerdict, judge

__all__ = ["NetcheckOptions", "NetcheckReport", "run_netcheck", "Measurement", "NetcheckVerdict", "judge"]
