"""Architecture rules (docs/architecture.md): the layers and what each may import, no import cycle, a shallow graph;
only cli imports typer, only ui imports rich, paramiko loads only for SSH."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ascendctl"
MAX_DEPTH = 13  # modules in the longest chain of run-time imports (issue #25: it was 20)

# Lowest first. A module may import its own layer and the layers below it, never one above (type-only imports
# under `if TYPE_CHECKING:` included). Every module of the package must be in one layer: a new file is placed here.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("errors", "models", "outcome", "paths", "redact", "nodeset", "outliers", "interrupts", "slurm", "collector", "ranktable",
                    "version", "launchers", "templating", "schemas", "bundle.layout", "bundle.archive")),
    ("inventory", ("inventory",)),
    ("remote", ("remote",)),
    ("facts", ("facts",)),
    ("features", ("preflight", "triage", "stacks", "netcheck", "render", "execute", "jobs", "bundle", "report", "perf")),
    ("ui", ("ui",)),
    ("cli", ("cli",)),
    ("entry", ("", "__main__")),  # the package's lazy exports and `python -m ascendctl`
)
# Inside the feature layer, what a feature may not import (the blame engine reads data; preflight knows no jobs).
FEATURE_FORBIDDEN: dict[str, tuple[str, ...]] = {
    # triage judges stacks captures it reads (stacks.incident, pure), never takes them
    "triage": ("jobs", "bundle.collect", "bundle.summaries", "report", "preflight", "netcheck", "stacks.capture",
               "stacks.hook", "render"),
    "preflight": ("jobs", "report", "bundle", "triage", "stacks", "netcheck"),
    "stacks": ("report", "bundle", "preflight", "netcheck"),
    "netcheck": ("jobs", "report", "bundle", "triage", "stacks", "preflight"),
    "render": ("jobs.service", "report", "bundle", "triage", "stacks", "preflight", "netcheck"),
    # perf reads profiles (bundle.layout, foundation, is its reader) and judges them; it reaches no node and no job
    "perf": ("jobs", "report", "bundle.collect", "bundle.summaries", "triage", "stacks", "preflight", "netcheck", "render", "execute", "remote"),
}
NOT_IMPORTED = ("stacks/sitecustomize.py", "netcheck/programs/")  # run by the node's Python, never imported here


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(NOT_IMPORTED):
            found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path], *, runtime: bool) -> set[str]:
    """The package's modules that `name` imports (anywhere in the file); `runtime`: leave out `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if runtime:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = []
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(["ascendctl"] + package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from P import x`: module P.x where x is a submodule, else P itself
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}".removeprefix("ascendctl").lstrip(".") in modules
                       else base for alias in node.names]
        for target in targets:
            if target != "ascendctl" and not target.startswith("ascendctl."):
                continue
            short = target.removeprefix("ascendctl").lstrip(".")
            while short and short not in modules:
                short = short.rpartition(".")[0]
            if short in modules and short != name:
                found.add(short)
    return found


def graph(*, runtime: bool) -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imports_of(name, path, modules, runtime=runtime) for name, path in modules.items()}


def layer_of(name: str) -> int:
    best, best_len = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".") or (prefix == "" and name == "")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest import chain of an acyclic graph, top module first."""
    memo: dict[str, list[str]] = {}

    def chain(v: str) -> list[str]:
        if v not in memo:
            memo[v] = [v] + max((chain(w) for w in sorted(edges[v])), key=len, default=[])
        return memo[v]

    return max((chain(v) for v in sorted(edges)), key=len)


def test_every_module_is_in_a_layer() -> None:
    assert [name for name in package_modules() if layer_of(name) < 0] == []


def test_no_module_imports_a_higher_layer() -> None:
    upward = [f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
              for name, targets in graph(runtime=False).items() for target in sorted(targets)
              if layer_of(target) > layer_of(name)]
    assert upward == []


def test_features_keep_to_their_own_floor() -> None:
    wrong = [f"{name} imports {target}" for name, targets in graph(runtime=False).items() for target in sorted(targets)
             for feature, forbidden in FEATURE_FORBIDDEN.items()
             if (name == feature or name.startswith(feature + "."))
             and any(target == f or target.startswith(f + ".") for f in forbidden)]
    assert wrong == []


def test_no_import_cycle_and_the_graph_is_shallow() -> None:
    runtime = graph(runtime=True)
    assert cycles(runtime) == []
    chain = longest_chain(runtime)
    assert len(chain) <= MAX_DEPTH, " -> ".join(chain)


def test_the_rules_catch_a_cycle_an_upward_import_and_a_deep_chain() -> None:
    """The checks above are not vacuous: a made-up graph breaks each of them."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert layer_of("inventory.load") < layer_of("remote.group") < layer_of("jobs.service") < layer_of("cli.app")
    assert layer_of("bundle.layout") == 0 and layer_of("bundle.collect") == layer_of("jobs.service")
    deep = {str(i): {str(i + 1)} for i in range(20)} | {"20": set()}
    assert len(longest_chain(deep)) == 21


def test_no_two_classes_share_a_name() -> None:
    seen: dict[str, list[str]] = {}
    for name, path in package_modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(name)
    assert {cls: where for cls, where in seen.items() if len(where) > 1} == {}


def imported_top_levels(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_only_cli_imports_typer_and_only_ui_imports_rich(path: Path) -> None:
    modules = imported_top_levels(path)
    rel = path.relative_to(PACKAGE).as_posix()
    if not rel.startswith("cli/"):
        assert "typer" not in modules, rel
    if not rel.startswith("ui/"):
        assert "rich" not in modules, rel
    assert "click" not in modules, rel
    if rel != "report/html.py":
        assert "jinja2" not in modules, rel
    if rel != "remote/transport/ssh.py":
        assert "paramiko" not in modules, rel


def test_core_does_not_import_cli_stack() -> None:
    code = (
        "import ascendctl.remote.fanout, ascendctl.inventory.load, ascendctl.execute, ascendctl.remote.transport.local, "
        "ascendctl.remote.transport.ssh, sys; assert not {'typer', 'rich', 'click'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_version_and_local_exec_do_not_load_paramiko() -> None:
    code = (
        "import sys; sys.argv=['ascendctl','--version']\n"
        "from ascendctl import cli\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "assert 'paramiko' not in sys.modules and 'rich.progress' not in sys.modules\n"
        "from ascendctl import load_inventory, run_command\n"
        "r = run_command(load_inventory(None, environ={}), 'true')\n"
        "assert r.exit_code == 0 and 'paramiko' not in sys.modules"
    )
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/", env=env)


def test_every_public_name_resolves() -> None:
    """`ascendctl.__all__` keeps working after the moves: each name loads from the module that owns it."""
    import ascendctl

    assert [name for name in ascendctl.__all__ if getattr(ascendctl, name, None) is None] == []
