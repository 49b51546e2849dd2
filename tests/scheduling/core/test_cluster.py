"""Cluster accounting: binds take exactly what pods ask, unbinds give it back, over-commits are refused."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kubegpu.scheduling.core.errors import InvalidSpec, OverCommit, UnknownPod
from tests.scheduling.helpers import cluster, node, pod


def test_bind_takes_cpu_memory_and_gpu_milli_and_unbind_returns_them() -> None:
    state = cluster(node("a", gpus=2, cpu=10_000, mem=8_000))
    state.bind(pod("p", cpu=3_000, mem=2_000, gpus=1, milli=300), 0, [1])
    assert (state.cpu_free[0], state.memory_free[0], list(state.gpu_free[0, :2])) == (7_000, 6_000, [1000, 700])
    assert state.allocated_gpu_milli == 300 and state.used_gpus() == 1
    state.unbind("p")
    assert (state.cpu_free[0], state.memory_free[0], list(state.gpu_free[0, :2])) == (10_000, 8_000, [1000, 1000])
    assert state.allocated_gpu_milli == 0 and state.version[0] == 2


@pytest.mark.parametrize(
    ("p", "gpus", "message"),
    [
        (pod("p", cpu=20_000), [], "needs 20000 CPU milli, 10000 free"),
        (pod("p", mem=9_000), [], "needs 9000 MiB, 8000 free"),
        (pod("p", gpus=1, milli=800), [0], "GPU 0 has 500 milli free, needs 800"),
        (pod("p", gpus=1), [5], "GPU 5 does not exist"),
        (pod("p", gpus=2), [1, 1], "needs 2 distinct GPUs"),
        (pod("p", gpus=1, models=frozenset({"T4"})), [1], "GPU model 'G2' not in ['T4']"),
    ],
    ids=["cpu", "memory", "gpu-share", "no-such-gpu", "same-gpu-twice", "model"],
)
def test_over_commit_is_refused_and_changes_nothing(p: object, gpus: list[int], message: str) -> None:
    state = cluster(node("a", gpus=2, cpu=10_000, mem=8_000))
    state.bind(pod("half", cpu=0, mem=0, gpus=1, milli=500), 0, [0])
    before = (state.cpu_free.copy(), state.memory_free.copy(), state.gpu_free.copy())
    with pytest.raises(OverCommit, match=re.escape(message)):
        state.bind(p, 0, gpus)  # type: ignore[arg-type]
    assert all(
        np.array_equal(x, y) for x, y in zip(before, (state.cpu_free, state.memory_free, state.gpu_free), strict=True)
    )


def test_a_pod_binds_once_and_unknown_pods_cannot_be_unbound() -> None:
    state = cluster(node("a"))
    state.bind(pod("p"), 0)
    with pytest.raises(OverCommit, match="already bound to node a"):
        state.bind(pod("p"), 0)
    with pytest.raises(UnknownPod, match="pod ghost is not bound"):
        state.unbind("ghost")


def test_duplicate_node_names_are_rejected() -> None:
    with pytest.raises(InvalidSpec, match="'a' appears more than once"):
        cluster(node("a"), node("a"))


def test_affinity_classes_are_counted_per_node_for_gpu_pods_only() -> None:
    state = cluster(node("a"), node("b"))
    state.bind(pod("s", gpus=1, milli=300), 0, [0])
    state.bind(pod("w", gpus=1), 0, [1])
    state.bind(pod("c"), 1)
    assert list(state.class_kinds) == [2, 0]
    state.unbind("s")
    assert list(state.class_kinds) == [1, 0] and state.class_counts["share-gpu"][0] == 0


def test_model_mask_accepts_any_listed_model_and_everything_when_empty() -> None:
    state = cluster(node("a", model="T4"), node("b", model="G2"), node("c", gpus=0))
    assert list(state.model_mask(frozenset({"T4", "V100M16"}))) == [True, False, False]
    assert list(state.model_mask(frozenset())) == [True, True, True]
