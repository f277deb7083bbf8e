"""Host checks: free disk for logs, resource limits, and software versions consistent across nodes.

Pure command builders and evaluators; must not import typer or rich.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Mapping, Sequence

from ascendctl.launchers import launcher_spec
from ascendctl.nodeset import fold, group_by
from ascendctl.facts.parsers import ParseError
from ascendctl.facts.parsers.system import parse_df_kib, parse_ulimits
from ascendctl.facts.parsers.versions import package_version, parse_version_info
from ascendctl.preflight.checks.model import ClusterCheck, ClusterVerdict, NodeCheck, Status, result

if TYPE_CHECKING:
    from ascendctl.inventory.load import Node
    from ascendctl.remote.probe import Section
    from ascendctl.preflight.checks.model import CheckResult, NodeFacts, ProbeContext

VERSION_FILES = {
    "driver": "/usr/local/Ascend/driver/version.info",
    "firmware": "/usr/local/Ascend/firmware/version.info",
    "cann": "/usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info",
    "nnae": "/usr/local/Ascend/nnae/latest/ascend_nnae_install.info",
}
PACKAGES = ("mindspore", "torch", "torch_npu")
# Reads dist-info folder names instead of importing importlib.metadata: a third of the
# CPU, which matters when 64 nodes share a hypervisor (or this test machine).
_PY_VERSIONS = (
    "import os, sys\n"
    "print('python', sys.version.split()[0])\n"
    f"want = {PACKAGES!r}\n"
    "found = {}\n"
    "for folder in sys.path:\n"
    "    try:\n        names = os.listdir(folder or '.')\n"
    "    except OSError:\n        continue\n"
    "    for name in names:\n"
    "        if name.endswith('.dist-info'):\n"
    "            dist, _, version = name[:-10].partition('-')\n"
    "            found.setdefault(dist.lower().replace('-', '_'), version)\n"
    "for p in want:\n"
    "    print(p, found.get(p, '-'))\n"
)


def _launcher_section(node: Node, ctx: ProbeContext) -> str | None:
    """Is the job's launcher on the node (next to its python, as launch runs it), and its script in the job's directory?"""
    if ctx.job is None:
        return None
    binary = shlex.quote(launcher_spec(ctx.job.launcher).binary(node))
    lines = [f"if p=$(command -v {binary} 2>/dev/null); then echo \"launcher $p\"; else echo 'launcher -'; fi", 'echo "cwd $(pwd)"']
    if ctx.job.script is not None:
        script = shlex.quote(ctx.job.script)
        lines.append(f"if [ -f {script} ]; then echo 'script ok'; else echo 'script -'; fi")
    if ctx.job.log_dir is not None:  # the nearest part of it that exists must be a directory this user can write into
        lines.append(f"d={shlex.quote(ctx.job.log_dir)}; while [ ! -e \"$d\" ] && [ \"$d\" != / ]; do p=${{d%/*}}; d=${{p:-/}}; done; "
                     "if [ -d \"$d\" ] && [ -w \"$d\" ] && [ -x \"$d\" ]; then echo 'logdir ok'; else echo \"logdir - $d\"; fi")
    return "\n".join(lines)


def _launcher_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    if ctx.job is None:
        return result("launcher", Status.SKIP, "no job given (`preflight --launcher L --script S`, or `launch`)")
    section = sections["launcher"]
    found = dict(line.split(" ", 1) for line in section.output.splitlines() if " " in line)
    if not section.ok or "launcher" not in found:
        raise ParseError(f"unexpected launcher probe output: {section.output[:200]!r}")
    spec = launcher_spec(ctx.job.launcher)
    binary = spec.binary(node)
    problems, hints = [], []
    if found["launcher"] == "-":
        problems.append(f"{binary} not found" + ("" if "/" in binary else f" on PATH (python: {node.python})"))
        hints.append(f"install {spec.package} on the node, "
                     "or set `python:` in the inventory to the interpreter of the job's environment")
    if ctx.job.script is not None and found.get("script") != "ok":
        problems.append(f"script {ctx.job.script} not found in {found.get('cwd', '?')} (the job's working directory)")
        hints.append("put the script on every node at the same path (or on a shared filesystem), or give an absolute path")
    if ctx.job.log_dir is not None and found.get("logdir", "ok") != "ok":
        blocked = found["logdir"].partition(" ")[2]
        problems.append(f"cannot create the job's log directory {ctx.job.log_dir}: {blocked} is not a directory this user can write")
        hints.append("launch with --log-dir DIR where the job's user can write, or set `preflight: {log_dir: DIR}` in the inventory")
    if problems:
        return result("launcher", Status.FAIL, "; ".join(problems), "; ".join(hints))
    what = found["launcher"] + (f", {ctx.job.script}" if ctx.job.script is not None else "")
    return result("launcher", Status.PASS, what)


LAUNCHER = NodeCheck("launcher", "the job's launcher and script are on the node", ("launcher",), _launcher_evaluate)


def _disk_section(node: Node, ctx: ProbeContext) -> str:
    path = shlex.quote(ctx.config.log_dir)
    # The log dir may not exist yet: measure the nearest existing parent.
    return f'd={path}; while [ ! -e "$d" ]; do d=$(dirname "$d"); done; df -Pk "$d"'


def _versions_section(node: Node, ctx: ProbeContext) -> str:
    lines = [f'for f in {path}; do [ -r "$f" ] && {{ echo "--{key}"; cat "$f"; }}; done' for key, path in VERSION_FILES.items()]
    python = shlex.quote(node.python)
    lines.append(f"echo '--python'; if command -v {python} >/dev/null 2>&1; then {python} -c {shlex.quote(_PY_VERSIONS)}; "
                 "else echo 'python -'; fi")
    return "\n".join(lines)


FACTS = {
    "launcher": _launcher_section,
    "disk": _disk_section,
    "limits": lambda node, ctx: "ulimit -n; ulimit -l",
    # what `ascendctl stacks` can use on the node: py-spy (native frames, threads), and whether ptrace lets it attach
    "stacks": lambda node, ctx: ("if command -v py-spy >/dev/null 2>&1; then echo 'py-spy yes'; else echo 'py-spy no'; fi; "
                                 "echo \"uid $(id -u)\"; echo \"ptrace_scope $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null "
                                 "|| echo none)\""),
    "versions": _versions_section,
}


def _disk_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    section = sections["disk"]
    try:
        (usage, *_) = parse_df_kib(section.output)
    except (ParseError, ValueError) as exc:
        return result("disk", Status.ERROR, f"cannot read `df` output: {exc}")
    free_gb = usage.available_kib / (1024 * 1024)
    want = ctx.config.min_free_disk_gb
    text = f"{free_gb:.1f} GiB free for {ctx.config.log_dir} (on {usage.mount})"
    if free_gb < want:
        return result("disk", Status.FAIL, text + f" < {want:g} GiB",
                      f"free space on {usage.mount} (old plogs under ~/ascend/log pile up) or set preflight.log_dir")
    return result("disk", Status.PASS, text)


DISK = NodeCheck("disk", "free space for logs", ("disk",), _disk_evaluate)


def _limits_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    try:
        limits = parse_ulimits(sections["limits"].output)
    except ParseError as exc:
        return result("limits", Status.ERROR, f"cannot read ulimit output: {exc}")
    nofile = "unlimited" if limits.nofile is None else str(limits.nofile)
    memlock = "unlimited" if limits.memlock_kib is None else f"{limits.memlock_kib} KiB"
    text = f"open files {nofile}, locked memory {memlock}"
    problems = []
    if limits.nofile is not None and limits.nofile < ctx.config.min_open_files:
        problems.append(f"open files {limits.nofile} < {ctx.config.min_open_files}")
    if limits.memlock_kib is not None:
        problems.append("locked memory is limited (RDMA and HCCL want unlimited)")
    if problems:
        return result("limits", Status.WARN, "; ".join(problems),
                      "raise nofile and memlock in /etc/security/limits.conf (e.g. `* - nofile 1048576`, `* - memlock unlimited`)")
    return result("limits", Status.PASS, text)


LIMITS = NodeCheck("limits", "open files and locked memory limits", ("limits",), _limits_evaluate)


def _stacks_evaluate(node: Node, sections: Mapping[str, Section], ctx: ProbeContext) -> CheckResult:
    """What `ascendctl stacks` (and a hang's stacks) will get here: never a failure, the faulthandler hook always works."""
    said = dict(line.split(" ", 1) for line in sections["stacks"].output.splitlines() if " " in line)
    if said.get("py-spy") not in ("yes", "no"):
        return result("stacks", Status.WARN, "could not tell whether py-spy is here: stacks show Python frames (faulthandler)")
    scope, root = said.get("ptrace_scope", "none").strip(), said.get("uid", "").strip() == "0"
    if said["py-spy"] == "no":
        return result("stacks", Status.WARN, "py-spy not found: `ascendctl stacks` shows each rank's Python frames "
                      "(faulthandler), without native frames or threads", "`pip install py-spy` on the nodes for those (optional)")
    blocked = {"3": "kernel.yama.ptrace_scope=3 lets nobody attach (until a reboot)",
               "2": "kernel.yama.ptrace_scope=2 lets only root attach",
               "1": "kernel.yama.ptrace_scope=1 lets only a parent or CAP_SYS_PTRACE attach"}.get(scope)
    if blocked is not None and (scope == "3" or not root):
        return result("stacks", Status.WARN, f"py-spy found, but {blocked}: stacks show Python frames only",
                      "run ascendctl as root on the nodes, or `sysctl kernel.yama.ptrace_scope=0` where your policy allows")
    return result("stacks", Status.PASS, f"py-spy found, ptrace allowed (ptrace_scope {scope}): native frames and threads too")


STACKS = NodeCheck("stacks", "what `ascendctl stacks` can take (py-spy, ptrace)", ("stacks",), _stacks_evaluate)


def read_versions(section: Section) -> dict[str, str]:
    """Component -> version from the versions section (driver, firmware, cann, nnae, python, packages)."""
    versions: dict[str, str] = {}
    current: str | None = None
    buffer: list[str] = []

    def flush() -> None:
        if current is None:
            return
        if current == "python":
            for line in buffer:
                words = line.split()
                if len(words) == 2:
                    versions[words[0]] = words[1]
            return
        try:
            found = package_version(parse_version_info("\n".join(buffer)))
        except ParseError:
            found = None
        versions[current] = found or "?"

    for line in section.output.splitlines():
        if line.startswith("--") and line[2:].isidentifier():
            flush()
            current, buffer = line[2:], []
        else:
            buffer.append(line)
    flush()
    return versions


def _versions_evaluate(facts: Sequence[NodeFacts], ctx: ProbeContext) -> ClusterVerdict:
    found = {f.node.name: read_versions(f.sections["versions"]) for f in facts if "versions" in f.sections}
    components = sorted({key for versions in found.values() for key in versions})
    per_node: dict[str, CheckResult] = {}
    differences: list[str] = []
    for component in components:
        groups = group_by(found.items(), key=lambda item: item[1].get(component, "-"), name=lambda item: item[0])
        if len(groups) < 2:
            continue
        groups.sort(key=lambda g: -len(g[1]))
        majority = groups[0][0]
        differences.append(f"{component}: " + "; ".join(f"{value} on {fold(names)}" for value, names in groups))
        for value, names in groups[1:]:
            for name in names:
                prior = per_node.get(name)
                text = f"{component} {value} (most nodes: {majority})"
                per_node[name] = result("versions", Status.FAIL, text if prior is None else prior.summary + "; " + text,
                                        "install the same driver, firmware, CANN and framework versions on every node")
    shown = ", ".join(f"{k} {v}" for k, v in next(iter(found.values()), {}).items() if v not in ("-", "?"))
    for name in found:
        per_node.setdefault(name, result("versions", Status.PASS, f"same as the other nodes ({shown or 'nothing found'})"))
    if differences:
        summary = result("versions", Status.FAIL, "versions differ: " + " | ".join(differences),
                         "install the same driver, firmware, CANN and framework versions on every node")
    else:
        summary = result("versions", Status.PASS, f"identical on {fold(found)}: {shown or 'nothing found'}")
    return ClusterVerdict(per_node, summary)


VERSIONS = ClusterCheck("versions", "driver/firmware/CANN/framework versions identical", ("versions",), _versions_evaluate)
