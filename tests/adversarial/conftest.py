"""The real test hosts of tests/cluster (network namespaces with real sshd and chronyd) for the fault tests here.

Importing the fixtures registers them for this folder; see tests/cluster/README.md for the harness.
"""

from tests.cluster.conftest import _asct_session, cluster_factory  # noqa: F401  (fixtures, registered by import)
