"""FGD: the node whose fragmentation grows least wins, and a fractional pod gets the GPU that keeps it lowest."""

from __future__ import annotations

import numpy as np

from kubegpu.scheduling.core.fgd import FgdGpu, FgdScore, sigmoid_score
from kubegpu.scheduling.core.fragmentation import CompiledWorkload
from kubegpu.scheduling.core.workload import TargetWorkload
from tests.scheduling.helpers import cluster, node, pod

# Half the tasks want half a GPU, half a whole GPU; 1 core each.
TARGET = TargetWorkload(((1000, 1, 500, frozenset()), (1000, 1, 1000, frozenset())), (0.5, 0.5))


def test_integer_score_is_the_truncated_sigmoid_of_the_fragmentation_drop() -> None:
    # sigmoid(0) = 0.5 -> 50; sigmoid(0.25) = 0.5622 -> 56; sigmoid(-0.25) = 0.4378 -> 43
    assert list(sigmoid_score(np.array([0.0, 250.0, -250.0]))) == [50, 56, 43]


def test_half_gpu_pod_prefers_the_half_used_gpu_that_it_fills_exactly() -> None:
    state = cluster(node("fresh", gpus=1, cpu=8000), node("half-used", gpus=1, cpu=8000))
    state.bind(pod("x", cpu=0, gpus=1, milli=500), 1, [0])
    cw = CompiledWorkload(TARGET, state.models)
    # fresh: F 0 -> 250 (the 500 left is a fragment for the whole-GPU half): 43.
    # half-used: F 250 -> 0: 56.
    assert list(FgdScore(cw).score(state, pod("p", cpu=1000, gpus=1, milli=500), np.arange(2))) == [43, 56]


def test_fractional_pod_gets_the_best_gpu_lowest_index_among_equals() -> None:
    state = cluster(node("n", gpus=4, cpu=8000))
    state.bind(pod("a", cpu=0, gpus=1, milli=500), 0, [2])
    state.bind(pod("b", cpu=0, gpus=1, milli=500), 0, [3])
    cw = CompiledWorkload(TARGET, state.models)
    assert FgdGpu(cw).pick(state, pod("p", cpu=1000, gpus=1, milli=500), 0) == (2,)
    assert FgdGpu(cw).pick(state, pod("w", cpu=1000, gpus=2), 0) == (0, 1)


def test_cpu_only_pod_avoids_the_node_it_would_starve_of_cpu() -> None:
    state = cluster(node("small-cpu", gpus=2, cpu=2000), node("big-cpu", gpus=2, cpu=64000))
    cw = CompiledWorkload(TARGET, state.models)
    small, big = FgdScore(cw).score(state, pod("c", cpu=1500), np.arange(2))
    assert big == 50 and small < big
