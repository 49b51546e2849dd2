"""Fragmentation Gradient Descent (FGD): the score plugin and its in-node GPU choice.

Owns :class:`FgdScore` — for each feasible node, place the pod hypothetically,
take the drop of the node's fragmentation Δ = F_before − F_after (GPU-milli),
and score ⌊100 · sigmoid(Δ / 1000)⌋ — and :class:`FgdGpu`, which gives a
fractional pod the GPU whose hypothetical placement scores best (the lowest
index among equal integer scores, as the FGD simulator does). Whole-GPU pods
take fully free GPUs. Must not filter; the measure itself lives in
:mod:`kubegpu.scheduling.core.fragmentation`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState, IntArray
from kubegpu.scheduling.core.errors import OverCommit
from kubegpu.scheduling.core.fragmentation import (
    CompiledWorkload,
    FloatArray,
    ShapeStats,
    ShapeStatsCache,
    fragment_matrix,
    fragmentation_after_share,
    fragmentation_after_whole,
    share_candidates,
)
from kubegpu.scheduling.core.framework import MAX_NODE_SCORE, GpuPicker, ScorePlugin
from kubegpu.scheduling.core.gpupick import exclusive_gpus
from kubegpu.scheduling.core.model import PodSpec


def sigmoid_score(delta: FloatArray) -> IntArray:
    """⌊100 · sigmoid(Δ/1000)⌋ — the FGD simulator's integer node score."""
    out: IntArray = ((1.0 / (1.0 + np.exp(-delta / 1000.0))) * MAX_NODE_SCORE).astype(np.int64)
    return out


def fractional_node_scores(stats: ShapeStats, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
    """Best FGD score over each node's GPUs for a fractional pod (every given node has a fitting GPU)."""
    cw = stats.cw
    rows_stats = stats.rows(nodes)
    cpu = state.cpu_free[nodes]
    mid = state.model_id[nodes]
    fits, small, total = rows_stats
    before = fragment_matrix(cw, fits, small, total, cpu, mid) @ cw.weights
    rows, free = share_candidates(state.gpu_free[nodes], pod.gpu_milli)
    after = fragmentation_after_share(
        cw, (fits[rows], small[rows], total[rows]), cpu[rows], mid[rows], free, pod.cpu_milli, pod.gpu_milli
    )
    out: IntArray = np.full(len(nodes), -1, dtype=np.int64)
    np.maximum.at(out, rows, sigmoid_score(before[rows] - after))
    return out


def fractional_gpu_scores(stats: ShapeStats, state: ClusterState, pod: PodSpec, node: int) -> IntArray:
    """FGD score of each GPU of one node for a fractional pod; −1 where the GPU lacks the share."""
    cw = stats.cw
    nodes = np.array([node])
    fits, small, total = stats.rows(nodes)
    cpu = state.cpu_free[nodes]
    mid = state.model_id[nodes]
    before = fragment_matrix(cw, fits, small, total, cpu, mid) @ cw.weights
    gpu = state.gpu_free[node]
    count = len(gpu)
    rep = np.zeros(count, dtype=np.int64)
    after = fragmentation_after_share(
        cw, (fits[rep], small[rep], total[rep]), cpu[rep], mid[rep], gpu, pod.cpu_milli, pod.gpu_milli
    )
    out: IntArray = np.where(gpu >= pod.gpu_milli, sigmoid_score(before[0] - after), -1)
    return out


class FgdScore(ScorePlugin):
    """Prefers the node whose fragmentation grows least (or shrinks most) with the pod on it."""

    name = "FGD"

    def __init__(self, workload: CompiledWorkload) -> None:
        self.workload = workload
        self.stats = ShapeStatsCache(workload)

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        stats = self.stats.of(state)
        if pod.is_fractional:
            return fractional_node_scores(stats, state, pod, nodes)
        before, after = fragmentation_after_whole(
            self.workload, stats.rows(nodes), state.cpu_free[nodes], state.model_id[nodes], pod.cpu_milli, pod.num_gpu
        )
        return sigmoid_score(before - after)

    def cache_key(self, pod: PodSpec) -> Hashable | None:
        return pod.shape  # FGD ignores memory: equal shapes score equally on an unchanged node


class FgdGpu(GpuPicker):
    """A fractional pod gets the GPU with the best FGD score; whole-GPU pods the first free GPUs."""

    name = "fgd"

    def __init__(self, workload: CompiledWorkload) -> None:
        self.workload = workload
        self.stats = ShapeStatsCache(workload)

    def pick(self, state: ClusterState, pod: PodSpec, node: int, among: Sequence[int] | None = None) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if not pod.is_fractional:
            return exclusive_gpus(state, pod, node)
        scores = fractional_gpu_scores(self.stats.of(state), state, pod, node)
        if among is not None:
            scores = np.where(np.isin(np.arange(len(scores)), list(among)), scores, -1)
        if scores.max() < 0:
            raise OverCommit(f"pod {pod.name}: no GPU of node {state.nodes[node].name} has {pod.gpu_milli} milli free")
        return (int(np.argmax(scores)),)
