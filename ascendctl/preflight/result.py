"""What a preflight run found (per node, per check, across nodes), its exit code, and its JSON document both ways:
read back by `report` and `--html` without running anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ascendctl.errors import ExitCode
from ascendctl.nodeset import generic, group_by, hint_with_fingerprints
from ascendctl.outcome import Outcome, exit_code_for
from ascendctl.preflight.checks.model import CheckResult, Status


@dataclass(frozen=True, slots=True)
class NodeReport:
    """Every selected check's result on one node, in registry order."""

    name: str
    host: str
    reachable: bool
    checks: tuple[CheckResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "reachable": self.reachable, "checks": [c.to_dict() for c in self.checks]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NodeReport":
        if not isinstance(data["name"], str):
            raise ValueError(f"node name {data['name']!r} is not a string")
        return cls(data["name"], str(data.get("host") or ""), bool(data.get("reachable", True)),
                   tuple(CheckResult.from_dict(c) for c in data["checks"]))


@dataclass(frozen=True, slots=True)
class PreflightReport:
    """Per-node results plus the cross-node summaries."""

    check_ids: tuple[str, ...]
    nodes: tuple[NodeReport, ...]
    cluster: tuple[CheckResult, ...]
    duration: float = 0.0

    @property
    def exit_code(self) -> ExitCode:
        """4 when a node was unreachable, else 3 when a check failed or could not be evaluated, else 0."""
        outcomes = [Outcome.UNREACHABLE for node in self.nodes if not node.reachable]
        outcomes += [c.status.outcome for node in self.nodes for c in node.checks]
        outcomes += [c.status.outcome for c in self.cluster]
        return exit_code_for(outcomes)

    @property
    def node_outcomes(self) -> list[tuple[str, Outcome]]:
        """Each node's outcome, in inventory order: unreachable, else failed when a check failed or was not evaluated."""
        def worst(node: NodeReport) -> Outcome:
            if not node.reachable:
                return Outcome.UNREACHABLE
            return next((c.status.outcome for c in node.checks if c.status.outcome != Outcome.OK), Outcome.OK)

        return [(node.name, worst(node)) for node in self.nodes]

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK

    def problems(self) -> list[tuple[tuple[str, Status, str, str | None], list[str]]]:
        """Every failing, unevaluated or warning check, grouped by (check, status, summary, hint) with its nodes in order."""
        found = [(n, c) for n in self.nodes for c in n.checks if c.status in (Status.FAIL, Status.ERROR, Status.WARN)]
        # the same error on many nodes differs by each node's own address: fold by the text with `<host>` in its place
        grouped = group_by(found, key=lambda p: (p[1].check, p[1].status, generic(p[1].summary, p[0].host) or "",
                                                  generic(p[1].hint, p[0].host)), name=lambda p: p[0].name)
        by_name = {n.name: n for n in self.nodes}
        problems = []
        for (check_id, status, summary, hint), names in grouped:
            if len(names) == 1:  # one node: its own words
                only = next(c for c in by_name[names[0]].checks if c.check == check_id)
                summary, hint = only.summary, only.hint
            else:  # a host key to verify: every node's own fingerprint, never folded away
                hint = hint_with_fingerprints(hint, summary, ((name, next(c.summary for c in by_name[name].checks
                                                                              if c.check == check_id)) for name in names))
            problems.append(((check_id, status, summary, hint), names))
        return problems

    def folded_problems(self) -> list[tuple[tuple[str, ...], Status, str, str | None, list[str]]]:
        """problems(), with checks that say the same thing on the same nodes folded into one line.

        An unreachable node gives one line for all its unevaluated checks, not one per check; at 1,000 nodes
        a problem is one line with its node set and its hint once.
        """
        merged: dict[tuple[Status, str, str | None, tuple[str, ...]], list[str]] = {}
        for (check_id, status, summary, hint), names in self.problems():
            merged.setdefault((status, summary, hint, tuple(names)), []).append(check_id)
        return [(tuple(ids), status, summary, hint, list(names)) for (status, summary, hint, names), ids in merged.items()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": list(self.check_ids),
            "nodes": [node.to_dict() for node in self.nodes],
            "cluster": [c.to_dict() for c in self.cluster],
            "duration": round(self.duration, 3),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PreflightReport":
        """The report back from a `preflight --json` document; KeyError/ValueError/TypeError on garbage."""
        duration = data.get("duration") or 0.0
        if not isinstance(duration, (int, float)):
            raise ValueError(f"duration {duration!r} is not a number")
        return cls(tuple(str(c) for c in data["checks"]), tuple(NodeReport.from_dict(n) for n in data["nodes"]),
                   tuple(CheckResult.from_dict(c) for c in data.get("cluster") or ()), float(duration))
