"""The FGD paper's baseline scorers, checked against hand-computed scores on small clusters."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.core.baselines import (
    BestFitScore,
    DotProductScore,
    GpuClusteringScore,
    GpuPackingScore,
    RandomScore,
    min_max_normalize,
)
from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.model import PodSpec
from tests.scheduling.helpers import cluster, node, pod


def scores(plugin: object, state: ClusterState, p: PodSpec) -> list[int]:
    return [int(x) for x in plugin.score(state, p, np.arange(state.size))]  # type: ignore[attr-defined]


def test_dot_product_scores_one_minus_half_the_normalised_dot_product() -> None:
    # free [64000/128000, 2000/8000] . request [8000/128000, 1000/8000] = 0.0625; 100*(1-0.03125) = 96.875 -> 96
    state = cluster(node("a", gpus=2, cpu=64_000))
    assert scores(DotProductScore(), state, pod("p", cpu=8_000, gpus=1)) == [96]


def test_clustering_bands_prefer_same_class_then_mixed_then_empty_then_other() -> None:
    state = cluster(node("only-share"), node("mixed"), node("empty"), node("other"))
    state.bind(pod("s1", gpus=1, milli=500), 0, [0])  # 7500 free: 25*500//8000 = 1 -> 76
    state.bind(pod("s2", gpus=1, milli=1000), 1, [0])
    state.bind(pod("s3", gpus=1, milli=1000), 1, [1])
    state.bind(pod("s4", gpus=1, milli=400), 1, [2])  # 5600 free... see below
    state.bind(pod("w1", gpus=1), 3, [0])  # 7000 free: 25*1000//8000 = 3
    share = pod("new", gpus=1, milli=300)
    # mixed: 8000-2400=5600 free -> 25*2400//8000 = 7 -> 57; empty: 0 + 25
    assert scores(GpuClusteringScore(), state, share) == [76, 57, 25, 3]
    assert scores(GpuClusteringScore(), state, pod("cpu-only")) == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        # partial node: GPU 1 has 600 free -> shares it: 100 - (600*100/1000)/10 = 94;
        # idle 8-GPU node: 33-8 = 25; idle 2-GPU node: 33-2 = 31
        (pod("share", gpus=1, milli=300), [94, 25, 31]),
        # whole GPU on the partial node uses one fully free GPU: 50-1 = 49
        (pod("one", gpus=1), [49, 25, 31]),
        (pod("two", gpus=2), [48, 25, 31]),
        (pod("cpu"), [0, 0, 0]),
    ],
    ids=["share-a-used-gpu", "one-free-gpu-of-used-node", "two-free-gpus", "cpu-only-flat"],
)
def test_packing_tiers(p: PodSpec, expected: list[int]) -> None:
    state = cluster(node("partial"), node("idle8"), node("idle2", gpus=2))
    state.bind(pod("x", gpus=1, milli=400), 0, [1])
    assert scores(GpuPackingScore(), state, p) == expected


def test_best_fit_prefers_least_leftover_after_min_max_normalisation() -> None:
    state = cluster(node("big", gpus=8, cpu=96_000), node("small", gpus=2, cpu=16_000))
    plugin = BestFitScore()
    raw = scores(plugin, state, pod("p", cpu=8_000, gpus=1))
    # big: 1 - (0.5*88000/128000 + 0.5*7000/8000) = 0.21875 -> 21
    # small: 1 - (0.5*8000/128000 + 0.5*1000/8000) = 0.90625 -> 90
    assert raw == [21, 90]
    assert list(plugin.normalize(np.array(raw))) == [0, 100]


def test_min_max_normalisation_of_equal_scores_is_all_minimum() -> None:
    assert list(min_max_normalize(np.array([7, 7, 7]))) == [0, 0, 0]
    assert list(min_max_normalize(np.array([10, 15, 20]))) == [0, 50, 100]


def test_random_gives_one_node_the_maximum_and_the_rest_the_minimum() -> None:
    state = cluster(node("a"), node("b"), node("c"))
    plugin = RandomScore(np.random.default_rng(1))
    picks = {scores(plugin, state, pod("p")).index(100) for _ in range(60)}
    assert picks == {0, 1, 2}
