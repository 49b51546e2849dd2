"""Where ``kubegpu labels`` puts its labels: the NFD feature file, stdout, or the NodeFeature object.

Owns the two outputs GFD has (its ``lm.Outputer``): :class:`FeatureFile` writes ``key=value`` lines atomically
(``""`` or ``-``: stdout) and removes the file on exit; :class:`NodeFeatureApi` creates the object
:mod:`.nodefeature` describes or, when it exists and differs, updates it with the resourceVersion it read
(a write that meets a 409 — the object changed in between, or was created by a racing writer — reads it again and
retries once, client-go's RetryOnConflict). The owner references are resolved once, from the labelling pod
(``--pod-name``): a pod that cannot be read is a warning and no owners, as in GFD. Raises :class:`OutputError`
with one line naming the object or file; must not compute labels.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kubegpu.deviceplugin import atomicfile
from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.gfd import labels as labels_
from kubegpu.deviceplugin.gfd import nodefeature

log = logging.getLogger(__name__)

#: Who the API server records as the writer of the NodeFeature object.
FIELD_MANAGER = "kubegpu-gfd"


class OutputError(DevicePluginError):
    """The labels could not be written (a file, or the API); the message names what and why."""


class Output(Protocol):
    """One place labels go (GFD's ``Outputer``)."""

    def write(self, values: Mapping[str, str]) -> None: ...

    def close(self, *, remove: bool) -> None:
        """Release what :meth:`write` held; ``remove``: take the labels away too (where that means anything)."""


def is_stdout(path: str) -> bool:
    """GFD writes to stdout for an empty ``--output-file``; kubegpu also for ``-``."""
    return path in ("", "-")


class FeatureFile:
    """The NFD feature file (``--output-file``), or stdout."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, values: Mapping[str, str]) -> None:
        text = labels_.feature_file(values)
        if is_stdout(self.path):
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        try:
            atomicfile.write(Path(self.path), text)
        except OSError as exc:
            raise OutputError(f"cannot write {self.path}: {exc.strerror}") from None
        log.info("labels written", extra={"file": self.path, "labels": len(values)})

    def close(self, *, remove: bool) -> None:
        if remove and not is_stdout(self.path):
            with contextlib.suppress(FileNotFoundError):
                Path(self.path).unlink()


class NodeFeatureApi:
    """The ``NodeFeature`` object of one node, written through the Kubernetes API.

    Parameters:
        node: the node the object describes (``--node-name``).
        namespace: where the object lives (``--namespace``).
        pod_name: the labelling pod, for the owner references; empty: none.
        kubeconfig: ``--kubeconfig``; None: ``$KUBECONFIG``, else the in-cluster service account.
    """

    def __init__(self, node: str, namespace: str, pod_name: str = "", kubeconfig: str | None = None) -> None:
        self.node = node
        self.namespace = namespace
        self.pod_name = pod_name
        self.kubeconfig = kubeconfig
        self.name = nodefeature.object_name(node)
        self.writes = 0
        self._client: Any = None
        self._resource: Any = None
        self._owners: list[dict[str, Any]] | None = None

    def _connect(self) -> Any:
        if self._client is None:
            # Imported here: the API client costs start time a feature-file run does not need.
            import lightkube
            from lightkube.generic_resource import create_namespaced_resource

            from kubegpu import kubeconfig

            try:
                config = kubeconfig.load(self.kubeconfig)
            except kubeconfig.KubeconfigError as exc:
                raise OutputError(str(exc)) from None
            logging.getLogger("httpx2").setLevel(logging.WARNING)
            self._client = lightkube.Client(config=config, namespace=self.namespace, field_manager=FIELD_MANAGER)
            self._resource = create_namespaced_resource(
                nodefeature.GROUP, nodefeature.VERSION, nodefeature.KIND, nodefeature.PLURAL
            )
        return self._client

    def _owner_refs(self, client: Any) -> list[dict[str, Any]]:
        if self._owners is None:
            self._owners = []
            if self.pod_name:
                import httpx2
                from lightkube import ApiError
                from lightkube.resources.core_v1 import Pod

                try:
                    pod = client.get(Pod, self.pod_name, namespace=self.namespace)
                    self._owners = nodefeature.owners(pod.to_dict())
                except (ApiError, httpx2.HTTPError, OSError, ValueError) as exc:
                    log.warning(
                        "cannot resolve the owner references; writing the NodeFeature object without them",
                        extra={"pod": f"{self.namespace}/{self.pod_name}", "error": _why(exc)},
                    )
        return self._owners

    def write(self, values: Mapping[str, str]) -> None:
        import httpx2
        from lightkube import ApiError

        client = self._connect()
        owners = self._owner_refs(client)
        where = f"NodeFeature {self.namespace}/{self.name}"
        for attempt in (1, 2):
            try:
                self._write_once(client, values, owners)
                return
            except ApiError as exc:
                if exc.status.code == 409 and attempt == 1:
                    log.info("NodeFeature object changed while writing it; reading it again", extra={"object": where})
                    continue
                hint = ""
                if exc.status.code == 404:
                    hint = f" (is NFD's NodeFeature CRD installed, and does namespace {self.namespace} exist?)"
                raise OutputError(f"cannot write {where}: {_why(exc)}{hint}") from None
            except (httpx2.HTTPError, OSError, ValueError) as exc:  # the server away, or a reply that is no object
                raise OutputError(f"cannot write {where}: {_why(exc)}") from None

    def _write_once(self, client: Any, values: Mapping[str, str], owners: list[dict[str, Any]]) -> None:
        from lightkube import ApiError

        resource = self._resource
        try:
            existing = client.get(resource, self.name, namespace=self.namespace).to_dict()
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            body = nodefeature.new_object(self.node, self.namespace, values, owners)
            client.create(resource.from_dict(body), namespace=self.namespace)
            self.writes += 1
            log.info("NodeFeature object created", extra={"object": self.name, "labels": len(values)})
            return
        wanted = nodefeature.updated(existing, self.node, values, owners)
        if not nodefeature.changed(existing, wanted):
            log.info("no changes in the NodeFeature object", extra={"object": self.name})
            return
        client.replace(resource.from_dict(wanted), namespace=self.namespace)
        self.writes += 1
        log.info("NodeFeature object updated", extra={"object": self.name, "labels": len(values)})

    def close(self, *, remove: bool) -> None:
        # GFD leaves the object in place on exit: it is the node's current description until the next writer
        # (or the DaemonSet's deletion, through the owner references) replaces it.
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


def _why(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    if status is not None and getattr(status, "code", None):
        return f"{status.code} {status.reason or ''}: {status.message or ''}".strip(": ")
    return " ".join(str(exc).split()) or type(exc).__name__
