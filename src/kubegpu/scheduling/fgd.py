"""Fragmentation Gradient Descent (FGD): the score plugin and its in-node GPU choice.

Owns :class:`FgdScore` — for each feasible node, place the pod hypothetically,
take the drop of the node's fragmentation Δ = F_before − F_after (GPU-milli),
and score ⌊100 · sigmoid(Δ / 1000)⌋ — and :class:`FgdGpu`, which gives a
fractional pod the GPU whose hypothetical placement scores best (the lowest
index among equal integer scores, as the FGD simulator does). Whole-GPU pods
take fully free GPUs. Must not filter; the measure itself lives in
:mod:`kubegpu.scheduling.fragmentation`.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from kubegpu.scheduling.cluster import ClusterState, IntArray
from kubegpu.scheduling.errors import OverCommit
from kubegpu.scheduling.fragmentation import (
    CompiledWorkload,
    FloatArray,
    fragmentation_after_fractional,
    fragmentation_after_whole,
)
from kubegpu.scheduling.framework import MAX_NODE_SCORE, GpuPicker, ScorePlugin
from kubegpu.scheduling.gpupick import exclusive_gpus
from kubegpu.scheduling.model import PodSpec


def sigmoid_score(delta: FloatArray) -> IntArray:
    """⌊100 · sigmoid(Δ/1000)⌋ — the FGD simulator's integer node score."""
    out: IntArray = ((1.0 / (1.0 + np.exp(-delta / 1000.0))) * MAX_NODE_SCORE).astype(np.int64)
    return out


def fractional_scores(cw: CompiledWorkload, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
    """FGD score per node and GPU for a fractional pod; −1 where the GPU lacks the share."""
    gpu = state.gpu_free[nodes]
    before, after = fragmentation_after_fractional(
        cw, state.cpu_free[nodes], gpu, state.model_id[nodes], pod.cpu_milli, pod.gpu_milli
    )
    scores = sigmoid_score(before[:, None] - after)
    out: IntArray = np.where(gpu >= pod.gpu_milli, scores, -1)
    return out


class FgdScore(ScorePlugin):
    """Prefers the node whose fragmentation grows least (or shrinks most) with the pod on it."""

    name = "FGD"

    def __init__(self, workload: CompiledWorkload) -> None:
        self.workload = workload

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        if pod.is_fractional:
            out: IntArray = fractional_scores(self.workload, state, pod, nodes).max(axis=1)
            return out
        before, after = fragmentation_after_whole(
            self.workload,
            state.cpu_free[nodes],
            state.gpu_free[nodes],
            state.model_id[nodes],
            pod.cpu_milli,
            pod.num_gpu,
        )
        return sigmoid_score(before - after)

    def cache_key(self, pod: PodSpec) -> Hashable | None:
        return pod.shape  # FGD ignores memory: equal shapes score equally on an unchanged node


class FgdGpu(GpuPicker):
    """A fractional pod gets the GPU with the best FGD score; whole-GPU pods the first free GPUs."""

    name = "fgd"

    def __init__(self, workload: CompiledWorkload) -> None:
        self.workload = workload

    def pick(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if not pod.is_fractional:
            return exclusive_gpus(state, pod, node)
        scores = fractional_scores(self.workload, state, pod, np.array([node]))[0]
        if scores.max() < 0:
            raise OverCommit(f"pod {pod.name}: no GPU of node {state.nodes[node].name} has {pod.gpu_milli} milli free")
        return (int(np.argmax(scores)),)
