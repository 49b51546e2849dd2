"""Our policy, ``lookahead``: FGD's fragmentation gradient, looking further ahead at the workload to come.

Owns :class:`LookaheadModel` (how the policy's view of the target workload is
built), :class:`LookaheadScore` and :class:`LookaheadGpu`. Must not filter and
must not bind; the gap tables live in :mod:`kubegpu.scheduling.core.gaps`.

Why: FGD measures, for the *next* task drawn from the target workload, how
much free GPU-milli that task could not use. It is blind to what the rest of
the workload will do with a node:

* its CPU: a CPU-only pod that takes 12 of a GPU node's 96 cores crosses no
  task's threshold today, yet the node's eight GPUs will later need about 11
  cores each, so the CPU runs out first and GPUs stay idle;
* the fate of a GPU's leftover share: 530 milli left by a 0.47-GPU pod look
  as bad to FGD as 190 milli left by a 0.81-GPU pod, but the first will be
  closed by the next 0.47 pod while nothing common ever fits the second. So
  FGD happily puts a 0.32 pod on the 530 share, leaving 210 milli that only
  the rarest pods can use, where a fresh GPU (680 left, the natural home of a
  0.65 pod) would have wasted nothing.

What it does, per node n, with G_n free GPU-milli and C_n free CPU milli:

* F_n — FGD's fragmentation of the node for the target workload, over *all*
  task shapes of the pod list (FGD keeps only the most popular 95 %; the rare
  multi-GPU shapes it drops are the ones that need whole nodes), each shape
  weighted by its share of the pods, as FGD (``demand_weighted`` weighs it
  by its share of the GPU request instead: that protects whole nodes
  everywhere, and on workloads rich in multi-GPU pods it drowns the measure's
  sense for the shares fractional pods leave — the whole nodes multi-GPU pods
  need are the scarcity term's business);
* S_n = max(0, G_n − C_n / ρ) — GPU-milli the node cannot feed with CPU, where
  ρ is the workload's total CPU request (CPU-only pods included, because they
  too must land somewhere) per GPU-milli requested;
* for a fractional pod, the gain of the k-pod gap tables
  (:class:`~kubegpu.scheduling.core.gaps.GapTables`): the drop of the milli that
  none of the next k pods could use on the GPU it takes, a closing placement
  as good as the share's natural partner never counted as a loss; weighted by
  ``gap_weight``;
* minus the scarcity penalty (:mod:`kubegpu.scheduling.core.scarcity`): the
  capacity the pod takes from nodes that pods of the workload which can run
  only there (a GPU model constraint, more CPU than most nodes have) will
  need, weighted by how much of it they will need — counted only on nodes
  that can still take those pods, and for a node it breaks for them, the
  rest of the node at the pressure beyond the weight F gives their shapes
  (homes are kinds *and* GPU counts: the 8-GPU pods that need a whole 8-GPU
  node are a home of their own);
* the score of a node is ⌊100 · sigmoid(Δ / 1000)⌋ with Δ the drop of
  F_n + S_n plus the weighted gap gain minus the penalty — FGD's coarse scale, whose ties go to
  the node the seeded tie-break ranks first, so near-equal nodes fill one
  after another (first fit) instead of spreading; when every feasible node
  has Δ < 0, the best one's loss is taken from all first (:func:`relative_sigmoid`):
  it is lost wherever the pod goes, and left in it pushes every Δ into the
  sigmoid's flat tail, where all nodes score 0 and the tie-break chooses
  (an 8-GPU pod paying for a home every 8-GPU node belongs to took the last
  128-core nodes that 120-core pods need while 96-core ones were free);
* a fractional pod takes the GPU with the best such score, ties to the GPU
  with the least free share (best fit).

Everything comes from the cluster state, the pod and the workload's shapes and
their frequencies — what FGD itself uses — never from the order of future pods.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState, IntArray
from kubegpu.scheduling.core.errors import InvalidSpec, OverCommit
from kubegpu.scheduling.core.fgd import sigmoid_score
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
from kubegpu.scheduling.core.framework import GpuPicker, ScorePlugin
from kubegpu.scheduling.core.gaps import DEFAULT_HORIZON, GapTables
from kubegpu.scheduling.core.gpupick import exclusive_gpus
from kubegpu.scheduling.core.model import NodeSpec, PodSpec
from kubegpu.scheduling.core.scarcity import Scarcity
from kubegpu.scheduling.core.workload import TargetWorkload

DEFAULT_GAP_WEIGHT = 8.0


@dataclass(frozen=True)
class LookaheadModel:
    """The target workload as arrays, ρ (CPU milli requested per GPU-milli) and the k-pod gap tables."""

    workload: CompiledWorkload
    cpu_per_gpu_milli: float
    stranding_weight: float = 1.0
    gaps: GapTables | None = None
    gap_weight: float = DEFAULT_GAP_WEIGHT
    scarcity: Scarcity | None = None

    @classmethod
    def from_pods(
        cls,
        pods: Sequence[PodSpec],
        models: tuple[str, ...],
        stranding_weight: float = 1.0,
        *,
        horizon: int = DEFAULT_HORIZON,
        gap_weight: float = DEFAULT_GAP_WEIGHT,
        demand_weighted: bool = False,
        nodes: Sequence[NodeSpec] = (),
    ) -> LookaheadModel:
        gpu_demand = sum(p.total_gpu_milli for p in pods)
        if gpu_demand <= 0:
            raise InvalidSpec("the lookahead policy needs a workload with at least one GPU pod")
        if not (np.isfinite(gap_weight) and gap_weight >= 0):
            raise InvalidSpec(f"gap weight must be a non-negative number, got {gap_weight}")
        # Shapes weighted by pod count, as FGD (the next pod decides what is a fragment), or with
        # ``demand_weighted`` by their GPU request (the next GPU-milli: 8-GPU shapes weigh 8 times more).
        target = TargetWorkload.from_pods(
            pods, threshold=1.0, weight=(lambda p: p.total_gpu_milli) if demand_weighted else None
        )
        rho = sum(p.cpu_milli for p in pods) / gpu_demand
        return cls(
            CompiledWorkload(target, models),
            rho,
            stranding_weight,
            GapTables.from_pods(pods, horizon),
            gap_weight,
            Scarcity.from_pods(pods, nodes, counted_by_pods=not demand_weighted) if nodes else None,
        )

    def scarce(self, state: ClusterState, pod: PodSpec, nodes: IntArray, free: IntArray | None = None) -> FloatArray:
        """GPU-milli of scarce models the pod would take from pods that can run only there (0 without a term)."""
        if self.scarcity is None:
            return np.zeros(len(nodes))
        return self.scarcity.penalty(state, pod, nodes, free)

    def gap_gain(self, free: IntArray, milli: int) -> FloatArray:
        """Weighted drop of k-pod stranded milli when a ``milli`` pod takes GPUs with ``free`` milli."""
        if self.gaps is None or not self.gap_weight:
            return np.zeros(np.shape(free))
        out: FloatArray = self.gap_weight * self.gaps.gain(free, milli)
        return out

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
    """Drop of F + S plus the weighted gap gain when a fractional pod takes a GPU with ``free`` milli."""
    cw = model.workload
    fits, small, total = stats.rows(nodes)
    cpu = state.cpu_free[nodes]
    mid = state.model_id[nodes]
    before = fragment_matrix(cw, fits, small, total, cpu, mid) @ cw.weights + model.stranded(cpu, total)
    after = fragmentation_after_share(
        cw, (fits[rows], small[rows], total[rows]), cpu[rows], mid[rows], free, pod.cpu_milli, pod.gpu_milli
    ) + model.stranded(cpu[rows] - pod.cpu_milli, total[rows] - pod.gpu_milli)
    gain = model.gap_gain(free, pod.gpu_milli) - model.scarce(state, pod, nodes[rows], free)
    out: FloatArray = before[rows] - after + gain
    return out


RAW_SCALE = 1024  # raw scores are Δ in 1/RAW_SCALE milli


def _raw(delta: FloatArray) -> IntArray:
    out: IntArray = np.round(delta * RAW_SCALE).astype(np.int64)
    return out


def relative_sigmoid(raw: IntArray) -> IntArray:
    """FGD's integer score of Δ = raw / RAW_SCALE, after taking away the loss every candidate has.

    When even the best candidate loses (Δ < 0), that much is lost wherever the
    pod goes; only the rest tells the candidates apart. Without the shift a
    large unavoidable loss (a scarce home every candidate belongs to) pushes
    every Δ far into the sigmoid's flat tail, where the integer score is 0
    for all and the tie-break, not the policy, picks the node.
    """
    if not len(raw):
        return raw
    best = int(raw.max())
    # Clamped far below any score but 0, so that the sigmoid's exponential cannot overflow.
    return sigmoid_score(np.maximum((raw - min(best, 0)) / RAW_SCALE, -100_000.0))


class LookaheadScore(ScorePlugin):
    """Prefers the node where fragmentation, CPU-stranded GPU and k-pod stranded share grow least."""

    name = "Lookahead"

    def __init__(self, model: LookaheadModel) -> None:
        self.model = model
        self.stats = ShapeStatsCache(model.workload)
        self._state: ClusterState | None = None

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        """Raw scores: Δ in 1/1024 milli (the best over a node's GPUs for a fractional pod); see :meth:`normalize`."""
        self._state = state
        if pod.is_fractional:
            rows, delta = self.share_deltas(state, pod, nodes)
            out: IntArray = np.full(len(nodes), np.iinfo(np.int64).min, dtype=np.int64)
            np.maximum.at(out, rows, _raw(delta))
            return out
        return _raw(self.whole_delta(state, pod, nodes))

    def normalize(self, scores: IntArray) -> IntArray:
        """⌊100 · sigmoid(Δ / 1000)⌋ over the feasible nodes, Δ less the loss every one of them has (if any)."""
        return relative_sigmoid(scores)

    def share_deltas(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> tuple[IntArray, FloatArray]:
        """(row, Δ) for each distinct GPU a fractional pod could take on the given nodes."""
        rows, free = share_candidates(state.gpu_free[nodes], pod.gpu_milli)
        return rows, _share_rows(self.model, self.stats.of(state), state, pod, nodes, rows, free)

    def whole_delta(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        """Δ of a CPU-only or whole-GPU pod on each given node (before the sigmoid)."""
        cpu = state.cpu_free[nodes]
        node_stats = self.stats.of(state).rows(nodes)
        total = node_stats[2]
        before, after = fragmentation_after_whole(
            self.model.workload, node_stats, cpu, state.model_id[nodes], pod.cpu_milli, pod.num_gpu
        )
        before = before + self.model.stranded(cpu, total)
        after = after + self.model.stranded(cpu - pod.cpu_milli, total - pod.total_gpu_milli)
        out: FloatArray = before - after - self.model.scarce(state, pod, nodes)
        return out

    def cache_key(self, pod: PodSpec) -> Hashable | None:
        # Equal shapes score equally on an unchanged node — at equal pressure on the nodes some pods need, which
        # moves with the whole cluster, so it is part of the key with the memory that decides a pod's home
        # (None until a cluster has been seen).
        scarcity = self.model.scarcity
        if scarcity is None or not scarcity.homes:
            return pod.shape
        if self._state is None:
            return None
        return (pod.shape, pod.memory_mib, tuple(scarcity.pressure(self._state).tolist()))


class LookaheadGpu(GpuPicker):
    """A fractional pod gets the best-scoring GPU, the one with the least free share among equals."""

    name = "lookahead"

    def __init__(self, model: LookaheadModel) -> None:
        self.model = model
        self.stats = ShapeStatsCache(model.workload)

    def pick(self, state: ClusterState, pod: PodSpec, node: int, among: Sequence[int] | None = None) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        if not pod.is_fractional:
            return exclusive_gpus(state, pod, node)
        free = state.gpu_free[node]
        candidates = np.flatnonzero(free >= pod.gpu_milli)
        if among is not None:
            candidates = candidates[np.isin(candidates, list(among))]
        if not len(candidates):
            raise OverCommit(f"pod {pod.name}: no GPU of node {state.nodes[node].name} has {pod.gpu_milli} milli free")
        nodes = np.array([node])
        rows = np.zeros(len(candidates), dtype=np.int64)
        scores = relative_sigmoid(
            _raw(_share_rows(self.model, self.stats.of(state), state, pod, nodes, rows, free[candidates]))
        )
        best = candidates[scores == scores.max()]
        return (int(min(best, key=lambda g: (free[g], g))),)
