"""`ascendctl stacks`: the hook launch ships, the node program, the parsers, the merge and the command, on real processes.

Every dump here is real faulthandler output from a Python process signalled in the test (py-spy is not installed
here: its JSON is built to the shape of py-spy's own `dump --json`, src/stack_trace.rs). The end-to-end test launches
a job on local nodes with a stand-in torchrun that starts real Python workers; real torchrun over SSH on test hosts is
tests/cluster/test_stacks_hosts.py.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from ascendctl.cli import app
from ascendctl.inventory.load import BUILTIN_SOURCE, builtin_inventory, load_inventory
from ascendctl.remote.scripts import remote, script
from ascendctl.stacks import (Frame, RankStack, ThreadStack, build_classes, build_tree, judge, parse_faulthandler,
                              parse_py_spy, take_stacks, wait_frame)
from ascendctl.stacks.hook import SIGNAL_NAME, SIGNAL_NUMBER, hook_source
from ascendctl.stacks.parse import parse_node_answer
from ascendctl.remote.transport.local import LocalTransport
from tests.json_schemas import assert_valid

runner = CliRunner()

WORKER = '''
import os, signal, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_collective

if os.environ.get("HANDLER") == "reset":
    signal.signal(signal.SIGWINCH, signal.SIG_DFL)
if os.environ.get("HANDLER") == "exit":  # a rank that ends as it is asked for its stack
    signal.signal(signal.SIGWINCH, lambda *_: os._exit(3))
if os.environ.get("CHILD") == "1":
    import subprocess
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def train_step(rank):
    if rank == int(os.environ.get("STUCK_RANK", "-1")):
        open(os.path.join(os.environ["READY_DIR"], str(rank)), "w").close()
        time.sleep(600)  # the stuck rank
    fake_collective.all_reduce(rank)


train_step(int(os.environ.get("RANK") or os.environ.get("RANK_ID")))
'''
FAKE_COLLECTIVE = '''
import os, time


def all_reduce(rank):
    open(os.path.join(os.environ["READY_DIR"], str(rank)), "w").close()
    time.sleep(600)
'''
PATTERNS = (r"fake_collective\.py:all_reduce$",)


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """The workers' script and its stand-in collective, and the directory where each rank says it is in place."""
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "worker.py").write_text(WORKER)
    (tmp_path / "prog" / "fake_collective.py").write_text(FAKE_COLLECTIVE)
    (tmp_path / "ready").mkdir()
    return tmp_path / "prog" / "worker.py"


def node_dir(tmp_path: Path, name: str = "n1") -> Path:
    """A node's job directory as launch leaves it: the hook in pyhook/."""
    path = tmp_path / "logs" / name
    (path / "pyhook").mkdir(parents=True, exist_ok=True)
    (path / "pyhook" / "sitecustomize.py").write_text(hook_source())
    return path


class Ranks:
    """Worker processes of a job started by hand (the job's marker, the hook on PYTHONPATH), killed at the end."""

    def __init__(self, job: str, program: Path) -> None:
        self.job, self.program = job, program
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, directory: Path | None, node: str = "n1", **env: str) -> subprocess.Popen[bytes]:
        environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RANK", "LOCAL_RANK")}
        environ.update(env, ASCENDCTL_JOB=f"{self.job}/{node}", READY_DIR=str(self.program.parent.parent / "ready"))
        if directory is not None:
            environ["PYTHONPATH"] = str(directory / "pyhook")
        proc = subprocess.Popen([sys.executable, str(self.program)], env=environ, start_new_session=True)
        self.procs.append(proc)
        return proc

    def wait_ready(self, *ranks: int, timeout: float = 30) -> None:
        ready = self.program.parent.parent / "ready"
        deadline = time.monotonic() + timeout
        while not all((ready / str(r)).exists() for r in ranks):
            assert time.monotonic() < deadline, sorted(p.name for p in ready.iterdir())
            time.sleep(0.05)

    def stop(self) -> None:
        marked = subprocess.run(["sh", "-c", f"grep -lzxF 'ASCENDCTL_JOB={self.job}/n1' /proc/[0-9]*/environ"],
                                capture_output=True, text=True).stdout.split()
        for path in marked:  # a rank's own children too
            try:
                os.kill(int(path.split("/")[2]), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        for proc in self.procs:
            proc.kill()
            proc.wait()


@pytest.fixture
def ranks(program: Path) -> Iterator[Ranks]:
    started = Ranks(f"stacks-{os.getpid()}-{secrets.token_hex(3)}", program)
    yield started
    started.stop()


def local() -> LocalTransport:
    return LocalTransport(builtin_inventory(environ={}).nodes[0])


def node_script(job: str, directory: Path, stamp: str = "20261123-101500Z", nonce: str = "n0nce", wait_ms: int = 2000,
                shell: list[str] | None = None, path: str | None = None) -> str:
    args = (f"ASCENDCTL_JOB={job}/n1", directory, stamp, SIGNAL_NAME, SIGNAL_NUMBER, wait_ms, 262144, nonce, 5000)
    if shell is None:
        command, stdin = remote("stacks_node.sh", *args)
        result = local().run(command, stdin=stdin, timeout=30)
        assert result.exit_code == 0, result.stderr
        return result.stdout
    done = subprocess.run([*shell, "-s", "--", *map(str, args)], input=script("stacks_node.sh"), capture_output=True,
                          text=True, timeout=30, env={"PATH": path or os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- the hook ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("env, registered", [
    ({"RANK": "3", "LOCAL_RANK": "1"}, "rank-3"),  # a torchrun worker
    ({"MS_ROLE": "MS_WORKER", "RANK_ID": "5", "DEVICE_ID": "1"}, "rank-5"),  # an msrun worker
    ({"MS_ROLE": "MS_WORKER", "MS_NODE_ID": "6"}, "rank-6"),
    ({}, None),  # a launcher
    ({"RANK": "3"}, None),  # RANK alone (a user's variable): not a torchrun worker
    ({"MS_ROLE": "MS_SCHED", "RANK_ID": "0"}, None),  # msrun's scheduler
    ({"RANK": "3", "LOCAL_RANK": "1", "ASCENDCTL_STACKS_PID": "1"}, None),  # a rank's own child (inherits the pid)
    ({"RANK": "3", "LOCAL_RANK": "1", "ASCENDCTL_STACKS": "0"}, None),  # turned off
])
def test_the_hook_registers_in_ranks_only_and_runs_the_sitecustomize_it_hides(tmp_path: Path, env: dict[str, str],
                                                                               registered: str | None) -> None:
    directory = node_dir(tmp_path)
    (tmp_path / "site").mkdir()  # the environment's own sitecustomize, later on the path (as in site-packages)
    (tmp_path / "site" / "sitecustomize.py").write_text("import os\nCHAINED = True\nopen(os.environ['MARK'], 'w').write(__name__)\n")
    code = ("import os, signal, sitecustomize, sys; "
            "print(sitecustomize.__file__, signal.getsignal(signal.SIGWINCH), os.environ.get('ASCENDCTL_STACKS_PID'))")
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{directory / 'pyhook'}:{tmp_path / 'site'}",
               "MARK": str(tmp_path / "mark"), **env}
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=30, check=True)
    chained, _, pid = done.stdout.split()
    assert chained == str(tmp_path / "site" / "sitecustomize.py")  # `import sitecustomize` finds the one it had
    assert (tmp_path / "mark").read_text() == "sitecustomize"
    live = sorted(p.name for p in (directory / "stacks" / "live").glob("*")) if (directory / "stacks").exists() else []
    if registered is None:
        assert live == [] and pid == env.get("ASCENDCTL_STACKS_PID", "None")
    else:
        assert live == [f"{registered}.{pid}.txt"]
        header = (directory / "stacks" / "live" / live[0]).read_text()
        assert header.startswith(f"# ascendctl-stacks rank={registered[5:]} ") and f" pid={pid} " in header


def test_the_hook_without_another_sitecustomize_and_a_broken_one_does_not_stop_the_job(tmp_path: Path) -> None:
    directory = node_dir(tmp_path)
    environ = {"PATH": os.environ["PATH"], "PYTHONPATH": str(directory / "pyhook"), "RANK": "0", "LOCAL_RANK": "0"}
    assert subprocess.run([sys.executable, "-c", "print('ok')"], env=environ, capture_output=True, text=True,
                          timeout=30).stdout == "ok\n"
    broken = node_dir(tmp_path, "n2")
    (broken / "stacks").mkdir()
    (broken / "stacks" / "live").write_text("not a directory")  # the hook cannot register: the job still starts
    environ["PYTHONPATH"] = str(broken / "pyhook")
    done = subprocess.run([sys.executable, "-c", "print('ok')"], env=environ, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


@pytest.mark.parametrize("inherited, inventory_env, expected", [
    (None, None, "/j/n 1/pyhook"),  # no trailing `:`: an empty entry would put the working directory on sys.path
    ("/site", None, "/j/n 1/pyhook:/site"),
    ("/site", "/inv", "/j/n 1/pyhook:/inv"),  # the inventory's (or --env's) PYTHONPATH comes after the hook
])
def test_the_hook_goes_first_on_the_jobs_pythonpath(inherited: str | None, inventory_env: str | None, expected: str) -> None:
    from ascendctl.jobs.environment import NodeEnvironment

    values = (("PYTHONPATH", inventory_env),) if inventory_env else ()
    environment = NodeEnvironment("n", "h", values, None, "/j/n 1/pyhook")
    environ = {"PATH": os.environ["PATH"], **({"PYTHONPATH": inherited} if inherited else {})}
    shown = subprocess.run(["sh", "-c", environment.exports() + 'printf %s "$PYTHONPATH"'], env=environ,
                           capture_output=True, text=True, check=True).stdout
    assert shown == expected
    recorded = environment.to_dict()["env"]["PYTHONPATH"]
    assert recorded == ("/j/n 1/pyhook:/inv" if inventory_env else "/j/n 1/pyhook${PYTHONPATH:+:$PYTHONPATH}")


# -- faulthandler and py-spy read back -------------------------------------------------------------------------------
DEEP = '''
import faulthandler, os, signal, sys, threading, time
faulthandler.register(signal.SIGWINCH, file=open(sys.argv[1], "a"), all_threads=True, chain=False)

def deep(n):
    return deep(n - 1) if n else time.sleep(600)

threading.Thread(target=deep, args=(150,), name="deep", daemon=True).start()

def wait_here():
    open(sys.argv[2], "w").close()
    time.sleep(600)

wait_here()
'''


def signalled_dump(tmp_path: Path, program: str) -> str:
    """Run `program`, signal it once it is in place, and return what faulthandler wrote."""
    (tmp_path / "p.py").write_text(program)
    out, ready = tmp_path / "dump.txt", tmp_path / "in-place"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "p.py"), str(out), str(ready)])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.1)
        proc.send_signal(signal.SIGWINCH)
        last = -1
        while not out.exists() or out.stat().st_size in (0, last):  # until it has grown and stopped growing
            assert time.monotonic() < deadline
            last = out.stat().st_size if out.exists() else -1
            time.sleep(0.1)
        while out.stat().st_size != last:
            last = out.stat().st_size
            time.sleep(0.1)
        return out.read_text()
    finally:
        proc.kill()
        proc.wait()


def test_a_real_faulthandler_dump_is_read_outermost_first_with_its_main_thread_and_a_truncated_deep_one(tmp_path: Path) -> None:
    text = signalled_dump(tmp_path, DEEP)
    dump = parse_faulthandler(text)
    assert len(dump.threads) == 2, text
    main = dump.main_thread
    assert main is not None and [f.function for f in main.frames] == ["<module>", "wait_here"]
    assert main.frames[-1].file == str(tmp_path / "p.py") and main.frames[-1].line == 12
    deep = next(t for t in dump.threads if t is not main)
    assert deep.truncated and len(deep.frames) == 100 and deep.frames[-1].function == "deep"  # faulthandler's limit
    assert deep.ident is not None and main.ident is not None and deep.ident != main.ident


def test_the_main_thread_is_the_one_the_hook_named_even_when_another_ran_the_handler() -> None:
    text = ("# ascendctl-stacks rank=4 local_rank=0 launcher=torchrun pid=9 main_thread=0x00007f0000000002 python=3.11.7\n"
            "Current thread 0x00007f0000000001 (most recent call first):\n"
            '  File "/t/helper.py", line 3 in loop\n'
            "\n"
            "Thread 0x00007f0000000002 (most recent call first):\n"
            '  File "/t/train.py", line 40 in step\n'
            '  File "/t/train.py", line 50 in <module>\n')
    dump = parse_faulthandler(text)
    assert dump.header["rank"] == "4" and dump.main_thread is not None
    assert dump.main_thread.ident == 0x7f0000000002 and dump.main_thread.frames[-1] == Frame("/t/train.py", 40, "step")
    assert parse_faulthandler(text.split("\n", 1)[1]).main == 1  # without the header: the thread that is not threading's


def test_py_spy_json_gives_threads_native_frames_and_the_main_thread() -> None:
    document = [
        {"pid": 7, "thread_id": 139, "thread_name": "Thread-1", "os_thread_id": 8, "active": False, "owns_gil": False,
         "frames": [{"name": "wait", "filename": "/usr/lib/python3.11/threading.py", "module": None, "short_filename": None,
                     "line": 324, "locals": None}]},
        {"pid": 7, "thread_id": 140, "thread_name": "MainThread", "os_thread_id": 7, "active": False, "owns_gil": False,
         "frames": [{"name": "gloo::transport::tcp::UnboundBuffer::waitRecv", "filename": "unbound_buffer.cc",
                     "module": "/venv/torch/lib/libtorch_cpu.so", "short_filename": None, "line": 0, "locals": None},
                    {"name": "all_reduce", "filename": "/venv/torch/distributed/distributed_c10d.py", "module": None,
                     "short_filename": "torch/distributed/distributed_c10d.py", "line": 2501, "locals": None},
                    {"name": "<module>", "filename": "/t/train.py", "module": None, "short_filename": "train.py",
                     "line": 12, "locals": None}]},
    ]
    dump = parse_py_spy(json.dumps(document))
    main = dump.main_thread
    assert main is not None and main.name == "MainThread" and main.ident == 140
    assert [(f.function, f.native, f.line) for f in main.frames] == [
        ("<module>", False, 12), ("all_reduce", False, 2501), ("gloo::transport::tcp::UnboundBuffer::waitRecv", True, None)]
    assert wait_frame(main.frames) == main.frames[1]  # the Python call, not the native frame under it
    with pytest.raises(ValueError):
        parse_py_spy('{"not": "a list"}')


# -- merge and name ------------------------------------------------------------------------------------------------
def rank_at(rank: int, node: str, *frames: tuple[str, int, str]) -> RankStack:
    thread = ThreadStack(rank, tuple(Frame(*f) for f in frames))
    return RankStack(rank, node, 1000 + rank, rank % 2, "torchrun", "dumped", "faulthandler", (thread,), thread)


C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"


def hang(stuck: int = 4, world: int = 6) -> list[RankStack]:
    waiting = (("/t/hang.py", 44, "<module>"), ("/t/hang.py", 30, "step"), (LOGGER, 83, "wrapper"), (C10D, 2501, "all_reduce"))
    sleeping = (("/t/hang.py", 44, "<module>"), ("/t/hang.py", 27, "step"))
    return [rank_at(r, f"h0{r // 2 + 1}", *(sleeping if r == stuck else waiting)) for r in range(world)]


def test_the_rank_outside_the_collective_is_the_suspect_and_the_tree_carries_rank_sets() -> None:
    ranks = hang()
    classes, verdict = judge(build_classes(ranks))
    assert verdict.kind == "suspect" and verdict.suspects == (4,)
    assert verdict.message.startswith("rank 4 on h03 is not in a collective, barrier or store wait: /t/hang.py:27 in step")
    assert "(the other 5 ranks wait in all_reduce)" in verdict.message
    assert [(c.ranks, c.suspect) for c in classes] == [((4,), True), ((0, 1, 2, 3, 5), False)]
    assert classes[1].waiting is not None and classes[1].waiting.function == "all_reduce"  # not its logging wrapper
    tree = build_tree(ranks)
    assert tree.ranks == (0, 1, 2, 3, 4, 5) and len(tree.children) == 1
    module = tree.children[0]
    assert module.frame == Frame("/t/hang.py", 44, "<module>") and module.ranks == tree.ranks
    assert [(c.frame.line if c.frame else None, c.ranks) for c in module.children] == [(30, (0, 1, 2, 3, 5)), (27, (4,))]


def test_no_suspect_when_all_ranks_are_in_one_place_all_wait_or_none_waits() -> None:
    same = [rank_at(r, "h01", ("/t/a.py", 1, "<module>"), (C10D, 2501, "all_reduce")) for r in range(4)]
    assert judge(build_classes(same))[1].kind == "same_place"
    assert "all 4 ranks wait in the same place" in judge(build_classes(same))[1].message
    mismatched = same[:2] + [rank_at(r, "h02", ("/t/a.py", 2, "<module>"), (C10D, 3000, "barrier")) for r in (2, 3)]
    assert judge(build_classes(mismatched))[1].kind == "all_waiting"
    busy = [rank_at(r, "h01", ("/t/a.py", 1 + r, "<module>")) for r in range(3)]
    verdict = judge(build_classes(busy))[1]
    assert verdict.kind == "busy" and verdict.suspects == () and "no suspect" in verdict.message
    missing = judge(build_classes(same), [("h02", (4, 5))])[1]
    assert missing.message.endswith("; ranks 4-5 did not answer (no process of the job on h02)")
    assert judge(())[1].kind == "no_stacks"


def test_the_text_tree_folds_shared_frames_and_says_where_a_rank_stops() -> None:
    from ascendctl.stacks.text import tree_lines

    ranks = hang() + [rank_at(6, "h04", ("/t/hang.py", 44, "<module>"))]  # rank 6's innermost frame is <module>
    assert tree_lines(build_tree(ranks)) == [
        "ranks 0-6",
        "  /t/hang.py:44 in <module>",
        "  (rank 6: innermost frame above)",
        "├─ ranks 0-3,5",
        "│    /t/hang.py:30 in step",
        "│    torch/distributed/c10d_logger.py:83 in wrapper",
        "│    torch/distributed/distributed_c10d.py:2501 in all_reduce",
        "└─ rank 4",
        "     /t/hang.py:27 in step",
    ]


def test_extra_wait_patterns_make_a_job_specific_call_a_wait() -> None:
    frames = (Frame("/t/a.py", 1, "<module>"), Frame("/t/mycomm.py", 9, "exchange"))
    assert wait_frame(frames) is None and wait_frame(frames, (r"mycomm\.py:exchange$",)) == frames[1]


# -- the node program ------------------------------------------------------------------------------------------------
def test_the_node_program_signals_each_rank_once_keeps_the_capture_and_never_guesses(ranks: Ranks, tmp_path: Path) -> None:
    directory = node_dir(tmp_path)
    for rank in (0, 2):
        ranks.start(directory, RANK=str(rank), LOCAL_RANK=str(rank), STUCK_RANK="2", CHILD="1" if rank == 0 else "0")
    ranks.start(directory, MS_ROLE="MS_WORKER", RANK_ID="3", DEVICE_ID="1")  # an msrun worker
    nohook = ranks.start(None, RANK="4", LOCAL_RANK="0")  # no hook on its path: never signalled
    reset = ranks.start(directory, RANK="5", LOCAL_RANK="1", HANDLER="reset")  # its handler gone
    helper = subprocess.Popen(["sleep", "600"], env={**os.environ, "ASCENDCTL_JOB": f"{ranks.job}/n1", "MS_ROLE": "MS_WORKER",
                                                     "RANK_ID": "6", "DEVICE_ID": "0"})  # as msrun's `tail -f` of a log
    ranks.procs.append(helper)
    ranks.wait_ready(0, 2, 3, 4, 5)
    answer = parse_node_answer(node_script(ranks.job, directory), "n0nce")
    got = {r.rank: (r.pid, r.local_rank, r.launcher, r.status, [f.kind for f in r.files]) for r in answer.ranks}
    pids = {int(p.read_text().split(" pid=")[1].split()[0]): p for p in (directory / "stacks" / "live").glob("*.txt")}
    assert got[0][1:] == (0, "torchrun", "dumped", ["faulthandler"]) and got[2][1:] == (2, "torchrun", "dumped", ["faulthandler"])
    assert got[3][1:] == (1, "msrun", "dumped", ["faulthandler"])
    assert got[4] == (nohook.pid, 0, "torchrun", "nohook", []) and got[5] == (reset.pid, 1, "torchrun", "nohandler", [])
    assert sorted(got) == [0, 2, 3, 4, 5]  # rank 0's child process (same RANK) is not a rank, nor a non-Python helper
    assert {got[r][0] for r in (0, 2, 3)} <= set(pids)
    assert nohook.poll() is None and reset.poll() is None  # SIGWINCH's default is to ignore it: nobody was harmed
    incident = directory / "stacks" / "20261123-101500Z"
    assert answer.incident == str(incident) and (incident / "ranks.txt").read_text().startswith("pid rank local_rank")
    stuck = parse_faulthandler((incident / f"rank-2.{got[2][0]}.txt").read_text())
    assert stuck.main_thread is not None and stuck.main_thread.frames[-1].function == "train_step"
    waiting = parse_faulthandler((incident / f"rank-0.{got[0][0]}.txt").read_text())
    assert waiting.main_thread is not None and waiting.main_thread.frames[-1].function == "all_reduce"
    # a second capture in the same second gets a folder of its own, and only its own dump
    again = parse_node_answer(node_script(ranks.job, directory, nonce="n1nce"), "n1nce")
    assert again.incident == str(incident) + "-2"
    second = (incident.parent / (incident.name + "-2") / f"rank-0.{got[0][0]}.txt").read_text()
    assert second.count("(most recent call first)") == 1 and second.startswith("# ascendctl-stacks rank=0 ")
    assert all(proc.poll() is None for proc in ranks.procs)  # the job keeps running


from tests.test_shell_programs import SHELLS, busybox_path  # noqa: E402,F401  (a fixture: one busybox PATH)


@pytest.mark.parametrize("shell", SHELLS)
def test_the_node_program_on_a_busybox_node(shell: str, busybox_path: str, ranks: Ranks, tmp_path: Path) -> None:
    directory = node_dir(tmp_path)
    ranks.start(directory, RANK="1", LOCAL_RANK="0", STUCK_RANK="1")
    ranks.wait_ready(1)
    argv = [shutil.which(SHELLS[shell][0]) or SHELLS[shell][0], *SHELLS[shell][1:]]
    answer = parse_node_answer(node_script(ranks.job, directory, shell=argv, path=busybox_path), "n0nce")
    assert [(r.rank, r.status) for r in answer.ranks] == [(1, "dumped")]
    dump = parse_faulthandler(answer.ranks[0].files[0].text)
    assert dump.main_thread is not None and dump.main_thread.frames[-1].function == "train_step"
    assert answer.signalled is not None and answer.py_spy is False


def test_py_spy_where_the_node_has_it_adds_its_dump_and_stands_in_for_a_rank_without_the_hook(
        ranks: Ranks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in py-spy (this machine has none) answering in py-spy's --json shape; its --native is refused once."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    doc = json.dumps([{"pid": 1, "thread_id": 5, "thread_name": "MainThread", "os_thread_id": 1, "active": False,
                       "owns_gil": False, "frames": [{"name": "train_step", "filename": "/t/worker.py", "module": None,
                                                      "short_filename": None, "line": 16, "locals": None}]}])
    (bin_dir / "py-spy").write_text(f"#!/bin/sh\ncase \"$*\" in *--native*) echo 'native unwinding not supported' >&2; exit 1;; esac\n"
                                    f"echo '{doc}'\n")
    (bin_dir / "py-spy").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    directory = node_dir(tmp_path)
    ranks.start(None, RANK="0", LOCAL_RANK="0", STUCK_RANK="0")
    ranks.wait_ready(0)
    answer = parse_node_answer(node_script(ranks.job, directory), "n0nce")
    assert answer.py_spy and [(r.status, [f.kind for f in r.files]) for r in answer.ranks] == [("nohook", ["py-spy"])]
    assert parse_py_spy(answer.ranks[0].files[0].text).main_thread is not None


# -- the command, end to end on local nodes ----------------------------------------------------------------------------
FAKE_TORCHRUN = (Path(__file__).parent / "jobs" / "stand_in_torchrun.sh").read_text()  # also bench/stacks.py's


@pytest.fixture
def local_job(tmp_path: Path, program: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A detached job on three local nodes, two ranks each, rank 4 stuck outside the (stand-in) collective."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"defaults: {{transport: local, slots: 2, python: {bin_dir}/python}}\n"
                   "nodes:\n  - {name: a, host: 127.0.0.1}\n  - {name: b, host: 127.0.0.2}\n  - {name: c, host: 127.0.0.3}\n")
    monkeypatch.chdir(tmp_path)
    ready = tmp_path / "ready"
    launched = runner.invoke(app, ["launch", "-i", str(inv), "--launcher", "torchrun", "--no-preflight", "--detach",
                                   "--log-dir", str(tmp_path / "logs"), "--env", f"READY_DIR={ready}", "--env", "STUCK_RANK=4",
                                   "--json", "--", str(program)], catch_exceptions=False)
    assert launched.exit_code == 0, launched.output
    job = json.loads(launched.stdout)["job"]
    try:
        deadline = time.monotonic() + 60
        while len(list(ready.iterdir())) < 6:
            assert time.monotonic() < deadline, sorted(p.name for p in ready.iterdir())
            time.sleep(0.1)
        yield {"id": job["id"], "inventory": inv, "logs": tmp_path / "logs"}
    finally:
        stopped = runner.invoke(app, ["stop", job["id"], "--grace", "1"], catch_exceptions=False)
        assert stopped.exit_code == 0, stopped.output
        left = subprocess.run(["sh", "-c", f"grep -lzF 'ASCENDCTL_JOB={job['id']}/' /proc/[0-9]*/environ"],
                              capture_output=True, text=True).stdout
        assert left == "", left  # no process of the job is left behind


def test_stacks_of_a_launched_job_name_the_stuck_rank_and_keep_every_file(local_job: dict[str, Any]) -> None:
    result = runner.invoke(app, ["stacks", "--wait-pattern", PATTERNS[0]], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("suspect: rank 4 on c is not in a collective, barrier or store wait: "), result.stdout
    assert "worker.py:18 in train_step (the other 5 ranks wait in all_reduce)" in lines[0]
    assert lines[1].startswith(f"job {local_job['id']}: 6 of 6 rank(s) answered with a stack on 3 of 3 node(s)")
    assert f"kept on each node in {local_job['logs']}/<node>/stacks/" in lines[2]
    assert any(line.startswith("  rank 4       c") and line.endswith("[SUSPECT]") for line in lines), result.stdout
    assert any(line.startswith("  ranks 0-3,5  a-c") or line.startswith("  ranks 0-3,5  ") for line in lines)
    document = json.loads(runner.invoke(app, ["stacks", local_job["id"], "--json", "--wait-pattern", PATTERNS[0]],
                                        catch_exceptions=False).stdout)
    assert_valid("stacks", document)
    assert document["exit_code"] == 0 and document["verdict"]["suspects"] == [4]
    by_rank = {r["rank"]: r for r in document["ranks"]}
    assert sorted(by_rank) == [0, 1, 2, 3, 4, 5]
    assert [(by_rank[r]["node"], by_rank[r]["local_rank"]) for r in range(6)] == [
        ("a", 0), ("a", 1), ("b", 0), ("b", 1), ("c", 0), ("c", 1)]
    for rank in by_rank.values():  # each capture's files are kept on its node: two captures, two folders
        assert all(Path(f).is_file() for f in rank["files"]) and rank["source"] == "faulthandler"
    assert len(list((local_job["logs"] / "c" / "stacks").glob("2*"))) == 2
    # the job runs on: every rank paused once per capture and is still there
    status = runner.invoke(app, ["status", local_job["id"]], catch_exceptions=False)
    assert status.exit_code == 0 and len(re.findall(r"node rank \d +pid \d+ +running", status.stdout)) == 3, status.stdout


def test_a_node_that_cannot_be_asked_is_exit_4_and_the_others_still_answer(local_job: dict[str, Any], tmp_path: Path) -> None:
    from ascendctl.jobs.record import load_job

    record = load_job(local_job["id"])
    inv = tmp_path / "partly-down.yaml"
    inv.write_text(f"defaults: {{transport: local, slots: 2, connect_timeout: 2, connect_retries: 0}}\nnodes:\n"
                   "  - {name: a, host: 127.0.0.1}\n  - {name: b, host: 127.0.0.2}\n"
                   "  - {name: c, host: 127.0.0.3, transport: ssh, port: 1}\n")
    report = take_stacks(record, load_inventory(str(inv)), patterns=PATTERNS)
    assert int(report.exit_code) == 4
    assert [(n.node, n.error is None, n.unreachable) for n in report.nodes] == [("a", True, False), ("b", True, False),
                                                                                ("c", False, True)]
    assert [r.rank for r in report.stacked] == [0, 1, 2, 3] and report.verdict.kind == "same_place"


def test_no_such_job_is_2_and_a_job_that_is_not_running_is_1(tmp_path: Path) -> None:
    none = runner.invoke(app, ["stacks", "--json"])
    assert none.exit_code == 2 and json.loads(none.stdout)["status"] == "error"
    from ascendctl.jobs.record import JobRecord, NodeJob, save_job

    save_job(JobRecord(id="20261123-101500-abcd", launcher="torchrun", inventory=BUILTIN_SOURCE, script=["t.py"],
                       master_addr="127.0.0.1", master_port=29500, log_dir=str(tmp_path), started=time.time(),
                       nodes=(NodeJob("here", "127.0.0.1", 0, "torchrun t.py", log=f"{tmp_path}/here/launcher.log"),),
                       status="succeeded"))
    ended = runner.invoke(app, ["stacks"])
    assert ended.exit_code == 1 and "job 20261123-101500-abcd is not running (succeeded)" in ended.stderr
    bad = runner.invoke(app, ["stacks", "--wait-pattern", "("])
    assert bad.exit_code == 2 and "not a regular expression" in bad.stderr


def test_a_running_job_with_no_rank_left_is_1(tmp_path: Path) -> None:
    from ascendctl.jobs.record import JobRecord, NodeJob, save_job

    save_job(JobRecord(id="20261123-101501-abcd", launcher="torchrun", inventory=BUILTIN_SOURCE, script=["t.py"],
                       master_addr="127.0.0.1", master_port=29500, log_dir=str(tmp_path), started=time.time(),
                       nodes=(NodeJob(builtin_inventory(environ={}).nodes[0].name, "localhost", 0, "torchrun t.py",
                                      log=f"{tmp_path}/n/launcher.log", first_rank=0, workers=2),)))
    result = runner.invoke(app, ["stacks", "--json"])
    document = json.loads(result.stdout)
    assert result.exit_code == 1 and document["verdict"]["kind"] == "no_stacks", result.output
    assert "ranks 0-1 did not answer" in document["verdict"]["message"]
    assert_valid("stacks", document)


def test_the_same_hang_taken_five_times_names_the_same_suspect_every_time(local_job: dict[str, Any]) -> None:
    """Issue #27: a verdict that changes from one capture to the next is no verdict."""
    from ascendctl.jobs.record import load_job

    record = load_job(local_job["id"])
    seen = []
    for _ in range(5):
        report = take_stacks(record, patterns=PATTERNS, wait=1.0)
        seen.append((report.verdict.kind, report.verdict.suspects, [c.ranks for c in report.classes]))
    assert seen == [("suspect", (4,), [(4,), (0, 1, 2, 3, 5)])] * 5, seen
    assert len(list((local_job["logs"] / "c" / "stacks").glob("2*"))) == 5  # five folders, none overwritten


BLOCKED_IN_C = '''
import faulthandler, os, signal, sys, threading, time
faulthandler.register(signal.SIGWINCH, file=open(sys.argv[1], "a"), all_threads=True, chain=False)
THREADS = int(os.environ.get("THREADS", "0"))
stop = threading.Event()
for _ in range(THREADS):
    threading.Thread(target=stop.wait, daemon=True).start()

def read_the_pipe():
    r, w = os.pipe()
    open(sys.argv[2], "w").close()
    os.read(r, 1)  # blocked in C: no Python bytecode runs until a byte comes

read_the_pipe()
'''


def test_a_rank_blocked_in_c_still_shows_its_last_python_frame(tmp_path: Path) -> None:
    """faulthandler writes from inside the signal, in C: a rank stuck in a read (or a C extension's loop) answers."""
    dump = parse_faulthandler(signalled_dump(tmp_path, BLOCKED_IN_C))
    assert dump.main_thread is not None and dump.main_thread.frames[-1].function == "read_the_pipe"
    assert dump.main_thread.frames[-1].line == BLOCKED_IN_C.splitlines().index(
        "    os.read(r, 1)  # blocked in C: no Python bytecode runs until a byte comes") + 1


def test_a_rank_with_thousands_of_threads_gives_a_bounded_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """faulthandler stops at 100 threads of 100 frames each: the dump (and so each rank's answer) stays small. The
    main thread, the oldest, is then cut off: the rank is not judged by another thread in its place, and says why."""
    from ascendctl.stacks.parse import FileAnswer, RankAnswer, rank_stack

    monkeypatch.setenv("THREADS", "2000")
    text = signalled_dump(tmp_path, BLOCKED_IN_C)
    dump = parse_faulthandler(text)
    assert len(dump.threads) <= 101 and len(text.encode()) < 262144, (len(dump.threads), len(text))
    assert dump.main_thread is None  # every thread dumped is one `threading` started
    stack = rank_stack("n1", RankAnswer(1, 0, 0, "torchrun", "dumped", [FileAnswer("faulthandler", len(text), text)]),
                       incident=None, shown_bytes=262144)
    assert stack.main is None and "its main thread is not among the" in stack.notes[0]
    header = "# ascendctl-stacks rank=0 local_rank=0 launcher=torchrun pid=1 main_thread=0x0000000000000001 python=3.11\n"
    assert parse_faulthandler(header + text).main_thread is None  # the hook named a thread the dump does not hold


def test_a_mindspore_host_sync_is_where_a_rank_waits_for_its_collective() -> None:
    """PyNative runs ops asynchronously: a real msrun rank waiting for an AllReduce sits in Tensor.asnumpy (seen on the
    test hosts, tests/cluster/test_stacks_hosts.py); a host-side tensor method that does not sync is no wait."""
    site = "/venv/lib/python3.11/site-packages/mindspore"
    assert wait_frame([Frame("/job/train.py", 34, "<module>"), Frame(f"{site}/common/tensor.py", 1090, "asnumpy")])
    assert wait_frame([Frame("/job/train.py", 9, "step"), Frame(f"{site}/runtime/stream.py", 280, "synchronize")])
    assert wait_frame([Frame("/job/train.py", 9, "step"), Frame(f"{site}/common/tensor.py", 700, "shape")]) is None


def test_a_rank_that_exits_while_being_dumped_is_named_so_and_the_capture_ends_in_time(ranks: Ranks, tmp_path: Path) -> None:
    directory = node_dir(tmp_path)
    ranks.start(directory, RANK="0", LOCAL_RANK="0", STUCK_RANK="0")
    gone = ranks.start(directory, RANK="1", LOCAL_RANK="1", HANDLER="exit")
    ranks.wait_ready(0, 1)
    started = time.monotonic()
    answer = parse_node_answer(node_script(ranks.job, directory, wait_ms=2000), "n0nce")
    took = time.monotonic() - started
    got = {r.rank: (r.status, [f.kind for f in r.files]) for r in answer.ranks}
    assert got == {0: ("dumped", ["faulthandler"]), 1: ("exited", [])}, got
    assert gone.wait(5) == 3 and took < 30  # bounded by the node's wait, not by the rank that is gone
