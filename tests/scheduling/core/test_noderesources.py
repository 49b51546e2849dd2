"""kube-scheduler's NodeResourcesFit strategies, checked against hand-computed integer results."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.noderesources import (
    BIN_PACKING_SHAPE,
    NodeResourcesFitScore,
    ShapePoint,
    broken_linear,
    combine,
    go_div,
)
from tests.scheduling.helpers import cluster, node, pod


def a(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-8, 2, -4), (0, 5, 0)],
    ids=["positive", "negative-numerator", "negative-denominator", "exact-negative", "zero"],
)
def test_go_division_truncates_towards_zero(x: int, y: int, expected: int) -> None:
    assert int(go_div(a(x), y)[0]) == expected


@pytest.mark.parametrize(
    ("strategy", "requested", "allocatable", "weights", "expected"),
    [
        # cpu (4000-1000)*100/4000 = 75, memory (10000-2000)*100/10000 = 80, (75+80)/2 = 77
        ("LeastAllocated", [a(1000), a(2000)], [a(4000), a(10000)], [1, 1], 77),
        # cpu 2000*100/6000 = 33 (truncated), memory 3000*100/10000 = 30, 63/2 = 31
        ("LeastAllocated", [a(4000), a(7000)], [a(6000), a(10000)], [1, 1], 31),
        # requested above capacity scores 0 for that resource
        ("LeastAllocated", [a(5000), a(0)], [a(4000), a(10000)], [1, 1], 50),
        # cpu 50, memory 50, GPU 3000/4000 = 75 with weight 3: (50+50+225)/5 = 65
        ("MostAllocated", [a(4000), a(8000), a(3000)], [a(8000), a(16000), a(4000)], [1, 1, 3], 65),
        # requested above capacity is capped: 100, memory 1*100/3 = 33 -> (100+33)/2 = 66
        ("MostAllocated", [a(9000), a(1)], [a(8000), a(3)], [1, 1], 66),
        # a resource with allocatable 0 is left out of the weights
        ("MostAllocated", [a(4000), a(500)], [a(8000), a(0)], [1, 5], 50),
        # utilisation 25 -> 25, 20 -> 20; mean 22.5 rounds half away from zero to 23
        ("RequestedToCapacityRatio", [a(1000), a(2000)], [a(4000), a(10000)], [1, 1], 23),
        # a resource scoring 0 (nothing requested) is left out: only cpu's 25 counts
        ("RequestedToCapacityRatio", [a(1000), a(0)], [a(4000), a(10000)], [1, 1], 25),
    ],
    ids=[
        "least-simple",
        "least-truncates",
        "least-overcommitted-resource",
        "most-gpu-weighted",
        "most-caps-requested",
        "most-skips-absent-resource",
        "ratio-rounds-half-up",
        "ratio-skips-zero-scores",
    ],
)
def test_strategy_matches_hand_computed_kube_scheduler_score(
    strategy: str, requested: list[np.ndarray], allocatable: list[np.ndarray], weights: list[int], expected: int
) -> None:
    assert int(combine(strategy, requested, allocatable, weights, BIN_PACKING_SHAPE)[0]) == expected


@pytest.mark.parametrize(
    ("utilization", "expected"),
    [(0, 0), (25, 50), (50, 100), (75, 60), (77, 57), (100, 20)],
    ids=["start", "rising", "peak", "falling-exact", "falling-truncates-towards-zero", "end"],
)
def test_broken_linear_shape_interpolates_like_kube_scheduler(utilization: int, expected: int) -> None:
    # (0,0) (50,10) (100,2): scores scaled by 10; on the falling side (-80*27)/50 = -43.2 truncates to -43.
    shape = (ShapePoint(0, 0), ShapePoint(50, 10), ShapePoint(100, 2))
    assert int(broken_linear(shape, a(utilization))[0]) == expected


def test_plugin_scores_gpu_in_milli_and_skips_it_for_cpu_only_pods() -> None:
    state = cluster(node("a", gpus=4, cpu=8_000, mem=16_000))
    state.bind(pod("x", cpu=2_000, mem=4_000, gpus=2), 0, [0, 1])
    plugin = NodeResourcesFitScore("MostAllocated", {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3})
    nodes = a(0)
    # GPU pod: cpu 50, memory 50, GPU (2000+1000)/4000 = 75 -> (50+50+225)/5 = 65
    assert int(plugin.score(state, pod("p", cpu=2_000, mem=4_000, gpus=1), nodes)[0]) == 65
    # CPU-only pod: nvidia.com/gpu is an extended resource it does not request, so only cpu and memory count
    assert int(plugin.score(state, pod("q", cpu=2_000, mem=4_000), nodes)[0]) == 50


@pytest.mark.parametrize(
    ("strategy", "weights", "shape", "message"),
    [
        ("Balanced", None, BIN_PACKING_SHAPE, "unknown NodeResourcesFit strategy 'Balanced'"),
        ("LeastAllocated", {"gpu": 1}, BIN_PACKING_SHAPE, "unknown resource 'gpu'"),
        ("LeastAllocated", {"cpu": 0}, BIN_PACKING_SHAPE, "weight must be within 1..100"),
        ("RequestedToCapacityRatio", None, (ShapePoint(50, 1), ShapePoint(10, 2)), "utilization values must increase"),
        ("RequestedToCapacityRatio", None, (ShapePoint(0, 11),), "score 11 not within 0..10"),
    ],
    ids=["strategy", "resource", "weight", "shape-order", "shape-score"],
)
def test_bad_plugin_arguments_are_rejected_by_name(
    strategy: str, weights: dict[str, int] | None, shape: tuple[ShapePoint, ...], message: str
) -> None:
    with pytest.raises(InvalidSpec, match=message):
        NodeResourcesFitScore(strategy, weights, shape)
