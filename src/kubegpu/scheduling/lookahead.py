"""Our policy, ``lookahead``: FGD's fragmentation gradient plus a look-ahead at the CPU the workload will need.

Owns :class:`LookaheadScore`, :class:`LookaheadGpu` and how their target
workload is built. Must not filter and must not bind.

Why: FGD measures, for the *next* task drawn from the target workload, how
much free GPU-milli that task could not use. It is blind to what the rest of
the workload will ask of a node's CPU: a CPU-only pod that takes 12 of a GPU
node's 96 cores crosses no task's threshold today, yet the node's eight GPUs
will later need about 11 cores each, so the CPU runs out first and GPUs stay
idle ("lack-CPU" fragments). On the Alibaba trace these stranded GPUs are a
third of what FGD leaves unallocated, and most of it on CPU-heavy workloads.

What it does, per node n, with G_n free GPU-milli and C_n free CPU milli:

* F_n — FGD's fragmentation of the node for the target workload, over *all*
  task shapes of the pod list (FGD keeps only the most popular 95 %; the rare
  multi-GPU shapes it drops are the ones that need whole nodes);
* S_n = max(0, G_n − C_n / ρ) — GPU-milli the node cannot feed with CPU, where
  ρ is the look-ahead: the workload's total CPU request (CPU-only pods
  included, because they too must land somewhere) per GPU-milli requested;
* the score of a node is ⌊100 · sigmoid(Δ / 1000)⌋ with Δ the drop of
  F_n + S_n caused by placing the pod — FGD's coarse scale, whose ties go to
  the node the seeded tie-break ranks first, so near-equal nodes fill one
  after another (first fit) instead of spreading;
* a fractional pod takes the GPU with the best such score, ties to the GPU
  with the least free share (best fit).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubegpu.scheduling.cluster import ClusterState, IntArray
from kubegpu.scheduling.errors import InvalidSpec, OverCommit
from kubegpu.scheduling.fgd import sigmoid_score
from kubegpu.scheduling.fragmentation import (
    CompiledWorkload,
    FloatArray,
    ShapeStats,
    fragment_matrix,
    fragmentation_after_share,
    fragmentation_after_whole,
    share_candidates,
)
from kubegpu.scheduling.framework import GpuPicker, ScorePlugin
from kubegpu.scheduling.gpupick import exclusive_gpus
from kubegpu.scheduling.model import PodSpec
from kubegpu.scheduling.workload import TargetWorkload


@dataclass(frozen=True)
class LookaheadModel:
    """The target workload as arrays, and ρ: CPU milli the workload requests per GPU-milli."""

    workload: CompiledWorkload
    cpu_per_gpu_milli: float
    stranding_weight: float = 1.0

    @classmethod
    def from_pods(
        cls, pods: Sequence[PodSpec], models: tuple[str, ...], stranding_weight: float = 1.0
    ) -> LookaheadModel:
        gpu_demand = sum(p.total_gpu_milli for p in pods)
        if gpu_demand <= 0:
            raise InvalidSpec("the lookahead policy needs a workload with at least one GPU pod")
        target = TargetWorkload.from_pods(pods, threshold=1.0)
        rho = sum(p.cpu_milli for p in pods) / gpu_demand
        return cls(CompiledWorkload(target, models), rho, stranding_weight)

    def stranded(self, cpu_free: IntArray, gpu_free_total: IntArray) -> FloatArray:
        """GPU-milli a node's free CPU cannot feed, times the stranding weight."""
        if not self.stranding_weight or self.cpu_per_gpu_milli <= 0:
            return np.zeros(np.shape(gpu_free_total))
        out: FloatArray = self.stranding_weight * np.maximum(
            0.0, gpu_free_total - np.maximum(cpu_free, 0) / self.cpu_per_gpu_milli
        )
        return out


def _share_rows(
    model: LookaheadModel,
    stats: ShapeStats,
    state: ClusterState,
    pod: PodSpec,
    nodes: IntArray,
    rows: IntArray,
    free: IntArray,
) -> FloatArray:
    """Drop of F + S for a fractional pod taking a GPU with ``free`` milli on ``nodes[rows]``."""
    cw = model.workload
    fits, small, total = stats.rows(nodes)
    cpu = state.cpu_free[nodes]
    mid = state.model_id[nodes]
    before = fragment_matrix(cw, fits, small, total, cpu, mid) @ cw.weights + model.stranded(cpu, total)
    after = fragmentation_after_share(
        cw, (fits[rows], small[rows], total[rows]), cpu[rows], mid[rows], free, pod.cpu_milli, pod.gpu_milli
    ) + model.stranded(cpu[rows] - pod.cpu_milli, total[rows] - pod.gpu_milli)
    out: FloatArray = before[rows] - after
    return out


class _Stats:
    """Lazily binds a :class:`ShapeStats` to the cluster the policy is first used with."""

    def __init__(self, workload: CompiledWorkload) -> None:
        self.workload = workload
        self._stats: ShapeStats | None = None

    def of(self, state: ClusterState) -> ShapeStats:
        if self._stats is None or self._stats.state is not state:
            self._stats = ShapeStats(self.workload, state)
        return self._stats


class LookaheadScore(ScorePlugin):
    """Prefers the node where fragmentation plus CPU-stranded GPU grows least."""

    name = "Lookahead"

    def __init__(self, model: LookaheadModel) -> None:
        self.model = model
        self.stats = _Stats(model.workload)

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        stats = self.stats.of(state)
        if pod.is_fractional:
            rows, free = share_candidates(state.gpu_free[nodes], pod.gpu_milli)
            delta = _share_rows(self.model, stats, state, pod, nodes, rows, free)
            out: IntArray = np.full(len(nodes), -1, dtype=np.int64)
            np.maximum.at(out, rows, sigmoid_score(delta))
            return out
        cpu = state.cpu_free[nodes]
        node_stats = stats.rows(nodes)
        total = node_stats[2]
        before, after = fragmentation_after_whole(
            self.model.workload, node_stats, cpu, state.model_id[nodes], pod.cpu_milli, pod.num_gpu
        )
        before = before + self.model.stranded(cpu, total)
        after = after + self.model.stranded(cpu - pod.cpu_milli, total - pod.total_gpu_milli)
        return sigmoid_score(before - after)

    def cache_key(self, pod: PodSpec) -> Hashable | None:
        return pod.shape  # memory plays no part: equal shapes score equally on an unchanged node


class LookaheadGpu(GpuPicker):
    """A fractional pod gets the best-scoring GPU, the one with the least free share among equals."""

    name = "lookahead"

    def __init__(self, model: LookaheadModel) -> None:
        self.model = model
        self.stats = _Stats(model.workload)

    def pick(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if not pod.is_fractional:
            return exclusive_gpus(state, pod, node)
        free = state.gpu_free[node]
        candidates = np.flatnonzero(free >= pod.gpu_milli)
        if not len(candidates):
            raise OverCommit(f"pod {pod.name}: no GPU of node {state.nodes[node].name} has {pod.gpu_milli} milli free")
        nodes = np.array([node])
        rows = np.zeros(len(candidates), dtype=np.int64)
        scores = sigmoid_score(_share_rows(self.model, self.stats.of(state), state, pod, nodes, rows, free[candidates]))
        best = candidates[scores == scores.max()]
        return (int(min(best, key=lambda g: (free[g], g))),)
