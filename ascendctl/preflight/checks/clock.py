"""Time checks: the node's NTP client state (`ntp`) and its real clock against ours (`clock_skew`).

An NTP daemon can say "synchronised" while the clock the job sees is off (a wrong
server, a faked or stepped clock), so the skew is measured directly over SSH with
round-trip compensation. Pure evaluators; must not import typer or rich.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

from ascendctl.nodeset import fold
from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.timesync import parse_chrony_tracking, parse_ntpq_peers, parse_timedatectl_show, timesync_from_ntpq
from ascendctl.preflight.checks.model import ClusterCheck, ClusterVerdict, NodeCheck, Status, result

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node
    from ascendctl.facts.parsers.timesync import TimeSync
    from ascendctl.remote.probe import Section
    from ascendctl.preflight.checks.model import CheckResult, NodeFacts, ProbeContext

NTP_SCRIPT = """\
if command -v chronyc >/dev/null 2>&1; then echo 'daemon chrony'; chronyc -n tracking
elif command -v ntpq >/dev/null 2>&1; then echo 'daemon ntpd'; ntpq -pn
elif command -v timedatectl >/dev/null 2>&1; then echo 'daemon timedatectl'; timedatectl show
else echo 'daemon none'; fi"""

# Printed by the node just before the probe's first byte; see measure_clock in preflight.py.
CLOCK_COMMAND = "date +%s.%N"

FACTS = {"ntp": lambda node, ctx: NTP_SCRIPT}

NTP_HINT = "install chrony (or ntpsec) and point it at the cluster's NTP server; `chronyc sources -v` shows what it follows"


def read_timesync(section: Section) -> TimeSync | str:
    """The node's NTP state, or a sentence saying why it cannot be known."""
    lines = section.output.splitlines()
    if not lines or not lines[0].startswith("daemon "):
        return f"unexpected output: {section.output.strip()[:80]!r}"
    daemon, body = lines[0].split(" ", 1)[1], "\n".join(lines[1:])
    if daemon == "none":
        return "no NTP client found (chronyc, ntpq, timedatectl)"
    if section.exit_code not in (0, None) and daemon == "chrony":
        return f"chronyd is not answering: {body.strip()[:100]}"
    if section.exit_code not in (0, None):
        return f"{daemon} failed: {body.strip()[:100]}"
    try:
        if daemon == "chrony":
            return parse_chrony_tracking(body)
        if daemon == "ntpd":
            return timesync_from_ntpq(parse_ntpq_peers(body))
        return parse_timedatectl_show(body)
    except ParseError as exc:
        return f"cannot read {daemon} output: {exc}"


def _ntp_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    state = read_timesync(sections["ntp"])
    if isinstance(state, str):
        status = Status.ERROR if state.startswith(("unexpected", "cannot read")) else Status.FAIL
        hint = "start it: `systemctl enable --now chrony` (chronyd)" if state.startswith("chronyd is not answering") else NTP_HINT
        return result("ntp", status, state, hint)
    if not state.synchronised:
        source = f" (source {state.source})" if state.source else ""
        return result(
            "ntp", Status.FAIL, f"{state.daemon}: not synchronised{source}",
            "check that the NTP server is reachable (UDP 123) and wait for sync; `chronyc sources -v` / `ntpq -p` show why",
        )
    parts = [f"{state.daemon} synchronised"]
    if state.source:
        parts.append(f"to {state.source}")
    if state.stratum is not None:
        parts.append(f"(stratum {state.stratum}")
        parts[-1] += f", offset {state.offset_s:+.6f} s)" if state.offset_s is not None else ")"
    summary = " ".join(parts)
    if state.offset_s is not None and abs(state.offset_s) > ctx.config.warn_clock_skew:
        return result("ntp", Status.WARN, summary, "the daemon is still slewing a large offset; check again in a few minutes")
    return result("ntp", Status.PASS, summary)


NTP = NodeCheck("ntp", "NTP client synchronised", ("ntp",), _ntp_evaluate)


def parse_clock(output: str) -> float:
    """Seconds since the epoch from `date +%s.%N` (ParseError on anything else)."""
    text = output.strip()
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"expected seconds since the epoch from `date +%s.%N`, got {text[:40]!r}") from None


def _skew_evaluate(facts: Sequence[NodeFacts], ctx: ProbeContext) -> ClusterVerdict:
    cfg = ctx.config
    per_node: dict[str, CheckResult] = {}
    bad: list[str] = []
    worst = 0.0
    for f in facts:
        if f.clock_offset is None:
            per_node[f.node.name] = result("clock_skew", Status.ERROR, "could not read the node's clock (`date +%s.%N`)")
            bad.append(f.node.name)
            continue
        offset, error = f.clock_offset, f.clock_uncertainty or 0.0
        worst = max(worst, abs(offset) + error)  # what the measurement can vouch for, not its middle
        direction = "ahead of" if offset > 0 else "behind"
        text = f"clock {abs(offset):.3f} s {direction} this host (+/- {error:.3f} s)"
        if abs(offset) - error > cfg.max_clock_skew:
            bad.append(f.node.name)
            per_node[f.node.name] = result(
                "clock_skew", Status.FAIL, text,
                "the clock the job sees is off even if NTP says synchronised: check the NTP source "
                "(`chronyc sources -v`), step it (`chronyc makestep`), and look for faked clocks (LD_PRELOAD, FAKETIME)",
            )
        elif abs(offset) - error > cfg.warn_clock_skew:
            per_node[f.node.name] = result("clock_skew", Status.WARN, text, "NTP should keep nodes within a few ms; check its sources")
        elif abs(offset) + error > cfg.warn_clock_skew:
            # the error bar reaches past the warning threshold: the reading cannot vouch for this node's clock
            per_node[f.node.name] = result(
                "clock_skew", Status.WARN, f"{text}: cannot confirm within {cfg.warn_clock_skew:g} s",
                "the node answered slowly, so its clock reading is that uncertain: run preflight again on it "
                "(`-w NODE`), or compare `chronyc tracking` on both hosts")
        else:
            per_node[f.node.name] = result("clock_skew", Status.PASS, text)
    if bad:
        summary = result("clock_skew", Status.FAIL, f"{fold(bad)} off by more than {cfg.max_clock_skew:g} s", per_node[bad[0]].hint)
    else:
        unsure = [name for name, r in per_node.items() if r.status is not Status.PASS]
        if unsure:
            first = per_node[unsure[0]]
            summary = result("clock_skew", Status.WARN, f"{fold(unsure)}: {first.summary}", first.hint)
        else:
            summary = result("clock_skew", Status.PASS, f"every node within {worst:.3f} s of this host (error bars included)")
    return ClusterVerdict(per_node, summary)


CLOCK_SKEW = ClusterCheck("clock_skew", "node clocks agree with this host", (), _skew_evaluate, clock=True)
