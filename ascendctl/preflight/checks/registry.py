"""The preflight checks, in the order they run and report; selecting them by id (--only, --skip)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ascendctl.errors import UsageError
from ascendctl.preflight.checks import clock, names, network, npu, system

if TYPE_CHECKING:
    from ascendctl.preflight.checks.model import Check


def _registry() -> tuple[Check, ...]:
    return (
        network.SSH,
        clock.NTP,
        clock.CLOCK_SKEW,
        network.MTU,
        network.PATH_MTU,
        network.MASTER_PORT,
        names.NAME_RESOLUTION,
        npu.NPU_COUNT,
        npu.NPU_HEALTH,
        npu.NPU_STALE_PROCS,
        npu.HCCN_LINK,
        npu.DEVICE_IPS,
        system.VERSIONS,
        system.DISK,
        system.LIMITS,
        system.STACKS,
        system.LAUNCHER,
    )


ALL_CHECKS: tuple[Check, ...] = _registry()
CHECK_IDS: tuple[str, ...] = tuple(check.id for check in ALL_CHECKS)


def select_checks(only: Sequence[str] | None = None, skip: Sequence[str] | None = None) -> tuple[Check, ...]:
    """The checks to run, in registry order; unknown ids are a usage error naming the valid ones."""
    wanted = _split(only)
    unwanted = _split(skip)
    unknown = [cid for cid in wanted + unwanted if cid not in CHECK_IDS]
    if unknown:
        raise UsageError(f"unknown check id(s): {', '.join(unknown)}", hint="valid ids: " + ", ".join(CHECK_IDS))
    return tuple(c for c in ALL_CHECKS if (not wanted or c.id in wanted) and c.id not in unwanted)


def _split(ids: Sequence[str] | None) -> list[str]:
    out: list[str] = []
    for item in ids or ():
        out += [part.strip() for part in item.split(",") if part.strip()]
    return out
