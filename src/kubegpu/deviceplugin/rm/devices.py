"""What the plugin advertises: one device as the kubelet sees it.

Owns the :class:`Device` value (the ID the kubelet sees, the physical GPU behind
it, its NUMA node, its MIG placement and replica number) and the device of a
whole GPU. How IDs are spelled is :mod:`kubegpu.deviceplugin.naming`'s. Pure: no
I/O, no gRPC, no policy about which resource a device belongs to (that is
:mod:`.resource_map`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kubegpu.deviceplugin import naming
from kubegpu.gpu.model import Gpu


@dataclass(frozen=True)
class Device:
    """One device of one resource.

    ``id`` is what ListAndWatch advertises and Allocate receives (a GPU UUID, a
    MIG UUID, a replica ``<uuid>::<n>``, or a milli unit ``<uuid>::m<k>``). ``gpu_uuid``/``gpu_index`` name
    the physical GPU it lives on: health events and topology are about GPUs.
    ``mig`` is the (GPU instance, compute instance) pair of a MIG device, None
    for a whole GPU. ``index`` is NVIDIA's index string (``"3"``, ``"3:1"``).
    """

    id: str
    gpu_uuid: str
    gpu_index: int
    index: str
    numa: int | None
    paths: tuple[str, ...] = ()
    mig: tuple[int, int] | None = None
    replica: int | None = None
    #: Milli unit number (0..999) of a ``kubegpu.io/gpu-milli`` device, None otherwise.
    milli: int | None = None
    #: The physical GPU's memory, set on milli units (what a share of it is in MiB).
    memory_mib: int = 0

    @property
    def physical_id(self) -> str:
        """The ID without its replica suffix: what the container runtime gets."""
        return naming.strip_replica(self.id)


def milli_units(gpu: Gpu) -> tuple[Device, ...]:
    """The ``kubegpu.io/gpu-milli`` devices of ``gpu``: 1000 units, each with the GPU's NUMA node and paths."""
    return tuple(
        Device(
            id=naming.milli_id(gpu.uuid, k),
            gpu_uuid=gpu.uuid,
            gpu_index=gpu.index,
            index=str(gpu.index),
            numa=gpu.numa_node,
            paths=(gpu.device_node,),
            milli=k,
            memory_mib=gpu.memory_mib,
        )
        for k in range(naming.MILLI_PER_GPU)
    )


def whole_gpu(gpu: Gpu) -> Device:
    """The device of a whole GPU: ID = its UUID, topology = its NUMA node."""
    return Device(
        id=gpu.uuid,
        gpu_uuid=gpu.uuid,
        gpu_index=gpu.index,
        index=str(gpu.index),
        numa=gpu.numa_node,
        paths=(gpu.device_node,),
    )
