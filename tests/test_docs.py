"""The docs are tested: every `ascendctl ...` command shown in README.md and docs/**/*.md parses
against the real CLI, and the blocks marked to run do run, with the exit code (and output) they show.

Commands are taken from fenced ```sh and ```console blocks (in ```console, the lines after `$ `).
A block is run when an HTML comment right above it says so:

    <!-- doc-test: run -->            run every ascendctl command in it; each must exit 0 unless the block
                                      shows another code (`$ echo $?`, then the code, as a shell prints it)
    <!-- doc-test: run, output -->    also: every output line shown (but `...`) appears, in order
    <!-- doc-test: file NAME -->      the next fenced block is written to NAME before the page's commands run

Runs happen in a temp directory holding links to the repository's tests/, templates/ and
inventory.example.yaml, with the hermetic HOME of conftest.py. This module imports no Typer
internals beyond `typer.main.get_command`, the Click command tree the CLI itself runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from ascendctl.cli import app

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
MARK = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->")
FENCE = re.compile(r"^(`{3,})\s*([\w-]*)[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
SEPARATORS = {"&&", "||", "|", ";", "&"}
runner = CliRunner()


@dataclass
class Command:
    """One `ascendctl` command line found in a page, with what the page says it prints and exits with."""

    page: str
    line: int
    argv: list[str]
    run: bool = False
    check_output: bool = False
    exit_code: int | None = None
    output: list[str] = field(default_factory=list)
    stdout_to: str | None = None  # `> FILE`

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}: ascendctl {shlex.join(self.argv)}"


@dataclass
class Page:
    name: str
    commands: list[Command]
    files: dict[str, str]


def substitutions(line: str) -> list[str]:
    """The outermost `$(...)` bodies of a shell line (nested ones are found when the body is scanned)."""
    bodies: list[str] = []
    start, depth = -1, 0
    for i, char in enumerate(line):
        if line.startswith("$(", i) and depth == 0:
            start = i + 2
        if char == "(" and start >= 0:
            depth += 1
        elif char == ")" and depth:
            depth -= 1
            if depth == 0:
                bodies.append(line[start:i])
                start = -1
    return bodies


def ascendctl_argvs(line: str) -> list[list[str]]:
    """The argv (after `ascendctl`) of every ascendctl command in one shell line, `$(...)` included."""
    return [argv for argv, _ in ascendctl_commands(line)]


def ascendctl_commands(line: str) -> list[tuple[list[str], str | None]]:
    """(argv after `ascendctl`, the file its stdout is redirected to) of every ascendctl command in a shell line."""
    found: list[tuple[list[str], str | None]] = []
    for inner in substitutions(line):
        found.extend(ascendctl_commands(inner))
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    segment: list[str] = []
    for token in [*lexer, ";"]:
        if token not in SEPARATORS:
            segment.append(token)
            continue
        while segment and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", segment[0]):
            segment.pop(0)  # VAR=value ascendctl ...
        redirect = None
        if ">" in segment and segment.index(">") == len(segment) - 2:
            redirect = segment[-1]
            segment = segment[:-2]
        if segment and Path(segment[0]).name == "ascendctl":
            found.append((segment[1:], redirect))
        segment = []
    return found


def parse_page(name: str, text: str) -> Page:
    """Every ascendctl command of a page's ```sh and ```console blocks, and the files its markers name."""
    commands: list[Command] = []
    files: dict[str, str] = {}
    for fence in FENCE.finditer(text):
        before = text[: fence.start()].rstrip()
        mark = MARK.search(before.rsplit("\n", 1)[-1])
        options = {o.strip() for o in mark.group(1).split(",")} if mark else set()
        body, lang = fence.group(3), fence.group(2)
        first_line = text.count("\n", 0, fence.start()) + 2
        file_opt = next((o for o in options if o.startswith("file ")), None)
        if file_opt:
            files[file_opt.split(None, 1)[1]] = body
            continue
        if lang not in ("sh", "console"):
            continue
        last: Command | None = None
        expect_code = False
        for offset, raw in enumerate(body.splitlines()):
            if lang == "console" and not raw.startswith("$ "):
                if expect_code and last is not None and raw.strip().isdigit():
                    last.exit_code = int(raw.strip())
                elif last is not None and raw.strip() and raw.strip() != "...":
                    last.output.append(raw.rstrip())
                expect_code = False
                continue
            shell = raw[2:] if lang == "console" else raw
            if shell.strip() in ("echo $?", 'echo "$?"'):
                expect_code = True
                continue
            expect_code = False
            last = None  # output after another program's prompt is that program's
            for argv, stdout_to in ascendctl_commands(shell):
                last = Command(name, first_line + offset, argv, run="run" in options, check_output="output" in options,
                               stdout_to=stdout_to)
                commands.append(last)
    return Page(name, commands, files)


def load_pages() -> list[Page]:
    return [parse_page(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in PAGES]


def parse_error(argv: list[str]) -> str | None:
    """None when argv parses as the real CLI parses it (command exists, every flag and value valid), else why not.

    Each level is parsed with `make_context`, as `TyperGroup.invoke` does, then the subcommand is resolved
    from what that level left (`_protected_args` + `args`, read the way TyperGroup.invoke reads them).
    Nothing is invoked: only eager options (--help, --version) act during parsing, and they exit 0.
    """
    root: Any = get_command(app)
    command: Any = root
    try:
        ctx = root.make_context("ascendctl", list(argv))
        while hasattr(command, "commands"):
            args = [*ctx._protected_args, *ctx.args]
            if not args:  # a group that runs on its own (`ascendctl nodes` lists) needs none
                return None if command.invoke_without_command else f"`{ctx.command_path}` needs a subcommand"
            name, command, rest = command.resolve_command(ctx, args)
            ctx = command.make_context(name, rest, parent=ctx)
    except Exception as exc:
        if type(exc).__name__ == "Exit" and getattr(exc, "exit_code", None) == 0:
            return None  # --help or --version
        if not hasattr(exc, "format_message"):  # not a usage error: a bug in this test, not in the docs
            raise
        return f"{type(exc).__name__}: {exc.format_message()}"
    return None


PAGES_PARSED = load_pages()
ALL_COMMANDS = [c for page in PAGES_PARSED for c in page.commands]


def test_the_docs_show_commands_on_every_page() -> None:
    """Guards the extractor: a page whose blocks stop being found would otherwise pass silently."""
    by_page = {page.name: len(page.commands) for page in PAGES_PARSED}
    assert by_page["README.md"] >= 10, by_page
    for page in PAGES_PARSED:
        if page.name.startswith("docs/") and page.name != "docs/architecture.md":
            assert page.commands, f"{page.name} shows no ascendctl command in a ```sh or ```console block"
    assert sum(c.run for c in ALL_COMMANDS) >= 10


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=lambda c: f"{c.page}:{c.line}")
def test_every_documented_command_parses(command: Command) -> None:
    error = parse_error(command.argv)
    assert error is None, f"{command.where}\n  {error}"


def run_page(page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run a page's marked commands in a scratch directory; return every mismatch with what the page shows."""
    for name in ("tests", "templates", "inventory.example.yaml"):
        (tmp_path / name).symlink_to(REPO / name)
    for name, body in page.files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    problems: list[str] = []
    for command in (c for c in page.commands if c.run):
        result = runner.invoke(app, command.argv)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            problems.append(f"{command.where}: raised {result.exception!r}")
            continue
        if command.stdout_to:
            Path(command.stdout_to).write_text(result.stdout, encoding="utf-8")
        shown = 0 if command.exit_code is None else command.exit_code  # a block that shows no code means success
        if result.exit_code != shown:
            problems.append(f"{command.where}: exit {result.exit_code}, the doc shows {shown}\n{result.output}")
        if command.check_output:
            actual = iter(line.rstrip() for line in result.output.splitlines())
            for want in command.output:
                if not any(line == want for line in actual):
                    problems.append(f"{command.where}: output line not found (in order): {want!r}\n{result.output}")
                    break
    return problems


@pytest.mark.parametrize("page", [p for p in PAGES_PARSED if any(c.run for c in p.commands)], ids=lambda p: p.name)
def test_marked_blocks_run_as_shown(page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problems = run_page(page, tmp_path, monkeypatch)
    assert not problems, "\n".join(problems)


# Negative controls: the checks above must be able to fail.

def test_a_made_up_flag_or_command_is_caught() -> None:
    assert parse_error(["preflight", "--only", "ntp"]) is None
    assert parse_error(["inventory", "show", "-w", "n1", "-v"]) is None  # global flags may follow the command
    assert "--no-such-flag" in str(parse_error(["preflight", "--no-such-flag"]))
    assert "--dryrun" in str(parse_error(["launch", "--launcher", "torchrun", "--dryrun", "--", "train.py"]))
    assert parse_error(["launch", "--launcher", "mpirun", "--", "train.py"])  # not a launcher choice
    assert parse_error(["inventory", "shwo"])  # no such subcommand
    assert parse_error(["render", "hostfile", "--format", "slurm"])
    assert parse_error(["exec", "--fanout", "0", "--", "true"])  # out of range
    assert parse_error(["collect", "--json", "--only", "npu"])  # --only is preflight's, not collect's


def test_a_page_with_a_made_up_flag_fails_the_parse_test() -> None:
    page = parse_page("fake.md", "Run:\n\n```sh\nascendctl inventory validate -i x.yaml && ascendctl preflight --fast\n```\n")
    assert [c.argv for c in page.commands] == [["inventory", "validate", "-i", "x.yaml"], ["preflight", "--fast"]]
    assert [parse_error(c.argv) is None for c in page.commands] == [True, False]


def test_a_wrong_exit_code_or_output_in_a_page_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = ("<!-- doc-test: file bad.yaml -->\n```yaml\nnodes:\n  - {host: a, slot: 2}\n```\n\n"
            "<!-- doc-test: run -->\n```console\n$ ascendctl inventory validate -i bad.yaml\n$ echo $?\n0\n```\n\n"
            "<!-- doc-test: run, output -->\n```console\n$ ascendctl --version\nascendctl 0.0.0-not-this\n```\n")
    page = parse_page("fake.md", text)
    assert page.files == {"bad.yaml": "nodes:\n  - {host: a, slot: 2}\n"}
    assert [c.exit_code for c in page.commands] == [0, None]
    problems = run_page(page, tmp_path, monkeypatch)
    assert len(problems) == 2, problems
    assert "exit 2, the doc shows 0" in problems[0] and "output line not found" in problems[1]


def test_commands_are_found_in_pipes_substitutions_and_after_prompts() -> None:
    assert ascendctl_argvs('eval "$(ascendctl render env -w $(hostname) --launcher msrun)"') == [
        ["render", "env", "-w", "$(hostname)", "--launcher", "msrun"]]
    assert ascendctl_argvs("pip install . && ascendctl preflight") == [["preflight"]]
    assert ascendctl_argvs("ASCENDCTL_CONNECT_TIMEOUT=5 ascendctl exec -- true | tail -1  # note") == [["exec", "--", "true"]]
    assert ascendctl_commands("ascendctl preflight --json > pf.json") == [(["preflight", "--json"], "pf.json")]
    page = parse_page("p.md", "```console\n$ ascendctl jobs\nJOB  STATUS\n...\n$ echo $?\n0\n```\n```text\n$ ascendctl nope\n```\n")
    (command,) = page.commands
    assert command.argv == ["jobs"] and command.output == ["JOB  STATUS"] and command.exit_code == 0


def test_readme_gives_a_fresh_machine_its_two_commands_and_ci_runs_the_same_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    sh_lines = [line for fence in FENCE.finditer(readme) if fence.group(2) == "sh" for line in fence.group(3).splitlines()]
    assert "pip install . && ascendctl preflight" in sh_lines
    assert "bash scripts/test.sh" in sh_lines
    assert readme.index("pip install . && ascendctl preflight") < readme.index("## Quickstart")
    assert readme.index("## Development / Tests") < readme.index("bash scripts/test.sh\n```")
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert "bash scripts/test.sh" in ci
