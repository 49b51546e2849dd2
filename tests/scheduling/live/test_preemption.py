"""Which victims preemption chooses on the live cache."""

from __future__ import annotations

import dataclasses

import pytest

from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.cycle import Profile
from kubegpu.scheduling.live.objects import PodInfo
from kubegpu.scheduling.live.preemption import candidates

from .builders import node, pod
from .test_described_nodes import described


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


def _with_sick_gpu(allocatable: int) -> SchedulerCache:
    """A pcie-4xt4 node publishing GPU 0 Unhealthy, reporting ``allocatable`` GPUs (4: the kubelet's status not
    updated yet since the XID; 3: updated). ``sick`` (priority 1) holds the Unhealthy GPU 0, ``low`` (priority 5)
    GPU 1, ``keep`` (priority 1000) GPUs 2 and 3."""
    text = described("n", "pcie-4xt4", frozenset({0})).gpus_text
    cache = SchedulerCache()
    cache.set_node(dataclasses.replace(node("n", gpus=allocatable), gpus_text=text))
    ids = cache.described["n"].ids
    for name, priority, gpus in (("sick", 1, (0,)), ("low", 5, (1,)), ("keep", 1000, (2, 3))):
        annotations = {"kubegpu.io/gpu-devices": ",".join(str(ids[i]) for i in gpus)}
        placed = pod(name, gpus=len(gpus), node="n", priority=priority, annotations=annotations)
        cache.add_pod(placed, "n", cache.gpu_indices_of(placed, "n"))
    return cache


@pytest.mark.parametrize(
    ("allocatable", "gpus", "victims"),
    [
        pytest.param(4, 1, ["low"], id="a-victim-on-an-unhealthy-gpu-frees-nothing-usable"),
        pytest.param(3, 1, ["low", "sick"], id="allocatable-without-the-unhealthy-gpu-needs-both"),
        pytest.param(4, 2, [], id="too-few-healthy-gpus-to-free-no-candidate"),
    ],
)
def test_victims_on_a_described_node_free_healthy_gpus_the_pick_can_use(
    allocatable: int, gpus: int, victims: list[str]
) -> None:
    cache = _with_sick_gpu(allocatable)
    ranked = candidates(cache, Profile("p"), pod("new", gpus=gpus, priority=100), _prio)
    assert [sorted(v.pod.name for v in c.victims) for c in ranked] == ([victims] if victims else [])
    if victims:  # once they are gone, the scheduler's pick exists and uses only healthy GPUs
        for victim in ranked[0].victims:
            cache.remove_pod(victim.pod.uid)
        choice = cache.gpu_choice("n", gpus)
        assert choice is not None and 0 not in choice.indices
