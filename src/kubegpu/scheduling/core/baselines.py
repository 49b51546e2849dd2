"""The five baseline score plugins of the FGD paper, vectorised over nodes.

Owns Random, DotProduct (Tetris), GpuClustering, GpuPacking and BestFit, each
computing exactly what the FGD authors' simulator computes (integer
truncations included) so the reproduction compares like with like. Must not
filter and must not pick GPUs (see :mod:`kubegpu.scheduling.core.gpupick`).

Constants from that simulator: the largest machine spec used to normalise is
128 cores (128,000 CPU milli) and 8 GPUs (8,000 GPU-milli).
"""

from __future__ import annotations

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState, IntArray
from kubegpu.scheduling.core.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, ScorePlugin
from kubegpu.scheduling.core.model import MILLI, PodSpec

MAX_SPEC_CPU = 128_000
MAX_SPEC_GPU = 8_000


class RandomScore(ScorePlugin):
    """One feasible node, drawn uniformly, gets the maximum score; every other node the minimum."""

    name = "Random"

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        out = np.full(len(nodes), MIN_NODE_SCORE, dtype=np.int64)
        out[self.rng.integers(len(nodes))] = MAX_NODE_SCORE
        return out


class DotProductScore(ScorePlugin):
    """Tetris: 100 · (1 − ⟨free, request⟩ / 2) on [CPU, total GPU-milli] normalised by the max spec.

    The smaller the dot product of what is free and what is asked, the fuller
    the node, the higher the score.
    """

    name = "DotProduct"

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        free_cpu = state.cpu_free[nodes] / MAX_SPEC_CPU
        free_gpu = state.gpu_free[nodes].sum(axis=1) / MAX_SPEC_GPU
        dot = free_cpu * (pod.cpu_milli / MAX_SPEC_CPU) + free_gpu * (pod.total_gpu_milli / MAX_SPEC_GPU)
        out: IntArray = (MAX_NODE_SCORE * (1.0 - dot / 2.0)).astype(np.int64)
        return out


class GpuClusteringScore(ScorePlugin):
    """Keeps pods of one GPU affinity class together (no-GPU, share-GPU, n-GPU).

    Bands: only this class on the node (75, 100] > this class among others
    (50, 75] > no GPU pods yet (25, 50] > other classes only (0, 25]; inside a
    band, less free GPU scores higher. CPU-only pods score the minimum everywhere.
    """

    name = "GpuClustering"

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        if pod.num_gpu == 0:
            return np.full(len(nodes), MIN_NODE_SCORE, dtype=np.int64)
        quarter = MAX_NODE_SCORE // 4
        fullness = quarter * (MAX_SPEC_GPU - state.gpu_free[nodes].sum(axis=1)) // MAX_SPEC_GPU
        counts = state.class_counts.get(pod.affinity_class)
        has_class = counts[nodes] > 0 if counts is not None else np.zeros(len(nodes), dtype=np.bool_)
        kinds = state.class_kinds[nodes]
        offset = np.where(
            has_class,
            np.where(kinds == 1, MAX_NODE_SCORE * 3 // 4, MAX_NODE_SCORE * 2 // 4),
            np.where(kinds == 0, MAX_NODE_SCORE // 4, 0),
        )
        out: IntArray = fullness + offset
        return out


class GpuPackingScore(ScorePlugin):
    """Three tiers: share an already used GPU > use free GPUs of a used node > open an idle node.

    Tier 1 scores 100 − (free% of the GPUs used)/10, at least 50; tier 2
    50 − (fully free GPUs used), at least 33; tier 3 (every GPU of the node
    free) 33 − GPU count, at least the GPU count. CPU-only pods score the minimum.
    """

    name = "GpuPacking"

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        if pod.num_gpu == 0:
            return np.full(len(nodes), MIN_NODE_SCORE, dtype=np.int64)
        free = state.gpu_free[nodes]
        count = state.gpu_count[nodes]
        fully_free = (free == MILLI).sum(axis=1)
        idle_node = fully_free == count
        tier3 = np.maximum(MAX_NODE_SCORE // 3 - fully_free, fully_free)
        # The simulator walks GPUs from the least free share up and takes the first that fit.
        fit = free >= pod.gpu_milli
        key = np.where(fit, free, 10 * MILLI)  # non-fitting GPUs sort last
        order = np.argsort(key, axis=1, kind="stable")
        taken_free = np.take_along_axis(key, order, axis=1)[:, : pod.num_gpu]
        new_gpus = (taken_free == MILLI).sum(axis=1)
        tier2 = np.maximum(MAX_NODE_SCORE // 2 - new_gpus, MAX_NODE_SCORE // 3)
        free_ratio = (taken_free * 100 // MILLI).sum(axis=1)
        tier1 = np.maximum(MAX_NODE_SCORE - free_ratio // 10, MAX_NODE_SCORE // 2)
        out: IntArray = np.where(idle_node, tier3, np.where(new_gpus > 0, tier2, tier1))
        return out


class BestFitScore(ScorePlugin):
    """Least leftover wins: 100 · (1 − Σ ½ · (free − request)/max-spec over CPU and GPU), min–max normalised."""

    name = "BestFit"

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        left_cpu = (state.cpu_free[nodes] - pod.cpu_milli) / MAX_SPEC_CPU
        left_gpu = (state.gpu_free[nodes].sum(axis=1) - pod.total_gpu_milli) / MAX_SPEC_GPU
        out: IntArray = ((1.0 - (0.5 * left_cpu + 0.5 * left_gpu)) * MAX_NODE_SCORE).astype(np.int64)
        return out

    def normalize(self, scores: IntArray) -> IntArray:
        return min_max_normalize(scores)


def min_max_normalize(scores: IntArray) -> IntArray:
    """Integer min–max rescale to MIN..MAX_NODE_SCORE; all MIN when every score is equal."""
    low, high = scores.min(), scores.max()
    if high == low:
        return np.full(scores.shape, MIN_NODE_SCORE, dtype=np.int64)
    out: IntArray = (scores - low) * (MAX_NODE_SCORE - MIN_NODE_SCORE) // (high - low) + MIN_NODE_SCORE
    return out
