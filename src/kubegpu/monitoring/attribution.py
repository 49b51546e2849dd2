"""Pod attribution: which pod containers hold which GPU or MIG device.

Owns turning the kubelet's pod-resources answer (already flattened into
:class:`ContainerDevices` rows by :mod:`kubegpu.monitoring.podresources`)
into ``device UUID -> (pod, namespace, container) …`` for one machine:
filtering the NVIDIA resources, stripping shared-GPU replica suffixes and
resolving device IDs (GPU and MIG UUIDs, or NVML indices ``"3"`` / ``"3:1"``
when the plugin runs with ``deviceIDStrategy: index``). Pure: no sockets, no
clocks; must not know about Prometheus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from kubegpu.deviceplugin import naming
from kubegpu.gpu.model import Machine
from kubegpu.monitoring.podmeta import Pairs, PodMeta

#: GKE's shared-GPU device IDs (``…/vgpu3``), which dcgm-exporter also strips. NVIDIA's own replica
#: IDs are :class:`kubegpu.deviceplugin.naming.AnnotatedID`'s.
_GKE_REPLICA_SEPARATOR = "/vgpu"


@dataclass(frozen=True, order=True)
class PodRef:
    """A container that holds a device. Orders by namespace, pod, container for stable output.

    ``uid`` and ``labels`` come from the API server (``--kubernetes-enable-pod-uid``/``-labels``), empty without.
    """

    namespace: str
    pod: str
    container: str
    uid: str = field(default="", compare=False)
    labels: Pairs = field(default=(), compare=False)


@dataclass(frozen=True)
class ContainerDevices:
    """One ``ContainerDevices`` entry of a pod-resources ``List`` answer, with its owner."""

    namespace: str
    pod: str
    container: str
    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class Attribution:
    """Holders per device UUID (GPU or MIG), and the device IDs that matched nothing on this machine."""

    holders: dict[str, tuple[PodRef, ...]]
    unresolved: tuple[str, ...] = ()

    def of(self, uuid: str) -> tuple[PodRef, ...]:
        return self.holders.get(uuid, ())


EMPTY = Attribution(holders={})


def is_gpu_resource(name: str, extra: Iterable[str] = ()) -> bool:
    """True for the resources whose devices are attributed: ``nvidia.com/gpu``, ``nvidia.com/mig-*``,
    ``nvidia.com/gpu.shared``, kubegpu's ``kubegpu.io/gpu-milli`` and any name in ``extra``
    (``--nvidia-resource-names``)."""
    return naming.is_nvidia_gpu_resource(name) or name == naming.MILLI_RESOURCE or name in extra


def base_id(device_id: str) -> str:
    """A device ID without its shared-GPU replica suffix (NVIDIA's annotated IDs and GKE's ``GPU-x/vgpu2``)."""
    physical = naming.strip_replica(device_id)
    if physical != device_id:
        return physical
    return device_id.partition(_GKE_REPLICA_SEPARATOR)[0]


def device_index(machine: Machine) -> dict[str, str]:
    """Every accepted spelling of a device on ``machine`` -> its UUID (UUIDs, ``"i"``, ``"i:j"``)."""
    index: dict[str, str] = {}
    for gpu in machine.gpus:
        index[gpu.uuid] = gpu.uuid
        index[str(gpu.index)] = gpu.uuid
        for mig in gpu.mig_devices:
            index[mig.uuid] = mig.uuid
            index[mig.id_index] = mig.uuid
    return index


def attribute(
    rows: Iterable[ContainerDevices],
    index: dict[str, str],
    extra_resources: Iterable[str] = (),
) -> Attribution:
    """Holders of each device of the machine described by ``index`` (from :func:`device_index`).

    A container listing several replicas of one GPU holds it once; several
    containers sharing a GPU are all holders, in a stable order.
    """
    extra = frozenset(extra_resources)
    holders: dict[str, set[PodRef]] = {}
    unresolved: list[str] = []
    for row in rows:
        if not is_gpu_resource(row.resource_name, extra):
            continue
        ref = PodRef(namespace=row.namespace, pod=row.pod, container=row.container)
        for device_id in row.device_ids:
            uuid = index.get(base_id(device_id))
            if uuid is None:
                unresolved.append(device_id)
                continue
            holders.setdefault(uuid, set()).add(ref)
    return Attribution(
        holders={uuid: tuple(sorted(refs)) for uuid, refs in holders.items()},
        unresolved=tuple(unresolved),
    )


def with_metadata(
    attribution: Attribution, lookup: Callable[[str, str], PodMeta | None], uid: bool, labels: bool
) -> Attribution:
    """``attribution`` with each holder's pod UID and/or labels from ``lookup(namespace, pod)``.

    A pod ``lookup`` does not know (yet) keeps its pod/namespace/container labels only.
    """
    if not (uid or labels):
        return attribution

    def enrich(ref: PodRef) -> PodRef:
        meta = lookup(ref.namespace, ref.pod)
        if meta is None:
            return ref
        return replace(ref, uid=meta.uid if uid else "", labels=meta.labels if labels else ())

    return Attribution(
        holders={u: tuple(enrich(r) for r in refs) for u, refs in attribution.holders.items()},
        unresolved=attribution.unresolved,
    )
