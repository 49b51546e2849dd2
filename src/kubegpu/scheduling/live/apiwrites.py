"""Everything the scheduler writes to the API, one function per kind of write.

Owns: recording the chosen node and GPUs on the pod (a merge patch of its
annotations, before binding), binding through ``pods/binding``, the pod's
``PodScheduled`` condition and ``status.nominatedNodeName`` (``pods/status``), a PodGroup's phase,
evictions through ``pods/eviction`` (``policy/v1``, so PodDisruptionBudgets
are honoured), and :class:`EventRecorder`, which writes ``events.k8s.io/v1``
Events the way kube-scheduler's recorder does: a repeat of the same reason
and message for the same pod updates one Event's ``series`` (count, last
observed time) instead of creating another. Must not decide anything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

import msgspec
from lightkube import ApiError, AsyncClient
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.events_v1 import EventSeries
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.policy_v1 import Eviction
from lightkube.resources.core_v1 import Pod
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

from kubegpu.scheduling.live.objects import PodInfo

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "kubegpu-scheduler"


def micro_now() -> dt.datetime:
    """Now, in UTC, never with microsecond 0: the API rejects MicroTime values serialised without them."""
    now = dt.datetime.now(dt.UTC)
    return now if now.microsecond else now.replace(microsecond=1)


def identity() -> str:
    """This process's holder identity: host name and pid, as kube-scheduler's ``hostname_<uuid>``."""
    return f"{socket.gethostname()}_{os.getpid()}"


async def record_assignment(client: AsyncClient, pod: PodInfo, annotations: dict[str, str]) -> None:
    """Write the scheduler's choice (node, GPU devices, gang plan) on the pod, before it is bound.

    The patch names the resourceVersion the choice was made on, so it fails (409) instead of rewriting a pod
    that changed meanwhile (bound by someone else, say).
    """
    meta: dict[str, object] = {"annotations": annotations}
    if pod.resource_version:
        meta["resourceVersion"] = pod.resource_version
    await client.patch(Pod, pod.name, {"metadata": meta}, namespace=pod.namespace, patch_type=PatchType.MERGE)


async def bind(client: AsyncClient, pod: PodInfo, node: str) -> None:
    """Bind through ``pods/binding``; raises ApiError 409 when the pod is already bound."""
    binding = Pod.Binding(
        metadata=ObjectMeta(name=pod.name, namespace=pod.namespace, uid=pod.uid or None),
        target=ObjectReference(apiVersion="v1", kind="Node", name=node),
    )
    # The API answers a binding with a Status, which lightkube decodes as a Binding and fails; errors
    # (4xx/5xx) are raised as ApiError before decoding, so a ValidationError means the binding took effect.
    with contextlib.suppress(msgspec.ValidationError):
        await client.create(binding, pod.name, namespace=pod.namespace)


async def set_unschedulable(client: AsyncClient, pod: PodInfo, message: str, nominated: str | None = None) -> None:
    """The pod's ``PodScheduled`` condition False / Unschedulable (and ``nominatedNodeName`` when given)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, object] = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": now,
                "lastProbeTime": None,
            }
        ]
    }
    if nominated is not None:
        status["nominatedNodeName"] = nominated
    await client.patch(
        Pod.Status, pod.name, {"status": status}, namespace=pod.namespace, patch_type=PatchType.STRATEGIC
    )


async def evict(client: AsyncClient, victim: PodInfo) -> bool:
    """Evict through ``pods/eviction``; False when refused (429: a PodDisruptionBudget forbids it)."""
    eviction = Eviction(metadata=ObjectMeta(name=victim.name, namespace=victim.namespace))
    try:
        await client.create(Pod.Eviction(metadata=eviction.metadata), victim.name, namespace=victim.namespace)
    except msgspec.ValidationError:
        pass  # a Status answer, as for bindings: the eviction took effect
    except ApiError as exc:
        if exc.status.code == 429:
            return False
        if exc.status.code == 404:
            return True  # already gone
        raise
    return True


async def set_group_phase(client: AsyncClient, podgroup: Any, namespace: str, name: str, phase: str) -> None:
    """A PodGroup's ``status.phase`` as coscheduling writes it (``Scheduled`` once its members are bound)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, object] = {"phase": phase}
    if phase == "Scheduled":
        status["scheduleStartTime"] = now
    try:
        await client.patch(podgroup.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE)
    except ApiError as exc:
        log.warning("pod group status not written", extra={"group": f"{namespace}/{name}", "error": str(exc)})


@dataclass
class _Recorded:
    name: str
    count: int


class EventRecorder:
    """Writes events.k8s.io/v1 Events for pods, aggregating repeats into one Event's series."""

    def __init__(self, client: AsyncClient, instance: str) -> None:
        self.client = client
        self.instance = instance
        self._seen: dict[tuple[str, str, str], _Recorded] = {}

    async def event(self, pod: PodInfo, type_: str, reason: str, note: str, action: str = "Scheduling") -> None:
        key = (pod.uid, reason, note)
        now = micro_now()
        seen = self._seen.get(key)
        try:
            if seen is not None:
                seen.count += 1
                series = EventSeries(count=seen.count, lastObservedTime=now)
                await self.client.patch(
                    Event,
                    seen.name,
                    {"series": series.to_dict()},
                    namespace=pod.namespace,
                    patch_type=PatchType.MERGE,
                )
                return
            event = Event(
                metadata=ObjectMeta(generateName=f"{pod.name}.", namespace=pod.namespace),
                eventTime=now,
                reportingController=REPORTING_CONTROLLER,
                reportingInstance=self.instance,
                action=action,
                reason=reason,
                type=type_,
                note=note[:1024],
                regarding=ObjectReference(
                    apiVersion="v1", kind="Pod", name=pod.name, namespace=pod.namespace, uid=pod.uid or None
                ),
            )
            created = await self.client.create(event)
            if created.metadata is not None and created.metadata.name:
                self._seen[key] = _Recorded(created.metadata.name, 1)
        except ApiError as exc:
            # An event is best effort: losing one must never stop scheduling.
            log.warning("event not recorded", extra={"pod": pod.key, "reason": reason, "error": str(exc)})
            if seen is not None:
                del self._seen[key]

    def forget(self, uid: str) -> None:
        """Drop the aggregation state of a pod that is gone."""
        for key in [k for k in self._seen if k[0] == uid]:
            del self._seen[key]
