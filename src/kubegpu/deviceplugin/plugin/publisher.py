"""The Node writer: keeps the plugin's GPU description on its Node object.

Owns the one task that writes the ``kubegpu.io/gpus`` and ``kubegpu.io/gpu-devices`` annotations
(:mod:`kubegpu.deviceplugin.rm.nodegpus` builds them) with a JSON merge patch of ``metadata.annotations``
— no other field of the Node is touched, so it needs only ``patch`` on ``nodes`` — and the retrying:
updates coalesce (only the newest description is written, at once), an unchanged description is
written again only every :data:`RESYNC_S`, a failed write (Node not there yet, API server away, RBAC)
is logged once per distinct error and retried every :data:`RETRY_S`. Never raises into the plugin: a
daemon does not die because the API is away. Must not build the description or hold health policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from kubegpu import kubeconfig as kubeconfig_
from kubegpu.common.tasks import BackgroundTask
from kubegpu.kubeconfig import KubeconfigError

log = logging.getLogger(__name__)

__all__ = ["FIELD_MANAGER", "RESYNC_S", "RETRY_S", "KubeconfigError", "NodePublisher", "connect"]

#: Seconds between attempts while a write fails.
RETRY_S = 1.0
#: Seconds after which an unchanged description is written again: a Node deleted and registered again, or an
#: annotation removed by hand, gets it back (like GPU feature discovery's relabel period; an unchanged patch is a
#: no-op for the API server).
RESYNC_S = 60.0
#: Who the API server records as the writer.
FIELD_MANAGER = "kubegpu-plugin"


class NodePublisher:
    """Writes the newest annotations given to :meth:`update` on Node ``node_name``; start, then stop.

    ``client`` is closed by :meth:`stop`.
    """

    def __init__(self, node_name: str, client: AsyncClient) -> None:
        self.node_name = node_name
        self.client = client
        self.writes = 0
        self._wanted: dict[str, str | None] | None = None
        self._written: dict[str, str | None] | None = None
        self._wake = asyncio.Event()
        self._task = BackgroundTask("node-publisher", self._run)
        self._last_error: str | None = None

    def update(self, annotations: dict[str, str | None]) -> None:
        """Make ``annotations`` the ones to write (a newer call before the write replaces them)."""
        self._wanted = dict(annotations)
        self._wake.set()

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()
        with contextlib.suppress(Exception):
            await self.client.close()

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), RESYNC_S)
            except TimeoutError:
                self._written = None  # write the same description again
            self._wake.clear()
            wanted = self._wanted
            if wanted is None or wanted == self._written:
                continue
            try:
                await self.client.patch(
                    Node,
                    self.node_name,
                    {"metadata": {"annotations": wanted}},
                    patch_type=PatchType.MERGE,
                    field_manager=FIELD_MANAGER,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # ApiError, a connection error: the API being away must not stop the plugin
                self._failed(exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), RETRY_S)
                self._wake.set()
                continue
            self._written = wanted
            self.writes += 1
            if self._last_error is not None:
                log.info("node annotations written again", extra={"node": self.node_name})
                self._last_error = None
            else:
                # The first write is news; later ones follow health transitions the monitor already logs.
                level = logging.INFO if self.writes == 1 else logging.DEBUG
                log.log(level, "node annotations written", extra={"node": self.node_name, "writes": self.writes})

    def _failed(self, exc: Exception) -> None:
        if isinstance(exc, ApiError):
            text = f"{exc.status.code} {exc.status.reason}: {exc.status.message}"
        else:
            text = f"{type(exc).__name__}: {exc}"
        if text != self._last_error:
            log.warning(
                "cannot write the node annotations",
                extra={"node": self.node_name, "error": text, "retry_s": RETRY_S},
            )
            self._last_error = text


def connect(node_name: str, kubeconfig: str | None) -> NodePublisher:
    """A publisher for ``node_name`` on the cluster of ``kubeconfig`` (None: ``$KUBECONFIG`` or in-cluster).

    Raises :class:`kubegpu.kubeconfig.KubeconfigError` when no kubeconfig can be loaded.
    """
    return NodePublisher(node_name, kubeconfig_.client(kubeconfig))
