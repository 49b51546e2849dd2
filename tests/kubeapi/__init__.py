"""An in-process Kubernetes API server for tests and benchmarks, with the semantics kubegpu's scheduler and node
agent rely on (see README "Testing against an API server").

``KubeApiServer`` is the server (a context manager); ``tests.kubeapi.fixture`` provides the pytest fixture
``kube`` that uses it, or a real cluster when ``KUBEGPU_TEST_KUBECONFIG`` is set. This package is test
infrastructure: nothing under ``src/`` may import it.
"""

from .server import KubeApiServer, write_kubeconfig

__all__ = ["KubeApiServer", "write_kubeconfig"]
