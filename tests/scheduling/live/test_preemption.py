"""Which victims preemption chooses on the live cache."""

from __future__ import annotations

from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.cycle import Profile
from kubegpu.scheduling.live.objects import PodInfo
from kubegpu.scheduling.live.preemption import candidates

from .builders import node, pod


def _prio(p: PodInfo) -> int:
    return p.priority or 0


def _full_cluster() -> SchedulerCache:
    cache = SchedulerCache()
    cache.set_node(node("a", gpus=2))
    cache.set_node(node("b", gpus=2))
    cache.add_pod(pod("a-low", gpus=1, node="a", priority=10), "a", (0,))
    cache.add_pod(pod("a-mid", gpus=1, node="a", priority=50), "a", (1,))
    cache.add_pod(pod("b-lowest", gpus=1, node="b", priority=1), "b", (0,))
    cache.add_pod(pod("b-high", gpus=1, node="b", priority=500), "b", (1,))
    return cache


def test_the_node_whose_most_important_victim_matters_least_comes_first() -> None:
    ranked = candidates(_full_cluster(), Profile("p"), pod("new", gpus=1, priority=100), _prio)
    assert [(c.node, [v.pod.name for v in c.victims]) for c in ranked] == [("b", ["b-lowest"]), ("a", ["a-low"])]


def test_victims_are_reprieved_when_the_pod_fits_without_them() -> None:
    ranked = candidates(_full_cluster(), Profile("p"), pod("new", gpus=2, priority=100), _prio)
    assert [(c.node, sorted(v.pod.name for v in c.victims)) for c in ranked] == [("a", ["a-low", "a-mid"])]


def test_equal_or_higher_priority_pods_are_never_victims_and_never_means_never() -> None:
    cache = _full_cluster()
    assert candidates(cache, Profile("p"), pod("new", gpus=1, priority=1), _prio) == []
    never = pod("new", gpus=1, priority=100, spec={"preemptionPolicy": "Never"})
    assert candidates(cache, Profile("p"), never, _prio) == []


def test_nodes_the_pod_cannot_use_anyway_are_not_candidates() -> None:
    cache = _full_cluster()
    picky = pod("new", gpus=1, priority=100, spec={"nodeSelector": {"kubernetes.io/hostname": "a"}})
    assert [c.node for c in candidates(cache, Profile("p"), picky, _prio)] == ["a"]
