"""The ``kube`` pytest fixture: an API server for a test, with a namespace and a name prefix of its own.

Without ``KUBEGPU_TEST_KUBECONFIG`` one in-process ``KubeApiServer`` serves the whole session; with it, the
cluster that kubeconfig names is used instead. Either way each test gets a fresh namespace (deleted
afterwards, its pods force-deleted first so nothing waits for a kubelet) and a prefix for the cluster-scoped
objects it creates (Nodes, PriorityClasses, Namespaces, node Leases in kube-node-lease), which are deleted
afterwards too. Tests that need
the server's fault hooks call ``kube.require_server()``, which skips on a real cluster. Registered from
tests/conftest.py through ``pytest_plugins``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod, ServiceAccount
from lightkube.resources.scheduling_v1 import PriorityClass

from tests.polling import wait_until

from .server import KubeApiServer

KUBECONFIG_ENV = "KUBEGPU_TEST_KUBECONFIG"
_RUN = uuid.uuid4().hex[:6]
_SEQ = count(1)


@dataclass
class KubeEnv:
    """One test's view of the API server."""

    kubeconfig: Path
    namespace: str
    prefix: str  # for cluster-scoped objects: Nodes, PriorityClasses, extra Namespaces
    real: bool
    server: KubeApiServer | None  # None on a real cluster
    _client: Client | None = field(default=None, repr=False)

    def name(self, suffix: str) -> str:
        """A cluster-scoped name unique to this test (a Node, PriorityClass or Namespace so named is deleted after)."""
        return f"{self.prefix}{suffix}"

    @property
    def config(self) -> KubeConfig:
        return KubeConfig.from_file(self.kubeconfig)

    def client(self, **kwargs: Any) -> Client:
        """A sync lightkube client, default namespace = this test's namespace. Without arguments it is the test's one
        shared client (making a client costs about 0.2 s: TLS setup), closed after the test; closing it earlier is
        harmless (the next call makes a new one)."""
        if kwargs:
            return Client(config=self.config, namespace=self.namespace, **kwargs)
        if self._client is None or self._client._client._client.is_closed:
            self._client = Client(config=self.config, namespace=self.namespace)
        return self._client

    def async_client(self, **kwargs: Any) -> AsyncClient:
        """An async lightkube client, default namespace = this test's namespace (close it: ``await c.close()``)."""
        return AsyncClient(config=self.config, namespace=self.namespace, **kwargs)

    def http(self) -> Any:
        """An httpx client with the kubeconfig's server, TLS and credentials (lightkube's own), for requests lightkube
        cannot express (bookmarks, DeleteOptions bodies, raw Status bodies). Close it after use."""
        return self.client()._client._client

    def require_server(self) -> KubeApiServer:
        """The in-process server for its test hooks; skips the test on a real cluster."""
        if self.server is None:
            pytest.skip("needs the in-process API server's fault hooks (KUBEGPU_TEST_KUBECONFIG names a real cluster)")
        return self.server

    def ensure_crd(self, manifest: dict[str, Any]) -> None:
        """Install a CRD (a manifest dict) unless present, and wait until it is Established. One this session created
        is deleted at the end of the session."""
        _ensure_crd(self.client(), manifest, _SESSION_CRDS)


_SESSION_CRDS: list[str] = []


def _ensure_crd(client: Client, manifest: dict[str, Any], created: list[str]) -> None:
    name = manifest["metadata"]["name"]
    try:
        client.create(CustomResourceDefinition.from_dict(manifest))
        created.append(name)
    except ApiError as error:
        if error.status.code != 409:
            raise

    def established() -> bool:
        crd = client.get(CustomResourceDefinition, name)
        conditions = (crd.status.conditions if crd.status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_until(established, within=30, what=f"CRD {name} Established")


@pytest.fixture(scope="session")
def kube_server() -> Iterator[KubeApiServer | None]:
    """The session's in-process API server, or None when KUBEGPU_TEST_KUBECONFIG names a real cluster."""
    if os.environ.get(KUBECONFIG_ENV):
        yield None
        _delete_crds(Client(config=KubeConfig.from_file(os.environ[KUBECONFIG_ENV])))
        return
    with KubeApiServer(bookmark_interval=0.5) as server:
        yield server
        _delete_crds(Client(config=KubeConfig.from_file(server.kubeconfig)))


def _delete_crds(client: Client) -> None:
    for name in _SESSION_CRDS:
        with contextlib.suppress(ApiError):
            client.delete(CustomResourceDefinition, name)
    _SESSION_CRDS.clear()


@pytest.fixture
def kube(kube_server: KubeApiServer | None) -> Iterator[KubeEnv]:
    """An API server with a fresh namespace and name prefix for this test; see ``KubeEnv``."""
    real = kube_server is None
    kubeconfig = Path(os.environ[KUBECONFIG_ENV]) if real else kube_server.kubeconfig  # type: ignore[union-attr]
    seq = next(_SEQ)
    namespace = f"kg-{_RUN}-{seq}"
    env = KubeEnv(kubeconfig, namespace, f"kg-{_RUN}-{seq}-", real, kube_server)
    client = env.client()
    client.create(Namespace.from_dict({"metadata": {"name": namespace}}))
    if real:  # pods are refused until the service-account controller has made "default"; and the namespace is
        # complete once the root CA ConfigMap is there too (it would otherwise turn up in a test's ConfigMap watch)
        wait_until(lambda: _exists(client, ServiceAccount, "default", namespace), within=30, what="default SA")
        wait_until(lambda: _exists(client, ConfigMap, "kube-root-ca.crt", namespace), within=30, what="root CA")
    if kube_server is not None:
        kube_server.faults.clear()
    try:
        yield env
    finally:
        if kube_server is not None:
            kube_server.faults.clear()
        client = env.client()  # the test may have closed the shared one
        _clean_up(client, env)
        client.close()
        env._client = None


def _exists(client: Client, res: Any, name: str, namespace: str | None = None) -> bool:
    try:
        client.get(res, name, namespace=namespace)
    except ApiError:
        return False
    return True


def _clean_up(client: Client, env: KubeEnv) -> None:
    namespaces = [env.namespace] + [
        ns.metadata.name
        for ns in client.list(Namespace)
        if ns.metadata and (ns.metadata.name or "").startswith(env.prefix)
    ]
    for namespace in namespaces:
        # Bound pods wait for a kubelet that may not exist: finish their deletion first, as a kubelet would.
        with contextlib.suppress(ApiError):
            for pod in client.list(Pod, namespace=namespace):
                with contextlib.suppress(ApiError):
                    client.delete(Pod, pod.metadata.name, namespace=namespace, grace_period=0)  # type: ignore[union-attr]
        with contextlib.suppress(ApiError):
            client.delete(Namespace, namespace)
    for lease in client.list(Lease, namespace="kube-node-lease"):  # node agents' heartbeats
        name = lease.metadata.name if lease.metadata else None
        if name and name.startswith(env.prefix):
            with contextlib.suppress(ApiError):
                client.delete(Lease, name, namespace="kube-node-lease")
    for res in (Node, PriorityClass):
        for obj in client.list(res):
            name = obj.metadata.name if obj.metadata else None
            if name and name.startswith(env.prefix):
                with contextlib.suppress(ApiError):
                    client.delete(res, name)


__all__ = ["KUBECONFIG_ENV", "KubeEnv", "kube", "kube_server"]
