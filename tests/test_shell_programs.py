"""The shell programs ascendctl ships (ascendctl/sh/*.sh) and the repository's own scripts: shellcheck
reads every one of them, and each packaged program runs on the local transport the way it runs on a node
(`sh -s -- ARGS` with the script on stdin)."""

from __future__ import annotations

import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ascendctl.errors import CommandTimeoutError
from ascendctl.inventory.load import load_inventory
from ascendctl.remote.scripts import SCRIPTS, remote, script
from ascendctl.remote.transport.base import ANSWER_SLACK, KILL_GRACE, bounded_run
from ascendctl.remote.transport.local import LocalTransport

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
    """job_wrapper.sh (no bash, no python3 there: the POSIX stamper, whole seconds), job_state.sh, follow_log.sh's framed exit."""
    (tmp_path / ".job.env").write_text("export GREETING='hello from busybox'\n")
    (tmp_path / ".job.cmd").write_text("sh -c 'echo \"$GREETING\"; exit 3'\n")  # a launcher that fails
    (tmp_path / "launcher.log").write_text("")
    wrapper = tmp_path / "job_wrapper.sh"
    wrapper.write_text(script("job_wrapper.sh"))
    (tmp_path / "stamp_lines.sh").write_text(script("stamp_lines.sh"))
    argv = [shutil.which(SHELLS[shell][0]) or SHELLS[shell][0], *SHELLS[shell][1:], str(wrapper), str(tmp_path)]
    assert subprocess.run(argv, env={"PATH": busybox_path}, timeout=30).returncode == 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000000 \| hello from busybox\n", (tmp_path / "launcher.log").read_text())
    assert (tmp_path / "exit_code").read_text() == "3\n" and not (tmp_path / ".job.env").exists()
    state = run_on_busybox(shell, busybox_path, "job_state.sh", tmp_path, "", "ASCENDCTL_JOB=nobody/here")
    assert state.returncode == 0 and re.fullmatch(r"exit 3 \d+\npids\n", state.stdout), state.stdout
    follow = run_on_busybox(shell, busybox_path, "follow_log.sh", tmp_path, 999999, "n0nce", len("2026-11-23T10:00:00.000000 | hello "))
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


# -- the line stamper and the wrapper's wait for it (issue #30: output never slows or blocks the job) -------------
STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6} \| ")
STAMP_SIZE = len("2026-11-23T10:00:00.123456 | ")
_piece = re.search(r"^PIECE=(\d+)", script("stamp_lines.sh"), re.M)
PIECE = int(_piece.group(1)) if _piece else 65472  # bytes of a long line per stamped line (the stamper's setting)
DROP_NOTE = re.compile(rb"^ascendctl: (\d+) lines \((\d+) bytes\) dropped: output faster than the stamper$")
# the tools the POSIX stamper uses, for a node without python3 (GNU's here; busybox_path has busybox's)
FALLBACK_TOOLS = ("awk", "cat", "date", "dd", "mktemp", "rm", "sleep", "stat", "mkfifo", "mv", "wc", "sh")


@pytest.fixture(scope="module")
def no_python_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PATH with GNU tools and mawk but no python3: a node without Python, whose stamper is the POSIX one."""
    bin_dir = tmp_path_factory.mktemp("no-python-bin")
    for tool in FALLBACK_TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is not installed"
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


STAMPERS = ["python3", "dash, no python3", "busybox"]


def stamper_argv(kind: str, path: Path, no_python_path: str, busybox_path: str) -> tuple[list[str], dict[str, str]]:
    """How a node of this kind runs the stamper: sh with python3 on PATH, dash with GNU tools only, busybox's sh and tools."""
    if kind == "python3":
        return ["sh", str(path)], dict(os.environ)
    if kind == "busybox":
        return [shutil.which("busybox") or "busybox", "sh", str(path)], {"PATH": busybox_path}
    return [shutil.which("dash") or "dash", str(path)], {"PATH": no_python_path}


def expected_bodies(data: bytes) -> list[bytes]:
    """What the stamper writes after each stamp: every line, a long one in pieces of at most PIECE bytes."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line[i:i + PIECE] for line in lines for i in range(0, max(len(line), 1), PIECE)]


@pytest.mark.parametrize("kind", STAMPERS)
def test_stamp_lines_stamps_each_line_cuts_long_ones_into_pieces_and_keeps_an_unterminated_last_line(
        kind: str, tmp_path: Path, no_python_path: str, busybox_path: str) -> None:
    path = tmp_path / "stamp_lines.sh"
    path.write_text(script("stamp_lines.sh"))
    argv, env = stamper_argv(kind, path, no_python_path, busybox_path)
    data = (b"a\n\nnot utf-8: \xff\xfe | tab\there\n" + b"y" * (3 * PIECE + 5) + b"\n" + b"w" * PIECE + b"\n"
            + b"z" * 70_000)  # the last line has no newline
    out = subprocess.run(argv, input=data, capture_output=True, env=env, check=True, timeout=60).stdout
    lines = out.split(b"\n")
    assert lines.pop() == b""  # the unterminated last line was stamped and ended
    assert all(STAMP.match(line) and len(line) <= STAMP_SIZE + PIECE for line in lines), [line[:60] for line in lines]
    assert [line[STAMP_SIZE:] for line in lines] == expected_bodies(data)
    if kind == "busybox":  # busybox's date has no %N: whole seconds
        assert all(line[20:26] == b"000000" for line in lines)


def test_stamp_lines_pieces_fit_the_bound_ascendctl_reads_lines_with() -> None:
    from ascendctl.models import MAX_LINE

    assert _piece is not None, "stamp_lines.sh sets no PIECE"
    assert STAMP_SIZE + PIECE <= MAX_LINE  # a stamped piece is never cut again on the controller


@pytest.mark.parametrize("kind", STAMPERS)
def test_stamp_lines_ignores_stop_signals_and_ends_at_end_of_input(kind: str, tmp_path: Path, no_python_path: str,
                                                                 busybox_path: str) -> None:
    path = tmp_path / "stamp_lines.sh"
    path.write_text(script("stamp_lines.sh"))
    argv, env = stamper_argv(kind, path, no_python_path, busybox_path)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"before\n")
        proc.stdin.flush()
        # stamped and written at once, not held back until more output comes (mawk's input buffer did that)
        assert select.select([proc.stdout], [], [], 10)[0], "the first line was not written within 10 s"
        assert proc.stdout.readline().endswith(b" | before\n")
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            os.killpg(proc.pid, sig)
        time.sleep(0.3)
        proc.stdin.write(b"last words\n")
        proc.stdin.close()
        rest = proc.stdout.read()
        assert proc.wait(timeout=30) == 0
        assert rest.endswith(b" | last words\n"), rest
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # it ignores TERM by design
            proc.wait()


def test_stamp_lines_never_blocks_the_writer_drops_the_oldest_and_says_how_much() -> None:
    """python3's stamper whose launcher.log cannot be written (here: a pipe nobody reads) still takes 64 MiB of output
    at once; what it could not write is counted in notes, and the newest output (a crash's last words) is kept."""
    lines = [f"line {i:07d} {'.' * 50}\n".encode() for i in range(1_000_000)]  # 64 MB
    proc = subprocess.Popen(["sh", "-c", script("stamp_lines.sh"), "stamp_lines.sh"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    started = time.monotonic()
    proc.stdin.write(b"".join(lines))  # nobody reads the stamper's output meanwhile
    proc.stdin.write(b"Traceback: the last words\n")
    proc.stdin.close()
    took = time.monotonic() - started
    out = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert took < 10, f"the writer was held {took:.1f} s"
    bodies = [line[STAMP_SIZE:] for line in out.split(b"\n")[:-1]]
    notes = [m for m in map(DROP_NOTE.match, bodies) if m is not None]
    assert notes, "64 MiB into a stamper that cannot write: something must have been dropped"
    dropped_lines = sum(int(m.group(1)) for m in notes)
    kept = [body for body in bodies if DROP_NOTE.match(body) is None]
    assert bodies[-1] == b"Traceback: the last words"
    # every line is either kept (whole, or the end of one cut by a drop) or counted; at most one more per note
    assert 1_000_001 <= len(kept) + dropped_lines <= 1_000_001 + len(notes)
    assert sum(int(m.group(2)) for m in notes) <= len(b"".join(lines))


def run_wrapper(shell: str, tmp_path: Path, command: str, path: str, timeout: float = 60) -> tuple[float, str, str]:
    """job_wrapper.sh over a job directory as `ascendctl launch` unpacks it; (seconds it took, launcher.log, exit_code)."""
    (tmp_path / ".job.env").write_text("")
    (tmp_path / ".job.cmd").write_text(command + "\n")
    (tmp_path / "launcher.log").write_text("")
    for name in ("job_wrapper.sh", "stamp_lines.sh"):
        (tmp_path / name).write_text(script(name))
    argv = [*SHELLS.get(shell, [shell]), str(tmp_path / "job_wrapper.sh"), str(tmp_path)]
    argv[0] = shutil.which(argv[0]) or argv[0]
    started = time.monotonic()
    subprocess.run(argv, env={"PATH": path}, timeout=timeout, check=True)
    return time.monotonic() - started, (tmp_path / "launcher.log").read_text(), (tmp_path / "exit_code").read_text()


@pytest.mark.parametrize("shell", [*SHELLS, "sh"])
def test_the_wrapper_waits_for_the_stamper_while_the_log_grows(shell: str, busybox_path: str, tmp_path: Path) -> None:
    """A launcher that exits while a process it started still prints (for 7 s, a line a second): the exit status is
    recorded once the log holds every line (before: after 5 s, whatever the log held)."""
    path = busybox_path if shell != "sh" else os.environ["PATH"]
    command = "sh -c 'echo start; ( i=0; while [ $i -lt 7 ]; do sleep 1; i=$((i + 1)); echo late $i; done ) & exit 4'"
    took, log, code = run_wrapper(shell, tmp_path, command, path)
    assert code == "4\n"
    assert [line.split(" | ", 1)[1] for line in log.splitlines()] == ["start", *(f"late {i}" for i in range(1, 8))], log
    assert 6 <= took < 20, took


@pytest.mark.parametrize("shell", [*SHELLS, "sh"])
def test_the_wrapper_stops_waiting_for_a_stamper_that_makes_no_progress_and_says_so(shell: str, busybox_path: str,
                                                                                   tmp_path: Path) -> None:
    """A silent orphan (a child of the launcher that keeps its output open) would keep the stamper, and the wrapper,
    forever: after 5 s without progress the exit status is recorded, and the log says why it may be incomplete."""
    path = busybox_path if shell != "sh" else os.environ["PATH"]
    command = f"sh -c 'echo start; sleep 60 & echo $! > {tmp_path}/orphan; exit 3'"
    try:
        took, log, code = run_wrapper(shell, tmp_path, command, path)
    finally:
        os.kill(int((tmp_path / "orphan").read_text()), signal.SIGKILL)
    assert code == "3\n"
    assert 4.5 <= took < 15, took
    lines = log.splitlines()
    assert lines[0].endswith(" | start") and len(lines) == 2, log
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6} \| ascendctl: the launcher exited with status 3; stopped "
                        r"waiting for the rest of its output \(for 5 s nothing more was written\): a process it started "
                        r"still holds its output open", lines[1]), lines[1]


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
