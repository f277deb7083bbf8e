"""The shell programs ascendctl ships (ascendctl/sh/*.sh) and the repository's own scripts: shellcheck
reads every one of them, and each packaged program runs on the local transport the way it runs on a node
(`sh -s -- ARGS` with the script on stdin)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ascendctl.errors import CommandTimeoutError
from ascendctl.inventory import load_inventory
from ascendctl.shell import SCRIPTS, remote, script
from ascendctl.transport import ANSWER_SLACK, KILL_GRACE, bounded_run
from ascendctl.transport.local import LocalTransport

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = sorted((ROOT / "ascendctl/sh").glob("*.sh"))
REPOSITORY = [ROOT / "scripts/test.sh", ROOT / ".ci/run"]


def test_every_packaged_program_is_registered() -> None:
    assert sorted(SCRIPTS) == [p.name for p in PACKAGED]
    for name in SCRIPTS:
        assert script(name).startswith("#!"), f"{name}: no shebang (shellcheck needs the dialect)"


@pytest.mark.parametrize("path", PACKAGED + REPOSITORY, ids=lambda p: str(p.relative_to(ROOT)))
def test_shellcheck_is_clean(path: Path) -> None:
    # scripts/test.sh installs shellcheck: a missing one is a failure here, never a skip
    assert shutil.which("shellcheck"), "shellcheck is not installed (bash scripts/test.sh installs it)"
    proc = subprocess.run(["shellcheck", "--format=gcc", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture()
def local(tmp_path: Path) -> LocalTransport:
    path = tmp_path / "inventory.yaml"
    path.write_text("nodes:\n  - {host: localhost, name: here, transport: local}\n")
    return LocalTransport(load_inventory(path).nodes[0])


def run(transport: LocalTransport, name: str, *args: object) -> str:
    command, stdin = remote(name, *args)
    result = transport.run(command, stdin=stdin, timeout=30)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_job_state_reads_the_exit_file_a_live_pid_or_says_gone(local: LocalTransport, tmp_path: Path) -> None:
    assert run(local, "job_state.sh", tmp_path, "", "ASCENDCTL_JOB=nobody/here") == "gone\npids\n"
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert run(local, "job_state.sh", tmp_path, sleeper.pid, "ASCENDCTL_JOB=nobody/here") == "running\npids\n"
    finally:
        sleeper.kill()
        sleeper.wait()
    (tmp_path / "exit_code").write_text("3\n")
    os.utime(tmp_path / "exit_code", (1_700_000_000, 1_700_000_000))  # when the launcher ended: `jobs` shows it
    assert run(local, "job_state.sh", tmp_path, "", "ASCENDCTL_JOB=nobody/here") == "exit 3 1700000000\npids\n"


def test_job_state_lists_the_pids_of_every_process_left_with_the_marker(local: LocalTransport, tmp_path: Path) -> None:
    marker = f"ASCENDCTL_JOB=state-{os.getpid()}/here"
    marked = [subprocess.Popen(["sleep", "30"], env={**os.environ, "ASCENDCTL_JOB": marker.split("=", 1)[1]}) for _ in range(2)]
    other = subprocess.Popen(["sleep", "30"])
    (tmp_path / "exit_code").write_text("143\n")  # the launcher ended, two of its processes did not
    try:
        state, pids = run(local, "job_state.sh", tmp_path, "", marker).splitlines()
        assert re.fullmatch(r"exit 143 \d+", state), state
        assert sorted(pids.split()[1:]) == sorted(str(p.pid) for p in marked)
    finally:
        for proc in (*marked, other):
            proc.kill()
            proc.wait()
    assert re.fullmatch(r"exit 143 \d+\npids\n", run(local, "job_state.sh", tmp_path, "", marker))


def test_teardown_finds_processes_by_their_marker_only(local: LocalTransport) -> None:
    marker = f"ASCENDCTL_JOB=test-{os.getpid()}/here"
    marked = subprocess.Popen(["sleep", "30"], env={**os.environ, "ASCENDCTL_JOB": marker.split("=", 1)[1]})
    other = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        assert run(local, "teardown_job.sh", marker, 2000) == "term\n"
        assert marked.wait(timeout=5) == -15
        assert other.poll() is None
        assert run(local, "teardown_job.sh", marker, 2000) == "none\n"
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait()


# -- nodes whose tools are busybox's (and whose sh is dash or busybox's): POSIX sh, no GNU-only option -----------
SHELLS = {"dash": ["dash"], "busybox sh": ["busybox", "sh"]}


@pytest.fixture(scope="module")
def busybox_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PATH of busybox's applets only, as on a busybox node: its `date` has no %N (it prints "%N")."""
    # a missing busybox is a failure here, never a skip (install: apt-get install busybox)
    busybox = shutil.which("busybox")
    assert busybox, "busybox is not installed: apt-get install -y busybox"
    bin_dir = tmp_path_factory.mktemp("busybox-bin")
    for applet in subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split():
        (bin_dir / applet).symlink_to(busybox)
    date = subprocess.run(["date", "+%s%3N"], capture_output=True, text=True, env={"PATH": str(bin_dir)}).stdout
    assert date.strip().endswith("%3N"), date  # the premise: GNU date prints milliseconds here, busybox's does not
    return str(bin_dir)


def run_on_busybox(shell: str, path: str, name: str, *args: object, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """A packaged program as a busybox node runs it: `<shell> -s -- ARGS` with the text on stdin, busybox tools only."""
    argv = [shutil.which(SHELLS[shell][0]) or SHELLS[shell][0], *SHELLS[shell][1:], "-s", "--", *map(str, args)]
    return subprocess.run(argv, input=script(name), capture_output=True, text=True, timeout=timeout, env={"PATH": path})


@pytest.mark.parametrize("shell", SHELLS)
def test_teardown_kills_a_term_ignoring_process_after_the_grace_on_a_busybox_node(shell: str, busybox_path: str,
                                                                                   tmp_path: Path) -> None:
    job = f"busybox-{os.getpid()}-{secrets.token_hex(3)}/here"
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                 "print('ready', flush=True); time.sleep(60)"],
                                env={**os.environ, "ASCENDCTL_JOB": job}, stdout=subprocess.PIPE, text=True)
    (tmp_path / ".job.env").write_text("export HF_TOKEN=s3cret\n")  # its wrapper stopped before reading it
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"  # TERM is ignored from here on
        started = time.monotonic()
        done = run_on_busybox(shell, busybox_path, "teardown_job.sh", f"ASCENDCTL_JOB={job}", 1500, tmp_path)
        took = time.monotonic() - started
        assert (done.returncode, done.stdout, done.stderr) == (0, "kill\n", "")
        assert stubborn.wait(timeout=5) == -signal.SIGKILL
        assert 1.4 <= took < 10, took  # the grace was waited for, then the SIGKILL sent
        assert not (tmp_path / ".job.env").exists()
    finally:
        stubborn.kill()
        stubborn.wait()


@pytest.mark.parametrize("shell", SHELLS)
def test_teardown_of_a_process_that_ends_on_term_says_term_on_a_busybox_node(shell: str, busybox_path: str) -> None:
    job = f"busybox-{os.getpid()}-{secrets.token_hex(3)}/here"
    polite = subprocess.Popen(["sleep", "60"], env={**os.environ, "ASCENDCTL_JOB": job})
    try:
        time.sleep(0.1)
        started = time.monotonic()
        done = run_on_busybox(shell, busybox_path, "teardown_job.sh", f"ASCENDCTL_JOB={job}", 5000)
        assert (done.returncode, done.stdout) == (0, "term\n") and time.monotonic() - started < 4
        assert polite.wait(timeout=5) == -signal.SIGTERM
        assert run_on_busybox(shell, busybox_path, "teardown_job.sh", f"ASCENDCTL_JOB={job}", 5000).stdout == "none\n"
    finally:
        polite.kill()
        polite.wait()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_job_runs_start_to_end_on_a_busybox_node(shell: str, busybox_path: str, tmp_path: Path) -> None:
    """job_wrapper.sh (no bash there: the launcher's output unstamped), job_state.sh, follow_log.sh's framed exit."""
    (tmp_path / ".job.env").write_text("export GREETING='hello from busybox'\n")
    (tmp_path / ".job.cmd").write_text("sh -c 'echo \"$GREETING\"; exit 3'\n")  # a launcher that fails
    (tmp_path / "launcher.log").write_text("")
    wrapper = tmp_path / "job_wrapper.sh"
    wrapper.write_text(script("job_wrapper.sh"))
    argv = [shutil.which(SHELLS[shell][0]) or SHELLS[shell][0], *SHELLS[shell][1:], str(wrapper), str(tmp_path)]
    assert subprocess.run(argv, env={"PATH": busybox_path}, timeout=30).returncode == 0
    assert (tmp_path / "launcher.log").read_text() == "hello from busybox\n"
    assert (tmp_path / "exit_code").read_text() == "3\n" and not (tmp_path / ".job.env").exists()
    state = run_on_busybox(shell, busybox_path, "job_state.sh", tmp_path, "", "ASCENDCTL_JOB=nobody/here")
    assert state.returncode == 0 and re.fullmatch(r"exit 3 \d+\npids\n", state.stdout), state.stdout
    follow = run_on_busybox(shell, busybox_path, "follow_log.sh", tmp_path, 999999, "n0nce", 6)
    assert follow.returncode == 0
    assert re.fullmatch(r"from busybox\n\n@@n0nce exit 3 \d+(\.\d+)?@@\n", follow.stdout), follow.stdout  # a time, never "%N"


@pytest.mark.parametrize("shell", [*SHELLS, "bash"])
def test_follow_log_sends_heartbeats_while_the_log_is_quiet_and_the_reader_drops_them(shell: str, busybox_path: str,
                                                                                      tmp_path: Path) -> None:
    from ascendctl.jobs.ssh_runner import SSHNodeStream
    from tests.fakes import FakeSpawned

    (tmp_path / "launcher.log").write_text("start\npart")
    # the launcher (this process stands in: alive) is silent for 3.5 s, then writes its exit status
    ends = threading.Timer(3.5, lambda: (tmp_path / "exit_code").write_text("0\n"))
    ends.start()
    try:
        if shell == "bash":
            argv = ["bash", "-s", "--", str(tmp_path), str(os.getpid()), "n0nce", "0", "1"]
            follow = subprocess.run(argv, input=script("follow_log.sh"), capture_output=True, text=True, timeout=30)
        else:
            follow = run_on_busybox(shell, busybox_path, "follow_log.sh", tmp_path, os.getpid(), "n0nce", 0, 1)
    finally:
        ends.cancel()
    assert follow.returncode == 0, follow.stderr
    beats = follow.stdout.count("@@n0nce alive@@\n")
    assert 2 <= beats <= 4, follow.stdout  # one a second while nothing else is sent
    assert follow.stdout.startswith("start\npart@@n0nce alive@@\n"), follow.stdout
    assert re.search(r"\n@@n0nce exit 0 \S+@@\n$", follow.stdout), follow.stdout
    lines, ended = SSHNodeStream("n1", FakeSpawned(follow.stdout.encode()), "n0nce", silence=2).pump()
    assert lines == ["start", "part"] and ended is not None and ended.lost is None


def test_follow_log_prints_from_an_offset_then_the_framed_exit(local: LocalTransport, tmp_path: Path) -> None:
    (tmp_path / "launcher.log").write_text("one\ntwo\n")
    (tmp_path / "exit_code").write_text("0")
    out = run(local, "follow_log.sh", tmp_path, 0, "n0nce", 4)
    assert re.fullmatch(r"two\n\n@@n0nce exit 0 \d+\.\d+@@\n", out), out


def test_stamp_lines_prefixes_each_line_with_local_time_and_keeps_an_unterminated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "stamp_lines.sh"
    path.write_text(script("stamp_lines.sh"))
    out = subprocess.run(["bash", str(path)], input="a\n\nb", capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert [line.split(" | ", 1)[1] if " | " in line else line for line in lines] == ["a", "", "b"]
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6} \| ", line) for line in lines), lines


def test_collect_node_runs_its_sections_with_the_transport_bounded_run_text() -> None:
    text = (ROOT / "ascendctl/sh/collect_node.sh").read_text()
    assert bounded_run('"$1"', '"$section_timeout"', redirect='2>&1 </dev/null') in text


def test_a_timed_out_command_leaves_no_process_even_when_a_child_ignores_term(local: LocalTransport) -> None:
    """The command's shell dies of TERM at once; its child ignores TERM: the child must still be KILLed."""
    token = f"asct-unit-{secrets.token_hex(4)}"
    started = time.monotonic()
    with pytest.raises(CommandTimeoutError):
        local.run(f"sh -c 'trap \"\" TERM; while :; do sleep 1; done; : {token}' & wait", timeout=1)
    assert time.monotonic() - started < 1 + KILL_GRACE + ANSWER_SLACK
    time.sleep(0.3)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert [line for line in ps.splitlines() if token in line] == []


def test_a_bounded_command_still_reads_its_stdin(local: LocalTransport) -> None:
    assert local.run("cat", stdin=b"through the bound\n", timeout=5).stdout == "through the bound\n"
