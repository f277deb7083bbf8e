"""The `name_resolution` check: every node resolves its own hostname and the other nodes' cluster addresses, quickly.

gloo and torch look up the node's own name (gethostname + getaddrinfo) and reverse-resolve each peer they connect to
(getnameinfo); with no reachable DNS server every lookup stalls for seconds and large jobs abort. The lookups run in
preflight's cross-node round (they need the other nodes' cluster addresses) as `sh/name_lookup.sh`; the section
builder and the evaluator here are pure. Must not import typer or rich.
"""

from __future__ import annotations

import ipaddress
import math
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from ascendctl.facts.endpoint import NET_SECTIONS, canonical_ip
from ascendctl.nodeset import fold
from ascendctl.facts.parsers import ParseError
from ascendctl.remote.probe import TIMED_OUT
from ascendctl.remote.scripts import script
from ascendctl.preflight.checks.model import ClusterCheck, ClusterVerdict, Status, result
from ascendctl.preflight.checks.network import node_address

if TYPE_CHECKING:
    from ascendctl.remote.probe import Section
    from ascendctl.preflight.checks.model import CheckResult, NodeFacts, ProbeContext

NAMES_SECTION = "names"
# At most this many addresses per node (its own included): beyond, each node takes the ones that follow it in
# inventory order (a ring), so every address is still looked up by MAX_ADDRESSES - 1 other nodes.
MAX_ADDRESSES = 256
LOOKERS = 4  # lookups running side by side on a node
SLOW_CAP = 2  # a looker stops after this many slow lookups: a stalled resolver makes every one slow
STOPPED = (124, 137, 143)  # `timeout` stopped the lookup

HINT_SLOW = ("give every node an /etc/hosts with every node's cluster address and name, or a reachable DNS server "
             "(gloo looks up every peer it connects to: a stalled lookup costs each rank seconds)")
HINT_MISSING = ("give every node the same /etc/hosts with every node's cluster address and name "
                "(or DNS whose forward and reverse records agree)")


def stop_seconds(max_lookup: float) -> int:
    """Each lookup is stopped after this many seconds (where the node has `timeout`): past the threshold, with room."""
    return max(2, math.ceil(max_lookup) + 1)


def lookup_addresses(facts: NodeFacts, reachable: Sequence[NodeFacts]) -> list[str]:
    """The addresses a node reverse-resolves: its own cluster address first, then the others' that follow it in
    inventory order (distinct IP literals only), at most MAX_ADDRESSES."""
    ordered = sorted(reachable, key=lambda f: f.node.index)
    start = next((i for i, f in enumerate(ordered) if f.node.name == facts.node.name), 0)
    ring = ordered[start:] + ordered[:start]
    out: list[str] = []
    for peer in ring:
        address = canonical_ip(node_address(peer))
        if address is not None and address not in out:
            out.append(address)
            if len(out) == MAX_ADDRESSES:
                break
    return out


def lookup_section(facts: NodeFacts, reachable: Sequence[NodeFacts], ctx: ProbeContext) -> dict[str, str]:
    """The cross-node round's name lookups on this node (none on a one-node cluster): see sh/name_lookup.sh."""
    if len(ctx.inventory.nodes) < 2:
        return {}
    max_lookup = ctx.config.max_lookup_seconds
    args = [max(1, round(max_lookup * 100)), stop_seconds(max_lookup), LOOKERS, SLOW_CAP,
            *lookup_addresses(facts, reachable)]
    # the section runs with no positional parameters (`set --` in the probe runner): give the script its own
    return {NAMES_SECTION: f"set -- {shlex.join(str(a) for a in args)}\n{script('name_lookup.sh')}"}


@dataclass(frozen=True, slots=True)
class HostLookup:
    """`getent ahosts $(uname -n)`."""

    name: str
    cs: int
    rc: int
    addresses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddressLookup:
    """`getent hosts ADDRESS`, then `getent ahosts NAME` of the name it gave."""

    address: str
    cs: int
    rc: int
    name: str | None
    forward_cs: int | None = None
    forward_rc: int | None = None
    maps_back: bool | None = None
    forward: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Lookups:
    """What `name_lookup.sh` printed on one node."""

    asked: int = 0
    host: HostLookup | None = None
    addresses: tuple[AddressLookup, ...] = ()
    not_checked: int = 0  # left by lookers that stopped after their slow lookups
    getent_missing: bool = False


def _int(word: str, line: str) -> int:
    if not word.isdigit():
        raise ParseError(f"not a number in {line!r}")
    return int(word)


def parse_lookups(text: str) -> Lookups:
    """The lines of sh/name_lookup.sh; ParseError on any other line."""
    asked, host, found, left, missing = 0, None, [], 0, False
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        kind = words[0]
        if kind == "asked" and len(words) == 2:
            asked = _int(words[1], line)
        elif kind == "host" and len(words) >= 4:
            host = HostLookup(words[1], _int(words[2], line), _int(words[3], line), tuple(words[4:]))
        elif kind == "addr" and len(words) >= 8:
            name = None if words[4] == "-" else words[4]
            forward = name is not None and words[5] != "-"
            found.append(AddressLookup(
                words[1], _int(words[2], line), _int(words[3], line), name,
                _int(words[5], line) if forward else None, _int(words[6], line) if forward else None,
                words[7] == "1" if forward else None, tuple(words[8:]),
            ))
        elif kind == "stopped" and len(words) == 2:
            left += _int(words[1], line)
        elif line.strip() == "getent missing":
            missing = True
        else:
            raise ParseError(f"unexpected line {line.strip()[:80]!r}")
    return Lookups(asked, host, tuple(found), left, missing)


@dataclass
class _Findings:
    slow: list[str] = field(default_factory=list)
    slow_kinds: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    warn: str | None = None

    def kind(self, what: str) -> None:
        if what not in self.slow_kinds:
            self.slow_kinds.append(what)


def _listed(items: list[str], limit: int = 4) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _evaluate_node(facts: NodeFacts, names_of: Mapping[str, list[str]], ctx: ProbeContext) -> CheckResult:
    order = {address: i for i, address in enumerate(names_of)}
    limit = ctx.config.max_lookup_seconds
    max_cs = max(1, round(limit * 100))
    section: Section | None = facts.phase2.get(NAMES_SECTION)
    if section is None:
        return result("name_resolution", Status.ERROR, "no answer from the name lookups (the cross-node round failed on this node)")
    try:
        lookups = parse_lookups(section.output)
    except ParseError as exc:
        return result("name_resolution", Status.ERROR, f"cannot read the name lookups: {exc}")
    if lookups.getent_missing:
        return result("name_resolution", Status.ERROR, "getent not found on the node",
                      "install getent (Debian/Ubuntu: libc-bin; RHEL: glibc-common)")
    cut = section.exit_code is None or section.exit_code in TIMED_OUT
    if lookups.host is None and not lookups.addresses and not cut:
        return result("name_resolution", Status.ERROR, f"cannot read the name lookups: no lookup reported (exit {section.exit_code})")

    def who(address: str) -> str:
        nodes = names_of.get(address)
        return f"{address} ({fold(nodes)})" if nodes else address

    def is_slow(cs: int | None, rc: int | None) -> bool:
        return rc in STOPPED or (cs is not None and cs > max_cs)

    found = _Findings()
    own = canonical_ip(node_address(facts))
    # in inventory order, not the order the lookers finished in: the same problem on many nodes reads the same
    ordered = sorted(lookups.addresses, key=lambda item: order.get(item.address, len(order)))
    host = lookups.host
    if host is None:
        found.kind("its hostname")
        found.slow.append("its hostname (no answer)")
    elif is_slow(host.cs, host.rc):
        found.kind("its hostname")
        found.slow.append("its hostname")
    elif host.rc != 0 or not host.addresses:
        found.missing.append("its hostname does not resolve")
    elif own is not None and own not in host.addresses:
        loopback = all(_is_loopback(a) for a in host.addresses)
        found.warn = (f"its hostname resolves to {', '.join(host.addresses[:3])}"
                      f"{' (loopback)' if loopback else ''}, not its cluster address {own}")
    for item in ordered:
        if is_slow(item.cs, item.rc):
            found.kind("reverse lookups")
            found.slow.append(f"reverse {who(item.address)}")
        elif item.name is None:
            found.missing.append(f"no name for {who(item.address)}")
        elif is_slow(item.forward_cs, item.forward_rc):
            found.kind("forward lookups")
            found.slow.append(f"forward {item.name} (of {item.address})")
        elif item.forward_rc is None:
            continue  # the looker stopped before the forward lookup
        elif item.forward_rc != 0:
            found.inconsistent.append(f"{who(item.address)} -> {item.name}, which does not resolve")
        elif not item.maps_back:
            back = ", ".join(item.forward) or "nothing"
            found.inconsistent.append(f"{who(item.address)} -> {item.name} -> {back}")
    answered = len(lookups.addresses)
    left = max(lookups.not_checked, lookups.asked - answered)
    return _verdict(found, limit, answered, left, cut, ctx, own)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _verdict(found: _Findings, limit: float, answered: int, left: int, cut: bool, ctx: ProbeContext,
             own: str | None) -> CheckResult:
    parts: list[str] = []
    hint: str | None = None
    if found.slow or cut:
        if cut:
            # the section was stopped (section_timeout): lookups without `timeout` on the node stall that long
            what = (f"name lookups did not finish within section_timeout {ctx.config.section_timeout:g}s"
                    f" ({', '.join(found.slow_kinds) or 'no answer'}): the resolver stalls")
        elif left:
            # a stalled resolver: the lookers stopped; which lookups they hit first varies, so say what kinds
            what = (f"name lookups take over {limit:g} s ({', '.join(found.slow_kinds)}): the resolver stalls; "
                    f"stopped after the first slow ones, {left} of {answered + left} addresses not checked")
        else:
            what = f"name lookups take over {limit:g} s: {_listed(found.slow)}"
        parts.append(what)
        hint = HINT_SLOW
    if found.missing:
        parts.append(_listed(found.missing))
        hint = hint or HINT_MISSING
    if found.inconsistent:
        parts.append("not back to the same address: " + _listed(found.inconsistent))
        hint = hint or HINT_MISSING
    if parts:
        return result("name_resolution", Status.FAIL, "; ".join(parts), hint)
    if found.warn:
        return result("name_resolution", Status.WARN, found.warn,
                      f"map the hostname to the cluster address in /etc/hosts (`{own} <hostname>`): jobs that do not set "
                      "GLOO_SOCKET_IFNAME (ascendctl launch does) bind gloo to the address the hostname gives")
    return result("name_resolution", Status.PASS,
                  f"hostname and {answered} node address(es) resolve forward and reverse, each within {limit:g} s")


def _evaluate(facts: Sequence[NodeFacts], ctx: ProbeContext) -> ClusterVerdict:
    if len(ctx.inventory.nodes) < 2:
        summary = result("name_resolution", Status.SKIP, "one node: no other node to look up")
        return ClusterVerdict({f.node.name: summary for f in facts}, summary)
    names_of: dict[str, list[str]] = {}  # address -> nodes, in inventory order
    for f in sorted(facts, key=lambda f: f.node.index):
        address = canonical_ip(node_address(f))
        if address is not None:
            names_of.setdefault(address, []).append(f.node.name)
    per_node = {f.node.name: _evaluate_node(f, names_of, ctx) for f in facts}
    bad = [name for name, r in per_node.items() if r.status in (Status.FAIL, Status.ERROR)]
    warned = [name for name, r in per_node.items() if r.status == Status.WARN]
    limit = ctx.config.max_lookup_seconds
    if bad:
        summary = result("name_resolution", Status.FAIL, f"name lookups fail or stall on {fold(bad)}", per_node[bad[0]].hint)
    elif warned:
        summary = result("name_resolution", Status.WARN, f"hostname is not the cluster address on {fold(warned)}",
                         per_node[warned[0]].hint)
    else:
        summary = result("name_resolution", Status.PASS,
                         f"every node resolves its hostname and the nodes' addresses forward and reverse within {limit:g} s")
    return ClusterVerdict(per_node, summary)


NAME_RESOLUTION = ClusterCheck("name_resolution", "hostname and every node's address resolve quickly and consistently",
                               NET_SECTIONS, _evaluate, phase2=True)
