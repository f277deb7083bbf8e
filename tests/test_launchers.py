"""ascendctl/launchers.py: the one owner of every launcher fact (issue #25).

Each launcher's spec builds its command line and names its variables; an unknown launcher is a usage error
naming the ones there are; the regex of each spec reads back a line as its launcher writes it; and the modules
that used to repeat these facts now give the spec's answer.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from string import Template
from typing import Any

import pytest

from ascendctl.errors import ExitCode, UsageError
from ascendctl.launchers import (DEFAULT_CLUSTER_TIMEOUT, DEFAULT_HCCL_CONNECT_TIMEOUT, DEFAULT_MASTER_PORT, LAUNCHERS, MSRUN,
                                 TORCHRUN, LauncherArgs, LineOrigin, default_ports_help, launch_env, launcher_binary,
                                 launcher_spec, master_port)

PACKAGE = Path(__file__).resolve().parent.parent / "ascendctl"


@dataclass(frozen=True)
class FakeNode:
    python: str


VENV = FakeNode("/opt/venv/bin/python")
ARGS = LauncherArgs(nodes=4, nproc=8, node_rank=2, master_addr="172.16.0.11", port=1234, worker_log_dir="/logs/j/n03/workers",
                    job_id="j1")


def test_launchers_are_msrun_then_torchrun_and_each_spec_is_frozen() -> None:
    assert list(LAUNCHERS) == ["msrun", "torchrun"]
    assert LAUNCHERS["msrun"] is MSRUN and LAUNCHERS["torchrun"] is TORCHRUN
    assert all(spec.name == name for name, spec in LAUNCHERS.items())
    with pytest.raises(AttributeError):
        MSRUN.default_port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        LAUNCHERS["deepspeed"] = MSRUN  # type: ignore[index]


def test_default_ports_and_master_port() -> None:
    assert MSRUN.default_port == 8118 and TORCHRUN.default_port == 29500
    assert master_port("msrun") == 8118 and master_port("torchrun") == 29500
    assert master_port(None) == DEFAULT_MASTER_PORT == 29500  # `render env` without a launcher: torch's default
    assert master_port("msrun", 4000) == 4000 and master_port(None, 4000) == 4000
    assert default_ports_help() == "8118 (msrun), 29500 (torchrun)"


def test_binary_is_next_to_an_absolute_python_else_on_path() -> None:
    assert MSRUN.binary(VENV) == "/opt/venv/bin/msrun"
    assert TORCHRUN.binary(VENV) == "/opt/venv/bin/torchrun"
    assert TORCHRUN.binary(FakeNode("python3")) == "torchrun"
    assert launcher_binary(FakeNode("/usr/bin/python3"), "msrun") == "/usr/bin/msrun"


def test_msrun_argv() -> None:
    argv = MSRUN.argv(VENV, ARGS, ("train.py", "--epochs", "2"))
    assert argv == ["/opt/venv/bin/msrun", "--worker_num=32", "--local_worker_num=8", "--master_addr=172.16.0.11",
                    "--master_port=1234", "--node_rank=2", "--log_dir=/logs/j/n03/workers", "--join=True",
                    f"--cluster_time_out={DEFAULT_CLUSTER_TIMEOUT}", "train.py", "--epochs", "2"]
    assert DEFAULT_CLUSTER_TIMEOUT == 600
    # msrun has no rendezvous: --rdzv changes nothing on its command line, and every node's first rank is known
    rdzv = replace(ARGS, rdzv=True, cluster_timeout=30)
    assert MSRUN.argv(VENV, rdzv)[-1] == "--cluster_time_out=30" and "--node_rank=2" in MSRUN.argv(VENV, rdzv)
    assert MSRUN.first_rank(2, 8, rdzv=True) == 16 and not MSRUN.rendezvous


def test_torchrun_argv_static_and_rendezvous() -> None:
    assert TORCHRUN.argv(VENV, ARGS, ["train.py"]) == [
        "/opt/venv/bin/torchrun", "--nnodes=4", "--nproc-per-node=8", "--node-rank=2", "--master-addr=172.16.0.11",
        "--master-port=1234", "--log-dir=/logs/j/n03/workers", "--tee=3", "train.py"]
    rdzv = LauncherArgs(4, 8, 2, "172.16.0.11", 1234, "/logs/j/n03/workers", "j1", rdzv=True)
    assert TORCHRUN.argv(FakeNode("python3"), rdzv) == [
        "torchrun", "--nnodes=4", "--nproc-per-node=8", "--rdzv-backend=c10d", "--rdzv-endpoint=172.16.0.11:1234",
        "--rdzv-id=j1", "--log-dir=/logs/j/n03/workers", "--tee=3"]
    assert TORCHRUN.first_rank(2, 8, rdzv=True) is None and TORCHRUN.first_rank(2, 8, rdzv=False) == 16


def test_env_of_each_launcher() -> None:
    assert launch_env("msrun") == (("MASTER_PORT", "8118"), ("HCCL_CONNECT_TIMEOUT", "1200"))
    assert launch_env("torchrun", port=29600, hccl_connect_timeout=60) == (("MASTER_PORT", "29600"), ("HCCL_CONNECT_TIMEOUT", "60"))
    assert launch_env(None) == (("MASTER_PORT", "29500"), ("HCCL_CONNECT_TIMEOUT", str(DEFAULT_HCCL_CONNECT_TIMEOUT)))
    assert DEFAULT_HCCL_CONNECT_TIMEOUT == 1200
    assert MSRUN.env == ()
    assert TORCHRUN.env == (("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${role_name}${local_rank}]:[rank${rank}]:"),)
    assert dict(TORCHRUN.env)["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == TORCHRUN.line_prefix


@pytest.mark.parametrize("name", ["deepspeed", "", "MSRUN", "torchrun "])
def test_an_unknown_launcher_is_a_usage_error_naming_the_known_ones(name: str) -> None:
    with pytest.raises(UsageError) as info:
        launcher_spec(name)
    assert info.value.message == f"--launcher {name!r}: expected one of msrun, torchrun"
    assert info.value.exit_code == ExitCode.USAGE
    with pytest.raises(UsageError):
        launcher_binary(VENV, name)


def test_torchrun_prefix_regex_reads_the_prefix_torchrun_writes() -> None:
    # what torchelastic writes with the template launch sets (role "default", local rank 3, global rank 11)
    prefix = Template(TORCHRUN.line_prefix or "").substitute(role_name="default", local_rank=3, rank=11)
    line = prefix + "step 7 loss 2.1"
    assert line == "[default3]:[rank11]:step 7 loss 2.1"
    assert TORCHRUN.read_line(line) == LineOrigin(rank=11, local_rank=3)
    found = TORCHRUN.line_rx.match(line)
    assert found is not None and found.group("role") == "default" and line[found.end():] == "step 7 loss 2.1"
    # a real line of a torchrun job (as tests/test_triage_engine.py has them), and another role name with digits in it
    assert TORCHRUN.read_line("[default0]:[rank2]:rank 2: step 1 loss: 0.7353") == LineOrigin(2, 0)
    assert TORCHRUN.read_line("[trainer2x10]:[rank42]:hello") == LineOrigin(42, 10)
    # torch's own `[rank3]:` without torchrun's prefix, or the prefix not at the start, is not torchrun's
    assert TORCHRUN.read_line("[rank3]: RuntimeError: boom") is None
    assert TORCHRUN.read_line("x [default0]:[rank2]:y") is None


def test_msrun_has_no_line_prefix_and_its_regex_reads_its_worker_start_line() -> None:
    assert MSRUN.line_prefix is None  # msrun's workers write to their own worker_<rank>.log, unprefixed
    # msrun's own line for each worker it starts (MindSpore's process_entity/_api.py, as MindFormers' docs show it)
    line = ("[WARNING] ME(1812:281473186394144,MainProcess):2024-01-01-12:00:00.000.000 [mindspore/parallel/cluster/"
            "process_entity/_api.py:224] Start worker process with rank id:5, log file:output/msrun_log/worker_5.log. "
            "Environment variable [RANK_ID] is exported.")
    assert MSRUN.read_line(line) == LineOrigin(rank=5, local_rank=None)
    found = MSRUN.line_rx.search(line)
    assert found is not None and found.group("log") == "output/msrun_log/worker_5.log"
    # older MindSpore ends the line at the file name
    assert MSRUN.read_line("Start worker process with rank id:12, log file:/logs/j/n03/workers/worker_12.log") == LineOrigin(12)
    assert MSRUN.read_line("Rank ids will be assigned automatically, please use 'grep -rn 'rank id:'' command") is None
    assert MSRUN.read_line("[default0]:[rank2]:hello") is None


def test_run_modes_and_packages() -> None:
    assert TORCHRUN.run_modes == ("-m", "--module", "--no-python", "--no_python") and MSRUN.run_modes == ()
    assert TORCHRUN.package == "torch" and MSRUN.package == "MindSpore"


# ------------------------------------------------------------------------ the other modules take the spec's answer


def test_the_plan_and_the_environment_give_the_specs_answer() -> None:
    from ascendctl.facts.endpoint import Endpoint
    from ascendctl.inventory.load import load_inventory
    from ascendctl.jobs.plan import LaunchOptions, build_plan

    inv = load_inventory(Path(__file__).parent / "golden" / "launch" / "four_nodes" / "inventory.yaml")
    endpoints = {n.name: Endpoint(n.name, "eth1", f"172.16.0.{11 + n.index}", "eth1") for n in inv.nodes}
    for spec in LAUNCHERS.values():
        plan = build_plan(inv, LaunchOptions(spec.name, ("t.py",)), job_id="j", endpoints=endpoints)
        assert plan.master_port == spec.default_port
        node = plan.nodes[1]
        args = LauncherArgs(len(inv.nodes), node.workers, 1, plan.master_addr, spec.default_port, f"{node.dir}/workers", "j")
        assert node.command == shlex.join(spec.argv(inv.nodes[1], args, ["t.py"]))
        env = dict(node.environment.values)
        assert {k: env[k] for k, _ in launch_env(spec.name)} == dict(launch_env(spec.name))
        assert all(env[k] == v for k, v in spec.env)
        assert node.first_rank == spec.first_rank(1, node.workers, rdzv=False)


def test_preflight_job_target_refuses_an_unknown_launcher_as_the_lookup_does() -> None:
    from ascendctl.preflight.checks.model import job_target

    assert job_target("torchrun", "t.py") is not None and job_target(None, None) is None
    with pytest.raises(UsageError, match=r"--launcher 'pbs': expected one of msrun, torchrun"):
        job_target("pbs", None)
    with pytest.raises(UsageError, match=r"--script needs --launcher \(msrun or torchrun\)"):
        job_target(None, "t.py")


def test_the_cli_choices_and_the_json_schemas_name_exactly_the_launchers() -> None:
    from ascendctl.cli.launch_cmd import Launcher

    assert [member.value for member in Launcher] == list(LAUNCHERS)
    for schema in ("job.schema.json", "launch-dry-run.schema.json"):
        found: list[Any] = []

        def walk(value: Any) -> None:
            if isinstance(value, dict):
                if "launcher" in value and isinstance(value["launcher"], dict) and "enum" in value["launcher"]:
                    found.append(value["launcher"]["enum"])
                for item in value.values():
                    walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)

        walk(json.loads((PACKAGE / "schemas" / schema).read_text(encoding="utf-8")))
        assert found and all(enum == list(LAUNCHERS) for enum in found), (schema, found)


def test_launchers_is_a_foundation_module() -> None:
    """It imports only the foundation (errors, models, paths, redact, nodeset) and the standard library."""
    import ast

    tree = ast.parse((PACKAGE / "launchers.py").read_text(encoding="utf-8"))
    ours = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("ascendctl")}
    ours |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
             if alias.name.startswith("ascendctl")}
    assert ours <= {"ascendctl.errors", "ascendctl.models", "ascendctl.paths", "ascendctl.redact", "ascendctl.nodeset"}, ours


def test_preflight_checks_import_nothing_from_jobs() -> None:
    import ast

    for rel in ("preflight/checks/system.py", "preflight/checks/model.py"):
        tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
        modules = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not any(m == "ascendctl.jobs" or m.startswith("ascendctl.jobs.") for m in modules), (rel, modules)
