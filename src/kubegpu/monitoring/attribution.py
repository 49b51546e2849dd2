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

from collections.abc import Iterable
from dataclasses import dataclass

from kubegpu.gpu.model import Machine

#: Resource names always attributed (dcgm-exporter's set plus the plugin's shared-GPU rename).
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

#: Separators between a device ID and its replica number: NVIDIA's time-slicing/MPS IDs
#: (``GPU-…::3``) and GKE's shared-GPU IDs (``…/vgpu3``).
_REPLICA_SEPARATORS = ("::", "/vgpu")


@dataclass(frozen=True, order=True)
class PodRef:
    """A container that holds a device. Orders by namespace, pod, container for stable output."""

    namespace: str
    pod: str
    container: str


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
    ``nvidia.com/gpu.shared`` and any name in ``extra`` (``--nvidia-resource-names``)."""
    return name in (GPU_RESOURCE, SHARED_GPU_RESOURCE) or name.startswith(MIG_RESOURCE_PREFIX) or name in extra


def base_id(device_id: str) -> str:
    """A device ID without its shared-GPU replica suffix: ``GPU-x::2`` -> ``GPU-x``, ``GPU-x/vgpu2`` -> ``GPU-x``."""
    for separator in _REPLICA_SEPARATORS:
        head, found, _ = device_id.partition(separator)
        if found:
            return head
    return device_id


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
