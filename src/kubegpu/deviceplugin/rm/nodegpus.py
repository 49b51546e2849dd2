"""The node's GPU description: what the plugin publishes on its Node for a GPU-aware scheduler.

Owns the documented, versioned value of the Node annotation ``kubegpu.io/gpus`` (``version: v1``; README
"GPUs chosen by the scheduler" is its reference) and of the plain ID list ``kubegpu.io/gpu-devices`` beside it:
per GPU its index, UUID, the device ID it is advertised under, the resource of its milli units when
``--gpu-milli`` advertises it as ``kubegpu.io/gpu-milli``, model, memory, NUMA node, MIG devices and health;
the pair matrix ``kubegpu topology show`` prints (:func:`kubegpu.placement.link_matrix`, one source);
and the topology in the ``kubegpu topology pick --topology`` form, so a reader rebuilds it with
:func:`kubegpu.gpu.profiles.topology_from_dict`. Serialised compactly with sorted keys, so an unchanged node
gives the same bytes and the writer can skip the write. Pure: no I/O, no API client (the writer is
:mod:`kubegpu.deviceplugin.plugin.publisher`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from kubegpu import placement
from kubegpu.api import constants
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.gpu import profiles
from kubegpu.gpu.model import Gpu, Machine

#: The Node annotation holding the description (JSON).
GPUS_ANNOTATION = "kubegpu.io/gpus"
#: The Node annotation holding the whole-GPU device IDs in GPU index order, comma-separated (what the live
#: scheduler turns GPU indices into); absent when some GPU has no whole-GPU device (MIG mode, replicas only).
GPU_IDS_ANNOTATION = "kubegpu.io/gpu-devices"
#: The description's schema version; a reader refuses other versions.
VERSION = "v1"


def _health(unhealthy: bool) -> str:
    return constants.UNHEALTHY if unhealthy else constants.HEALTHY


def describe(machine: Machine, resources: Iterable[Resource], unhealthy: Mapping[str, set[str]]) -> dict[str, Any]:
    """The description of ``machine`` as served: ``unhealthy`` maps resource names to their Unhealthy device IDs.

    A GPU is Unhealthy when a device on it that is not a MIG device is (a whole-GPU device, a replica, a milli unit),
    or, on a GPU in MIG mode, when every MIG device on it is. A MIG device is Unhealthy when its device is.
    """
    served = tuple(resources)
    whole_id: dict[int, tuple[str, str]] = {}  # GPU index -> (resource, ID) of its whole-GPU device
    mig_id: dict[str, tuple[str, str]] = {}  # MIG UUID -> (resource, ID)
    milli_of: dict[int, str] = {}  # GPU index -> the resource it is advertised in milli units under
    sick_gpus: set[int] = set()
    sick_mig: set[str] = set()
    for resource in served:
        bad = unhealthy.get(resource.name, set())
        for device in resource.devices:
            if device.mig is not None:
                mig_id.setdefault(device.physical_id, (resource.name, device.id))
                if device.id in bad:
                    sick_mig.add(device.physical_id)
                continue
            if device.milli is not None:
                milli_of.setdefault(device.gpu_index, resource.name)
            elif device.replica is None:
                whole_id.setdefault(device.gpu_index, (resource.name, device.id))
            if device.id in bad:
                sick_gpus.add(device.gpu_index)
    gpus = [_gpu(gpu, whole_id, mig_id, sick_gpus, sick_mig, milli_of.get(gpu.index)) for gpu in machine.gpus]
    return {
        "version": VERSION,
        "gpus": gpus,
        "links": placement.link_matrix(machine.topology),
        "topology": profiles.topology_to_dict(machine.topology),
    }


def _gpu(
    gpu: Gpu,
    whole_id: Mapping[int, tuple[str, str]],
    mig_id: Mapping[str, tuple[str, str]],
    sick_gpus: set[int],
    sick_mig: set[str],
    milli: str | None,
) -> dict[str, Any]:
    migs = [
        {
            "index": m.id_index,
            "uuid": m.uuid,
            "profile": m.profile,
            "memoryMiB": m.memory_mib,
            "resource": mig_id[m.uuid][0] if m.uuid in mig_id else None,
            "id": mig_id[m.uuid][1] if m.uuid in mig_id else None,
            "health": _health(m.uuid in sick_mig),
        }
        for m in (gpu.mig_devices if gpu.mig_enabled else ())
    ]
    sick = gpu.index in sick_gpus or (bool(migs) and all(m["health"] == constants.UNHEALTHY for m in migs))
    resource, device_id = whole_id.get(gpu.index, (None, None))
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "resource": resource,
        "id": device_id,
        "model": gpu.product_name,
        "memoryMiB": gpu.memory_mib,
        "numa": gpu.numa_node,
        "mig": migs,
        "milli": milli,
        "health": _health(sick),
    }


def gpu_ids(description: Mapping[str, Any]) -> str | None:
    """The ``kubegpu.io/gpu-devices`` value: whole-GPU IDs in index order; None when some GPU has none."""
    ids = [g["id"] for g in description["gpus"]]
    if not ids or any(i is None for i in ids):
        return None
    return ",".join(ids)


def node_annotations(description: Mapping[str, Any]) -> dict[str, str | None]:
    """Both Node annotations (None: remove it), as a merge patch of ``metadata.annotations`` writes them."""
    return {
        GPUS_ANNOTATION: json.dumps(description, sort_keys=True, separators=(",", ":")),
        GPU_IDS_ANNOTATION: gpu_ids(description),
    }
