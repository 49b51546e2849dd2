"""kube-scheduler's ``NodeResourcesFit`` scoring strategies, in its integer arithmetic.

Owns the three strategies — ``LeastAllocated``, ``MostAllocated`` and
``RequestedToCapacityRatio`` — as vectorised functions over nodes and as one
score plugin, :class:`NodeResourcesFitScore`, with per-resource weights for
``cpu``, ``memory`` and ``nvidia.com/gpu``. Must not filter and must not pick
GPUs.

Faithful to kube-scheduler (``pkg/scheduler/framework/plugins/noderesources``):
requested = what the node already has requested + the pod's request; a
resource whose allocatable is 0 is skipped, and so is an extended resource
(the GPU) that the pod does not request; per-resource scores are integer
divisions (Go truncates towards zero); LeastAllocated and MostAllocated take
the integer weighted mean, RequestedToCapacityRatio rounds it half away from
zero and leaves out resources scoring 0; a broken-linear shape maps
utilisation 0..100 to shape scores 0..10 scaled by 10. kube-scheduler's
non-zero defaults (100m CPU, 200 MB) apply to *unset* requests only; our pods
always carry explicit requests, so they never apply here. The GPU is counted
in GPU-milli (1000 per GPU), which for whole-GPU pods gives exactly the
integer-count result and extends it naturally to fractional pods.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState, IntArray
from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.framework import MAX_NODE_SCORE, ScorePlugin
from kubegpu.scheduling.core.model import PodSpec

RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")


def go_div(a: IntArray, b: IntArray | int) -> IntArray:
    """Integer division truncating towards zero, as Go's ``/`` on int64 does."""
    q = np.floor_divide(a, b)
    inexact = np.remainder(a, b) != 0
    negative = (np.asarray(a) < 0) != (np.asarray(b) < 0)
    out: IntArray = np.where(inexact & negative, q + 1, q)
    return out


def least_requested_score(requested: IntArray, capacity: IntArray) -> IntArray:
    """(capacity − requested) · 100 / capacity; 0 when capacity is 0 or requested exceeds it."""
    safe = np.where(capacity == 0, 1, capacity)
    score = go_div((capacity - requested) * MAX_NODE_SCORE, safe)
    out: IntArray = np.where((capacity == 0) | (requested > capacity), 0, score)
    return out


def most_requested_score(requested: IntArray, capacity: IntArray) -> IntArray:
    """requested · 100 / capacity with requested capped at capacity; 0 when capacity is 0."""
    safe = np.where(capacity == 0, 1, capacity)
    score = go_div(np.minimum(requested, capacity) * MAX_NODE_SCORE, safe)
    out: IntArray = np.where(capacity == 0, 0, score)
    return out


@dataclass(frozen=True, slots=True)
class ShapePoint:
    """One point of a RequestedToCapacityRatio shape: utilisation 0..100 → score 0..10."""

    utilization: int
    score: int


#: kube-scheduler's default shape for RequestedToCapacityRatio (favours empty nodes).
DEFAULT_SHAPE = (ShapePoint(0, 10), ShapePoint(100, 0))
#: The bin-packing shape from the kube-scheduler docs (favours full nodes).
BIN_PACKING_SHAPE = (ShapePoint(0, 0), ShapePoint(100, 10))


def validate_shape(shape: Sequence[ShapePoint]) -> None:
    """The checks kube-scheduler's config validation makes on a shape."""
    if not shape:
        raise InvalidSpec("RequestedToCapacityRatio shape needs at least one point")
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            raise InvalidSpec(f"shape point {i}: utilization {point.utilization} not within 0..{MAX_UTILIZATION}")
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise InvalidSpec(f"shape point {i}: score {point.score} not within 0..{MAX_CUSTOM_PRIORITY_SCORE}")
        if i and point.utilization <= shape[i - 1].utilization:
            raise InvalidSpec(f"shape point {i}: utilization values must increase")


def broken_linear(shape: Sequence[ShapePoint], p: IntArray) -> IntArray:
    """kube-scheduler's BuildBrokenLinearFunction on scores already scaled to 0..100."""
    xs = [pt.utilization for pt in shape]
    ys = [pt.score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE) for pt in shape]
    out = np.full(p.shape, ys[-1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=np.bool_)
    for i, x in enumerate(xs):
        hit = ~done & (p <= x)
        if i == 0:
            value = np.full(p.shape, ys[0], dtype=np.int64)
        else:
            value = ys[i - 1] + go_div((ys[i] - ys[i - 1]) * (p - xs[i - 1]), xs[i] - xs[i - 1])
        out = np.where(hit, value, out)
        done |= hit
    return out


def requested_to_capacity_ratio_resource(
    shape: Sequence[ShapePoint], requested: IntArray, capacity: IntArray
) -> IntArray:
    """One resource's RequestedToCapacityRatio score (before weighting)."""
    safe = np.where(capacity <= 0, 1, capacity)
    utilization = np.where(
        (capacity <= 0) | (requested <= 0),
        0,
        np.where(requested >= capacity, MAX_UTILIZATION, go_div(requested * MAX_UTILIZATION, safe)),
    )
    over = (capacity == 0) | (requested > capacity)
    out: IntArray = np.where(
        over, broken_linear(shape, np.full(requested.shape, MAX_UTILIZATION)), broken_linear(shape, utilization)
    )
    return out


def combine(
    strategy: str,
    requested: Sequence[IntArray],
    allocatable: Sequence[IntArray],
    weights: Sequence[int],
    shape: Sequence[ShapePoint] = DEFAULT_SHAPE,
) -> IntArray:
    """A strategy's node score from per-resource requested/allocatable arrays and weights."""
    size = requested[0].shape
    node_score = np.zeros(size, dtype=np.int64)
    weight_sum = np.zeros(size, dtype=np.int64)
    for req, alloc, weight in zip(requested, allocatable, weights, strict=True):
        present = alloc != 0
        if strategy == "LeastAllocated":
            score = least_requested_score(req, alloc)
        elif strategy == "MostAllocated":
            score = most_requested_score(req, alloc)
        elif strategy == "RequestedToCapacityRatio":
            score = requested_to_capacity_ratio_resource(shape, req, alloc)
            present &= score > 0
        else:
            raise InvalidSpec(f"unknown NodeResourcesFit strategy {strategy!r} (choose from {', '.join(STRATEGIES)})")
        node_score += np.where(present, score * weight, 0)
        weight_sum += np.where(present, weight, 0)
    safe = np.where(weight_sum == 0, 1, weight_sum)
    if strategy == "RequestedToCapacityRatio":
        # Go's math.Round: half away from zero; scores are non-negative here.
        mean = np.floor(node_score / safe + 0.5).astype(np.int64)
    else:
        mean = go_div(node_score, safe)
    out: IntArray = np.where(weight_sum == 0, 0, mean)
    return out


class NodeResourcesFitScore(ScorePlugin):
    """kube-scheduler's NodeResourcesFit score plugin with a scoring strategy and resource weights."""

    name = "NodeResourcesFit"

    def __init__(
        self,
        strategy: str = "LeastAllocated",
        weights: dict[str, int] | None = None,
        shape: Sequence[ShapePoint] = DEFAULT_SHAPE,
    ) -> None:
        if strategy not in STRATEGIES:
            raise InvalidSpec(f"unknown NodeResourcesFit strategy {strategy!r} (choose from {', '.join(STRATEGIES)})")
        weights = dict(weights or {"cpu": 1, "memory": 1})
        for resource, weight in weights.items():
            if resource not in RESOURCES:
                raise InvalidSpec(f"unknown resource {resource!r} (choose from {', '.join(RESOURCES)})")
            if not 1 <= weight <= 100:
                raise InvalidSpec(f"resource {resource!r}: weight must be within 1..100, got {weight}")
        if strategy == "RequestedToCapacityRatio":
            validate_shape(shape)
        self.strategy = strategy
        self.weights = weights
        self.shape = tuple(shape)

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        requested: list[IntArray] = []
        allocatable: list[IntArray] = []
        weights: list[int] = []
        for resource, weight in self.weights.items():
            if resource == "cpu":
                alloc = state.cpu_capacity[nodes]
                req = alloc - state.cpu_free[nodes] + pod.cpu_milli
            elif resource == "memory":
                alloc = state.memory_capacity[nodes]
                req = alloc - state.memory_free[nodes] + pod.memory_mib
            else:
                if pod.num_gpu == 0:
                    continue  # an extended resource the pod does not request is left out
                alloc = state.gpu_capacity[nodes].sum(axis=1)
                req = alloc - state.gpu_free[nodes].sum(axis=1) + pod.total_gpu_milli
            requested.append(req)
            allocatable.append(alloc)
            weights.append(weight)
        if not requested:
            return np.zeros(len(nodes), dtype=np.int64)
        return combine(self.strategy, requested, allocatable, weights, self.shape)

    def cache_key(self, pod: PodSpec) -> Hashable | None:
        # The score reads only the node's own requested/allocatable and these four requests.
        return (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli)
