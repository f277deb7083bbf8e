"""The probe's section runner (ascendctl/sh/probe_runner.sh) as real processes, in dash and bash.

Every section runs in a subshell under one watchdog per probe; these tests hang sections in the ways vendor tools
hang (ignoring TERM, leaving children that hold the output) and look for what is left with `ps`, by a token unique
to each test.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ascendctl.remote.probe import NOT_RUN, TOOL_PATH, Section, build_probe, parse_probe

SHELLS = ["dash", "bash"]


def processes_with(token: str, *, settle: float = 4.0) -> list[str]:
    """Command lines holding `token`, after giving a KILL in flight `settle` seconds to land."""
    deadline = time.monotonic() + settle
    while True:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        left = [line for line in ps.splitlines() if token in line and "ps -eo" not in line]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def group_left(pgid: int, *, settle: float = 3.0) -> list[str]:
    """Processes still in the probe's process group after `settle` seconds (the ticker's last `sleep` ends in 0.5 s)."""
    deadline = time.monotonic() + settle
    while True:
        ps = subprocess.run(["ps", "-eo", "pgid=,pid=,args="], capture_output=True, text=True).stdout
        left = [line for line in ps.splitlines() if line.split()[0] == str(pgid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def run_probe(shell: str, script: str, *, env: dict[str, str] | None = None) -> tuple[dict[str, Section], int]:
    """Run a probe the way a node does; return its sections and its process group (for leftovers)."""
    proc = subprocess.Popen([shell, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    out, _ = proc.communicate(timeout=60)
    return parse_probe(out, nonce="n0nce"), proc.pid


@pytest.mark.parametrize("shell", SHELLS)
def test_a_section_ignoring_term_is_killed_after_the_grace_and_the_next_section_runs(shell: str) -> None:
    token = f"asct-run-{secrets.token_hex(4)}"
    wedged = f"trap '' TERM; sh -c 'trap \"\" TERM; sleep 300; : {token}' & wait"
    sections, pgid = run_probe(shell, build_probe({"wedged": wedged, "after": "echo fine"}, nonce="n0nce", section_timeout=1))
    assert sections["wedged"].exit_code == 137  # TERM ignored: KILLed after the grace, as `timeout -k` reports it
    assert sections["after"] == Section("fine", 0)
    assert processes_with(token) == []
    assert group_left(pgid) == []


@pytest.mark.parametrize("shell", SHELLS)
def test_a_timed_out_section_takes_its_children_with_it(shell: str) -> None:
    """The tool's children hold the probe's output open; TERM reaches them too, or the node would answer late."""
    token = f"asct-run-{secrets.token_hex(4)}"
    sections, pgid = run_probe(shell, build_probe(
        {"hung": f"sh -c 'sleep 300; : {token}' & sleep 301; echo never", "ok": "echo $((6 * 7))"},
        nonce="n0nce", section_timeout=1))
    assert sections["hung"].exit_code == 124 and "never" not in sections["hung"].output
    assert sections["ok"] == Section("42", 0)
    assert processes_with(token) == []
    assert group_left(pgid) == []


@pytest.mark.parametrize("shell", SHELLS)
def test_sections_are_bounded_on_a_node_without_timeout(shell: str, tmp_path: Path) -> None:
    """The runner needs no coreutils `timeout` (busybox images, minimal nodes): only `sleep` and /proc."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sleep", "date", "echo"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    script = build_probe({"slow": "sleep 30", "exits": "exit 3"}, nonce="n0nce", section_timeout=1)
    probe_path = f"{bin_dir}"  # the probe adds the vendor tool folders; /usr/bin (timeout) is not among them
    check = subprocess.run([shell, "-c", "PATH=$1; command -v timeout || echo none", "-", f"{probe_path}:{TOOL_PATH}"],
                           capture_output=True, text=True)
    assert check.stdout.strip() == "none"
    sections, pgid = run_probe(shutil.which(shell) or shell, script, env={"PATH": probe_path})
    assert sections["slow"].exit_code == 124
    assert sections["exits"] == Section("", 3)
    assert group_left(pgid) == []


@pytest.mark.parametrize("shell", SHELLS)
def test_a_section_cannot_see_the_probe_s_arguments_or_disturb_its_framing(shell: str) -> None:
    sections, _ = run_probe(shell, build_probe(
        {"args": 'echo "[$#][$1]"', "clobber": "pid=1; rc=9; limit=0; exit 5", "next": "echo still"},
        nonce="n0nce", section_timeout=5))
    assert sections["args"] == Section("[0][]", 0)
    assert sections["clobber"] == Section("", 5)
    assert sections["next"] == Section("still", 0)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_probe_whose_output_is_closed_leaves_nothing_behind(shell: str) -> None:
    """The channel goes away mid-probe (the client gave up): the sections' shell dies on its next write, and the
    watchdog and its ticker must notice and end, not tick on for ever."""
    script = build_probe({"a": "sleep 1", "b": "echo x", "c": "sleep 1"}, nonce="n0nce", section_timeout=10)
    proc = subprocess.Popen([shell, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert proc.stdout is not None
    proc.stdout.close()
    proc.wait(timeout=30)
    assert group_left(proc.pid, settle=5.0) == []


def test_budget_not_run_sections_say_so() -> None:
    """With a budget already spent, sections are not run at all (exit NOT_RUN), and say why."""
    script = build_probe({"a": "sleep 1.5", "b": "echo late"}, nonce="n0nce", section_timeout=5, budget=1)
    sections, _ = run_probe("dash", script)
    assert sections["a"].exit_code in (124, 0)
    assert sections["b"].exit_code == NOT_RUN and "spent its 1s" in sections["b"].output


def test_no_process_is_left_in_the_probe_s_group_after_a_healthy_probe() -> None:
    sections, pgid = run_probe("dash", build_probe({"a": "echo a", "b": "true"}, nonce="n0nce", section_timeout=5,
                                                   budget=30, clock=True))
    assert sections["a"] == Section("a", 0) and sections["b"] == Section("", 0)
    assert group_left(pgid) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, signal.SIGCONT)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_runner_s_functions_do_not_shadow_commands_a_section_may_call(shell: str) -> None:
    """Sections run in a subshell of the runner, so they see its functions: none may be named like a command
    (`tree`, `watch`, `run`, `now` are real programs or likely ones)."""
    names = "tree watch run now tick reap start_ticker stop_ticker"
    section = f"for f in {names}; do type \"$f\" 2>/dev/null | grep -q function && echo \"shadowed $f\"; done; true"
    sections, _ = run_probe(shell, build_probe({"look": section}, nonce="n0nce", section_timeout=5))
    assert sections["look"] == Section("", 0)
