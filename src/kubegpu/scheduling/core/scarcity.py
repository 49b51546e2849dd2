"""Which nodes the workload's pods that can run only on some of them will need more of than is free.

Owns :class:`Scarcity`, built from the target workload's pod list and the
cluster's nodes, and :meth:`Scarcity.penalty`, the GPU-milli a placement takes
away from pods that can run nowhere else. Must not filter, score or choose
nodes; pure arithmetic on the cluster's free GPU-milli.

Nodes of one *kind* (same GPU model, GPU count, CPU and memory capacity) are
alike to every pod. A GPU pod's *home* is the set of kinds that could hold it
on an empty node — its GPU model constraint, its GPU count, its CPU and its
memory decide (a ``T4`` pod's home is the T4 kinds; an 8-GPU pod asking 120
cores is at home only on the 128-core 8-GPU kind) — together with its GPU
count: 8-GPU pods bound to G3 need a whole G3 node, 1-GPU pods bound to G3
any G3 GPU, so they are two homes and a 1-GPU G3 pod that breaks the last
whole G3 node takes it from the first. For every home H narrower than all GPU
kinds, ``s_H`` is the share of the workload's GPU request made by pods whose
kinds lie inside H's and that ask H's GPU count. If the rest of the workload
arrives in the same mix until the cluster is full, it brings GPU-milli until
the free GPU-milli, CPU or memory runs out, whichever comes first: ``to_come
= min(free GPU-milli, free CPU / ρ, free memory / μ)``, ρ and μ the
workload's CPU and memory request per GPU-milli it requests (CPU-only pods
included: they too take their part of the free CPU). H's pods will ask for
``s_H · to_come`` more GPU-milli against ``free_H``: the free GPU-milli of
H's nodes, each node's counted at the share of H's pods (by GPU request) that
its free GPUs, CPU and memory could still take — a node with a sliver of CPU
left is usable for the few of H's pods that ask that little, not for all; the
pressure ``min(1, s_H · to_come / free_H)`` is the chance that a milli of H
taken now by a pod that could have gone elsewhere is one those pods will
miss. A pod not of H (CPU-only pods included) pays, on a node of H that can
still take the least H's pods ask, what it takes of H — its GPU-milli plus
its CPU counted as the GPU-milli it would feed for H's pods — times the
pressure, and where the placement leaves that node unable to take them, the
rest of what the node had usable for them times the pressure beyond the weight
``w_H`` the fragmentation measure gives H's shapes (it already counts that
rest as their fragment at ``w_H``: their share of the pods when it weighs
shapes by pod count, as FGD and ``lookahead`` do, ``s_H`` when by GPU
request); the highest over the homes counts. Pods of H pay nothing there.
Without such pods (every GPU pod at home everywhere) every penalty is zero.
The pressure moves in steps of 1/32 (``PRESSURE_STEPS``) so that a scorer can
cache node scores per pressure and stay exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.fragmentation import FloatArray, IntArray
from kubegpu.scheduling.core.model import NodeSpec, PodSpec

PRESSURE_STEPS = 32

#: A node kind: (GPU model, GPUs, CPU milli, memory MiB).
Kind = tuple[str, int, int, int]


def _home(kinds: Sequence[Kind], pod: PodSpec) -> frozenset[int]:
    """Indices of the kinds whose empty node could hold the pod."""
    return frozenset(
        k
        for k, (model, gpus, cpu, memory) in enumerate(kinds)
        if gpus >= pod.num_gpu
        and (not pod.gpu_models or model in pod.gpu_models)
        and cpu >= pod.cpu_milli
        and memory >= pod.memory_mib
    )


@dataclass
class _Tracked:
    """What :class:`Scarcity` keeps per cluster: usable milli and GPU counts per node and home, their totals."""

    state: ClusterState
    per_node: FloatArray
    count: IntArray
    versions: IntArray
    total: FloatArray
    pressure: tuple[float, FloatArray] | None = None


@dataclass(frozen=True)
class Scarcity:
    """Node kinds, the narrow homes of the workload's GPU pods, each home's share of the GPU request and weight."""

    kinds: tuple[Kind, ...]
    kind_of_node: IntArray
    homes: tuple[frozenset[int], ...]
    member: FloatArray  # member[j, k] = 1 when kind k is in home j
    share: FloatArray  # share[j] = GPU request of pods whose home lies inside home j / all GPU request
    cpu_per_milli: FloatArray  # cpu_per_milli[j] = CPU those pods ask per GPU-milli they ask
    need: IntArray  # need[j] = (GPUs, milli per GPU, CPU, memory): the least any of those pods asks of a node
    gpus: IntArray  # gpus[j] = the GPU count every pod of home j asks
    counted: FloatArray  # counted[j] = the weight the fragmentation measure gives those pods' shapes
    cpu_per_gpu_milli: float = 0.0  # ρ: the workload's CPU request (CPU-only pods too) per GPU-milli requested
    memory_per_gpu_milli: float = 0.0  # μ: the same for memory (MiB)
    # fits[j]: (shapes, 4) — milli per GPU, CPU, memory and share of home j's GPU request, per distinct ask of its pods
    fits: tuple[FloatArray, ...] = ()
    _pod_homes: dict[tuple[int, int, int, frozenset[str]], frozenset[int]] = field(default_factory=dict, compare=False)
    _usable: dict[int, _Tracked] = field(default_factory=dict, compare=False)

    @classmethod
    def from_pods(cls, pods: Sequence[PodSpec], nodes: Sequence[NodeSpec], *, counted_by_pods: bool = True) -> Scarcity:
        """``counted_by_pods``: the fragmentation measure weighs shapes by pod count (else by GPU request)."""
        kinds = sorted({(n.model, n.gpus, n.cpu_milli, n.memory_mib) for n in nodes if n.gpus})
        index = {kind: k for k, kind in enumerate(kinds)}
        kind_of_node = np.array(
            [index.get((n.model, n.gpus, n.cpu_milli, n.memory_mib), -1) for n in nodes], dtype=np.int64
        )
        everywhere = frozenset(range(len(kinds)))
        demand = sum(p.total_gpu_milli for p in pods)
        # Pods no node could ever hold ask nothing of any home.
        at_home = [(h, p) for p in pods if p.num_gpu for h in (_home(kinds, p),) if h]
        # A home is a set of kinds and a GPU count: the 8-GPU pods bound to G3 nodes need a whole G3 node, the
        # 1-GPU ones any G3 GPU, so a 1-GPU pod breaking the last whole G3 node takes it from the first.
        keys = sorted({(h, p.num_gpu) for h, p in at_home if h != everywhere}, key=lambda k: (sorted(k[0]), k[1]))
        homes = [h for h, _ in keys]
        gpus = np.array([n for _, n in keys], dtype=np.int64)
        share = np.zeros(len(homes))
        counted = np.zeros(len(homes))
        cpu_per_milli = np.zeros(len(homes))
        need = np.zeros((len(homes), 4), dtype=np.int64)
        fits: list[FloatArray] = []
        for j, home in enumerate(homes):
            inside = [p for h, p in at_home if h <= home and p.num_gpu == gpus[j]]
            milli = sum(p.total_gpu_milli for p in inside)
            share[j] = milli / demand
            counted[j] = len(inside) / len(pods) if counted_by_pods else share[j]
            cpu_per_milli[j] = sum(p.cpu_milli for p in inside) / milli
            need[j] = [min(getattr(p, a) for p in inside) for a in ("num_gpu", "gpu_milli", "cpu_milli", "memory_mib")]
            asks: dict[tuple[int, int, int], float] = {}
            for p in inside:
                key = (p.gpu_milli, p.cpu_milli, p.memory_mib)
                asks[key] = asks.get(key, 0.0) + p.total_gpu_milli / milli
            fits.append(np.array([(*key, weight) for key, weight in sorted(asks.items())], dtype=np.float64))
        member = np.array([[k in h for k in range(len(kinds))] for h in homes], dtype=np.float64)
        member = member.reshape(len(homes), len(kinds))
        rho = sum(p.cpu_milli for p in pods) / demand
        mu = sum(p.memory_mib for p in pods) / demand
        return cls(
            tuple(kinds),
            kind_of_node,
            tuple(homes),
            member,
            share,
            cpu_per_milli,
            need,
            gpus,
            counted,
            rho,
            mu,
            tuple(fits),
        )

    def home_of(self, pod: PodSpec) -> frozenset[int]:
        """The kinds whose empty node could hold the pod (kept per request)."""
        key = (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_models)
        home = self._pod_homes.get(key)
        if home is None:
            home = self._pod_homes[key] = _home(self.kinds, pod)
        return home

    def _counts(self, gpu: IntArray) -> IntArray:
        """(nodes, homes): how many GPUs of each node have at least the per-GPU milli each home's pods ask."""
        out: IntArray = (gpu[:, :, None] >= self.need[:, 1][None, None, :]).sum(axis=1)
        return out

    def _usable_rows(
        self, kind: IntArray, count: IntArray, gpu: IntArray, cpu: IntArray, memory: IntArray
    ) -> FloatArray:
        """(nodes, homes): a node's free GPU-milli for each home it belongs to, times the share of its pods it fits.

        The share is of the home's GPU request, over the pods whose ask (GPUs
        of enough free milli, CPU, memory) the node's free resources still
        meet; zero where it cannot take the least of them.
        """
        inside = np.where(kind[:, None] >= 0, self.member.T[np.maximum(kind, 0)], 0.0)
        enough = count >= self.need[:, 0][None, :]
        enough &= cpu[:, None] >= self.need[:, 2][None, :]
        enough &= memory[:, None] >= self.need[:, 3][None, :]
        share = np.zeros(enough.shape)
        for j, asks in enumerate(self.fits):
            gpus_with = (gpu[:, :, None] >= asks[None, None, :, 0]).sum(axis=1)  # (nodes, asks)
            fit = (
                (gpus_with >= self.gpus[j]) & (cpu[:, None] >= asks[None, :, 1]) & (memory[:, None] >= asks[None, :, 2])
            )
            share[:, j] = fit @ asks[:, 3]
        out: FloatArray = inside * enough * share * gpu.sum(axis=1)[:, None]
        return out

    def _tracked(self, state: ClusterState) -> _Tracked:
        """Per-node usable milli and GPU counts, kept current with the cluster (only changed nodes recomputed)."""
        tracked = self._usable.get(0)
        if tracked is None or tracked.state is not state:
            homes = len(self.homes)
            tracked = _Tracked(
                state,
                np.zeros((state.size, homes)),
                np.zeros((state.size, homes), dtype=np.int64),
                np.full(state.size, -1, dtype=np.int64),
                np.zeros(homes),
            )
            self._usable[0] = tracked
        stale = np.flatnonzero(tracked.versions != state.version)
        if len(stale):
            count = self._counts(state.gpu_free[stale])
            rows = self._usable_rows(
                self.kind_of_node[stale], count, state.gpu_free[stale], state.cpu_free[stale], state.memory_free[stale]
            )
            tracked.per_node[stale] = rows
            # Summed afresh, not by difference: the shares are fractions, and a running sum would drift from it.
            tracked.total = tracked.per_node.sum(axis=0)
            tracked.count[stale] = count
            tracked.versions[stale] = state.version[stale]
            tracked.pressure = None
        return tracked

    def usable_by_node(self, state: ClusterState) -> FloatArray:
        """(nodes, homes) usable free GPU-milli, kept current with the cluster."""
        return self._tracked(state).per_node

    def usable(self, state: ClusterState) -> FloatArray:
        """Per narrow home: free GPU-milli on its nodes that can still take the least of what its pods ask."""
        return self._tracked(state).total.copy()

    def to_come(self, state: ClusterState) -> float:
        """GPU-milli the rest of the workload, in its mix, can still bring: until GPU, CPU or memory runs out."""
        out = float(state.total_gpu_milli - state.allocated_gpu_milli)
        if self.cpu_per_gpu_milli > 0:
            out = min(out, float(state.cpu_free.sum()) / self.cpu_per_gpu_milli)
        if self.memory_per_gpu_milli > 0:
            out = min(out, float(state.memory_free.sum()) / self.memory_per_gpu_milli)
        return max(out, 0.0)

    def pressure(self, state: ClusterState) -> FloatArray:
        """Per narrow home: min(1, its pods' share of the GPU-milli to come / the home's free milli)."""
        if not self.homes:
            return np.zeros(0)
        tracked = self._tracked(state)
        to_come = self.to_come(state)
        if tracked.pressure is not None and tracked.pressure[0] == to_come:
            return tracked.pressure[1]
        free_home = tracked.total
        wanted = self.share * to_come
        raw = np.where(free_home > 0, np.minimum(1.0, wanted / np.maximum(free_home, 1.0)), 0.0)
        out: FloatArray = np.round(raw * PRESSURE_STEPS) / PRESSURE_STEPS
        out.setflags(write=False)
        tracked.pressure = (to_come, out)
        return out

    def penalty(self, state: ClusterState, pod: PodSpec, nodes: IntArray, free: IntArray | None = None) -> FloatArray:
        """Pressure-weighted GPU-milli the pod would take on each node from homes it could leave to their pods.

        What it takes of a home is its GPU-milli plus its CPU counted as the
        GPU-milli that CPU would feed for the home's pods: a CPU-only pod on
        the only kind of node a 120-core 8-GPU pod fits takes from it too.
        Only nodes that can still take the least the home's pods ask lose
        them anything. Where the placement leaves such a node unable to
        (it breaks the eight free GPUs of a node an 8-GPU pod needs), the
        rest of what the node had free for them is lost too, weighted by the
        pressure beyond the weight the fragmentation measure gives the home's
        shapes: at that weight it already counts it. ``free``,
        for a fractional pod, is the free milli of the GPU it would take on
        each given node (``nodes`` may then repeat a node, one row per GPU).
        """
        if not self.homes or not len(nodes):
            return np.zeros(len(nodes))
        home = self.home_of(pod) if pod.num_gpu else frozenset(range(len(self.kinds)))
        elsewhere = np.array(
            [not (home <= h and n == pod.num_gpu) for h, n in zip(self.homes, self.gpus, strict=True)],
            dtype=np.float64,
        )
        weight = self.pressure(state) * elsewhere
        if not weight.any():
            return np.zeros(len(nodes))
        tracked = self._tracked(state)
        before = tracked.per_node[nodes]  # (nodes, homes); > 0 exactly where the node can serve the home
        need = self.need
        count = tracked.count[nodes]
        if pod.is_fractional and free is not None:
            count = count - ((free[:, None] >= need[:, 1][None, :]) & (free[:, None] - pod.gpu_milli < need[:, 1]))
        else:
            count = count - pod.num_gpu  # whole GPUs taken are free GPUs, each counted above
        still = count >= need[:, 0][None, :]
        still &= (state.cpu_free[nodes] - pod.cpu_milli)[:, None] >= need[:, 2][None, :]
        still &= (state.memory_free[nodes] - pod.memory_mib)[:, None] >= need[:, 3][None, :]
        taken = pod.total_gpu_milli + pod.cpu_milli / np.maximum(self.cpu_per_milli, 1e-9)
        # Breaking the node for the home loses it the rest of what the node had free for the home's pods. The
        # fragmentation measure already counts that rest as a fragment for those pods' shapes at the weight it
        # gives them (their share of the pods); what it misses is the pressure beyond that weight.
        broken = np.where(still, 0.0, np.maximum(before - taken[None, :], 0.0))
        beyond = np.maximum(weight - self.counted, 0.0)
        loss = np.where(before > 0, taken[None, :] * weight[None, :] + broken * beyond[None, :], 0.0)
        out: FloatArray = loss.max(axis=1)
        return out
