"""Real-host fixtures for the adversarial tests: the same hosts as tests/cluster (see its README)."""

from tests.cluster.conftest import _asct_session, cluster_factory  # noqa: F401  (pytest fixtures, re-exported)
