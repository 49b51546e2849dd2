"""Preemption evicts the fewest, lowest-priority pods that make room, never equal or higher priority."""

from __future__ import annotations

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.filters import default_filters
from kubegpu.scheduling.core.framework import Profile, Scheduler
from kubegpu.scheduling.core.gpupick import BestFitGpu
from kubegpu.scheduling.core.model import NodeSpec
from kubegpu.scheduling.core.noderesources import NodeResourcesFitScore
from kubegpu.scheduling.core.preemption import plan_preemption, schedule_with_preemption
from tests.scheduling.helpers import cluster, node, pod


def make(*nodes: NodeSpec) -> tuple[ClusterState, Scheduler]:
    state = cluster(*nodes)
    profile = Profile("t", default_filters(), ((NodeResourcesFitScore("LeastAllocated"), 1),), BestFitGpu())
    return state, Scheduler(state, profile, np.random.default_rng(0))


def test_only_the_lower_priority_pod_that_frees_enough_is_evicted() -> None:
    state, s = make(node("n", gpus=2))
    state.bind(pod("low", gpus=1, priority=1), 0, [0])
    state.bind(pod("mid", gpus=1, priority=5), 0, [1])
    placement, victims = schedule_with_preemption(s, pod("high", gpus=1, priority=10))
    assert placement is not None and placement.gpus == (0,)
    assert [v.pod.name for v in victims] == ["low"]
    assert set(state.bindings) == {"mid", "high"}


def test_equal_or_higher_priority_pods_are_never_victims() -> None:
    state, s = make(node("n", gpus=1))
    state.bind(pod("same", gpus=1, priority=10), 0, [0])
    placement, victims = schedule_with_preemption(s, pod("p", gpus=1, priority=10))
    assert placement is None and victims == () and set(state.bindings) == {"same"}


def test_the_node_with_the_lowest_priority_victims_is_chosen_then_the_fewest() -> None:
    state, s = make(node("a", gpus=2), node("b", gpus=2), node("c", gpus=2))
    state.bind(pod("a1", gpus=1, priority=3), 0, [0])
    state.bind(pod("a2", gpus=1, priority=3), 0, [1])
    state.bind(pod("b1", gpus=2, priority=2), 1, [0, 1])
    state.bind(pod("c1", gpus=1, priority=2), 2, [0])
    state.bind(pod("c2", gpus=1, priority=2), 2, [1])
    plan = plan_preemption(s, pod("p", gpus=2, priority=10))
    # a: highest victim priority 3; b: one victim of 2; c: two victims of 2 -> b
    assert plan is not None and state.nodes[plan.node].name == "b" and [v.pod.name for v in plan.victims] == ["b1"]


def test_a_pod_that_cannot_fit_even_after_evictions_changes_nothing() -> None:
    state, s = make(node("n", gpus=2, cpu=8_000))
    state.bind(pod("low", cpu=1_000, gpus=1, priority=0), 0, [0])
    before = (state.cpu_free.copy(), state.gpu_free.copy(), dict(state.bindings))
    placement, victims = schedule_with_preemption(s, pod("huge", cpu=16_000, priority=9))
    assert placement is None and victims == ()
    assert np.array_equal(before[0], state.cpu_free) and np.array_equal(before[1], state.gpu_free)
    assert before[2] == state.bindings


def test_fractional_victims_free_the_gpu_share_the_preemptor_needs() -> None:
    state, s = make(node("n", gpus=1))
    state.bind(pod("s1", gpus=1, milli=300, priority=1), 0, [0])
    state.bind(pod("s2", gpus=1, milli=500, priority=2), 0, [0])
    placement, victims = schedule_with_preemption(s, pod("p", gpus=1, milli=400, priority=5))
    # evicting s1 (300) leaves 200+300 = 500 free >= 400; s2 is reprieved
    assert placement is not None and [v.pod.name for v in victims] == ["s1"]
