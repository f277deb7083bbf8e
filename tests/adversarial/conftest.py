"""Fixtures for the hostile-input and fault tests of issue #13: the real test hosts of tests/cluster, reused as they are."""

from tests.cluster.conftest import _asct_session, cluster_factory  # noqa: F401  (pytest fixtures, found by name)
