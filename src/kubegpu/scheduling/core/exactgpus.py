"""Exact GPUs on a node that publishes them: which devices a whole-GPU pod gets, and how well they are connected.

Owns reading the Node annotation ``kubegpu.io/gpus`` (``version: v1``, written by the device plugin; README
"GPUs chosen by the scheduler") into a :class:`NodeGpus`, choosing a pod's GPUs among the healthy ones not in
use with the node's placement policy (:func:`kubegpu.placement.pick`: ``topology`` keeps a set on one NVLink /
NVSwitch island and one NUMA node; the same path the plugin and the simulator use), and the interconnect term
of a node score: the chosen set's pair link score (NVSwitch counted as NVLink) against the best set of that
size on the node, 0-100; and for a fractional pod the one GPU among those published as ``kubegpu.io/gpu-milli``
(:func:`choose_share`, best fit as the simulator's picker). A node without the annotation is not this module's:
the scheduler counts its GPUs. Pure: no I/O, no Kubernetes client; the caller hands in the annotation text and
the devices in use.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kubegpu import placement
from kubegpu.gpu import errors as gpu_errors
from kubegpu.gpu import profiles
from kubegpu.gpu.model import Topology
from kubegpu.placement import weights
from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import MILLI

#: The Node annotation the plugin publishes its GPUs in.
GPUS_ANNOTATION = "kubegpu.io/gpus"
#: The one schema version this reader understands.
VERSION = "v1"
#: The resource a GPU advertised for fractional pods is published under (a GPU's ``milli`` in the description).
MILLI_RESOURCE = "kubegpu.io/gpu-milli"
#: The best interconnect score.
MAX_SCORE = 100


class DescriptionError(InvalidSpec):
    """The node's GPU description cannot be read; the message names the node and the key."""


@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs as published: per GPU index its device ID (None: not advertised whole) and health."""

    name: str
    topology: Topology
    ids: tuple[str | None, ...]
    healthy: tuple[bool, ...]
    #: Per GPU index its UUID ("" when the description has none).
    uuids: tuple[str, ...] = ()
    #: Per GPU index: advertised as ``kubegpu.io/gpu-milli`` units (a GPU for fractional pods, never whole).
    milli: tuple[bool, ...] = ()

    def free(self, in_use: Collection[str]) -> list[int]:
        """Indices that may be chosen: advertised whole, healthy, and their device not in ``in_use``."""
        return [i for i, d in enumerate(self.ids) if d is not None and self.healthy[i] and d not in in_use]

    def share_free(self, used: Mapping[int, int]) -> dict[int, int]:
        """Milli left per healthy milli-advertised GPU, ``used`` being the milli taken on each GPU index."""
        return {
            i: MILLI - used.get(i, 0)
            for i, is_milli in enumerate(self.milli)
            if is_milli and self.healthy[i] and self.uuids[i]
        }


@dataclass(frozen=True)
class Choice:
    """The GPUs for one pod: indices ascending, their device IDs (the pod annotation's value), the score term."""

    indices: tuple[int, ...]
    devices: tuple[str, ...]
    interconnect: int

    @property
    def annotation(self) -> str:
        """The value of the pod annotation ``kubegpu.io/gpu-devices``."""
        return ",".join(self.devices)


def read(node_name: str, text: str) -> NodeGpus:
    """The description in the annotation ``text`` of Node ``node_name``; DescriptionError when unreadable."""
    where = f"node {node_name}: annotation {GPUS_ANNOTATION}"
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DescriptionError(f"{where}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DescriptionError(f"{where}: must be a JSON object")
    if data.get("version") != VERSION:
        raise DescriptionError(f"{where}: version {data.get('version')!r} is not {VERSION!r}")
    raw: Any = data.get("topology")
    try:
        topology = profiles.topology_from_dict(raw, source=f"{where}: topology")
    except gpu_errors.ProfileError as exc:
        raise DescriptionError(str(exc)) from None
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or len(gpus) != topology.size:
        raise DescriptionError(f"{where}: gpus must list {topology.size} GPUs, one per topology index")
    ids: list[str | None] = [None] * topology.size
    healthy = [False] * topology.size
    uuids = [""] * topology.size
    milli = [False] * topology.size
    for position, gpu in enumerate(gpus):
        index = gpu.get("index") if isinstance(gpu, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < topology.size:
            raise DescriptionError(f"{where}: gpus[{position}].index must be a GPU index below {topology.size}")
        device_id = gpu.get("id")
        ids[index] = device_id if isinstance(device_id, str) and device_id else None
        healthy[index] = gpu.get("health") == "Healthy"
        uuid = gpu.get("uuid")
        uuids[index] = uuid if isinstance(uuid, str) else ""
        milli[index] = gpu.get("milli") == MILLI_RESOURCE
    return NodeGpus(
        name=node_name,
        topology=topology,
        ids=tuple(ids),
        healthy=tuple(healthy),
        uuids=tuple(uuids),
        milli=tuple(milli),
    )


def interconnect(node: NodeGpus, indices: Collection[int]) -> int:
    """0-100: the pair link score of ``indices`` against the best set of that size on the node (1 GPU: 100)."""
    chosen = sorted(set(indices))
    if len(chosen) <= 1:
        return MAX_SCORE
    matrix = _links(node.topology)
    best = weights.set_score(
        matrix, placement.pick(placement.TOPOLOGY, node.topology, range(node.topology.size), [], len(chosen))
    )
    if best <= 0:
        return MAX_SCORE
    return min(MAX_SCORE, MAX_SCORE * weights.set_score(matrix, chosen) // best)


def _links(topology: Topology) -> weights.Matrix:
    n = topology.size
    return tuple(tuple(weights.link_score(topology, i, j, fabric=True) for j in range(n)) for i in range(n))


def choose(node: NodeGpus, in_use: Collection[str], count: int, policy: str = placement.TOPOLOGY) -> Choice | None:
    """The GPUs a pod asking ``count`` whole GPUs gets on ``node``, or None when fewer are free.

    ``in_use``: the device IDs held by pods bound to the node (terminating ones included).
    ``policy``: the node's whole-GPU placement policy (``topology`` or ``best-effort``).
    """
    if count < 1:
        raise InvalidSpec(f"node {node.name}: a whole-GPU pick needs at least 1 GPU, got {count}")
    free = node.free(in_use)
    if len(free) < count:
        return None
    indices = tuple(placement.pick(policy, node.topology, free, [], count))
    devices = tuple(node.ids[i] or "" for i in indices)
    return Choice(indices=indices, devices=devices, interconnect=interconnect(node, indices))


def choose_share(node: NodeGpus, used: Mapping[int, int], share: int) -> Choice | None:
    """The one GPU a fractional pod asking ``share`` milli gets on ``node``, or None when no GPU has that much left.

    Best fit, as the simulator's GPU-share picker chooses (:class:`kubegpu.scheduling.core.gpupick.BestFitGpu`):
    the healthy milli-advertised GPU with the least free share that still fits, lowest index on ties.
    ``used``: milli held per GPU index by the pods counted on the node. The choice's device is the GPU's UUID.
    """
    if not 0 < share <= MILLI:
        raise InvalidSpec(f"node {node.name}: a share must be within 1..{MILLI} milli, got {share}")
    free = node.share_free(used)
    fitting = [i for i, left in free.items() if left >= share]
    if not fitting:
        return None
    best = min(fitting, key=lambda i: (free[i], i))
    return Choice(indices=(best,), devices=(node.uuids[best],), interconnect=MAX_SCORE)
