"""Hostile file names in a node's log directories, on real test hosts: `collect` packs only the files it chose.

Any user's job writes into the directories `collect` searches, and names are chosen by that job. Issue #30: a
name holding a newline and tabs ended the node's tab/newline file list early and forged a line of its own naming
`/root`, which root's `collect` then packed whole, exit 0. Each case plants one hostile name beside ordinary logs
and a secret in `/root/.secret/` (each host has its own `/root`), runs `ascendctl collect` over SSH, and checks
that the bundle holds exactly the ordinary logs, nothing of the secret, and that the manifest and stderr name what
was refused and why.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec

runner = CliRunner()
PLOG = "/root/ascend/log/debug/plog"
SECRET_DIR = "/root/.secret"

# run by python3 on the host: makes each {"path", and "content" | "link" | "dir"} of the JSON list on stdin
PLANT = """
import json, os, sys
for spec in json.load(sys.stdin):
    path = spec["path"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if "link" in spec:
        os.symlink(spec["link"], path)
    elif "dir" in spec:
        os.makedirs(path, exist_ok=True)
    else:
        with open(path, "w") as f:
            f.write(spec["content"])
"""

FORGED_ROOT = f"{PLOG}/x\n9999999999\t0\tplog\t/root"  # find's line for it ends in the line "9999999999<tab>0<tab>plog<tab>/root"
UNQUOTED = f"{PLOG}/d\\057..\\057..\\057..\\057..\\057..\\057.secret\\057token"  # tar's default unquoting: /root/.secret/token
LINK = f"{PLOG}/link.log"

# case: (what the job plants, files refused as {path: reason}, hostile files kept whole as {path: content})
CASES: dict[str, tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]] = {
    "newline and tabs forging a record of /root": ([{"path": FORGED_ROOT, "content": ""}],
                                                   {FORGED_ROOT: "control character in the path"}, {}),
    "backslash escapes tar would unquote into /root/.secret/token": ([{"path": f"{PLOG}/d", "dir": True},
                                                                      {"path": UNQUOTED, "content": "bait\n"}],
                                                                     {}, {UNQUOTED: "bait\n"}),
    "symbolic link to a secret file": ([{"path": LINK, "link": f"{SECRET_DIR}/token"}], {LINK: "symbolic link"}, {}),
}


def plant(cluster: Cluster, host: str, specs: list[dict[str, Any]]) -> None:
    result = cluster.run_on(host, ["python3", "-c", PLANT], input=json.dumps(specs))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_file_name_in_a_log_directory_never_widens_what_collect_packs(cluster_factory: Any, tmp_path: Path,
                                                                                 case: str) -> None:
    hostile, refused, kept_hostile = CASES[case]
    cluster: Cluster = cluster_factory([HostSpec("h01", chrony="none")])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    secret = f"SECRET-{secrets.token_hex(8)}\n"
    ordinary = {f"{PLOG}/plog-1_ok.log": "[ERROR] HCCL(1,python): ordinary\n", f"{PLOG}/-dash.log": "leading dash\n"}
    plant(cluster, "h01", [{"path": f"{SECRET_DIR}/token", "content": secret},
                           *({"path": p, "content": c} for p, c in ordinary.items()), *hostile])
    bundle = tmp_path / "bundle"
    result = runner.invoke(app, ["collect", "-i", str(inventory), "-o", str(bundle)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr  # refused files are notes: the node was collected
    [node] = json.loads((bundle / "manifest.json").read_text())["nodes"]
    assert node["status"] == "ok"
    want = {**ordinary, **kept_hostile}
    assert {f["path"] for f in node["files"]} == set(want)
    on_disk = {"/" + str(p.relative_to(bundle / "h01/files")): p.read_text()
               for p in (bundle / "h01/files").rglob("*") if p.is_file() or p.is_symlink()}
    assert on_disk == want
    assert not [p for p in bundle.rglob("*") if p.is_file() and secret in p.read_text(errors="replace")]
    assert {r["path"]: r["reason"] for r in node["refused_files"]} == refused
    for path, reason in refused.items():
        assert f"ascendctl: warning: h01: not collected: {path!r}: {reason}" in result.stderr
