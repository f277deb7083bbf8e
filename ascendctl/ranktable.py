"""Where an HCCL rank table puts each rank: server, host address and device, read leniently.

`render ranktable` writes rank tables and `render ranktable --check` validates one field by field (render.py); triage
only needs to know, from a table that came with the logs, which device of which server each rank ran on (a plog names
its device, never its rank) and how many ranks the job had (a rank that never spoke was still expected). This is that
reading, for every layout HCCL takes: `server_list` (v1.0, v1.2 with `host_ip`), `rank_list` (v2.0, ranks without
servers), and the legacy `group_list`/`instance_list` of one group. A field that is missing or not a number is passed
over; nothing here raises on a malformed table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# File names people and tools give rank tables: RANK_TABLE_FILE=rank_table_16p.json, hccl_8p.json, hccl_2s_16p.json,
# ranktable.json, rank_table_file.json (what MindSpore's hccl_tools writes, what `render ranktable -o` is usually told)
NAME_RX = re.compile(r"(?:rank_?table|^hccl).*\.json$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RankPlace:
    """One rank of a table: its server's id (an address or a name), the server's host address when given, its device."""

    rank: int
    server: str | None
    host_ip: str | None
    device: int | None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def rank_places(table: Any) -> list[RankPlace]:
    """Every rank the table places, in the table's order; empty when it is no rank table."""
    if not isinstance(table, dict):
        return []
    places: list[RankPlace] = []
    servers = table.get("server_list")
    if isinstance(servers, list):
        for server in servers:
            if not isinstance(server, dict) or not isinstance(server.get("device"), list):
                continue
            for device in server["device"]:
                rank = _int(device.get("rank_id")) if isinstance(device, dict) else None
                if rank is not None:
                    places.append(RankPlace(rank, _text(server.get("server_id")), _text(server.get("host_ip")),
                                            _int(device.get("device_id"))))
    ranks = table.get("rank_list")
    if isinstance(ranks, list):  # v2.0: ranks and their devices, no server of their own
        for entry in ranks:
            rank = _int(entry.get("rank_id")) if isinstance(entry, dict) else None
            if rank is not None:
                places.append(RankPlace(rank, None, None, _int(entry.get("device_id"))))
    groups = table.get("group_list")
    if isinstance(groups, list) and len(groups) == 1 and isinstance(groups[0], dict):  # legacy: one group, ranks in order
        instances = groups[0].get("instance_list")
        rank = 0
        for instance in instances if isinstance(instances, list) else []:
            devices = instance.get("devices") if isinstance(instance, dict) else None
            for device in devices if isinstance(devices, list) else []:
                if isinstance(device, dict):
                    given = _int(device.get("rank_id")) if "rank_id" in device else rank
                    if given is not None:
                        places.append(RankPlace(given, _text(instance.get("server_id")), None, _int(device.get("device_id"))))
                    rank += 1
    return places
