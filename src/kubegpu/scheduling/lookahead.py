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
    fragmentation_after_fractional,
    fragmentation_after_whole,
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


def fractional_deltas(model: LookaheadModel, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
    """Drop of F + S per node and GPU for a fractional pod; −inf where the GPU lacks the share."""
    gpu = state.gpu_free[nodes]
    cpu = state.cpu_free[nodes]
    before, after = fragmentation_after_fractional(
        model.workload, cpu, gpu, state.model_id[nodes], pod.cpu_milli, pod.gpu_milli
    )
    total = gpu.sum(axis=1)
    before = before + model.stranded(cpu, total)
    after = after + model.stranded(cpu - pod.cpu_milli, total - pod.gpu_milli)[:, None]
    out: FloatArray = np.where(gpu >= pod.gpu_milli, before[:, None] - after, -np.inf)
    return out


def fractional_scores(model: LookaheadModel, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
    """Integer score per node and GPU for a fractional pod; −1 where the GPU lacks the share."""
    delta = fractional_deltas(model, state, pod, nodes)
    fits = np.isfinite(delta)
    out: IntArray = np.where(fits, sigmoid_score(np.where(fits, delta, 0.0)), -1)
    return out


class LookaheadScore(ScorePlugin):
    """Prefers the node where fragmentation plus CPU-stranded GPU grows least."""

    name = "Lookahead"

    def __init__(self, model: LookaheadModel) -> None:
        self.model = model

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        if pod.is_fractional:
            out: IntArray = fractional_scores(self.model, state, pod, nodes).max(axis=1)
            return out
        cpu = state.cpu_free[nodes]
        total = state.gpu_free[nodes].sum(axis=1)
        before, after = fragmentation_after_whole(
            self.model.workload, cpu, state.gpu_free[nodes], state.model_id[nodes], pod.cpu_milli, pod.num_gpu
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

    def pick(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if not pod.is_fractional:
            return exclusive_gpus(state, pod, node)
        scores = fractional_scores(self.model, state, pod, np.array([node]))[0]
        best = scores.max()
        if best < 0:
            raise OverCommit(f"pod {pod.name}: no GPU of node {state.nodes[node].name} has {pod.gpu_milli} milli free")
        free = state.gpu_free[node]
        candidates = np.flatnonzero(scores == best)
        return (int(min(candidates, key=lambda g: (free[g], g))),)
