"""-w/-x and --rerun-failed over real SSH to real test hosts: a command runs on the chosen hosts and nowhere else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster

runner = CliRunner()
# Each run leaves a line in the host's own /root (a private home per host), so a host that was not chosen
# is seen not to have run anything, not only to be missing from the output.
MARK = "hostname; echo run >> /root/ascendctl-runs"


def exec_json(inventory: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["exec", "-i", str(inventory), "--json", *args, "--", MARK], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def runs(cluster: Cluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for host in cluster.hosts:
        out = cluster.run_on(host, "cat /root/ascendctl-runs 2>/dev/null | wc -l", check=True).stdout
        counts[host.name] = int(out.strip())
    return counts


def test_selection_by_name_host_and_group_then_rerun_failed_after_sshd_came_back(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory(3, wait_chrony=False)
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"connect_timeout": 3, "connect_retries": 0})
    inventory.write_text(inventory.read_text() + "groups:\n  ends: [h01, h03]\n")
    _, h02, h03 = cluster.hosts

    def ran(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(n["name"], n["status"], n["stdout"]) for n in doc["nodes"]]

    expected_runs = {"h01": 0, "h02": 0, "h03": 0}
    for args, chosen in ((("-w", "h02"), ["h02"]), (("-w", h03.ip), ["h03"]), (("-w", "@ends"), ["h01", "h03"]),
                         (("-x", "h01"), ["h02", "h03"]), (("-w", "@all", "-x", f"{h02.ip},h03"), ["h01"])):
        code, doc = exec_json(inventory, *args)
        assert code == 0, args
        assert ran(doc) == [(name, "ok", f"{name}\n") for name in chosen], args
        for name in chosen:
            expected_runs[name] += 1
        assert runs(cluster) == expected_runs, args

    cluster.stop_sshd(h02)
    code, doc = exec_json(inventory)
    assert code == 4
    assert [(n["name"], n["status"]) for n in doc["nodes"]] == [("h01", "ok"), ("h02", "unreachable"), ("h03", "ok")]
    expected_runs["h01"] += 1
    expected_runs["h03"] += 1
    assert runs(cluster) == expected_runs

    cluster.start_sshd(h02)
    code, doc = exec_json(inventory, "--rerun-failed")
    assert code == 0
    assert ran(doc) == [("h02", "ok", "h02\n")]
    expected_runs["h02"] += 1
    assert runs(cluster) == expected_runs  # h01 and h03 ran nothing more

    result = runner.invoke(app, ["exec", "-i", str(inventory), "--rerun-failed", "--", MARK], catch_exceptions=False)
    assert result.exit_code == 0 and "nothing to rerun" in result.stderr
    assert runs(cluster) == expected_runs
