"""The Node side of the agent on the API: registration, node status and the node Lease.

Owns the three things a kubelet keeps up for its Node: registering it
(create; when it already exists, get it and re-apply our labels, as a
restarted kubelet does), reporting its status (every
``--node-status-update-frequency`` the status is computed; it is sent when it
changed, or at least every ``--node-status-report-frequency``; a change of the
emulator's devices asks for an update at once) and renewing the
``kube-node-lease`` Lease every quarter of its duration (create when missing;
update with the resourceVersion read, so a conflicting writer is noticed and
the Lease re-read). Failed calls are logged and retried with a capped backoff;
nothing here ends the daemon. Must not decide what the status says
(:mod:`nodeobject`, :mod:`lease` do).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient, codecs
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node as NodeResource
from lightkube.types import PatchType

from kubegpu.kubelet.agent import lease, nodeobject
from kubegpu.kubelet.agent.config import NODE_LEASE_NAMESPACE, AgentConfig
from kubegpu.kubelet.node import Node

log = logging.getLogger(__name__)

#: The kubelet's registration/lease retry: start at 200 ms, double, cap at 7 s.
RETRY_START_S = 0.2
RETRY_CAP_S = 7.0

#: Errors that mean "the API did not answer as hoped"; anything else is a bug and propagates.
API_ERRORS = (ApiError, httpx2.HTTPError, OSError)


class NodeSync:
    def __init__(
        self,
        client: AsyncClient,
        node: Node,
        config: AgentConfig,
        node_info: dict[str, str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.node = node
        self.config = config
        self.node_info = node_info
        self._clock = clock
        self.uid: str | None = None
        self.registered = asyncio.Event()
        self._conditions: object = None
        self._last_sent: dict[str, object] | None = None
        self._last_sent_at = 0.0
        self._wake = asyncio.Event()
        self._gpu_devices: str | None = None
        #: Status updates sent and lease renewals made (the agent's status report shows them).
        self.status_updates = 0
        self.lease_renewals = 0

    def request_update(self) -> None:
        """The emulator's devices changed: send the node status now rather than at the next tick."""
        self._wake.set()

    # ----- registration ----------------------------------------------------------------------

    async def register(self) -> None:
        """Create the Node (or adopt the existing one); retries until the API answers."""
        delay = RETRY_START_S
        name = self.config.node_name
        while True:
            try:
                existing = await self._create_or_get()
                break
            except API_ERRORS as exc:
                log.warning(
                    "unable to register node with API server", extra={"node": name, "error": describe_error(exc)}
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_CAP_S)
            except Exception:
                log.exception("node registration failed", extra={"node": name})
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_CAP_S)
        meta = existing.get("metadata") or {}
        self.uid = meta.get("uid")
        self._conditions = (existing.get("status") or {}).get("conditions")
        self.registered.set()
        log.info("node registered", extra={"node": name, "uid": self.uid})

    async def _create_or_get(self) -> dict[str, Any]:
        manifest = nodeobject.node_manifest(self.config)
        try:
            created = await self.client.create(codecs.from_dict(manifest))
            return as_dict(created)
        except ApiError as exc:
            if exc.status.code != 409:
                raise
        existing = as_dict(await self.client.get(NodeResource, self.config.node_name))
        patch = nodeobject.registration_patch(self.config, existing)
        if patch is not None:
            patched = await self.client.patch(NodeResource, self.config.node_name, patch, patch_type=PatchType.MERGE)
            existing = as_dict(patched)
        log.info("node already registered; adopted it", extra={"node": self.config.node_name})
        return existing

    # ----- status ----------------------------------------------------------------------------

    async def update_status(self) -> bool:
        """Send the status when it changed or the report frequency passed; True when sent."""
        self.node.manager.sweep()
        resources = self.node.manager.resource_status()
        gpu_devices = nodeobject.gpu_devices(resources)
        if gpu_devices != self._gpu_devices:
            patch = {"metadata": {"annotations": {nodeobject.GPU_DEVICES_ANNOTATION: gpu_devices or None}}}
            await self.client.patch(NodeResource, self.config.node_name, patch, patch_type=PatchType.MERGE)
            self._gpu_devices = gpu_devices
        devices = nodeobject.device_counts(resources)
        status = nodeobject.node_status(self.config, devices, self._conditions, self.node_info, self._clock())
        now = self._clock()
        unchanged = self._last_sent is not None and nodeobject.without_heartbeats(
            status
        ) == nodeobject.without_heartbeats(self._last_sent)
        if unchanged and now - self._last_sent_at < self.config.status_report_frequency:
            return False
        await self.client.patch(
            NodeResource.Status, self.config.node_name, {"status": status}, patch_type=PatchType.MERGE
        )
        self._last_sent, self._last_sent_at = status, now
        self._conditions = status["conditions"]
        self.status_updates += 1
        log.info(
            "node status updated",
            extra={"node": self.config.node_name, "allocatable": status["allocatable"]},
        )
        return True

    async def status_loop(self) -> None:
        """Keep the node status up (:meth:`update_status`), at once when :meth:`request_update` asks."""

        async def pause(seconds: float) -> None:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), seconds)

        await self._repeat(
            self.update_status,
            self.config.status_update_frequency,
            pause,
            warning="error updating node status",
            failure="node status update failed",
        )

    # ----- lease -----------------------------------------------------------------------------

    async def renew_lease(self) -> None:
        name, duration = self.config.node_name, self.config.lease_duration
        try:
            current = as_dict(await self.client.get(Lease, name, namespace=NODE_LEASE_NAMESPACE))
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            body = lease.lease_manifest(name, self.uid, duration, self._clock())
            await self.client.create(codecs.from_dict(body))
        else:
            body = lease.renewed(current, name, self.uid, duration, self._clock())
            await self.client.replace(codecs.from_dict(body))
        self.lease_renewals += 1

    async def lease_loop(self) -> None:
        """Renew the node Lease every ``lease_renew_interval``; a 409 (someone else wrote the Lease since we read
        it) is retried like any failure, and the next try reads it afresh."""
        await self._repeat(
            self.renew_lease,
            self.config.lease_renew_interval,
            asyncio.sleep,
            warning="failed to update lease",
            failure="lease renewal failed",
        )

    # ----- the loops' one retry ----------------------------------------------------------

    async def _repeat(
        self,
        step: Callable[[], Awaitable[object]],
        interval: float,
        pause: Callable[[float], Awaitable[None]],
        *,
        warning: str,
        failure: str,
    ) -> None:
        """Once the Node is registered, run ``step`` forever: ``interval`` after a success, the capped backoff
        (200 ms doubling to 7 s, back to 200 ms after a success) after a failure; ``pause`` does the waiting.

        An API failure is logged as ``warning`` with the error; anything else (a bug) as ``failure`` with its
        traceback, and retried the same way, so nothing here ends the daemon.
        """
        await self.registered.wait()
        delay = RETRY_START_S
        while True:
            try:
                await step()
                delay = RETRY_START_S
                wait = interval
            except API_ERRORS as exc:
                log.warning(warning, extra={"node": self.config.node_name, "error": describe_error(exc)})
                wait, delay = delay, min(delay * 2, RETRY_CAP_S)
            except Exception:
                log.exception(failure, extra={"node": self.config.node_name})
                wait, delay = delay, min(delay * 2, RETRY_CAP_S)
            await pause(wait)


def as_dict(obj: Any) -> dict[str, Any]:
    """A lightkube object as the plain dict the pure modules read."""
    out: dict[str, Any] = obj.to_dict()
    return out


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return f"{exc.status.code} {exc.status.reason}: {exc.status.message}"
    return f"{type(exc).__name__}: {exc}"
