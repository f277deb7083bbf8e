"""Node state that lasts between commands: which nodes of an inventory are quarantined, since when, why and by whom.

One JSON file per inventory under $XDG_STATE_HOME/ascendctl/nodes/, keyed by `inventory_key` (the inventory file's
resolved path; for a Slurm allocation the Slurm cluster, whose node names are its own). Every change is a
read-modify-write under an fcntl lock file beside it, written atomically (`paths.write_atomic`, mode 0600), so two
ascendctl processes at once lose no update. Spares are the inventory's `@spares` group: read-only here. On Slurm a
quarantine also drains the node (`scontrol update ... State=DRAIN Reason="ascendctl: ..."`), and a release resumes it
only when the reason is still ascendctl's. Must not import typer or rich.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from ascendctl.errors import AscendctlError, UsageError, parse_json
from ascendctl.paths import hidden_char, name_problem, state_dir, write_atomic

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory

NODE_STATE_SCHEMA = 1
SPARES_GROUP = "spares"
SLURM_REASON_PREFIX = "ascendctl: "


class NodeState(str, Enum):
    """What a node is for ascendctl: used (ok), left out until released (quarantined), or held back (spare)."""

    OK = "ok"
    QUARANTINED = "quarantined"
    SPARE = "spare"


class NodeStateError(AscendctlError):
    """The node state file cannot be read or written; the message names the file."""


@dataclass(frozen=True, slots=True)
class Quarantine:
    """Why one node is quarantined: the reason, since when (epoch seconds), who and which command, and the evidence."""

    reason: str
    since: float
    by: str
    command: str
    evidence: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "since": self.since, "by": self.by, "command": self.command, "evidence": self.evidence}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Quarantine":
        """Back from `to_dict`; ValueError/KeyError/TypeError on anything else."""
        evidence = data.get("evidence")
        if not all(isinstance(data[k], str) for k in ("reason", "by", "command")) or not isinstance(evidence, (str, type(None))):
            raise ValueError("reason, by, command and evidence must be strings")
        since = data["since"]
        if isinstance(since, bool) or not isinstance(since, (int, float)):
            raise ValueError(f"since {since!r} is not a time")
        return cls(data["reason"], float(since), data["by"], data["command"], evidence)


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """One inventory node as `ascendctl nodes` lists it."""

    name: str
    state: NodeState
    spare: bool
    quarantine: Quarantine | None = None


@dataclass(frozen=True, slots=True)
class NodeBook:
    """The node state of one inventory: its file and the quarantined nodes by name."""

    path: Path
    key: str
    quarantined: Mapping[str, Quarantine] = field(default_factory=dict)

    def entries(self, inventory: Inventory) -> list[NodeEntry]:
        """Every node of `inventory`, in its order, with its state."""
        spares = set(inventory.groups.get(SPARES_GROUP, ()))
        found = []
        for name in inventory.names:
            held = self.quarantined.get(name)
            state = NodeState.QUARANTINED if held else NodeState.SPARE if name in spares else NodeState.OK
            found.append(NodeEntry(name, state, name in spares, held))
        return found

    def gone(self, inventory: Inventory) -> list[str]:
        """Quarantined names the inventory no longer has (sorted): `nodes release` still takes them."""
        return sorted(set(self.quarantined) - set(inventory.names))


@dataclass(frozen=True, slots=True)
class SlurmChange:
    """What Slurm was asked for one node (drain or resume), and what came of it: None when done, else why not."""

    node: str
    action: str  # "drain", "resume", or "keep" (drained by someone else: left as it is)
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class StateChange:
    """What a quarantine or release did: the nodes changed, those already so, and the Slurm side."""

    book: NodeBook
    changed: tuple[str, ...]
    unchanged: tuple[str, ...]
    slurm: tuple[SlurmChange, ...] = ()

    @property
    def slurm_problems(self) -> list[SlurmChange]:
        return [c for c in self.slurm if c.problem is not None]


def inventory_key(inventory: Inventory) -> str:
    """The stable id node state is kept under: `slurm:<cluster>` for an allocation (node names are the Slurm cluster's,
    and every allocation is a new inventory), else the inventory file's resolved path (editing the file keeps the
    state; the built-in inventory is its own name)."""
    if inventory.allocation is not None:
        return slurm_state_key()
    if inventory.source.startswith("<"):
        return inventory.source
    return os.path.realpath(inventory.source)


def slurm_state_key(environ: Mapping[str, str] | None = None) -> str:
    """`slurm:<cluster>`: the key every allocation of one Slurm cluster shares. Inside a job Slurm sets
    SLURM_CLUSTER_NAME; outside one (submit mode) the cluster's own ClusterName is asked of `scontrol show config`."""
    env = os.environ if environ is None else environ
    name = env.get("SLURM_CLUSTER_NAME")
    if not name:
        from ascendctl.slurm import run_tool

        try:
            config = run_tool(["scontrol", "show", "config"], environ=environ)
        except AscendctlError:
            config = ""
        found = [line.split("=", 1)[1].strip() for line in config.splitlines()
                 if line.split("=", 1)[0].strip() == "ClusterName" and "=" in line]
        name = found[0] if found else ""
    return "slurm:" + (name or "default")


def _key_path(key: str) -> Path:
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return state_dir() / "nodes" / f"{digest}.json"


def state_path(inventory: Inventory) -> Path:
    """The node state file of this inventory."""
    return _key_path(inventory_key(inventory))


def _reset_hint(path: Path) -> str:
    return f"move it away or delete it (rm {path}) to start again with no node quarantined"


def _read(path: Path, key: str) -> NodeBook:
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # nothing recorded (a state "directory" that is a file holds nothing)
        return NodeBook(path, key)
    except OSError as exc:
        raise NodeStateError(f"{path}: cannot read the node state: {exc.strerror or exc}", hint=_reset_hint(path)) from None
    try:
        data = parse_json(text)
        if not isinstance(data, dict) or data.get("schema") != NODE_STATE_SCHEMA or not isinstance(data.get("quarantined"), dict):
            raise ValueError(f"not a node state file (schema {NODE_STATE_SCHEMA} with `quarantined`)")
        held = {str(name): Quarantine.from_dict(entry) for name, entry in data["quarantined"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NodeStateError(f"{path}: the node state file is corrupt: {exc}", hint=_reset_hint(path)) from None
    return NodeBook(path, key, held)


def load_node_state(inventory: Inventory) -> NodeBook:
    """The node state of `inventory` (none quarantined when there is no file yet); NodeStateError when unreadable."""
    return _read(state_path(inventory), inventory_key(inventory))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the lock file beside `path` (flock, exclusive) for a read-modify-write."""
    lock = path.with_suffix(".lock")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise NodeStateError(f"{lock}: cannot open the node state lock: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes, also if this process dies
        yield
    finally:
        os.close(fd)


def update_node_state(inventory: Inventory, change: Callable[[dict[str, Quarantine]], None]) -> NodeBook:
    """Apply `change` to the quarantined nodes under the lock and write the result atomically (mode 0600)."""
    path, key = state_path(inventory), inventory_key(inventory)
    with _locked(path):
        held = dict(_read(path, key).quarantined)
        change(held)
        document = {"schema": NODE_STATE_SCHEMA, "inventory": inventory.source, "key": key,
                    "quarantined": {name: q.to_dict() for name, q in sorted(held.items())}}
        try:
            write_atomic(path, json.dumps(document, indent=1) + "\n", private=True)
        except OSError as exc:
            raise NodeStateError(f"{path}: cannot write the node state: {exc.strerror or exc}") from None
    return NodeBook(path, key, held)


def quarantine_nodes(inventory: Inventory, names: Sequence[str], reason: str, *, by: str, command: str,
                     evidence: str | None = None, now: float | None = None) -> StateChange:
    """Quarantine `names` (nodes of `inventory`) for one reason; see `quarantine_each`."""
    return quarantine_each(inventory, {name: (reason, evidence) for name in names}, by=by, command=command, now=now)


def quarantine_each(inventory: Inventory, why: Mapping[str, tuple[str, str | None]], *, by: str, command: str,
                    now: float | None = None) -> StateChange:
    """Quarantine each node of `why` (name -> (reason, evidence)) in one locked update; a node already quarantined keeps
    its `since` and takes the new reason. In a Slurm allocation each node is also drained (`ascendctl: <reason>`)."""
    cleaned: dict[str, tuple[str, str | None]] = {}
    for name, (reason, evidence) in why.items():
        reason = reason.strip()
        if not reason:
            raise UsageError("a quarantine needs a reason (--reason TEXT)", hint="e.g. --reason 'ECC errors on NPU 3'")
        for what, text in (("--reason", reason), ("--evidence", evidence or "")):
            hidden = hidden_char(text)
            if hidden is not None:
                raise UsageError(f"{what} cannot contain control or invisible characters ({hidden})", hint="one line of plain text")
        cleaned[name] = (reason, evidence)
    stamp = time.time() if now is None else now
    changed: list[str] = []

    def mark(held: dict[str, Quarantine]) -> None:
        for name, (reason, evidence) in cleaned.items():
            before = held.get(name)
            if before is None:
                changed.append(name)
            held[name] = Quarantine(reason, before.since if before else stamp, by, command, evidence)

    book = update_node_state(inventory, mark)
    slurm = _drain(cleaned) if inventory.allocation is not None else ()
    return StateChange(book, tuple(changed), tuple(n for n in cleaned if n not in changed), slurm)


def release_nodes(inventory: Inventory, names: Sequence[str]) -> StateChange:
    """Release `names`; in a Slurm allocation resume each node Slurm drains with ascendctl's reason (only those)."""
    changed: list[str] = []

    def unmark(held: dict[str, Quarantine]) -> None:
        for name in names:
            if held.pop(name, None) is not None:
                changed.append(name)

    book = update_node_state(inventory, unmark)
    slurm = _resume(names) if inventory.allocation is not None else ()
    return StateChange(book, tuple(changed), tuple(n for n in names if n not in changed), slurm)


def named_nodes(inventory: Inventory, nodeset: str, *, stale: bool = False) -> list[str]:
    """The node names NODESET stands for (names or hosts, @groups), in inventory order; UsageError naming unknown ones.
    `stale`: also names no longer in the inventory that are still quarantined (so a release can clear them)."""
    from ascendctl.inventory.load import NodeNames
    from ascendctl.inventory.selection import ALL_GROUP, expand_nodeset, select_nodes

    try:
        return select_nodes(inventory, nodeset).names
    except UsageError as unknown:
        if not stale:
            raise
        held = load_node_state(inventory).quarantined
        items = expand_nodeset(nodeset, {ALL_GROUP: tuple(inventory.names), **inventory.groups})
        gone = [item for item in items if item in held and item not in inventory.names]
        rest = [item for item in items if item not in gone]
        if not gone:
            raise
        known, missing = NodeNames(inventory.nodes).lookup(rest)
        if missing:
            from ascendctl.nodeset import fold

            raise UsageError(f"{fold(missing)} in {nodeset!r}: no such node in {inventory.source}, nor a quarantined one",
                             hint=unknown.hint) from None
        return [name for name in inventory.names if name in known] + gone


def submit_exclusions(inventory: Inventory, environ: Mapping[str, str] | None = None) -> dict[str, Quarantine]:
    """Submit mode (`launch --backend slurm` outside an allocation): the nodes sbatch must not give the job, by name: those
    quarantined for the Slurm cluster (what allocations on it recorded, and drained) and in the inventory file's own state."""
    held = dict(_read(_key_path(inventory_key(inventory)), inventory_key(inventory)).quarantined)
    key = slurm_state_key(environ)
    held.update(_read(_key_path(key), key).quarantined)
    # a name goes into the batch script: one that could not be a node name (a newline, a comma) is not taken from the file
    return {name: why for name, why in sorted(held.items()) if name_problem(name) is None}


def without_quarantined(inventory: Inventory) -> tuple[Inventory, list[str]]:
    """`inventory` minus its quarantined nodes (renumbered from 0, as a selection is), and the names left out."""
    held = load_node_state(inventory).quarantined
    out = [name for name in inventory.names if name in held]
    if not out:
        return inventory, []
    kept = [node for node in inventory.nodes if node.name not in held]
    return replace(inventory, nodes=tuple(replace(node, index=i) for i, node in enumerate(kept))), out


def drain_argv(node: str, reason: str) -> list[str]:
    """The scontrol command that drains `node` with ascendctl's reason (an argv: no shell quoting involved)."""
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={SLURM_REASON_PREFIX}{reason}"]


def resume_argv(node: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


def _drain(why: Mapping[str, tuple[str, str | None]]) -> tuple[SlurmChange, ...]:
    from ascendctl.slurm import run_tool

    done = []
    for name, (reason, _evidence) in why.items():
        try:
            run_tool(drain_argv(name, reason))
            done.append(SlurmChange(name, "drain"))
        except AscendctlError as exc:  # often: only an operator may drain; the quarantine itself is recorded
            done.append(SlurmChange(name, "drain", exc.message))
    return tuple(done)


def _resume(names: Sequence[str]) -> tuple[SlurmChange, ...]:
    from ascendctl.slurm import run_tool, show_nodes

    try:
        shown = show_nodes(names)
    except AscendctlError as exc:
        return tuple(SlurmChange(name, "resume", exc.message) for name in names)
    done = []
    for name in names:
        node = shown.get(name)
        if node is None or "DRAIN" not in node.state.upper():
            continue  # not drained: nothing to resume
        if not (node.reason or "").startswith(SLURM_REASON_PREFIX.strip()):
            done.append(SlurmChange(name, "keep", f"drained by someone else ({node.reason or 'no reason'}): left drained"))
            continue
        try:
            run_tool(resume_argv(name))
            done.append(SlurmChange(name, "resume"))
        except AscendctlError as exc:
            done.append(SlurmChange(name, "resume", exc.message))
    return tuple(done)
