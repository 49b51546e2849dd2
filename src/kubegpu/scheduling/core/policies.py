"""The policy registry: every named policy as a profile of filters, scorers and a GPU picker.

Owns the names users type (``--policy``), their one-line descriptions and how
each is assembled: the FGD paper's six (random, dotprod, clustering, packing,
bestfit, fgd), kube-scheduler's three NodeResourcesFit strategies
(least-allocated, most-allocated, requested-to-capacity-ratio) and ours
(``lookahead``, the default). Must not run scheduling cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kubegpu.scheduling.core.baselines import (
    BestFitScore,
    DotProductScore,
    GpuClusteringScore,
    GpuPackingScore,
    RandomScore,
)
from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.errors import UnknownPolicy
from kubegpu.scheduling.core.fgd import FgdGpu, FgdScore
from kubegpu.scheduling.core.filters import default_filters
from kubegpu.scheduling.core.fragmentation import CompiledWorkload
from kubegpu.scheduling.core.framework import Profile
from kubegpu.scheduling.core.gaps import DEFAULT_HORIZON
from kubegpu.scheduling.core.gpupick import BestFitGpu, RandomGpu
from kubegpu.scheduling.core.lookahead import DEFAULT_GAP_WEIGHT, LookaheadGpu, LookaheadModel, LookaheadScore
from kubegpu.scheduling.core.model import PodSpec
from kubegpu.scheduling.core.noderesources import BIN_PACKING_SHAPE, NodeResourcesFitScore, ShapePoint
from kubegpu.scheduling.core.workload import TargetWorkload

DEFAULT_POLICY = "lookahead"
PAPER_POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")


@dataclass(frozen=True)
class PolicyOptions:
    """Policy knobs: kube-scheduler resource weights and shape; the lookahead policy's weights, horizon and terms."""

    weights: dict[str, int] | None = None
    shape: tuple[ShapePoint, ...] = BIN_PACKING_SHAPE
    stranding_weight: float = 1.0
    horizon: int = DEFAULT_HORIZON
    gap_weight: float = DEFAULT_GAP_WEIGHT
    demand_weighted: bool = False
    scarcity: bool = True


Builder = Callable[[ClusterState, TargetWorkload, Sequence[PodSpec], np.random.Generator, PolicyOptions], Profile]


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    build: Builder


def _random(
    state: ClusterState, target: TargetWorkload, pods: Sequence[PodSpec], rng: np.random.Generator, opts: PolicyOptions
) -> Profile:
    return Profile("random", default_filters(), ((RandomScore(rng), 1000),), RandomGpu(rng))


def _dotprod(
    state: ClusterState, target: TargetWorkload, pods: Sequence[PodSpec], rng: np.random.Generator, opts: PolicyOptions
) -> Profile:
    return Profile("dotprod", default_filters(), ((DotProductScore(), 1000),), BestFitGpu())


def _clustering(
    state: ClusterState, target: TargetWorkload, pods: Sequence[PodSpec], rng: np.random.Generator, opts: PolicyOptions
) -> Profile:
    return Profile("clustering", default_filters(), ((GpuClusteringScore(), 1000),), BestFitGpu())


def _packing(
    state: ClusterState, target: TargetWorkload, pods: Sequence[PodSpec], rng: np.random.Generator, opts: PolicyOptions
) -> Profile:
    return Profile("packing", default_filters(), ((GpuPackingScore(), 1000),), BestFitGpu())


def _bestfit(
    state: ClusterState, target: TargetWorkload, pods: Sequence[PodSpec], rng: np.random.Generator, opts: PolicyOptions
) -> Profile:
    return Profile("bestfit", default_filters(), ((BestFitScore(), 1000),), BestFitGpu())


def _fgd(
    state: ClusterState, target: TargetWorkload, pods: Sequence[PodSpec], rng: np.random.Generator, opts: PolicyOptions
) -> Profile:
    cw = CompiledWorkload(target, state.models)
    return Profile("fgd", default_filters(), ((FgdScore(cw), 1000),), FgdGpu(cw))


def _nodefit(strategy: str, name: str, default_weights: dict[str, int]) -> Builder:
    def build(
        state: ClusterState,
        target: TargetWorkload,
        pods: Sequence[PodSpec],
        rng: np.random.Generator,
        opts: PolicyOptions,
    ) -> Profile:
        plugin = NodeResourcesFitScore(strategy, opts.weights or default_weights, opts.shape)
        return Profile(name, default_filters(), ((plugin, 1),), BestFitGpu())

    return build


def _lookahead(
    state: ClusterState, target: TargetWorkload, pods: Sequence[PodSpec], rng: np.random.Generator, opts: PolicyOptions
) -> Profile:
    model = LookaheadModel.from_pods(
        pods,
        state.models,
        opts.stranding_weight,
        horizon=opts.horizon,
        gap_weight=opts.gap_weight,
        demand_weighted=opts.demand_weighted,
        nodes=state.nodes if opts.scarcity else (),
    )
    return Profile("lookahead", default_filters(), ((LookaheadScore(model), 1000),), LookaheadGpu(model))


GPU_WEIGHTED = {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3}

POLICIES: dict[str, PolicyInfo] = {
    info.name: info
    for info in (
        PolicyInfo(
            "lookahead",
            "ours: FGD's gradient over all shapes, plus GPU a node's CPU cannot feed, shares the next 50 pods cannot"
            " use and capacity taken from pods that fit only some nodes or need them whole",
            _lookahead,
        ),
        PolicyInfo(
            "fgd", "Fragmentation Gradient Descent (FGD, ATC'23): least growth of expected GPU fragmentation", _fgd
        ),
        PolicyInfo("bestfit", "least CPU+GPU left over after placement", _bestfit),
        PolicyInfo("packing", "share used GPUs first, then free GPUs of used nodes, then idle nodes", _packing),
        PolicyInfo("clustering", "keep pods of the same GPU class (shared, n-GPU) together", _clustering),
        PolicyInfo("dotprod", "Tetris: smallest dot product of free resources and the request", _dotprod),
        PolicyInfo("random", "a uniformly random feasible node, a random fitting GPU", _random),
        PolicyInfo(
            "least-allocated",
            "kube-scheduler NodeResourcesFit LeastAllocated (cpu 1, memory 1, nvidia.com/gpu 1): spread",
            _nodefit("LeastAllocated", "least-allocated", {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}),
        ),
        PolicyInfo(
            "most-allocated",
            "kube-scheduler NodeResourcesFit MostAllocated (cpu 1, memory 1, nvidia.com/gpu 3): bin-pack",
            _nodefit("MostAllocated", "most-allocated", GPU_WEIGHTED),
        ),
        PolicyInfo(
            "requested-to-capacity-ratio",
            "kube-scheduler NodeResourcesFit RequestedToCapacityRatio 0→0, 100→10 (cpu 1, memory 1, nvidia.com/gpu 3)",
            _nodefit("RequestedToCapacityRatio", "requested-to-capacity-ratio", GPU_WEIGHTED),
        ),
    )
}


def policy_names() -> list[str]:
    return list(POLICIES)


def build_profile(
    name: str,
    state: ClusterState,
    target: TargetWorkload,
    pods: Sequence[PodSpec],
    rng: np.random.Generator,
    options: PolicyOptions | None = None,
) -> Profile:
    """The profile of policy ``name`` for this cluster and workload."""
    info = POLICIES.get(name)
    if info is None:
        raise UnknownPolicy(f"unknown policy {name!r} (choose from {', '.join(POLICIES)})")
    return info.build(state, target, pods, rng, options or PolicyOptions())
