"""Retry records: the nodes that failed or were unreachable in the last run of a remote command, as Ansible's retry files.

`exec`, `preflight` and `collect` save one after each run; `--rerun-failed` reads it back (`rerun_nodes`) and
the command runs on exactly those nodes (selection.py). One record per command and inventory, in
$XDG_STATE_HOME/ascendctl/retry/, written atomically and readable only by its owner.
Must not import typer or rich.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ascendctl.errors import NothingToDo, UsageError, parse_json
from ascendctl.outcome import Outcome
from ascendctl.paths import state_dir, write_atomic

log = logging.getLogger(__name__)
RETRY_SCHEMA = 1


@dataclass(frozen=True, slots=True)
class RetryRecord:
    """What the last run of `command` on `inventory` left undone: node names, in inventory order."""

    command: str
    inventory: str
    failed: tuple[str, ...]  # reached, and the command (or a check) failed or could not be judged there
    unreachable: tuple[str, ...]
    time: float

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.failed + self.unreachable

    def to_dict(self) -> dict[str, object]:
        return {"schema": RETRY_SCHEMA, "command": self.command, "inventory": self.inventory, "failed": list(self.failed),
                "unreachable": list(self.unreachable), "time": self.time}


def retry_path(command: str, inventory_source: str) -> Path:
    """Where the record of `command` on this inventory lives: one file per (command, inventory file)."""
    key = inventory_source if inventory_source.startswith("<") else os.path.abspath(inventory_source)
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return state_dir() / "retry" / f"{command}-{digest}.json"


def save_failures(command: str, inventory_source: str, outcomes: Iterable[tuple[str, Outcome]]) -> RetryRecord:
    """Record this run's failed and unreachable nodes (an empty record after a clean run); a write failure is only logged."""
    outcomes = list(outcomes)
    record = RetryRecord(command, inventory_source,
                         failed=tuple(name for name, o in outcomes if o not in (Outcome.OK, Outcome.UNREACHABLE)),
                         unreachable=tuple(name for name, o in outcomes if o == Outcome.UNREACHABLE), time=time.time())
    path = retry_path(command, inventory_source)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(path, json.dumps(record.to_dict()), private=True)
    except OSError as exc:  # the run's own result matters more than the record of it
        log.warning("cannot save the nodes to rerun in %s: %s (--rerun-failed will not know this run)", path, exc.strerror or exc)
    return record


def load_failures(command: str, inventory_source: str) -> RetryRecord | None:
    """The record of the last run of `command` on this inventory, or None when there is none."""
    path = retry_path(command, inventory_source)
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
        return RetryRecord(str(data["command"]), str(data["inventory"]), tuple(map(str, data["failed"])),
                           tuple(map(str, data["unreachable"])), float(data["time"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: cannot read the record of the last `{command}`: {exc}",
                         hint="delete it and run the command once without --rerun-failed") from None


def rerun_nodes(command: str, inventory_source: str) -> tuple[str, ...]:
    """The nodes `--rerun-failed` runs on; UsageError without a record, NothingToDo (exit 0) when none failed."""
    record = load_failures(command, inventory_source)
    if record is None:
        raise UsageError(f"nothing to rerun: no earlier `{command}` on {inventory_source} is recorded",
                         hint=f"run `ascendctl {command}` once without --rerun-failed")
    if not record.nodes:
        raise NothingToDo(f"nothing to rerun: the last `{command}` on {inventory_source} had no failed or unreachable nodes")
    return record.nodes
