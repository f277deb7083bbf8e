"""Faults during `collect` on real test hosts: hostile file names, a node lost in the middle of its transfer.

Any user's job writes into the directories `collect` searches, and names are chosen by that job. Issue #30: a
name holding a newline and tabs ended the node's tab/newline file list early and forged a line of its own naming
`/root`, which root's `collect` then packed whole, exit 0. Each case plants one hostile name beside ordinary logs
and a secret in `/root/.secret/` (each host has its own `/root`), runs `ascendctl collect` over SSH, and checks
that the bundle holds exactly the ordinary logs, nothing of the secret, and that the manifest and stderr name what
was refused and why.

Issue #30, round 2: a node whose link is cut while it sends its archive made `collect` wait 30 minutes (a hidden
stream timeout) and left its `tar` running on the node. Now the transfer's limit is silence: a node that sends
nothing for `command_timeout` seconds is lost, and the node's own watchdog stops the `tar` nobody reads.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from tests.cluster.harness import Cluster, HostSpec
from tests.cluster.test_launch_hosts import ASCENDCTL

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


def collect_processes(cluster: Cluster, host: str, token: str) -> list[str]:
    """The node's side of a collect run: its script (whose arguments hold `token`) and any `tar` in the host's network
    namespace (nothing else in that namespace runs tar)."""
    ns = cluster.host(host).ns
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=True).stdout.split()
    found = []
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # gone meanwhile
        if token in args or args.split(" ", 1)[0].endswith("tar"):
            found.append(f"{pid} {args[:200]}")
    return found


def wait_until(what: Any, timeout: float, *, step: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def test_a_node_lost_mid_transfer_is_named_lost_within_the_command_timeout_and_leaves_nothing_running(
        cluster_factory: Any, tmp_path: Path) -> None:
    cluster: Cluster = cluster_factory([HostSpec("h01", chrony="none"), HostSpec("h02", chrony="none")])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml", defaults={"command_timeout": 8, "connect_timeout": 3,
                                                                          "connect_retries": 0})
    token = f"asct-lost-{secrets.token_hex(4)}"  # in the node script's arguments (the --msprof directory)
    plog = f"{PLOG}/plog-1_ok.log"
    big = f"{PLOG}/plog-2_big.log"
    for host in ("h01", "h02"):
        plant(cluster, host, [{"path": plog, "content": f"[ERROR] HCCL(1,python): {host}\n"}])
    # h02 sends slowly (2 Mbit/s out of eth0; tbf's burst must hold a 9000-byte frame): its 16 MB plog takes a
    # minute, so the link is cut mid-transfer
    assert cluster.run_on("h02", f"truncate -s 16M {big} && tc qdisc add dev eth0 root tbf rate 2mbit burst 16kb "
                                 "latency 2s").returncode == 0
    bundle = tmp_path / "bundle"
    h02 = cluster.host("h02")
    proc = subprocess.Popen([*ASCENDCTL, "collect", "-i", str(inventory), "-o", str(bundle), "--msprof", f"/root/{token}",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        arriving = bundle / "h02/files" / big.lstrip("/")
        began = wait_until(lambda: proc.poll() is not None or (arriving.exists() and arriving.stat().st_size > 64 * 1024), 60)
        assert began and proc.poll() is None, f"h02's transfer never began: {proc.poll()} {proc.communicate(timeout=60)}"
        assert collect_processes(cluster, "h02", token), "nothing of the collection runs on h02"
        subprocess.run(["ip", "link", "set", "dev", h02.veth, "down"], check=True)
        cut = time.monotonic()
        out, err = proc.communicate(timeout=60)  # before: 30 minutes (no output, no manifest)
        took = time.monotonic() - cut
        # still off the network (sshd cannot tell its client is gone): the node's watchdog stops the tar nobody reads
        left_while_cut = wait_until(lambda: not collect_processes(cluster, "h02", token), 15) or collect_processes(
            cluster, "h02", token)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        subprocess.run(["ip", "link", "set", "dev", h02.veth, "up"], check=True)
    assert proc.returncode == 4, err[-3000:]
    assert took < 8 + 15, took  # the silence limit (command_timeout 8 s) and a margin for a busy machine
    doc = json.loads(out)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["unreachable"] == ["h02"] and doc["manifest"]["unreachable"] == ["h02"]
    nodes = {n["name"]: n for n in manifest["nodes"]}
    assert nodes["h02"]["status"] == "unreachable"
    assert nodes["h02"]["error"] == f"root@{h02.ip} stopped answering: nothing received for 8s (command_timeout)"
    assert {e["node"]: e["code"] for e in doc["errors"]} == {"h02": "unreachable"}
    # what h02 sent before it was lost is kept and described
    cut_short = {f["path"]: f for f in nodes["h02"]["truncated"]}
    assert cut_short[big]["reason"] == "node lost" and 0 < cut_short[big]["bytes"] < 16 * 2**20
    # the other node's data is all there
    assert nodes["h01"]["status"] == "ok" and [f["path"] for f in nodes["h01"]["files"]] == [plog]
    assert (bundle / "h01/files" / plog.lstrip("/")).read_text() == "[ERROR] HCCL(1,python): h01\n"
    assert left_while_cut is True, left_while_cut
    # back on the network: nothing of that run is left on h02
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection((h02.ip, 22), timeout=1):
                break
        except OSError:
            assert time.monotonic() < deadline, "h02 unreachable after its link came back"
            time.sleep(0.5)
    assert wait_until(lambda: not collect_processes(cluster, "h02", token), 15), collect_processes(cluster, "h02", token)


# run by python3 on the host: each {"path", "content", "age"} of the JSON list on stdin, modified `age` seconds ago
PLANT_AGED = """
import json, os, sys, time
for spec in json.load(sys.stdin):
    os.makedirs(os.path.dirname(spec["path"]), exist_ok=True)
    with open(spec["path"], "w") as f:
        f.write(spec["content"])
    os.utime(spec["path"], (time.time() - spec["age"],) * 2)
"""


def test_collect_profile_takes_each_hosts_newest_task_and_perf_names_the_slow_rank_and_link(
        cluster_factory: Any, tmp_path: Path) -> None:
    """collect --profile over SSH: h01 holds ranks 0-1 of the newest task and an older run's, h02 ranks 2-3; the
    summary names rank 1 and link 2->3 (tests/data/perf/ascend), each host names the older profiles it left out."""
    data = Path(__file__).resolve().parent.parent / "data" / "perf" / "ascend"
    cluster: Cluster = cluster_factory([HostSpec("h01", chrony="none"), HostSpec("h02", chrony="none")])
    inventory = cluster.write_inventory(tmp_path / "inv.yaml")
    units = sorted(data.iterdir())
    for host, mine in (("h01", units[:2]), ("h02", units[2:])):
        specs = [{"path": f"/root/prof/{unit.name}/{f.relative_to(unit)}", "content": f.read_text(), "age": 30}
                 for unit in mine for f in unit.rglob("*") if f.is_file()]
        if host == "h01":  # an older run in the same directory
            specs.append({"path": "/root/prof/node0_1_20261125_ascend_pt/profiler_info_0.json", "content": "{}",
                          "age": 86400})
        result = cluster.run_on(host, ["python3", "-c", PLANT_AGED], input=json.dumps(specs))
        assert result.returncode == 0, result.stderr
    result = runner.invoke(app, ["collect", "-i", str(inventory), "-o", str(tmp_path / "b"), "--json",
                                 "--profile", "/root/prof"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    perf = doc["summary"]["perf"]
    assert perf["verdict"].startswith("rank 1 is the straggler") and perf["ranks"] == 4
    assert [(link["src"], link["dst"]) for link in perf["slow_links"]] == [(2, 3)]
    left = {n["name"]: n["profiles_left_out"] for n in doc["manifest"]["nodes"]}
    assert left == {"h01": ["/root/prof/node0_1_20261125_ascend_pt"], "h02": []}
