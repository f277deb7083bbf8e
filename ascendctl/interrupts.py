"""Stop signals as orders to tear down: the one place ascendctl installs signal handlers.

Inside `stop_on_signals()`, the first SIGINT, SIGTERM or SIGHUP raises `StopSignal` (a KeyboardInterrupt naming
the signal) in the main thread, so every Ctrl-C path (above all a job's teardown on every node) serves `timeout`,
CI cancellation, systemd and a closed terminal too. Later signals never raise: the teardown they would cut short
runs to the end (a second Ctrl-C cannot skip the SIGKILL); `on_repeat` is told instead. The CLI wraps the commands
that supervise a job in it. Must not import typer or rich.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Callable, Iterator

from ascendctl.errors import STOP_SIGNALS, StopSignal


@contextmanager
def stop_on_signals(on_repeat: Callable[[str], None] | None = None) -> Iterator[None]:
    """While inside: the first stop signal raises StopSignal, the others call `on_repeat(signal name)`."""
    if threading.current_thread() is not threading.main_thread():  # handlers can only be set in the main thread
        yield
        return
    received: list[str] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        received.append(name)
        if len(received) == 1:
            raise StopSignal(name)
        if on_repeat is not None:
            on_repeat(name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.Signals[name] for name in STOP_SIGNALS)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
