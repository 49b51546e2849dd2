"""Honouring the scheduler's pick: which pending pod the kubelet is admitting, and which devices it must get.

Owns the rule that turns the pods bound to this node (:class:`PodPick`, read from the API by
:mod:`kubegpu.deviceplugin.plugin.pods`) and one GetPreferredAllocation container request into a
:class:`Decision`: the scheduler's devices (annotation ``kubegpu.io/gpu-devices``), "no pick: the policy
decides as before", or :class:`PickUnavailable` (the pod fails admission with that reason). The rule:

1. candidates are the pods bound here that are still pending (phase Pending, not terminating, not yet
   allocated by this plugin) with a container or init container asking exactly ``size`` of the resource;
2. a candidate whose annotated devices of this resource include every must-include ID and leave at least
   ``size`` available is the pod being admitted (the oldest by creation time when several fit, as the kubelet
   admits in creation order); its answer is the must-include IDs, then its other available devices in
   annotation order — exactly what the scheduler chose for a one-container pod;
3. else the oldest candidate is taken to be the one admitted (those whose every annotated device is already
   in use — most likely admitted before a plugin restart — count last): annotated → :class:`PickUnavailable`
   naming the unavailable devices; not annotated → the policy decides, as without kubegpu's scheduler;
4. no candidate → the policy decides.

For ``kubegpu.io/gpu-milli`` the scheduler annotates the one GPU (its UUID) and the annotation stands for every
unit of that GPU: the answer is ``size`` available units of it, never units of another GPU.

README "GPUs chosen by the scheduler" gives the race analysis. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.naming import MILLI_PER_GPU, MILLI_RESOURCE, milli_id
from kubegpu.deviceplugin.rm.resources import Resource

#: The pod annotation with the devices the scheduler chose (comma-separated device IDs as advertised).
DEVICES_ANNOTATION = "kubegpu.io/gpu-devices"


class PickUnavailable(InvalidRequest):
    """The scheduler's devices for the pod being admitted cannot be given: admission must fail, with this text."""


@dataclass(frozen=True)
class PodPick:
    """What the rule needs of one pod bound to this node.

    ``created`` is the RFC 3339 creation timestamp (they sort chronologically); ``devices`` the annotated
    device IDs (empty: not placed by kubegpu); ``asks`` every (resource, count) a container or init container
    limits; ``pending``: phase Pending and no deletion timestamp.
    """

    uid: str
    namespace: str
    name: str
    created: str
    devices: tuple[str, ...]
    asks: frozenset[tuple[str, int]]
    pending: bool
    #: The ``kubegpu.io/gpu-milli`` its containers ask in all (0: not a fractional pod).
    milli: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def wants(self, resource: str, size: int) -> bool:
        return (resource, size) in self.asks


@dataclass(frozen=True)
class Decision:
    """``devices``: the answer (None: the policy decides); ``pod``: the pod taken to be admitted, if any."""

    pod: PodPick | None
    devices: list[str] | None


def _count(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def pod_pick(pod: Mapping[str, Any]) -> PodPick:
    """The :class:`PodPick` of a Pod as the API returns it (a dict)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    asks: set[tuple[str, int]] = set()
    share = 0
    inits = spec.get("initContainers") or []
    for n, container in enumerate([*inits, *(spec.get("containers") or [])]):
        resources = container.get("resources") or {}
        for resource, value in {**(resources.get("requests") or {}), **(resources.get("limits") or {})}.items():
            count = _count(value)
            if count:
                asks.add((resource, count))
                if resource == MILLI_RESOURCE and n >= len(inits):
                    share += count
    text = str((meta.get("annotations") or {}).get(DEVICES_ANNOTATION, ""))
    return PodPick(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        created=str(meta.get("creationTimestamp", "")),
        devices=tuple(d.strip() for d in text.split(",") if d.strip()),
        asks=frozenset(asks),
        pending=(status.get("phase") or "Pending") == "Pending" and not meta.get("deletionTimestamp"),
        milli=share,
    )


def choose(
    pods: Iterable[PodPick],
    resource: Resource,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    allocated: frozenset[str] = frozenset(),
) -> Decision:
    """The decision for one container request; ``allocated``: UIDs this plugin already gave their devices."""
    offered = set(available) | set(must_include)
    must = list(dict.fromkeys(must_include))
    candidates = sorted(
        (p for p in pods if p.pending and p.uid not in allocated and p.wants(resource.name, size)),
        key=lambda p: (p.created, p.namespace, p.name),
    )
    for pod in candidates:
        mine = chosen_devices(pod, resource)
        if not mine or not set(must) <= set(mine):
            continue
        rest = [d for d in mine if d in offered and d not in must]
        if len(must) + len(rest) >= size:
            return Decision(pod, must + rest[: size - len(must)])
    if not candidates:
        return Decision(None, None)
    admitted = [p for p in candidates if not _all_taken(p, resource, offered)] or candidates
    pod = admitted[0]
    mine = chosen_devices(pod, resource)
    if not mine:
        return Decision(pod, None)
    if resource.is_milli:
        gpus = ",".join(_milli_gpus(pod, resource))
        left = sum(1 for d in mine if d in offered)
        raise PickUnavailable(
            f"pod {pod.key}: the scheduler chose GPU {gpus} for {size} {resource.name} "
            f"({DEVICES_ANNOTATION}); it has {left} units available; refusing another GPU"
        )
    missing = [d for d in mine if d not in offered]
    why = f"not available (in use or unhealthy): {','.join(missing)}" if missing else "fewer than requested"
    raise PickUnavailable(
        f"pod {pod.key}: the scheduler chose {resource.name} devices {','.join(mine)} "
        f"({DEVICES_ANNOTATION}); {why}; refusing other devices"
    )


def _milli_gpus(pod: PodPick, resource: Resource) -> list[str]:
    """The GPU UUIDs in ``pod``'s annotation that ``resource`` has milli units of (the scheduler writes one)."""
    return [d for d in pod.devices if milli_id(d, 0) in resource.by_id][:1]


def chosen_devices(pod: PodPick, resource: Resource) -> list[str]:
    """The devices of ``resource`` the scheduler chose for ``pod``: its annotated IDs of the resource, or, for milli
    units (``kubegpu.io/gpu-milli``, annotated with the GPU's UUID), every unit of that one GPU."""
    if resource.is_milli:
        units = (milli_id(gpu, k) for gpu in _milli_gpus(pod, resource) for k in range(MILLI_PER_GPU))
        return [u for u in units if u in resource.by_id]
    return [d for d in pod.devices if d in resource.by_id]


def fully_given(pod: PodPick, resource: Resource, given: set[str]) -> bool:
    """Whether ``given`` (the devices of ``resource`` allocated to ``pod``) is all the scheduler chose for it."""
    if resource.is_milli:
        return pod.milli > 0 and len(given) >= pod.milli
    return set(chosen_devices(pod, resource)) <= given


def _all_taken(pod: PodPick, resource: Resource, offered: set[str]) -> bool:
    mine = chosen_devices(pod, resource)
    return bool(mine) and not any(d in offered for d in mine)
