"""One scheduling cycle: the tutorial's profile, reason summaries, the sample size, GPU choice."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.config import TUTORIAL_RESOURCES, default_config
from kubegpu.scheduling.live.cycle import Cycle, FitError, Placement, Profile, nodes_to_find
from kubegpu.scheduling.live.scoring import NodeResourcesFit

from .builders import node, pod


def _cluster() -> SchedulerCache:
    cache = SchedulerCache()
    for name in ("a-empty", "b-busy", "c-empty"):
        cache.set_node(node(name))
    for i in range(6):
        cache.add_pod(pod(f"r{i}", gpus=1, node="b-busy"), "b-busy", (i,))
    return cache


def test_the_tutorial_profile_packs_a_one_gpu_pod_onto_the_node_with_six_gpus_used() -> None:
    profile = default_config().profiles[0]
    decision = Cycle(np.random.default_rng(0)).schedule(_cluster(), profile, pod("new", gpus=1))
    assert isinstance(decision, Placement)
    assert (decision.node, decision.gpus) == ("b-busy", (6,))


def test_least_allocated_spreads_it_onto_an_empty_node() -> None:
    profile = Profile("spread", scorers=((NodeResourcesFit("LeastAllocated", TUTORIAL_RESOURCES), 1),))
    decision = Cycle(np.random.default_rng(0)).schedule(_cluster(), profile, pod("new", gpus=1))
    assert isinstance(decision, Placement)
    assert decision.node in ("a-empty", "c-empty")
    assert decision.gpus == (0,)


def test_a_gpu_model_no_node_has_fails_with_reason_counts() -> None:
    cache = SchedulerCache()
    for i in range(3):
        cache.set_node(node(f"a100-{i}", labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}))
    cache.set_node(node("small", gpus=1, labels={"nvidia.com/gpu.product": "Tesla-T4"}))
    p = pod("p", gpus=2, spec={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}})
    decision = Cycle(np.random.default_rng(0)).schedule(cache, default_config().profiles[0], p)
    assert isinstance(decision, FitError)
    assert decision.message == "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."


def test_reasons_are_counted_per_node_and_sorted_as_kube_scheduler_sorts_them() -> None:
    cache = SchedulerCache()
    for i in range(8):
        cache.set_node(node(f"full-{i}", gpus=1))
    for i in range(4):
        cache.set_node(node(f"cpu-{i}", gpus=0, labels={"pool": "cpu"}))
    p = pod("p", gpus=2, cpu="100", spec={"tolerations": []})
    decision = Cycle(np.random.default_rng(0)).schedule(cache, default_config().profiles[0], p)
    assert isinstance(decision, FitError)
    assert decision.message == "0/12 nodes are available: 12 Insufficient cpu, 12 Insufficient nvidia.com/gpu."


def test_a_full_node_reports_too_many_pods() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n", pods="1"))
    cache.add_pod(pod("r", node="n"), "n")
    decision = Cycle(np.random.default_rng(0)).schedule(cache, default_config().profiles[0], pod("p"))
    assert isinstance(decision, FitError)
    assert decision.message == "0/1 nodes are available: 1 Too many pods."


@pytest.mark.parametrize(
    ("percentage", "total", "expected"),
    [(0, 50, 50), (0, 500, 230), (0, 5000, 500), (0, 6000, 300), (10, 5000, 500), (100, 5000, 5000), (1, 500, 100)],
    ids=["small", "500-adaptive", "5000-adaptive", "floor-5pct", "explicit", "all", "at-least-100"],
)
def test_nodes_to_find_follows_kube_scheduler(percentage: int, total: int, expected: int) -> None:
    assert nodes_to_find(percentage, total) == expected


def test_sampling_rotates_the_start_node_between_cycles() -> None:
    cache = SchedulerCache()
    for i in range(300):
        cache.set_node(node(f"n{i:03d}"))
    profile = Profile("p", percentage_of_nodes_to_score=10)
    cycle = Cycle(np.random.default_rng(0))
    cycle.schedule(cache, profile, pod("a"))
    first = cycle.next_start
    cycle.schedule(cache, profile, pod("b"))
    assert first == 100 and cycle.next_start == 200


def test_gpus_held_by_pods_without_a_device_record_are_not_handed_out() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n", gpus=4))
    cache.add_pod(pod("known", gpus=1, node="n"), "n", (0,))
    cache.add_pod(pod("other-scheduler", gpus=2, node="n"), "n", ())
    assert cache.free_gpus("n") == [1]
