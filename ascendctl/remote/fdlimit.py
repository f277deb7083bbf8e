"""File descriptors: how many connections this process may hold open at once.

The one place that knows the fd cost of a connection and the soft RLIMIT_NOFILE: the limit is raised to the
hard limit once, and what is left after a reserve bounds the fan-out window and the connections a NodeGroup
keeps between rounds. So 1,000 nodes under `ulimit -n 1024` are worked on, never `Too many open files`.
Must not import typer or rich.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)

# One SSH connection: its socket, plus the pipe pair paramiko makes when a channel's fileno() is selected on
# (a spawned command followed by the event loop). A local command: its three pipes.
PER_CONNECTION = 3
# Kept for everything that is not a connection: the interpreter, logs, run records, bundle files being written,
# a jump host's channels, the tar and gzip pipes of collect.
RESERVE = 64

_lock = threading.Lock()
_raised = False


def nofile_limit() -> int:
    """The soft RLIMIT_NOFILE, first raised to the hard limit (once per process); a large number where there is none."""
    global _raised
    try:
        import resource
    except ImportError:  # not a Unix: no such limit to mind
        return 1 << 20
    with _lock:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if not _raised:
            _raised = True
            if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > soft):
                wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
                    soft = wanted
                except (ValueError, OSError) as exc:  # a container may refuse; the soft limit then is the budget
                    log.debug("cannot raise RLIMIT_NOFILE %s -> %s: %s", soft, wanted, exc)
        return soft if soft != resource.RLIM_INFINITY else 1 << 20


def open_fds() -> int:
    """File descriptors this process has open now (0 where /proc or /dev/fd cannot tell)."""
    for path in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(path))
        except OSError:
            continue
    return 0


def connection_budget() -> int:
    """How many connections may be open at once, given the limit and what is already open (at least 1)."""
    free = nofile_limit() - open_fds() - RESERVE
    return max(1, free // PER_CONNECTION)

