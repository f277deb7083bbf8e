"""The one remote probe protocol: concatenate named shell sections, run them in one round trip, split the output back.

Each section runs in its own `sh -c` under `timeout` (when the node has it), so one hung tool cannot
stall the others, and its exit status is recorded. Section markers carry a per-run nonce so no tool
output can forge them. Preflight's checks, the cluster-endpoint probe, device discovery, collect's facts
and job state all speak it. Pure; must not import typer or rich.
"""

from __future__ import annotations

import math
import re
import secrets
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from .transport import KILL_GRACE, bounded_run

if TYPE_CHECKING:
    from .transport import Transport


@dataclass(frozen=True, slots=True)
class Section:
    """What one probe section printed (stdout and stderr together) and its exit status."""

    output: str
    exit_code: int | None  # None when the section never finished (probe cut short)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


# Exit status of a section the probe did not run because its time budget was spent.
NOT_RUN = 125
# Exit statuses of a section that `timeout` stopped: 124 after TERM, 137 after KILL.
TIMED_OUT = (124, 137)

# Non-interactive SSH sessions rarely have the vendor tools on PATH.
TOOL_PATH = "/usr/local/Ascend/driver/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin"


def build_probe(sections: Mapping[str, str], *, nonce: str, section_timeout: float, budget: float | None = None) -> str:
    """One shell script that runs every section and frames its output with markers.

    With a `budget` (seconds), the probe as a whole ends within it: each section gets at most what is
    left, and once it is spent the remaining sections are not run (exit status NOT_RUN). So a tool that
    hangs in several sections costs a few checks their answers, never the whole node its reply.
    """
    if budget is not None:
        whole = max(1, int(budget))
        limit = (f"left=$((end - $(date +%s))); "
                 f"if [ \"$left\" -le 0 ]; then echo 'not run: the probe spent its {whole}s on earlier sections'; return {NOT_RUN}; fi; "
                 f"t={section_timeout:g}; [ \"$left\" -lt {math.ceil(section_timeout)} ] && t=$left; ")
        seconds = '"$t"'
        start = [f"end=$(($(date +%s) + {whole}))"]
    else:
        limit, seconds, start = "", f"{section_timeout:g}", []
    lines = [
        f'PATH="$PATH:{TOOL_PATH}"; export PATH; LC_ALL=C; export LC_ALL',
        *start,
        "if command -v timeout >/dev/null 2>&1; then",
        # `timeout -k`: TERM at the limit, KILL 2 s later (a wedged tool ignores TERM), to the section's whole process group
        f"  run() {{ {limit}{bounded_run(chr(34) + '$1' + chr(34), seconds, redirect='2>&1 </dev/null')}; return \"$rc\"; }}",
        "else",
        '  run() { sh -c "$1" 2>&1 </dev/null; }',
        "fi",
    ]
    for name, script in sections.items():
        lines.append(f"printf '\\n@@{nonce} begin {name}@@\\n'; run {shlex.quote(script)}; "
                     f"printf '\\n@@{nonce} end {name} %s@@\\n' \"$?\"")
    return "\n".join(lines) + "\n"


def parse_probe(text: str, *, nonce: str) -> dict[str, Section]:
    """Split probe output into sections; a section without its end marker has exit_code None."""
    begin = re.compile(rf"^@@{re.escape(nonce)} begin (\S+)@@$")
    end = re.compile(rf"^@@{re.escape(nonce)} end (\S+) (\d+)@@$")
    sections: dict[str, Section] = {}
    current: str | None = None
    buffer: list[str] = []
    for line in text.split("\n"):
        opened = begin.match(line)
        closed = end.match(line)
        if opened:
            current, buffer = opened.group(1), []
        elif closed and current is not None and current == closed.group(1):
            sections[current] = Section(_strip_framing(buffer), int(closed.group(2)))
            current, buffer = None, []
        elif current is not None:
            buffer.append(line)
    if current is not None:
        sections[current] = Section(_strip_framing(buffer), None)
    return sections


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """A node's answer to one probe: its sections, and how the probe as a whole ended."""

    sections: dict[str, Section]
    asked: tuple[str, ...]
    exit_code: int
    stderr: str = ""
    section_timeout: float = 0.0
    unfinished: tuple[str, ...] = field(default=())

    @property
    def complete(self) -> bool:
        """Every section asked for printed its end marker."""
        return not self.unfinished

    def failure(self, what: str) -> str | None:
        """Why the answer cannot be trusted as a whole ("device probe failed (exit 126): ..."), or None."""
        if self.complete:
            return None
        if not self.sections and self.exit_code != 0:
            first = next((line.strip() for line in self.stderr.splitlines() if line.strip()), "no output")
            return f"{what} failed (exit {self.exit_code}): {first}"
        return f"{what} did not finish within {self.section_timeout:g}s per section (no answer from {', '.join(self.unfinished)})"


def ask(transport: Transport, sections: Mapping[str, str], *, section_timeout: float,
        timeout: float | None = None) -> ProbeAnswer:
    """Run `sections` on one node in one round trip (a fresh nonce each time) and split the answer.

    With `timeout` (the command limit), the probe budgets itself to answer before it: sections that would
    run past it are reported NOT_RUN instead of the whole node timing out.
    """

    nonce = secrets.token_hex(6)
    budget = None if timeout is None else max(1.0, timeout - KILL_GRACE - 2)
    output = transport.run(build_probe(sections, nonce=nonce, section_timeout=section_timeout, budget=budget), timeout=timeout)
    answers = parse_probe(output.stdout, nonce=nonce)
    unfinished = tuple(name for name in sections if name not in answers or answers[name].exit_code is None)
    return ProbeAnswer(answers, tuple(sections), output.exit_code, output.stderr, section_timeout, unfinished)


def _strip_framing(lines: list[str]) -> str:
    text = "\n".join(lines)
    # the end marker is printed after a newline of its own
    return text[:-1] if text.endswith("\n") else text
