"""The pods bound to this node, from the API: what the plugin needs to honour the scheduler's pick.

Owns the list+watch of Pods with ``fieldSelector spec.nodeName=<node>`` (all namespaces) into a cache of
:class:`~kubegpu.deviceplugin.rm.picks.PodPick`, the consistent re-list a GetPreferredAllocation makes when
the cache has no fitting pick (the watch may lag the kubelet: the pod being admitted may not be cached
yet), and the bookkeeping between the two RPCs: the devices promised to a pod in GetPreferredAllocation,
checked against the kubelet's next Allocate of that resource (the kubelet may trim an answer to a NUMA
affinity), and the pods whose every chosen device has been allocated. The decisions are
:func:`kubegpu.deviceplugin.rm.picks.choose`'s. Never raises an API failure into an RPC: without the API
the cache as it stands decides. Must not decide anything itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from kubegpu import kubeconfig as kubeconfig_
from kubegpu.common.tasks import BackgroundTask
from kubegpu.deviceplugin import naming
from kubegpu.deviceplugin.rm import picks
from kubegpu.deviceplugin.rm.resources import Resource

log = logging.getLogger(__name__)

#: Seconds between attempts while the list or watch fails.
RETRY_S = 1.0
#: Longest a GetPreferredAllocation waits for its consistent re-list before the cache decides.
RELIST_TIMEOUT_S = 2.0


class NodePods:
    """The pods of Node ``node_name`` and the picks promised to them; start, then stop (closes ``client``)."""

    def __init__(self, node_name: str, client: AsyncClient) -> None:
        self.node_name = node_name
        self.client = client
        self.pods: dict[str, picks.PodPick] = {}
        self.synced = asyncio.Event()
        self.relists = 0
        self._promised: dict[str, tuple[picks.PodPick, list[str]]] = {}  # resource -> (pod, devices)
        self._given: dict[str, set[str]] = {}  # pod UID -> devices allocated to it by this plugin
        self._allocated: set[str] = set()  # pod UIDs given every device the scheduler chose
        self._version: str | None = None
        self._task = BackgroundTask("node-pods", self._run)
        self._last_error: str | None = None

    @property
    def _fields(self) -> Any:  # lightkube's list and watch spell the selector's type differently
        return {"spec.nodeName": self.node_name}

    def start(self) -> None:
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()
        with contextlib.suppress(Exception):
            await self.client.close()

    # --- the cache ------------------------------------------------------------------------------------------

    async def relist(self) -> None:
        """Replace the cache with a consistent list (a quorum read: no resourceVersion)."""
        listing = self.client.list(Pod, namespace="*", fields=self._fields)
        seen: dict[str, picks.PodPick] = {}
        async for pod in listing:
            pick = picks.pod_pick(pod.to_dict())
            seen[pick.uid] = pick
        self.pods = seen
        self._version = listing.resourceVersion
        self._forget_gone()
        self.relists += 1
        self.synced.set()

    def _forget_gone(self) -> None:
        for uid in [u for u in self._given if u not in self.pods]:
            del self._given[uid]
        self._allocated &= set(self.pods)

    async def _watch(self) -> None:
        async for kind, pod in self.client.watch(
            Pod, namespace="*", fields=self._fields, resource_version=self._version
        ):
            pick = picks.pod_pick(pod.to_dict())
            if pod.metadata is not None and pod.metadata.resourceVersion:
                self._version = pod.metadata.resourceVersion
            if kind == "DELETED":
                self.pods.pop(pick.uid, None)
                self._forget_gone()
            else:
                self.pods[pick.uid] = pick

    async def _run(self) -> None:
        while True:
            try:
                await self.relist()
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API away, a 410, RBAC: relist after a pause, never die
                text = f"{type(exc).__name__}: {exc}"
                if text != self._last_error:
                    log.warning(
                        "cannot watch the node's pods",
                        extra={"node": self.node_name, "error": text, "retry_s": RETRY_S},
                    )
                    self._last_error = text
                await asyncio.sleep(RETRY_S)  # the retry interval of a failing watch, not synchronisation

    # --- the RPCs -------------------------------------------------------------------------------------------

    async def preferred(
        self, resource: Resource, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str] | None:
        """The scheduler's devices for the pod being admitted, or None (the policy decides).

        Raises :class:`~kubegpu.deviceplugin.rm.picks.PickUnavailable` when that pod's devices cannot be given.
        """
        self._promised.pop(resource.name, None)
        decision = self._choose(resource, available, must_include, size)
        if decision.devices is None:
            try:
                await asyncio.wait_for(self.relist(), RELIST_TIMEOUT_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cannot list the node's pods, deciding from the cache", extra={"error": str(exc)})
            decision = self._choose(resource, available, must_include, size)
        if decision.devices is None or decision.pod is None:
            return None
        self._promised[resource.name] = (decision.pod, decision.devices)
        # A share is hundreds of unit IDs of one GPU: logged as that GPU and the count.
        shown = naming.unique_physical_ids(decision.devices) if resource.is_milli else decision.devices
        units = len(decision.devices)
        log.info(
            "honouring the scheduler's pick",
            extra={"resource": resource.name, "pod": decision.pod.key, "devices": shown, "units": units},
        )
        return decision.devices

    def _choose(
        self, resource: Resource, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> picks.Decision:
        return picks.choose(
            self.pods.values(), resource, available, must_include, size, allocated=frozenset(self._allocated)
        )

    def allocating(self, resource: Resource, containers: Sequence[Sequence[str]]) -> None:
        """Check an Allocate against the last promise for ``resource``; raises PickUnavailable when it differs."""
        promised = self._promised.pop(resource.name, None)
        if promised is None:
            return
        pod, devices = promised
        got = {d for ids in containers for d in ids}
        if got != set(devices):
            raise picks.PickUnavailable(
                f"pod {pod.key}: the kubelet allocates {','.join(sorted(got))} but the scheduler chose "
                f"{','.join(devices)} ({picks.DEVICES_ANNOTATION}); refusing other devices"
            )
        given = self._given.setdefault(pod.uid, set())
        given |= got
        if picks.fully_given(pod, resource, given):
            self._allocated.add(pod.uid)


def connect(node_name: str, kubeconfig: str | None) -> NodePods:
    """The pods of ``node_name`` on the cluster of ``kubeconfig`` (None: ``$KUBECONFIG`` or in-cluster)."""
    return NodePods(node_name, kubeconfig_.client(kubeconfig))
