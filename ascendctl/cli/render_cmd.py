"""`ascendctl render hostfile|ranktable|env`: the files and exports a multi-node launch needs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ascendctl.cli.app import app
from ascendctl.launchers import DEFAULT_HCCL_CONNECT_TIMEOUT, DEFAULT_MASTER_PORT, MSRUN, launcher_spec
from ascendctl.cli.common import JsonOpt, NodeOptions, argv_now, cli_errors, examples, node_options

render_app = typer.Typer(help="Render hostfiles, HCCL rank tables and per-node env exports.", no_args_is_help=True,
                         rich_markup_mode=None)
app.add_typer(render_app, name="render")


class HostfileFormat(str, Enum):
    openmpi = "openmpi"
    deepspeed = "deepspeed"
    mpich = "mpich"
    plain = "plain"


class RankTableVersion(str, Enum):
    v1_0 = "1.0"
    v1_2 = "1.2"


class ServerId(str, Enum):
    host = "host"
    name = "name"


OutputOpt = Annotated[Optional[Path], typer.Option("-o", "--output", help="Write to FILE instead of stdout.", show_default=False)]
TemplatesOpt = Annotated[
    Optional[Path], typer.Option("--templates", help="Directory with your own hostfile-<format>.tmpl (else the built-in ones).", show_default=False)
]


def _device_ids(text: str | None) -> list[int] | None:
    from ascendctl.facts.devices import parse_device_range
    from ascendctl.errors import UsageError

    if text is None:
        return None
    try:
        return parse_device_range(text)
    except ValueError as exc:
        raise UsageError(f"--devices: {exc}") from None


@render_app.command("hostfile", epilog=examples("ascendctl render hostfile -o hostfile", "ascendctl render hostfile --format deepspeed -x n07",
                                                codes="0 ok, 1 error, 2 usage or bad inventory"))
@cli_errors
@node_options("inventory", "nodes", "exclude")
def hostfile(
    fmt: Annotated[HostfileFormat, typer.Option("--format", help="openmpi/deepspeed: HOST slots=N; mpich: HOST:N; plain: HOST.")] = HostfileFormat.openmpi,
    output: OutputOpt = None,
    templates: TemplatesOpt = None,
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Write a hostfile with one line per node, from the inventory (no node is contacted)."""
    from ascendctl.paths import write_text_atomic
    from ascendctl.render import render_hostfile
    from ascendctl.ui import render_view

    inv = cluster.select()
    text = render_hostfile(inv, fmt.value, templates=templates)
    if output is not None:
        write_text_atomic(output, text)
    render_view.show_hostfile(text, fmt=fmt.value, nodes=len(inv.nodes), output=output, as_json=as_json, argv=argv_now())


@render_app.command("ranktable", epilog=examples("ascendctl render ranktable -o rank_table.json",
                                                 "ascendctl render ranktable --version 1.2 --devices 0-15", "ascendctl render ranktable --check rank_table.json",
                                                 codes="0 ok, 1 error, 2 usage or bad inventory, 3 devices or rank table invalid, 4 nodes unreachable"))
@cli_errors
@node_options("inventory", "connect_timeout", "command_timeout", "fanout", "accept_new_host_keys", "nodes", "exclude")
def ranktable(
    version: Annotated[RankTableVersion, typer.Option("--version", help="1.0 (910, A2, A3) or 1.2 (A3 SuperPoD).")] = RankTableVersion.v1_0,
    devices: Annotated[Optional[str], typer.Option("--devices", help="Device ids on every node, e.g. 0-7 or 0-3,8-11 (default: 0..slots-1).", show_default=False)] = None,
    output: OutputOpt = None,
    check: Annotated[Optional[Path], typer.Option("--check", help="Validate this existing rank table against the inventory and the nodes instead.", show_default=False)] = None,
    server_id: Annotated[ServerId, typer.Option("--server-id", help="What server_id holds: the node's host address or its inventory name.")] = ServerId.host,
    host_nic_ip: Annotated[bool, typer.Option("--host-nic-ip/--no-host-nic-ip", help="Write host_nic_ip: \"reserve\" per server (v1.0, as hccl_tools.py does).")] = True,
    as_json: JsonOpt = False,
    *,
    cluster: NodeOptions,
) -> None:
    """Write the HCCL rank table: device IPs from the inventory or the nodes, validated first (exit 3 if wrong)."""
    from ascendctl.paths import write_text_atomic
    from ascendctl.render import check_rank_table_file, render_rank_table
    from ascendctl.ui import progress, render_view

    selected = _device_ids(devices)
    inv = cluster.select()
    with progress("ranktable", as_json=as_json) as sink:
        if check is not None:
            report = check_rank_table_file(inv, check, on_event=sink)
        else:
            result = render_rank_table(inv, version=version.value, devices=selected, server_id=server_id.value,
                                       host_nic_ip="reserve" if host_nic_ip else None, on_event=sink)
    if check is not None:
        render_view.show_check(report, as_json=as_json, argv=argv_now())
        raise typer.Exit(int(report.exit_code))
    if result.table is not None and output is not None:
        write_text_atomic(output, result.text())
    render_view.show_rank_table(result, output=output, as_json=as_json, argv=argv_now())
    raise typer.Exit(int(result.exit_code))


@render_app.command("env", epilog=examples("ascendctl render env -w n01", "eval \"$(ascendctl render env -w $(hostname) --launcher msrun)\"",
                                           codes="0 ok, 1 error, 2 usage or bad inventory, 3 an interface has no address"))
@cli_errors
@node_options("inventory", "exclude")
def env(
    rank_table_file: Annotated[Optional[str], typer.Option("--rank-table", "--rank-table-file", help="RANK_TABLE_FILE as the nodes see it (made absolute); unset without it, as in launch.", show_default=False)] = None,
    launcher: Annotated[Optional[str], typer.Option("--launcher", help="msrun or torchrun: its default port and line prefixes, as `launch` sets them.", show_default=False)] = None,
    master_port: Annotated[Optional[int], typer.Option("--master-port", help=f"MASTER_PORT (default: {MSRUN.default_port} for msrun, else {DEFAULT_MASTER_PORT}).", min=1, max=65535, show_default=False)] = None,
    hccl_connect_timeout: Annotated[int, typer.Option("--hccl-connect-timeout", help="HCCL_CONNECT_TIMEOUT in seconds (HCCL's own default is 120).", min=1)] = DEFAULT_HCCL_CONNECT_TIMEOUT,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write the exports, secrets included, to this file (mode 0600); stdout never shows secrets.", show_default=False)] = None,
    as_json: JsonOpt = False,
    nodes: Annotated[Optional[str], typer.Option("-w", "--nodes", "--node", metavar="NODESET", show_default=False,
                                                 help="Only these nodes' exports (e.g. for eval on one node); the job's geometry stays the whole inventory's.")] = None,
    *,
    cluster: NodeOptions,
) -> None:
    """Print the env exports each node needs (HCCL_IF_IP of its cluster interface, MASTER_ADDR, RANK_TABLE_FILE, ...)."""
    from ascendctl.render import render_env
    from ascendctl.ui import render_view

    if launcher is not None:
        launcher_spec(launcher)  # UsageError for a launcher we do not start
    from ascendctl.inventory.load import load_inventory
    from ascendctl.inventory.selection import select_nodes

    whole = load_inventory(cluster.inventory)  # the job's geometry (master, ranks) is the whole inventory's; -w/-x pick what to print
    shown = set(select_nodes(whole, nodes, cluster.exclude).names)
    envs = render_env(whole, launcher=launcher, rank_table_file=rank_table_file, master_port=master_port,
                      hccl_connect_timeout=hccl_connect_timeout)
    envs = tuple(e for e in envs if e.node in shown)
    render_view.show_env(envs, as_json=as_json, argv=argv_now(), output=output)
