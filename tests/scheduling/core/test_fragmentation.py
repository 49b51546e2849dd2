"""The fragmentation measure: hand-computed cases, and the vectorised forms against the plain definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.scheduling.core.fragmentation import (
    CompiledWorkload,
    fragmentation_after_share,
    fragmentation_after_whole,
    gpu_stats,
    node_fragmentation,
)
from kubegpu.scheduling.core.model import Shape
from kubegpu.scheduling.core.workload import TargetWorkload

MODELS = ("A", "B")


def naive(target: TargetWorkload, cpu: int, gpus: list[int], model: int) -> float:
    """F_n read straight from the definition, one shape at a time."""
    total = 0.0
    for (need_cpu, num, milli, models), p in zip(target.shapes, target.weights, strict=True):
        free = sum(gpus)
        if num == 0 or model < 0 or (models and MODELS[model] not in models):
            total += p * free
        elif sum(1 for g in gpus if g >= milli) >= num and cpu >= need_cpu:
            total += p * sum(g for g in gpus if g < milli)
        else:
            total += p * free
    return total


def test_hand_computed_node_fragmentation() -> None:
    # shapes: (1 GPU x 500, 2 cores) 50 %, (CPU only) 25 %, (2 whole GPUs, 2 cores) 25 %
    target = TargetWorkload(
        ((2000, 1, 500, frozenset()), (1000, 0, 0, frozenset()), (2000, 2, 1000, frozenset())), (0.5, 0.25, 0.25)
    )
    cw = CompiledWorkload(target, MODELS)
    gpus = np.array([[1000, 300, 600, 0]])
    # 500-shape fits (1000, 600): fragment = 300; CPU-only: all 1900; 2-GPU shape: one free GPU only -> 1900
    expected = 0.5 * 300 + 0.25 * 1900 + 0.25 * 1900
    assert node_fragmentation(cw, np.array([4000]), gpus, np.array([0]))[0] == pytest.approx(expected)
    # without CPU the GPU shapes cannot run anywhere on the node: everything is fragment
    assert node_fragmentation(cw, np.array([500]), gpus, np.array([0]))[0] == pytest.approx(1900)


shapes = st.tuples(
    st.sampled_from([0, 1000, 4000, 16000]),
    st.sampled_from([(0, 0), (1, 100), (1, 250), (1, 500), (1, 810), (1, 1000), (2, 1000), (4, 1000)]),
    st.sampled_from([frozenset(), frozenset({"A"}), frozenset({"B", "C"})]),
).map(lambda t: (t[0], t[1][0], t[1][1], t[2] if t[1][0] else frozenset()))
workloads = st.lists(shapes, min_size=1, max_size=6, unique=True).flatmap(
    lambda ss: st.lists(st.floats(0.05, 1.0), min_size=len(ss), max_size=len(ss)).map(
        lambda ws: TargetWorkload(tuple(ss), tuple(w / sum(ws) for w in ws))
    )
)
nodes = st.tuples(
    st.integers(0, 20000),
    st.lists(st.sampled_from([0, 50, 190, 300, 500, 700, 1000]), min_size=1, max_size=8),
    st.integers(-1, 1),
)


def _arrays(node: tuple[int, list[int], int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cpu, gpus, model = node
    padded = np.zeros((1, 8), dtype=np.int64)
    padded[0, : len(gpus)] = gpus
    return np.array([cpu]), padded, np.array([model])


@settings(max_examples=150, deadline=None)
@given(workloads, nodes, st.sampled_from([100, 300, 500, 810]), st.integers(0, 4000))
def test_vectorised_measure_matches_the_definition_before_and_after_placements(
    target: TargetWorkload, node: tuple[int, list[int], int], share: int, cpu_req: int
) -> None:
    cw = CompiledWorkload(target, MODELS)
    cpu, gpus, model = node
    cpu_a, gpu_a, model_a = _arrays(node)
    assert node_fragmentation(cw, cpu_a, gpu_a, model_a)[0] == pytest.approx(naive(target, cpu, gpus, model))
    stats = gpu_stats(cw, gpu_a)
    for i, g in enumerate(gpus):
        if g < share:
            continue
        after = fragmentation_after_share(cw, stats, cpu_a, model_a, np.array([g]), cpu_req, share)[0]
        moved = [x - share if j == i else x for j, x in enumerate(gpus)]
        assert after == pytest.approx(naive(target, cpu - cpu_req, moved, model))
    if 1000 in gpus:
        before, after = fragmentation_after_whole(cw, stats, cpu_a, model_a, cpu_req, 1)
        moved = list(gpus)
        moved[moved.index(1000)] = 0
        assert before[0] == pytest.approx(naive(target, cpu, gpus, model))
        assert after[0] == pytest.approx(naive(target, cpu - cpu_req, moved, model))


def _shape(cpu: int, num: int, milli: int) -> Shape:
    return (cpu, num, milli, frozenset())
