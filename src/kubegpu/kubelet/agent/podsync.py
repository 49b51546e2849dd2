"""The pod side of the agent on the API: watch the pods bound to this node and play their kubelet.

Owns the list + watch of pods with field selector ``spec.nodeName=<node>`` in
every namespace (resourceVersion kept, bookmarks asked for, ``410 Gone`` or a
lost stream answered by a fresh list, with a capped backoff), and for each pod
the kubelet's sync, one pod at a time: admit it through the emulator's
:class:`~kubegpu.kubelet.node.Node` (exactly ``kubegpu kubelet admit``), write
its runtime options annotation and its ``Running`` status; or reject it
(``Failed``, Warning Event); on a ``deletionTimestamp`` free its devices and
delete it with grace period 0; when it finishes or disappears free its
devices. A list also frees what the emulator holds for pods no longer bound
here. Nothing a pod or the API does ends the daemon. Must not build statuses
(:mod:`podstatus` does).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from lightkube import ApiError, AsyncClient, codecs
from lightkube.resources.core_v1 import Pod as PodResource
from lightkube.types import PatchType

from kubegpu.kubelet import errors
from kubegpu.kubelet.agent import podstatus
from kubegpu.kubelet.agent.config import AgentConfig
from kubegpu.kubelet.agent.nodesync import API_ERRORS, RETRY_CAP_S, RETRY_START_S, as_dict, describe_error
from kubegpu.kubelet.node import Node

log = logging.getLogger(__name__)

#: Ask the server to end each watch after this long (lightkube then re-watches from the last version).
WATCH_TIMEOUT_S = 300


class PodSync:
    def __init__(
        self, client: AsyncClient, node: Node, config: AgentConfig, clock: Callable[[], float] = time.time
    ) -> None:
        self.client = client
        self.node = node
        self.config = config
        self._clock = clock
        self.synced = asyncio.Event()
        #: Pods admitted (Running reported), rejected and whose deletion was finished since start.
        self.counts = {"running": 0, "rejected": 0, "deleted": 0}
        #: Pods whose Running status this agent wrote: later events about them (our own writes) need nothing.
        self._reported: set[str] = set()
        #: Pods whose last sync failed on an API error: (namespace, name) -> its retry task and attempts.
        self._retries: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._attempts: dict[tuple[str, str], int] = {}

    @property
    def _fields(self) -> dict[str, Any]:
        return {"spec.nodeName": self.config.node_name}

    async def run(self) -> None:
        """List and watch forever."""
        delay = RETRY_START_S
        while True:
            try:
                version = await self._list()
                self.synced.set()
                delay = RETRY_START_S
                await self._watch(version)
            except API_ERRORS as exc:
                gone = isinstance(exc, ApiError) and exc.status.code == 410
                log.log(
                    logging.INFO if gone else logging.WARNING,
                    "pod watch ended; listing again",
                    extra={"node": self.config.node_name, "error": describe_error(exc)},
                )
                if not gone:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_CAP_S)
            except Exception:
                log.exception("pod list/watch failed; listing again", extra={"node": self.config.node_name})
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_CAP_S)

    async def _list(self) -> str:
        listing = self.client.list(PodResource, namespace="*", fields=self._fields)
        seen: set[str] = set()
        pods: list[dict[str, Any]] = []
        async for obj in listing:
            pods.append(as_dict(obj))
        version = listing.resourceVersion
        for api_pod in pods:
            seen.add(podstatus.uid_of(api_pod))
            await self.sync(api_pod)
        for held in list(self.node.pods):
            if held.uid not in seen:
                await self._release(held.namespace, held.name, "no longer bound to this node")
        return version

    async def _watch(self, version: str) -> None:
        stream = self.client.watch(
            PodResource, namespace="*", fields=self._fields, resource_version=version, server_timeout=WATCH_TIMEOUT_S
        )
        async for kind, obj in stream:
            if kind == "BOOKMARK":
                continue
            api_pod = as_dict(obj)
            if kind == "DELETED":
                namespace, name = podstatus.key_of(api_pod)
                held = self.node.pods.get(podstatus.uid_of(api_pod))
                if held is not None:
                    await self._release(namespace, name, "pod deleted")
                continue
            await self.sync(api_pod)

    # ----- one pod ---------------------------------------------------------------------------

    async def sync(self, api_pod: Mapping[str, Any]) -> None:
        """The kubelet's sync of one pod; on an API error it is synced again later (capped backoff)."""
        namespace, name = podstatus.key_of(api_pod)
        uid = podstatus.uid_of(api_pod)
        held = self.node.pods.get(uid) is not None
        action = podstatus.decide(api_pod, held)
        if action is podstatus.Action.ADMIT and held and uid in self._reported:
            action = podstatus.Action.NOTHING
        try:
            if action is podstatus.Action.ADMIT:
                await self._admit(api_pod)
            elif action is podstatus.Action.FINISH_DELETION:
                if self.node.pods.get(uid) is not None:
                    await self._release(namespace, name, "deletion requested")
                await self._delete(namespace, name)
            elif action is podstatus.Action.RELEASE:
                await self._release(namespace, name, f"pod {podstatus.phase_of(api_pod)}")
        except API_ERRORS as exc:
            log.warning(
                "error syncing pod",
                extra={"pod": f"{namespace}/{name}", "action": action.value, "error": describe_error(exc)},
            )
            self._retry_later(namespace, name)
        except Exception:
            # A daemon never dies on a bad pod: log with the traceback, try again later.
            log.exception("pod sync failed", extra={"pod": f"{namespace}/{name}", "action": action.value})
            self._retry_later(namespace, name)
        else:
            self._attempts.pop((namespace, name), None)

    def _retry_later(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        if key in self._retries and not self._retries[key].done():
            return
        attempt = self._attempts.get(key, 0) + 1
        self._attempts[key] = attempt
        delay = min(RETRY_START_S * 2 ** (attempt - 1), RETRY_CAP_S)
        self._retries[key] = asyncio.create_task(
            self._resync(namespace, name, delay), name=f"resync {namespace}/{name}"
        )

    async def _resync(self, namespace: str, name: str, delay: float) -> None:
        """Read the pod again after ``delay`` and sync it (gone: free what it held)."""
        await asyncio.sleep(delay)
        self._retries.pop((namespace, name), None)
        log.info("syncing pod again", extra={"pod": f"{namespace}/{name}", "after_s": delay})
        try:
            api_pod = as_dict(await self.client.get(PodResource, name, namespace=namespace))
        except ApiError as exc:
            if exc.status.code == 404:
                self._attempts.pop((namespace, name), None)
                await self._release(namespace, name, "pod deleted")
                return
            log.warning("error reading pod", extra={"pod": f"{namespace}/{name}", "error": describe_error(exc)})
            self._retry_later(namespace, name)
            return
        except API_ERRORS as exc:
            log.warning("error reading pod", extra={"pod": f"{namespace}/{name}", "error": describe_error(exc)})
            self._retry_later(namespace, name)
            return
        await self.sync(api_pod)

    def stop(self) -> None:
        """Cancel pending retries (the agent is stopping)."""
        for task in self._retries.values():
            task.cancel()
        self._retries.clear()

    async def _admit(self, api_pod: Mapping[str, Any]) -> None:
        namespace, name = podstatus.key_of(api_pod)
        uid = podstatus.uid_of(api_pod)
        same_name = self.node.pods.find(namespace, name)
        if same_name is not None and same_name.uid != uid:
            # The old pod of that name is gone from the API (a new one took its name).
            await self._release(namespace, name, "replaced by a new pod of the same name")
        try:
            kpod = podstatus.to_kubelet_pod(api_pod)
        except errors.PodManifestError as exc:
            log.warning("cannot admit invalid pod", extra={"pod": f"{namespace}/{name}", "error": str(exc)})
            await self._event(api_pod, "FailedValidation", str(exc))
            return
        try:
            result = await self.node.admit(kpod)
        except errors.ControlError as exc:
            if exc.reason in ("UnexpectedAdmissionError", "TopologyAffinityError"):
                await self._reject(api_pod, exc.reason, exc.message)
                return
            # CreateContainerConfigError: admitted, a container could not start; the kubelet keeps it Pending.
            log.warning("pod not started", extra={"pod": f"{namespace}/{name}", "reason": exc.reason})
            await self._event(api_pod, "Failed", f"Error: {exc.message}")
            return
        await self.client.patch(
            PodResource,
            name,
            podstatus.runtime_options_patch(result),
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        status = podstatus.running_status(api_pod, self.config.internal_ip, self._clock())
        await self._patch_status(namespace, name, status)
        self._reported.add(uid)
        self.counts["running"] += 1
        log.info("pod running", extra={"pod": f"{namespace}/{name}", "uid": uid})

    async def _reject(self, api_pod: Mapping[str, Any], reason: str, message: str) -> None:
        namespace, name = podstatus.key_of(api_pod)
        await self._event(api_pod, reason, message)
        await self._patch_status(namespace, name, podstatus.rejected_status(api_pod, reason, message))
        self.counts["rejected"] += 1
        log.info("pod rejected", extra={"pod": f"{namespace}/{name}", "reason": reason, "error": message})

    async def _patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self.client.patch(
            PodResource.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
        )

    async def _release(self, namespace: str, name: str, why: str) -> None:
        try:
            result = await self.node.delete(namespace, name)
        except errors.ControlError:
            return
        deleted = result["deleted"]
        if isinstance(deleted, dict):
            self._reported.discard(str(deleted.get("uid")))
        log.info("pod devices freed", extra={"pod": f"{namespace}/{name}", "why": why, "freed": result["freed"]})

    async def _delete(self, namespace: str, name: str) -> None:
        """Finish the deletion as the kubelet does once the containers stopped: grace period 0."""
        try:
            await self.client.delete(PodResource, name, namespace=namespace, grace_period=0)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            return
        self.counts["deleted"] += 1
        log.info("pod deletion finished", extra={"pod": f"{namespace}/{name}"})

    async def _event(self, api_pod: Mapping[str, Any], reason: str, message: str) -> None:
        body = podstatus.event_manifest(
            api_pod, self.config.node_name, reason, message, "Warning", self._clock(), uuid.uuid4().hex[:16]
        )
        try:
            await self.client.create(codecs.from_dict(body))
        except API_ERRORS as exc:
            # An event is best effort, as in the kubelet's recorder.
            log.warning("unable to write event", extra={"reason": reason, "error": describe_error(exc)})
