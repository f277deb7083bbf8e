"""`inventory init`: a commented starter inventory from a hostfile, a node set or the current Slurm allocation.

The nodes are read through the inventory's own loaders (a hostfile is validated as `-i hostfile` is; the
allocation as the built-in Slurm inventory), the comments come from the settings' own descriptions, and the
text is loaded back through `parse_inventory` before anything is written. Must not import typer or rich.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ascendctl.errors import AscendctlError, UsageError
from ascendctl.inventory.load import allocation_inventory, load_inventory, parse_inventory
from ascendctl.slurm import allocation_job_id
from ascendctl.inventory.settings import SETTINGS_BY_NAME, PreflightConfig

if TYPE_CHECKING:
    from ascendctl.inventory.load import Inventory

STDOUT = "-"
# Keys a new inventory usually needs, with an example value where the built-in default is "none".
_COMMENTED_KEYS = (("user", "root"), ("identity_file", "~/.ssh/id_ed25519"), ("known_hosts", None), ("interface", "eth0"))
_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class InitResult:
    """What `inventory init` wrote: the text, where to (`-` for stdout), and how many nodes it holds."""

    text: str
    output: str
    nodes: int
    origin: str


def init_inventory(*, hostfile: str | None = None, nodeset: str | None = None, output: str = "inventory.yaml",
                   force: bool = False, environ: Mapping[str, str] | None = None) -> InitResult:
    """Write a starter inventory for the nodes of a hostfile, a node set or the Slurm allocation we run in."""
    env = os.environ if environ is None else environ
    clean = {k: v for k, v in env.items() if not k.startswith("ASCENDCTL_")}  # the file holds what the source says
    if hostfile and nodeset:
        raise UsageError("give one source of nodes: --from-hostfile or -w, not both")
    if hostfile:
        source, origin = load_inventory(hostfile, environ=clean), f"from the hostfile {hostfile}"
    elif nodeset:
        source, origin = _nodeset_inventory(nodeset, clean), f"from the node set {nodeset}"
    elif allocation_job_id(env):
        source = allocation_inventory(environ=clean)
        origin = f"from the nodes of Slurm job {source.allocation.job_id if source.allocation else '?'}"
    else:
        raise UsageError("no nodes to write: say where they come from",
                         hint="--from-hostfile FILE, -w 'node[01-16]', or run inside a Slurm allocation (salloc)")
    text = starter_text(source, origin)
    label = "<stdout>" if output == STDOUT else output
    loaded = parse_inventory(text, source=label, environ=clean)  # what we write must load as what we read
    if [(n.name, n.host, n.slots) for n in loaded.nodes] != [(n.name, n.host, n.slots) for n in source.nodes]:
        raise AscendctlError(f"{label}: the written inventory does not load back as its {len(source.nodes)} nodes")
    if output != STDOUT:
        _write(Path(output), text, force)
    return InitResult(text, output, len(loaded.nodes), origin)


def _nodeset_inventory(pattern: str, environ: Mapping[str, str]) -> Inventory:
    """Each name of the node set is a node whose host is its name (ranges sized before they are expanded)."""
    from ascendctl.inventory.selection import expand_nodeset

    names = expand_nodeset(pattern, {})
    return parse_inventory("nodes:\n" + "".join(f"  - {_scalar(name)}\n" for name in names), source=f"-w {pattern}",
                           environ=environ)


def starter_text(inventory: Inventory, origin: str) -> str:
    """The inventory as commented YAML: the usual keys explained (commented out), slots, preflight thresholds, nodes."""
    slots = Counter(n.slots for n in inventory.nodes).most_common(1)[0][0] if inventory.nodes else SETTINGS_BY_NAME["slots"].default
    lines = [f"# ascendctl inventory, written by `ascendctl inventory init` {origin}.",
             "# `ascendctl inventory validate -i FILE` checks it; `ascendctl inventory show` prints each node's",
             "# settings and where each value came from. inventory.example.yaml and README.md list every key.",
             "# Precedence, lowest to highest: built-in default < defaults: < the node's own keys",
             "# < ASCENDCTL_<KEY> environment variables < command-line flags.", "", "defaults:"]
    for key, example in _COMMENTED_KEYS:
        spec = SETTINGS_BY_NAME[key]
        lines.append(_commented(f"# {key}: {example if example is not None else spec.default}", spec.doc))
    lines.append(_commented(f"slots: {slots}", SETTINGS_BY_NAME["slots"].doc + "; a node's own slots: wins"))
    lines.append(_commented("# preflight:", "thresholds of `ascendctl preflight` (built-in values shown)"))
    thresholds = PreflightConfig()
    lines += [_commented(f"#   {f.name}: {getattr(thresholds, f.name)}", f.metadata["doc"]) for f in fields(PreflightConfig)]
    first = _scalar(inventory.nodes[0].name) if inventory.nodes else "n01"
    lines += ["", "# Groups name node sets for `-w @NAME` (names or hosts, ranges or comma lists):",
              "# groups:", f"#   head: {first}", "", "nodes:"]
    for node in inventory.nodes:
        keys = [f"host: {_scalar(node.host)}"] + ([f"name: {_scalar(node.name)}"] if node.name != node.host else [])
        keys += [f"slots: {node.slots}"] if node.slots != slots else []
        lines.append(f"  - {{{', '.join(keys)}}}")
    return "\n".join(lines) + "\n"


def _commented(text: str, doc: str) -> str:
    return f"  {text:<36}# {doc}"


def _scalar(text: str) -> str:
    """A YAML scalar that reads back as this exact string: plain when it is a plain word, else double-quoted."""
    import json

    import yaml

    if _PLAIN.match(text) and yaml.safe_load(text) == text:
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def _write(path: Path, text: str, force: bool) -> None:
    from ascendctl.paths import write_text_atomic

    if path.exists() and not force:
        raise UsageError(f"{path}: already exists; not overwritten", hint="pass --force to replace it, or -o FILE for another file")
    if path.is_dir():
        raise UsageError(f"{path}: is a directory", hint="-o FILE names the inventory file to write")
    write_text_atomic(path, text)

