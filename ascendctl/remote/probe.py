"""The one remote probe protocol: concatenate named shell sections, run them in one round trip, split the output back.

Each section runs in its own subshell under one watchdog per probe (ascendctl/sh/probe_runner.sh), so one
hung tool cannot stall the others, and its exit status is recorded. Section markers carry a per-run nonce so no tool
output can forge them. Preflight's checks, the cluster-endpoint probe, device discovery, collect's facts
and job state all speak it. Pure; must not import typer or rich.
"""

from __future__ import annotations

import re
import secrets
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from ascendctl.remote.scripts import script
from ascendctl.remote.transport.base import KILL_GRACE

if TYPE_CHECKING:
    from ascendctl.remote.transport.base import Transport


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
# Exit statuses of a section the watchdog stopped: 124 after TERM, 137 after KILL (as `timeout -k` says it).
TIMED_OUT = (124, 137)

# Non-interactive SSH sessions rarely have the vendor tools on PATH.
TOOL_PATH = "/usr/local/Ascend/driver/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin"


def build_probe(sections: Mapping[str, str], *, nonce: str, section_timeout: float, budget: float | None = None,
                clock: bool = False) -> str:
    """One shell script that runs every section and frames its output with markers.

    The sections run one after another, each in a subshell of the probe's shell under the runner's watchdog
    (ascendctl/sh/probe_runner.sh): at `section_timeout` it gets TERM, KILL_GRACE later KILL, with everything it
    started, and its exit status says so (124, 137).

    With `clock`, the node's clock is read first of all (`date +%s.%N` in a marker line of its own), so the
    reading reaches us before any section has run: `ask` times its arrival (see ClockReading).

    With a `budget` (seconds), the probe as a whole ends within it: each section gets at most what is
    left, and once it is spent the remaining sections are not run (exit status NOT_RUN). So a tool that
    hangs in several sections costs a few checks their answers, never the whole node its reply.
    """
    whole = None if budget is None else max(1, int(budget))
    lines = [
        *([f"printf '@@{nonce} clock %s@@\\n' \"$(date +%s.%N)\""] if clock else []),
        f'PATH="$PATH:{TOOL_PATH}"; export PATH; LC_ALL=C; export LC_ALL',
        f"SECTION_CS={max(1, round(section_timeout * 100))} GRACE_CS={round(KILL_GRACE * 100)} "
        f"BUDGET_CS={'' if whole is None else whole * 100} BUDGET_TEXT={'' if whole is None else f'{whole}s'}",
        script("probe_runner.sh"),
        "exec 4>&1",
        "{",
        "asct_now; budget_end=$((now + ${BUDGET_CS:-0}))",
        "asct_start_ticker",
    ]
    for name, text in sections.items():
        lines.append(f"printf '\\n@@{nonce} begin {name}@@\\n'; asct_run {shlex.quote(text)}; "
                     f"printf '\\n@@{nonce} end {name} %s@@\\n' \"$?\"")
    lines += ["asct_stop_ticker", "} 3>&1 1>&4 | asct_watch >/dev/null 2>&1 4>&-"]
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
class ClockReading:
    """The node's clock as the probe read it, and when we sent the probe and received the reading (our clock)."""

    remote: str  # what `date +%s.%N` printed
    sent: float
    received: float


def _clock_reading(raw: bytes, arrivals: list[tuple[float, int]], *, nonce: str, sent: float) -> ClockReading | None:
    """The clock line of a probe's raw output and the time the chunk that completed it arrived."""
    match = re.search(rb"@@" + nonce.encode() + rb" clock (\S*)@@\n", raw)
    if match is None:
        return None
    received = next((at for at, upto in arrivals if upto >= match.end()), arrivals[-1][0] if arrivals else sent)
    return ClockReading(match.group(1).decode("ascii", "replace"), sent, received)


@dataclass(frozen=True, slots=True)
class ProbeAnswer:
    """A node's answer to one probe: its sections, and how the probe as a whole ended."""

    sections: dict[str, Section]
    asked: tuple[str, ...]
    exit_code: int
    stderr: str = ""
    section_timeout: float = 0.0
    unfinished: tuple[str, ...] = field(default=())
    clock: ClockReading | None = None  # asked for with ask(..., clock=True)

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
        timeout: float | None = None, clock: bool = False) -> ProbeAnswer:
    """Run `sections` on one node in one round trip (a fresh nonce each time) and split the answer.

    With `timeout` (the command limit), the probe budgets itself to answer before it: sections that would
    run past it are reported NOT_RUN instead of the whole node timing out. With `clock`, the answer also
    carries the node's clock read at the start of the probe, timed by the arrival of its output chunk (a
    transport that hands over its output only at the end gives a reading as uncertain as the whole probe).
    """

    nonce = secrets.token_hex(6)
    budget = None if timeout is None else max(1.0, timeout - KILL_GRACE - 2)
    script = build_probe(sections, nonce=nonce, section_timeout=section_timeout, budget=budget, clock=clock)
    chunks: list[bytes] = []
    arrivals: list[tuple[float, int]] = []  # (our time, bytes received so far)
    received = 0

    def on_stdout(chunk: bytes) -> None:
        nonlocal received
        received += len(chunk)
        if not arrivals or arrivals[-1][1] < _CLOCK_LINE_WITHIN:
            arrivals.append((time.time(), received))
        chunks.append(chunk)

    sent = time.time()
    output = transport.stream(script, on_stdout=on_stdout, timeout=timeout)
    raw = b"".join(chunks)
    answers = parse_probe(raw.decode("utf-8", "replace"), nonce=nonce)
    unfinished = tuple(name for name in sections if name not in answers or answers[name].exit_code is None)
    reading = _clock_reading(raw[:_CLOCK_LINE_WITHIN], arrivals, nonce=nonce, sent=sent) if clock else None
    return ProbeAnswer(answers, tuple(sections), output.exit_code, output.stderr, section_timeout, unfinished, reading)


# the clock line is the first thing a probe prints (a login banner or profile noise may come before it)
_CLOCK_LINE_WITHIN = 64 * 1024


def _strip_framing(lines: list[str]) -> str:
    text = "\n".join(lines)
    # the end marker is printed after a newline of its own
    return text[:-1] if text.endswith("\n") else text
