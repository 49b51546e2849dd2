"""Score plugins over the live cache: kube-scheduler's NodeResourcesFit with any resource, through the core.

Owns :class:`NodeResourcesFit` (strategy, per-resource weights, shape) as
kube-scheduler scores it: CPU and memory from the non-zero requests (100m /
200 MiB for containers without a request), extended resources from their
requests and only when the pod asks for them, the integer arithmetic of the
core's :func:`kubegpu.scheduling.core.noderesources.combine`. Must not filter and
does no I/O. Owns :class:`GpuTopology` too: the interconnect of the GPUs a
pod would get on a node that publishes its GPUs (``kubegpu.io/gpus``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kubegpu.scheduling.core import noderesources
from kubegpu.scheduling.core.noderesources import ShapePoint
from kubegpu.scheduling.live import resources
from kubegpu.scheduling.live.cache import IntArray, SchedulerCache
from kubegpu.scheduling.live.objects import PodInfo


@dataclass(frozen=True, slots=True)
class ResourceWeight:
    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceWeight(resources.CPU, 1), ResourceWeight(resources.MEMORY, 1))


@dataclass(frozen=True)
class NodeResourcesFit:
    """kube-scheduler's NodeResourcesFit score for one strategy."""

    strategy: str = "LeastAllocated"
    resources: tuple[ResourceWeight, ...] = DEFAULT_RESOURCES
    shape: tuple[ShapePoint, ...] = noderesources.DEFAULT_SHAPE
    name: str = "NodeResourcesFit"

    def score(self, cache: SchedulerCache, pod: PodInfo, nodes: IntArray) -> IntArray:
        requested: list[IntArray] = []
        allocatable: list[IntArray] = []
        weights: list[int] = []
        for rw in self.resources:
            col = cache.column.get(rw.name)
            if rw.name in (resources.CPU, resources.MEMORY):
                nz = 0 if rw.name == resources.CPU else 1
                want = pod.non_zero.get(rw.name, 0)
                have = cache.non_zero[nodes, nz]
            else:
                want = pod.requests.get(rw.name, 0)
                if want == 0:
                    continue  # an extended resource the pod does not request is not scored
                have = cache.requested[nodes, col] if col is not None else np.zeros(len(nodes), dtype=np.int64)
            alloc = cache.allocatable[nodes, col] if col is not None else np.zeros(len(nodes), dtype=np.int64)
            requested.append(have + want)
            allocatable.append(alloc)
            weights.append(rw.weight)
        if not requested:
            return np.zeros(len(nodes), dtype=np.int64)
        return noderesources.combine(self.strategy, requested, allocatable, weights, self.shape)


@dataclass(frozen=True)
class GpuTopology:
    """Score plugin ``GPUTopology``: how well connected the GPUs are that a pod asking 2+ GPUs gets, 0-100.

    On a node that publishes its GPUs, :attr:`kubegpu.scheduling.core.exactgpus.Choice.interconnect` of the set
    the scheduler would choose there; a node without a description, and every node for a pod asking fewer
    than 2 GPUs, scores 0 (nothing known to prefer).
    """

    name: str = "GPUTopology"

    def score(self, cache: SchedulerCache, pod: PodInfo, nodes: IntArray) -> IntArray:
        out = np.zeros(len(nodes), dtype=np.int64)
        if pod.gpus < 2 or not cache.described:
            return out
        for k, row in enumerate(nodes):
            node = cache.names[int(row)]
            if node in cache.described:
                choice = cache.gpu_choice(node, pod.gpus)
                out[k] = choice.interconnect if choice is not None else 0
        return out


class LiveScorePlugin(Protocol):
    """A score plugin over the live cache: a name and integer scores for node indices."""

    @property
    def name(self) -> str: ...

    def score(self, cache: SchedulerCache, pod: PodInfo, nodes: IntArray) -> IntArray: ...


def node_score(
    plugins: Sequence[tuple[LiveScorePlugin, int]], cache: SchedulerCache, pod: PodInfo, nodes: IntArray
) -> IntArray:
    """Sum of each plugin's score times its weight, per node."""
    total = np.zeros(len(nodes), dtype=np.int64)
    for plugin, weight in plugins:
        total += weight * plugin.score(cache, pod, nodes)
    return total
