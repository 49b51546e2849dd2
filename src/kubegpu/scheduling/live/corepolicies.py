"""kubegpu's own policies (``Lookahead``, ``FGD``) as score plugins of the live scheduler, through the core.

Owns :class:`CorePolicyScore`: it keeps a :class:`kubegpu.scheduling.core.cluster.ClusterState` mirror of the live
cache (nodes in the cache's order, so node indices agree; every counted pod bound on the GPUs it holds) in step
with it — rebuilt when the node set changes, otherwise pods bound and unbound by difference — and asks the
core's score plugin (:class:`~kubegpu.scheduling.core.lookahead.LookaheadScore`,
:class:`~kubegpu.scheduling.core.fgd.FgdScore`) for the nodes' scores. The target workload these policies weigh is
built from every pod the cache counts (plus the pod being placed) and refreshed every ``REFRESH`` decisions. Units
as in the core: CPU milli, memory MiB (rounded up), whole GPUs as 1000 GPU-milli each, a ``kubegpu.io/gpu-milli``
share as that much of one GPU (a node's GPUs: its ``nvidia.com/gpu`` and its ``kubegpu.io/gpu-milli`` / 1000).
:meth:`CorePolicyScore.pick_share` asks the policy's own GPU picker (the simulator's) which of the GPUs the cycle
allows a fractional pod gets. Must not filter or do I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kubegpu.scheduling.core import fgd, lookahead
from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.errors import SchedulingError
from kubegpu.scheduling.core.fragmentation import CompiledWorkload
from kubegpu.scheduling.core.framework import GpuPicker, ScorePlugin
from kubegpu.scheduling.core.model import MILLI, NodeSpec, PodSpec
from kubegpu.scheduling.core.workload import TargetWorkload
from kubegpu.scheduling.live import resources
from kubegpu.scheduling.live.cache import IntArray, SchedulerCache
from kubegpu.scheduling.live.objects import GPU_PRODUCT_LABEL, PodInfo

MIB = 1024 * 1024
#: Decisions between rebuilds of the policy's workload model.
REFRESH = 256
#: Score plugin name -> core policy.
POLICIES = ("Lookahead", "FGD")


def pod_spec(pod: PodInfo) -> PodSpec:
    """A live pod as the core sees it: whole GPUs as 1000 milli each, a ``kubegpu.io/gpu-milli`` share as part of
    one GPU (a share the scheduler refuses, e.g. with both forms, counts as its whole GPUs only)."""
    num, share = pod.gpus, MILLI if pod.gpus else 0
    if not num and 0 < pod.gpu_milli <= MILLI:
        num, share = 1, pod.gpu_milli
    return PodSpec(
        name=pod.uid,
        cpu_milli=pod.requests.get(resources.CPU, 0),
        memory_mib=math.ceil(pod.requests.get(resources.MEMORY, 0) / MIB),
        num_gpu=num,
        gpu_milli=share,
    )


class CorePolicyScore:
    """One of kubegpu's policies scoring live nodes."""

    def __init__(self, policy: str) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown kubegpu policy {policy!r} (choose from {', '.join(POLICIES)})")
        self.name = policy
        self._state: ClusterState | None = None
        self._generation = -1
        self._plugin: ScorePlugin | None = None
        self._picker: tuple[ScorePlugin, GpuPicker] | None = None
        self._decisions = 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CorePolicyScore) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def _sync(self, cache: SchedulerCache) -> ClusterState | None:
        if not cache.names:
            return None
        if self._state is None or self._generation != cache.generation:
            nodes = []
            for name in cache.names:
                info = cache.nodes[name]
                count = info.gpu_count + info.allocatable.get(resources.GPU_MILLI, 0) // MILLI
                nodes.append(
                    NodeSpec(
                        name,
                        info.allocatable.get(resources.CPU, 0),
                        info.allocatable.get(resources.MEMORY, 0) // MIB,
                        count,
                        (info.labels.get(GPU_PRODUCT_LABEL) or "unknown") if count else "",
                    )
                )
            self._state = ClusterState(nodes)
            self._generation = cache.generation
            self._plugin = None
        state = self._state
        for uid in [u for u in state.bindings if u not in cache.placed]:
            state.unbind(uid)
        for uid, placed in cache.placed.items():
            if uid in state.bindings or placed.node not in state.index:
                continue
            spec = pod_spec(placed.pod)
            node = state.index[placed.node]
            gpus = list(placed.gpus)
            if spec.is_fractional and not gpus:  # GPU unknown: where best fit puts it (the plugin's own policy)
                free = state.gpu_free[node]
                fitting = state.gpus_fitting(spec, node)
                gpus = [min(fitting, key=lambda g: (free[g], g))] if fitting else []
            elif len(gpus) < spec.num_gpu:  # devices unknown: the lowest free GPUs stand in
                free = [int(g) for g in np.flatnonzero(state.gpu_free[node, : state.gpu_count[node]] == MILLI)]
                gpus += [g for g in free if g not in gpus][: spec.num_gpu - len(gpus)]
            try:
                state.bind(spec, node, gpus)
            except SchedulingError:
                continue  # over the node's allocatable (bound by someone who ignores it): not counted here
        return state

    def _build(self, cache: SchedulerCache, state: ClusterState, extra: PodSpec) -> ScorePlugin | None:
        pods = [pod_spec(p.pod) for p in cache.placed.values()] + [extra]
        try:
            if self.name == "FGD":
                return fgd.FgdScore(CompiledWorkload(TargetWorkload.from_pods(pods), state.models))
            return lookahead.LookaheadScore(lookahead.LookaheadModel.from_pods(pods, state.models, nodes=state.nodes))
        except SchedulingError:
            return None  # no GPU pod seen yet: nothing to weigh

    def score(self, cache: SchedulerCache, pod: PodInfo, nodes: IntArray) -> IntArray:
        state = self._sync(cache)
        if state is None:
            return np.zeros(len(nodes), dtype=np.int64)
        spec = pod_spec(pod)
        self._decisions += 1
        if self._plugin is None or self._decisions % REFRESH == 0:
            self._plugin = self._build(cache, state, spec)
        if self._plugin is None:
            return np.zeros(len(nodes), dtype=np.int64)
        raw = self._plugin.score(state, spec, nodes)
        return self._plugin.normalize(raw)

    def pick_share(self, cache: SchedulerCache, pod: PodInfo, node: str, among: Sequence[int]) -> int | None:
        """The GPU of ``among`` the policy's own GPU picker gives the fractional ``pod`` on ``node`` — the one the
        simulator would choose on the same cluster — or None when the mirror has no room there or no model yet."""
        state = self._sync(cache)
        if state is None or node not in state.index or not among:
            return None
        spec = pod_spec(pod)
        if self._plugin is None:
            self._plugin = self._build(cache, state, spec)
        plugin = self._plugin
        if plugin is None:
            return None
        if self._picker is None or self._picker[0] is not plugin:
            if isinstance(plugin, lookahead.LookaheadScore):
                self._picker = (plugin, lookahead.LookaheadGpu(plugin.model))
            elif isinstance(plugin, fgd.FgdScore):
                self._picker = (plugin, fgd.FgdGpu(plugin.workload))
            else:
                return None
        try:
            gpus = self._picker[1].pick(state, spec, state.index[node], among)
        except SchedulingError:
            return None  # the mirror counts the node fuller than the cache does: the cycle's own choice stands
        return gpus[0] if gpus else None
