"""Filter plugins: which nodes can host a pod at all.

Owns :class:`NodeResourcesFit` (CPU and memory, as kube-scheduler's filter of
that name) and :class:`GpuShareFit` (the pod's GPU model is allowed and enough
GPUs each have the pod's per-GPU share free, as the FGD simulator's
Open-Gpu-Share filter). Must not rank nodes.
"""

from __future__ import annotations

import numpy as np

from kubegpu.scheduling.core.cluster import BoolArray, ClusterState
from kubegpu.scheduling.core.framework import FilterPlugin
from kubegpu.scheduling.core.model import MILLI, PodSpec


class NodeResourcesFit(FilterPlugin):
    """Free CPU and memory cover the pod's requests."""

    name = "NodeResourcesFit"

    def filter(self, state: ClusterState, pod: PodSpec) -> BoolArray:
        ok: BoolArray = (state.cpu_free >= pod.cpu_milli) & (state.memory_free >= pod.memory_mib)
        return ok


class GpuShareFit(FilterPlugin):
    """The node's GPU model is allowed and ``num_gpu`` of its GPUs each have ``gpu_milli`` free."""

    name = "GpuShareFit"

    def filter(self, state: ClusterState, pod: PodSpec) -> BoolArray:
        if pod.num_gpu == 0:
            return np.ones(state.size, dtype=np.bool_)
        if pod.gpu_milli == MILLI:
            enough = (state.gpu_free == MILLI).sum(axis=1) >= pod.num_gpu
        else:
            enough = (state.gpu_free >= pod.gpu_milli).sum(axis=1) >= pod.num_gpu
        ok: BoolArray = enough & state.model_mask(pod.gpu_models)
        return ok


def default_filters() -> tuple[FilterPlugin, ...]:
    """The filter set every built-in policy uses."""
    return (NodeResourcesFit(), GpuShareFit())
