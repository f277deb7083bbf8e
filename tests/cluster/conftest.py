"""Fixtures for tests that run against real (namespace) hosts; see README.md here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import Cluster, HostSpec, build_cluster, cleanup_leftovers, require_root_linux, teardown_on_signals


@pytest.fixture(scope="session", autouse=True)
def _asct_session() -> Iterator[None]:
    # Fail loudly (not skip) when the machine cannot run these tests.
    require_root_linux()
    cleanup_leftovers()
    teardown_on_signals()  # a pytest ended by SIGTERM/SIGHUP still removes its hosts
    yield
    cleanup_leftovers()


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``cluster_factory(specs_or_n, **build_cluster_kwargs) -> Cluster``.

    Every cluster built through the factory is torn down at the end of the test, also when
    the test fails. Work dirs (keys, configs, sshd/chronyd logs) stay under tmp_path.
    """
    built: list[Cluster] = []

    def factory(specs: list[HostSpec] | int, **kw: Any) -> Cluster:
        kw.setdefault("workdir", tmp_path / f"cluster{len(built) + 1}")
        c = build_cluster(specs, **kw)
        built.append(c)
        return c

    yield factory

    errors: list[Exception] = []
    for c in reversed(built):
        try:
            c.teardown()
        except Exception as e:  # keep tearing down the others
            errors.append(e)
    if errors:
        raise errors[0]
