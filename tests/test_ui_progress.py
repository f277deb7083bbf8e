"""The progress line of long fan-outs: on a terminal it shows done/total, failures and the slowest node still
running; in --json, CI and pipes there is none. The CLI runs in a subprocess whose stderr is a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

FLAG = "release"


def run_on_pty(tmp_path: Path, *args: str, env: dict[str, str]) -> str:
    """Run `ascendctl exec` on three local nodes (the first to start waits for a flag file) with stderr on a pty; its stderr text.

    The flag is created once the line shows two nodes done and names the slowest one, or once the two quick nodes have
    ended and the stream has been quiet for a while since (then there is no line to wait for): on a loaded machine the
    command may take seconds to start, so quiet before the quick nodes end says nothing."""
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("defaults: {transport: local}\nnodes:\n  - {host: 'n[1-3]'}\n")
    flag = tmp_path / FLAG
    # every node runs here (LocalTransport): the first to start waits for the flag, the others end at once
    script = tmp_path / "work.sh"
    script.write_text(f"#!/bin/sh\nif mkdir {tmp_path}/first 2>/dev/null; then while [ ! -e {flag} ]; do sleep 0.05; done; "
                      f"else touch {tmp_path}/quick.$$; fi\n")
    script.chmod(0o755)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ascendctl", "exec", "-i", str(inventory), "--fanout", "3", *args, "--",
                             str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                            env={**env, "COLUMNS": "120", "TERM": "xterm"})
    os.close(follower)
    seen = b""
    quiet_since = time.monotonic()
    give_up = time.monotonic() + 120
    while True:
        ready = select.select([leader], [], [], 1.0)[0]
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the pty closes with the process
                break
            if not chunk:
                break
            seen += chunk
            quiet_since = time.monotonic()
        quick_ended = len(list(tmp_path.glob("quick.*"))) >= 2
        if quick_ended and not any(tmp_path.glob("quick-seen")):
            (tmp_path / "quick-seen").touch()
            quiet_since = max(quiet_since, time.monotonic())
        # the line shows the two quick nodes done and the waiting one as the slowest; no line: quiet for 3 s after the
        # quick nodes ended; never a hang
        quiet = quick_ended and time.monotonic() - quiet_since >= 3
        if (b"2/3" in seen and b"slowest" in seen) or quiet or time.monotonic() > give_up:
            flag.touch()
        if proc.poll() is not None and not ready:
            break
    os.close(leader)
    assert proc.stdout is not None
    proc.stdout.read()
    proc.stdout.close()
    assert proc.wait() == 0
    return seen.decode(errors="replace")


def clean_env() -> dict[str, str]:
    from ascendctl.ui import CI_VARIABLES

    return {k: v for k, v in os.environ.items() if k not in ("ASCENDCTL_NO_PROGRESS", *CI_VARIABLES)}


def test_a_terminal_sees_done_total_failed_and_the_slowest_node_still_running(tmp_path: Path) -> None:
    text = run_on_pty(tmp_path, env=clean_env())
    assert "exec" in text and "2/3" in text and "0 failed" in text
    assert "slowest: n" in text


def test_json_and_ci_get_no_progress_line_even_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert "slowest" not in run_on_pty(tmp_path / "a", "--json", env=clean_env())
    assert "slowest" not in run_on_pty(tmp_path / "b", env={**clean_env(), "CI": "true"})
