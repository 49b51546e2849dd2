"""kubegpu's policies scoring live nodes through the core's ClusterState mirror."""

from __future__ import annotations

import numpy as np

from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.corepolicies import CorePolicyScore
from kubegpu.scheduling.live.cycle import Cycle, Placement, Profile

from .builders import node, pod


def _cluster() -> SchedulerCache:
    cache = SchedulerCache()
    for name in ("a", "b"):
        cache.set_node(node(name, cpu="64", labels={"nvidia.com/gpu.product": "A100"}))
    # Node "a" has 7 of 8 GPUs used: one GPU left, which only a 1-GPU pod can use.
    for i in range(7):
        cache.add_pod(pod(f"r{i}", gpus=1, node="a"), "a", (i,))
    for i in range(4):
        cache.add_pod(pod(f"big{i}", gpus=8, node="none"), "none")  # a node the cache does not know: not counted
    return cache


def test_the_mirror_follows_the_cache_and_fgd_fills_the_last_gpu() -> None:
    cache = _cluster()
    plugin = CorePolicyScore("FGD")
    scores = plugin.score(cache, pod("new", gpus=1), np.arange(2))
    state = plugin._state
    assert state is not None and state.used_gpus() == 7
    assert scores[0] > scores[1]  # the leftover GPU on "a" is a fragment unless a 1-GPU pod takes it
    cache.remove_pod("uid-default-r0")
    plugin.score(cache, pod("new", gpus=1), np.arange(2))
    assert plugin._state is state and state.used_gpus() == 6


def test_lookahead_as_the_profile_score_places_pods() -> None:
    cache = _cluster()
    profile = Profile("p", scorers=((CorePolicyScore("Lookahead"), 1),))
    decision = Cycle(np.random.default_rng(0)).schedule(cache, profile, pod("new", gpus=1))
    assert isinstance(decision, Placement) and decision.node == "a" and decision.gpus == (7,)


def test_a_new_node_rebuilds_the_mirror() -> None:
    cache = _cluster()
    plugin = CorePolicyScore("Lookahead")
    plugin.score(cache, pod("new", gpus=1), np.arange(2))
    first = plugin._state
    cache.set_node(node("c", labels={"nvidia.com/gpu.product": "A100"}))
    plugin.score(cache, pod("new", gpus=1), np.arange(3))
    assert plugin._state is not first and plugin._state is not None and plugin._state.size == 3
