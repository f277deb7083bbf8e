"""1,000 SSH endpoints from one control node under `ulimit -n 1024`: exec and a quick preflight reach every one.

20 real test hosts (network namespaces, one sshd each) hold 50 addresses each; the inventory has a node per
address. The CLI runs in a subprocess under `prlimit --nofile=1024:1024`, as on a control node with the common
default limit: more nodes than file descriptors, so the connections kept across preflight's rounds must stay
within the budget.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster, HostSpec

pytestmark = pytest.mark.slow

HOSTS, PER_HOST = 20, 50
NOFILE = 1024


def cli(*args: str) -> tuple[int, dict[str, Any], str]:
    """Run ascendctl under the fd limit; (exit code, its JSON document, stderr)."""
    proc = subprocess.run(["prlimit", f"--nofile={NOFILE}:{NOFILE}", "--", sys.executable, "-m", "ascendctl", *args],
                          capture_output=True, text=True, timeout=900)
    return proc.returncode, json.loads(proc.stdout), proc.stderr


@pytest.fixture
def thousand(cluster_factory: Any, tmp_path: Path) -> tuple[Cluster, Path]:
    # MaxStartups raised: one of these sshds stands for 50 nodes, each of which would see its own client's connect
    specs = [HostSpec(f"h{i:02d}", extra_addresses=PER_HOST - 1, sshd_config_extra=["MaxStartups 200:30:400"])
             for i in range(1, HOSTS + 1)]
    cluster: Cluster = cluster_factory(specs)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", every_address=True,
                                        defaults={"connect_timeout": 30, "command_timeout": 60})
    return cluster, inventory


def test_exec_and_preflight_reach_all_1000_endpoints_within_1024_fds(thousand: tuple[Cluster, Path]) -> None:
    cluster, inventory = thousand
    endpoints = cluster.endpoints()
    assert len(endpoints) == len({ip for _, ip in endpoints}) == HOSTS * PER_HOST
    host_of = {name: name.split("-")[0] for name, _ in endpoints}

    code, doc, stderr = cli("exec", "-i", str(inventory), "--json", "--", "hostname")
    assert code == 0, stderr[-3000:]
    assert [(n["name"], n["status"], n["stdout"]) for n in doc["nodes"]] == [
        (name, "ok", f"{host_of[name]}\n") for name, _ in endpoints]
    assert "Traceback" not in stderr and "Too many open files" not in stderr

    code, doc, stderr = cli("preflight", "-i", str(inventory), "--only", "ssh,ntp,mtu", "--json")
    assert "Traceback" not in stderr and "Too many open files" not in stderr
    assert [n["name"] for n in doc["nodes"] if n["reachable"]] == [name for name, _ in endpoints], stderr[-3000:]
    failed = {(n["name"], c["check"], c["status"], c["summary"]) for n in doc["nodes"] for c in n["checks"]
              if c["status"] != "pass"}
    assert not failed, sorted(failed)[:10]
    assert code == 0
    # more nodes than connections that fit: said once, on stderr (stdout is the JSON document)
    assert stderr.count(f"file descriptor limit ({NOFILE})") == 1, stderr[-3000:]
