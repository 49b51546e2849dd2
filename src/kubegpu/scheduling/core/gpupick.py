"""In-node GPU choice: which GPUs of the chosen node a pod gets.

Owns the pickers of the FGD simulator's GPU-share plugin: best fit (a
fractional pod takes the GPU with the least sufficient free share, lowest
index on ties) and random (uniform among GPUs that fit). Whole-GPU pods always
take the lowest-indexed fully free GPUs, in both. Must not choose nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.errors import OverCommit
from kubegpu.scheduling.core.framework import GpuPicker
from kubegpu.scheduling.core.model import MILLI, PodSpec


def exclusive_gpus(state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
    """The lowest-indexed ``num_gpu`` fully free GPUs of the node."""
    free = np.flatnonzero(state.gpu_free[node, : state.gpu_count[node]] == MILLI)
    if len(free) < pod.num_gpu:
        raise OverCommit(
            f"pod {pod.name}: node {state.nodes[node].name} has {len(free)} free GPUs, needs {pod.num_gpu}"
        )
    return tuple(int(g) for g in free[: pod.num_gpu])


class BestFitGpu(GpuPicker):
    """Fractional pods go to the GPU whose free share is the smallest that still fits."""

    name = "best-fit"

    def pick(self, state: ClusterState, pod: PodSpec, node: int, among: Sequence[int] | None = None) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if not pod.is_fractional:
            return exclusive_gpus(state, pod, node)
        candidates = state.gpus_fitting(pod, node, among)
        if not candidates:
            raise OverCommit(f"pod {pod.name}: no GPU of node {state.nodes[node].name} has {pod.gpu_milli} milli free")
        free = state.gpu_free[node]
        return (min(candidates, key=lambda g: (free[g], g)),)


class RandomGpu(GpuPicker):
    """Fractional pods go to a uniformly random GPU among those that fit."""

    name = "random"

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def pick(self, state: ClusterState, pod: PodSpec, node: int, among: Sequence[int] | None = None) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if not pod.is_fractional:
            return exclusive_gpus(state, pod, node)
        candidates = state.gpus_fitting(pod, node, among)
        if not candidates:
            raise OverCommit(f"pod {pod.name}: no GPU of node {state.nodes[node].name} has {pod.gpu_milli} milli free")
        return (candidates[int(self.rng.integers(len(candidates)))],)
