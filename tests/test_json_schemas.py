"""Every `--json` document, made by running the real command, is valid against its shipped JSON Schema.

Local-transport inventories (no hosts needed): commands that succeed, fail, meet an unreachable node (an
SSH node on 127.0.0.2 port 1) or a bad inventory (the error document). Real hosts: tests/cluster/test_json_schemas_hosts.py.
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.jobs.record import jobs_dir
from ascendctl.schemas import BASE_URI, SUFFIX, schema_for, schema_names
from tests.json_schemas import assert_valid, problems

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
TRIAGE_CASE = REPO / "tests" / "data" / "triage" / "real" / "a-kohya-2xh100-rank1-ecc"


def run_json(args: list[str]) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.stdout.strip(), f"no document on stdout for {args}: {result.output}"
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture
def inventories(tmp_path: Path) -> dict[str, str]:
    """Inventory files on the local transport: two nodes, one of them unreachable over SSH, device IPs, a broken file."""
    venv = tmp_path / "venv" / "bin"  # the job's python: launch looks for torchrun/msrun next to it
    venv.mkdir(parents=True)
    for name, body in (("torchrun", "echo 'rank 0: ValueError: bad input'\nexit 7"), ("msrun", "exec sleep 30")):
        (venv / name).write_text(f"#!/bin/sh\n{body}\n")
        (venv / name).chmod(0o755)
    texts = {
        "local": f"defaults: {{transport: local, slots: 1, python: {sys.executable}}}\n"
                 "nodes:\n  - {name: a, host: 127.0.0.1}\n  - {name: b, host: 127.0.0.2}\n",
        "job": f"defaults: {{transport: local, slots: 1, python: {venv}/python}}\nnodes:\n  - {{name: a, host: 127.0.0.1}}\n",
        "unreach": f"defaults: {{connect_timeout: 3, connect_retries: 0, python: {sys.executable}}}\n"
                   "nodes:\n  - {name: a, host: 127.0.0.1, transport: local}\n  - {name: down, host: 127.0.0.2, port: 1}\n",
        "rt": "defaults: {transport: local, slots: 2}\nnodes:\n"
              "  - {name: a, host: 127.0.0.1, device_ips: [192.168.100.11, 192.168.101.11]}\n"
              "  - {name: b, host: 127.0.0.2, device_ips: [192.168.100.12, 192.168.101.12]}\n",
        "bad": "defaults: {conect_timeout: 5}\nnodes:\n  - {hots: 10.0.0.1}\n",
    }
    paths = {"tmp": str(tmp_path), "log": str(tmp_path / "logs")}
    for name, text in texts.items():
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
        paths[name] = str(tmp_path / f"{name}.yaml")
    return paths


# (schema, command line with {placeholders} from `inventories`, expected exit code)
CASES = [
    ("exec", "exec -i {local} --json -- echo hi", 0),
    ("exec", "exec -i {local} --json -- exit 3", 3),
    ("exec", "exec -i {unreach} --json -- true", 4),
    ("preflight", "preflight -i {local} --only ssh --json", 0),
    ("preflight", "preflight -i {unreach} --json", 4),
    ("inventory-show", "inventory show -i {local} --json", 0),
    ("inventory-show", "inventory show --json", 0),  # the built-in inventory (cwd has no inventory.yaml)
    ("inventory-validate", "inventory validate -i {unreach} --json", 0),
    ("render-hostfile", "render hostfile -i {local} --json", 0),
    ("render-hostfile", "render hostfile -i {local} --format mpich -o {tmp}/hostfile --json", 0),
    ("render-env", "render env -i {local} --launcher msrun --rank-table /x/rt.json --json", 0),
    ("render-env", "render env -i {local} -w b -o {tmp}/env.sh --json", 0),
    ("render-ranktable", "render ranktable -i {rt} --json", 0),
    ("render-ranktable", "render ranktable -i {local} --json", 3),  # no device IPs anywhere
    ("render-ranktable", "render ranktable -i {unreach} --json", 4),
    ("launch-dry-run", "launch -i {local} --launcher torchrun --dry-run --json -- train.py --epochs 3", 0),
    ("launch-dry-run", "launch -i {local} --launcher msrun --env HCCL_TOKEN=s3cret --dry-run --json -- train.py", 0),
    ("netcheck", "netcheck -i {local} --backend tcp --size 1M --json", 0),
    ("netcheck", "netcheck -i {local} --backend tcp --size 1M --quick --json", 0),  # groups: the ring of two
    ("netcheck", "netcheck -i {unreach} --backend tcp --size 1M --json", 4),
    ("triage", f"triage {TRIAGE_CASE} --json", 0),
    ("collect", "collect -i {local} -o {tmp}/bundle.tar.gz --json", 0),
    ("collect", "collect -i {unreach} -o {tmp}/partial --json", 4),
    ("nodes", "nodes -i {local} --json", 0),
    # failures before any node is contacted: the error document
    ("error", "exec -i {bad} --json -- true", 2),
    ("error", "preflight -i {bad} --json", 2),
    ("error", "collect -i {bad} --json", 2),
    ("error", "netcheck -i {bad} --json", 2),
    ("error", "netcheck --size lots --json", 2),
    ("error", "inventory validate -i {bad} --json", 2),
    ("error", "inventory show -i {bad} --json", 2),
    ("error", "nodes -i {bad} --json", 2),
    ("error", "render hostfile -i {bad} --json", 2),
    ("error", "render ranktable -i {bad} --json", 2),
    ("error", "render ranktable -i {local} --check {tmp}/missing.json --json", 1),
    ("error", "render env -i {bad} --json", 2),
    ("error", "launch -i {bad} --launcher torchrun --json -- train.py", 2),
    ("error", "launch --backend slurm --nodes 2 --launcher torchrun --dry-run --json -- train.py", 2),  # a batch script is text
    ("error", "exec -i {local} -w nosuchnode --json -- true", 2),
    ("error", "status --json", 2),  # no job recorded yet
    ("error", "logs -f --json", 2),
    ("error", "stacks --json", 2),  # no job recorded yet
    ("error", "triage {tmp}/missing --json", 1),
]


@pytest.mark.parametrize("schema, line, code", CASES, ids=[f"{i:02d}-{s}-{line.split()[0]}-{c}" for i, (s, line, c) in enumerate(CASES)])
def test_real_documents_match_their_schema(schema: str, line: str, code: int, inventories: dict[str, str],
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # submit mode is outside an allocation
    args = [word.format(**inventories) for word in line.split()]
    exit_code, document = run_json(args)
    assert exit_code == code, document
    assert document["exit_code"] == code
    assert_valid(schema, document)
    if schema == "error":
        assert problems(args[0] if args[0] not in ("render", "inventory") else " ".join(args[:2]), document), \
            "an error document must not pass as the command's own document"
    if schema == "collect":  # the bundle's manifest.json is the document's manifest
        bundle = Path(document["bundle"])
        if bundle.is_dir():
            manifest = json.loads((bundle / "manifest.json").read_text())
        else:
            with tarfile.open(bundle) as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("/manifest.json"))
                manifest = json.load(tar.extractfile(member))  # type: ignore[arg-type]
        assert not problems("collect", {**document, "manifest": manifest})


def test_a_job_from_launch_to_stop(inventories: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """launch (failed, then detached), jobs, status, logs, stop, and the stored records, on a local node."""
    monkeypatch.chdir(tmp_path)
    job = ["-i", inventories["job"]]
    code, failed = run_json(["launch", *job, "--launcher", "torchrun", "--no-preflight", "--log-dir", inventories["log"] + "/1",
                             "--json", "--", "train.py"])
    assert code == 5 and failed["job"]["status"] == "failed" and failed["job"]["first_failure"] is not None
    assert_valid("launch", failed)
    documents = {"jobs": run_json(["jobs", "--json"]), "status": run_json(["status", "--json"]),
                 "logs": run_json(["logs", "--json"])}
    assert [c for c, _ in documents.values()] == [0, 5, 0]
    assert documents["logs"][1]["lines"] == [{"node": "a", "line": "rank 0: ValueError: bad input"}]
    code, running = run_json(["launch", *job, "--launcher", "msrun", "--no-preflight", "--detach", "--log-dir",
                              inventories["log"] + "/2", "--json", "--", "train.py"])
    assert code == 0 and running["detached"] is True and running["job"]["status"] == "running"
    assert_valid("launch", running)
    documents["status-running"] = run_json(["status", running["job"]["id"], "--json"])
    documents["stop"] = run_json(["stop", running["job"]["id"], "--grace", "1", "--json"])
    assert documents["stop"][0] == 0 and documents["stop"][1]["job"]["status"] == "stopped"
    for name, (_, document) in documents.items():
        assert_valid(name.split("-")[0], document)
    records = sorted(jobs_dir().glob("*.json"))
    assert len(records) == 2
    for record in records:
        assert_valid("job", json.loads(record.read_text()))


def test_a_checked_rank_table(inventories: dict[str, str], tmp_path: Path) -> None:
    written = tmp_path / "rank_table.json"
    code, document = run_json(["render", "ranktable", "-i", inventories["rt"], "-o", str(written), "--json"])
    assert code == 0 and document["file"] == str(written) and document["ranks"] == 4
    assert_valid("render-ranktable", document)
    code, checked = run_json(["render", "ranktable", "-i", inventories["rt"], "--check", str(written), "--json"])
    assert code == 0 and checked["ranks"] == 4
    assert_valid("render-ranktable-check", checked)
    table = json.loads(written.read_text())
    table["server_list"][1]["device"][0]["device_ip"] = "192.168.100.11"  # a duplicate device IP
    written.write_text(json.dumps(table))
    code, bad = run_json(["render", "ranktable", "-i", inventories["rt"], "--check", str(written), "--json"])
    assert code == 3 and bad["errors"]
    assert_valid("render-ranktable-check", bad)


# --- the validator can fail: documents that break the contract are rejected -------------------------


@pytest.fixture
def exec_document(inventories: dict[str, str]) -> dict[str, Any]:
    code, document = run_json(["exec", "-i", inventories["unreach"], "--json", "--", "echo", "hi"])
    assert code == 4
    assert_valid("exec", document)
    return document


@pytest.mark.parametrize("key", ["nodes", "remote_command", "errors", "status", "schema", "command", "exit_code"])
def test_a_document_missing_a_required_key_is_rejected(exec_document: dict[str, Any], key: str) -> None:
    del exec_document[key]
    assert any(f"'{key}' is a required property" in p for p in problems("exec", exec_document))


def test_wrong_types_values_and_keys_are_rejected(exec_document: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(exec_document))
    del broken["nodes"][0]["stdout"]
    assert problems("exec", broken) == ["nodes/0: 'stdout' is a required property"]
    for path, value in ((("nodes", 1, "status"), "sick"), (("nodes", 0, "exit_code"), "0"), (("status",), "ok"),
                        (("schema",), 2), (("exit_code",), 7), (("errors", 0, "node"), 4)):
        broken = json.loads(json.dumps(exec_document))
        target = broken
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        assert problems("exec", broken), f"{path} = {value!r} was accepted"
    assert problems("exec", {**exec_document, "surprise": 1}) == ["(top): Unevaluated properties are not allowed ('surprise' was unexpected)"]
    assert problems("error", exec_document)  # a command's own document is not an error document
    assert problems("preflight", exec_document)


# --- the schemas themselves -------------------------------------------------------------------------


def json_commands() -> list[str]:
    """Every command path (`exec`, `render hostfile`) that takes --json, from the real Typer app."""
    found = []

    def walk(command: Any, path: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])
        if any("--json" in getattr(p, "opts", ()) for p in getattr(command, "params", ())):
            found.append(" ".join(path))

    walk(typer.main.get_command(app), [])
    return sorted(found)


def test_every_command_with_json_has_a_schema_and_every_schema_is_well_formed() -> None:
    from jsonschema import Draft202012Validator

    commands = json_commands()
    assert {"exec", "preflight", "collect", "launch", "jobs", "status", "logs", "stop", "triage", "netcheck", "render hostfile",
            "render ranktable", "render env", "inventory show", "inventory validate"} <= set(commands)
    for command in commands:
        assert schema_for(command)["title"] == f"ascendctl {command} --json"
    for name in schema_names():
        schema = schema_for(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$id"] == f"{BASE_URI}{name}{SUFFIX}"
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    documents = {name for name in schema_names() if name not in ("envelope", "job")}
    assert documents == {c.replace(" ", "-") for c in commands} | {"error", "launch-dry-run", "render-ranktable-check"}
    assert schema_for("launch --dry-run") == schema_for("launch-dry-run")
    with pytest.raises(KeyError, match="no JSON schema for 'deploy'"):
        schema_for("deploy")


def test_the_schemas_enums_are_the_codes_enums() -> None:
    """Statuses, categories and exit codes are spelled out in envelope.schema.json: they must stay the code's."""
    from ascendctl.preflight.checks.model import Status
    from ascendctl.errors import ExitCode
    from ascendctl.models import NodeStatus
    from ascendctl.triage.signatures import ROLES, Category

    defs = schema_for("envelope")["$defs"]
    assert defs["nodeStatus"]["enum"] == [s.value for s in NodeStatus]
    assert defs["checkStatus"]["enum"] == [s.value for s in Status]
    assert defs["category"]["enum"] == [c.value for c in Category]
    assert defs["exitCode"]["enum"] == [int(c) for c in ExitCode]
    finding = schema_for("triage")["$defs"]["finding"]["properties"]
    assert finding["role"]["enum"] == list(ROLES)
