"""The exporter's Kubernetes API client: this node's pods (UID, labels) and the counters ConfigMap.

Owns the only API traffic of ``kubegpu exporter``: a list+watch of the Pods with ``fieldSelector
spec.nodeName=<node>`` (all namespaces) into a cache of :class:`~kubegpu.monitoring.podmeta.PodMeta`, so a
collection reads pod UIDs and labels from memory and never waits on the API; a ``GET`` of a pod the
kubelet lists but the cache lacks (the watch may lag, or the node name may not be the one we guessed),
in the background, and the ``-m NAMESPACE:NAME`` ConfigMap read (key ``metrics``, as dcgm-exporter).
Every API failure is logged once per distinct error and retried; none is raised into a collection.
Must not decide which labels are kept or how they are spelled (:mod:`kubegpu.monitoring.podmeta`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Sequence
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import ConfigMap, Pod

from kubegpu import kubeconfig
from kubegpu.monitoring.errors import MonitoringError
from kubegpu.monitoring.podmeta import PodMeta, from_pod

log = logging.getLogger(__name__)

#: Seconds between attempts while the list or watch fails.
RETRY_S = 1.0
#: A pod the API said does not exist is asked for again after this long.
MISSING_RETRY_S = 30.0
#: The key of the counters CSV in the ConfigMap ``-m`` names (dcgm-exporter's).
CONFIGMAP_KEY = "metrics"
#: Longest wait for the ConfigMap (dcgm-exporter's connection timeout is 10 s).
CONFIGMAP_TIMEOUT_S = 10.0

Key = tuple[str, str]  # (namespace, name)


class ConfigMapUnavailable(MonitoringError):
    """The counters ConfigMap cannot be read or has no ``metrics`` key; the message names it."""


KubeconfigError = kubeconfig.KubeconfigError


def check_config(path: str | None) -> None:
    """Load the cluster configuration of :func:`connect` now; raises :class:`KubeconfigError` (one line)."""
    kubeconfig.load(path)


def connect(path: str | None) -> AsyncClient:
    """A client for ``--kubeconfig`` (None: ``$KUBECONFIG``, in-cluster, ``~/.kube/config``).

    Raises :class:`kubegpu.kubeconfig.KubeconfigError` (one line) when none can be loaded.
    """
    return kubeconfig.client(path)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return f"{exc.status.code} {exc.status.reason or ''}: {exc.status.message or exc}".strip()
    return f"{type(exc).__name__}: {exc}"


async def read_configmap(client: AsyncClient, namespace: str, name: str) -> str:
    """The ``metrics`` value of ConfigMap ``namespace/name``; raises :class:`ConfigMapUnavailable`."""
    where = f"ConfigMap {namespace}:{name}"
    try:
        cm = await asyncio.wait_for(client.get(ConfigMap, name, namespace=namespace), CONFIGMAP_TIMEOUT_S)
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        raise ConfigMapUnavailable(f"{where}: no answer from the API server in {CONFIGMAP_TIMEOUT_S:g} s") from None
    except Exception as exc:  # the API away, RBAC, not found: all mean "use the file"
        raise ConfigMapUnavailable(f"{where}: cannot read it: {_describe(exc)}") from None
    data = cm.data or {}
    if CONFIGMAP_KEY not in data:
        raise ConfigMapUnavailable(f"{where}: no {CONFIGMAP_KEY!r} key")
    return str(data[CONFIGMAP_KEY])


class NodePods:
    """UID and labels of the pods of Node ``node_name``; :meth:`start`, then :meth:`stop` (closes ``client``).

    Parameters:
        node_name: this node's name (``$NODE_NAME`` from the downward API ``spec.nodeName``).
        client: the API client.
        allow: the pod-label allowlist regexes (empty: every label).
    """

    def __init__(self, node_name: str, client: AsyncClient, allow: Sequence[re.Pattern[str]] = ()) -> None:
        self.node_name = node_name
        self.client = client
        self.allow = tuple(allow)
        self.pods: dict[Key, PodMeta] = {}
        self.synced = asyncio.Event()
        self.fetches = 0
        self._version: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._fetching: dict[Key, asyncio.Task[None]] = {}
        self._missing: dict[Key, float] = {}  # key -> loop time a GET of it failed
        self._fetched: set[Key] = set()  # pods cached by a GET, not by the node's list
        self._last_error: str | None = None

    @property
    def _fields(self) -> Any:  # lightkube's list and watch spell the selector's type differently
        return {"spec.nodeName": self.node_name}

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="exporter-node-pods")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._fetching.values()) if t is not None]
        self._task = None
        self._fetching.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self.client.close()

    def lookup(self, namespace: str, name: str) -> PodMeta | None:
        """The cached metadata of a pod, or None; a miss starts a background GET of that pod."""
        key = (namespace, name)
        meta = self.pods.get(key)
        if meta is None and self._task is not None:
            self._fetch_later(key)
        return meta

    # --- the cache ------------------------------------------------------------------------------------------

    def _store(self, obj: Any) -> Key:
        namespace, name, meta = from_pod(obj.to_dict(), self.allow)
        self.pods[(namespace, name)] = meta
        self._missing.pop((namespace, name), None)
        return (namespace, name)

    async def relist(self) -> None:
        listing = self.client.list(Pod, namespace="*", fields=self._fields)
        seen: dict[Key, PodMeta] = {}
        async for pod in listing:
            namespace, name, meta = from_pod(pod.to_dict(), self.allow)
            seen[(namespace, name)] = meta
        # Pods fetched one by one (not on this node's list) stay until a watch or GET says otherwise.
        self.pods = {**{k: v for k, v in self.pods.items() if k not in seen and k in self._fetched}, **seen}
        self._version = listing.resourceVersion
        self.synced.set()

    async def _watch(self) -> None:
        async for kind, pod in self.client.watch(
            Pod, namespace="*", fields=self._fields, resource_version=self._version
        ):
            if pod.metadata is not None and pod.metadata.resourceVersion:
                self._version = pod.metadata.resourceVersion
            if kind == "DELETED":
                namespace, name, _ = from_pod(pod.to_dict())
                self.pods.pop((namespace, name), None)
            else:
                self._store(pod)

    def _log_error(self, what: str, exc: BaseException, **extra: Any) -> None:
        text = _describe(exc)
        if text != self._last_error:
            log.warning(what, extra={"node": self.node_name, "error": text, **extra})
            self._last_error = text

    async def _run(self) -> None:
        while True:
            try:
                await self.relist()
                if self._last_error is not None:
                    log.info("watching the node's pods again", extra={"node": self.node_name})
                    self._last_error = None
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API away, a 410, RBAC: relist after a pause, never die
                self._log_error("cannot watch the node's pods", exc, retry_s=RETRY_S)
                await asyncio.sleep(RETRY_S)  # the retry interval of a failing watch, not synchronisation

    def _fetch_later(self, key: Key) -> None:
        if key in self._fetching:
            return
        loop = asyncio.get_running_loop()
        missing_since = self._missing.get(key)
        if missing_since is not None and loop.time() - missing_since < MISSING_RETRY_S:
            return
        task = loop.create_task(self._fetch(key), name=f"exporter-pod-{key[0]}-{key[1]}")
        self._fetching[key] = task
        task.add_done_callback(lambda _t: self._fetching.pop(key, None))

    async def _fetch(self, key: Key) -> None:
        namespace, name = key
        self.fetches += 1
        try:
            pod = await self.client.get(Pod, name, namespace=namespace)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._missing[key] = asyncio.get_running_loop().time()
            if not (isinstance(exc, ApiError) and exc.status.code == 404):  # a pod gone is no error
                self._log_error("cannot get a pod", exc, pod=f"{namespace}/{name}")
            return
        self._fetched.add(self._store(pod))
