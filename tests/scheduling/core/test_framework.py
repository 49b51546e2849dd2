"""The filter → score → select pipeline: reasons, weights, normalisation, seeded tie-breaking, score caches."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pytest

from kubegpu.scheduling.core.cluster import ClusterState, IntArray
from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.filters import default_filters
from kubegpu.scheduling.core.framework import Placement, Profile, Scheduler, ScorePlugin, Unschedulable
from kubegpu.scheduling.core.gpupick import BestFitGpu
from kubegpu.scheduling.core.model import PodSpec
from tests.scheduling.helpers import cluster, node, pod


class Fixed(ScorePlugin):
    """Scores from a table, optionally min–max normalised."""

    def __init__(self, name: str, table: list[int], normalise: bool = False) -> None:
        self.name = name
        self.table = np.array(table, dtype=np.int64)
        self.normalise = normalise
        self.calls: list[list[int]] = []

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        self.calls.append([int(n) for n in nodes])
        out: IntArray = self.table[nodes]
        return out

    def normalize(self, scores: IntArray) -> IntArray:
        if not self.normalise:
            return scores
        out: IntArray = (scores - scores.min()) * 100 // max(1, int(scores.max() - scores.min()))
        return out


def scheduler(state: ClusterState, *scorers: tuple[ScorePlugin, int], seed: int = 0, tie: str = "rank") -> Scheduler:
    return Scheduler(
        state, Profile("t", default_filters(), tuple(scorers), BestFitGpu()), np.random.default_rng(seed), tie
    )


def test_unschedulable_pod_reports_how_many_nodes_each_filter_rejected() -> None:
    state = cluster(node("tiny-cpu", cpu=1000), node("t4", model="T4"), node("g2"))
    decision = scheduler(state, (Fixed("f", [0, 0, 0]), 1)).schedule(
        pod("p", cpu=2000, gpus=1, models=frozenset({"V100M32"}))
    )
    assert isinstance(decision, Unschedulable)
    assert decision.rejected_by == {"NodeResourcesFit": 1, "GpuShareFit": 2}
    assert "1 rejected by NodeResourcesFit; 2 rejected by GpuShareFit" in decision.reason


def test_weighted_sum_of_normalised_scores_picks_the_node() -> None:
    state = cluster(node("a"), node("b"), node("c"))
    # plugin 1 raw [10, 20, 30] -> normalised [0, 50, 100] x1; plugin 2 [90, 0, 0] x2 -> totals [180, 50, 100]
    s = scheduler(state, (Fixed("one", [10, 20, 30], normalise=True), 1), (Fixed("two", [90, 0, 0]), 2))
    decision = s.schedule(pod("p"))
    assert isinstance(decision, Placement) and (decision.node, decision.score) == (0, 180)


def test_rank_tie_break_is_fixed_by_the_seed_and_uniform_spreads() -> None:
    state = cluster(*(node(f"n{i}") for i in range(6)))
    ranked = scheduler(state, (Fixed("flat", [5] * 6), 1), seed=7)
    first = ranked.decide(pod("p"))
    assert isinstance(first, Placement) and first.node == int(np.argmin(ranked.rank))
    assert {ranked.decide(pod(f"q{i}")).node for i in range(30)} == {first.node}  # type: ignore[union-attr]
    uniform = scheduler(state, (Fixed("flat", [5] * 6), 1), seed=7, tie="uniform")
    assert len({uniform.decide(pod(f"q{i}")).node for i in range(60)}) == 6  # type: ignore[union-attr]
    with pytest.raises(InvalidSpec, match="tie_break must be one of rank, uniform"):
        scheduler(state, (Fixed("flat", [5] * 6), 1), tie="first")


def test_a_single_feasible_node_is_taken_without_scoring() -> None:
    state = cluster(node("a", cpu=1000), node("b"))
    plugin = Fixed("f", [0, 0])
    decision = scheduler(state, (plugin, 1)).schedule(pod("p", cpu=2000))
    assert isinstance(decision, Placement) and decision.node == 1 and plugin.calls == []


class Cached(Fixed):
    def cache_key(self, pod: PodSpec) -> Hashable | None:
        return pod.shape


def test_cached_scores_are_recomputed_only_for_nodes_that_changed() -> None:
    state = cluster(node("a"), node("b"), node("c"))
    plugin = Cached("c", [1, 2, 3])
    s = scheduler(state, (plugin, 1))
    s.scores(pod("p"), np.arange(3))
    state.bind(pod("x"), 1)
    s.scores(pod("q"), np.arange(3))  # same shape as p: only node b is stale
    s.scores(pod("r", cpu=9000), np.arange(3))  # another shape: computed afresh
    assert plugin.calls == [[0, 1, 2], [1], [0, 1, 2]]
