"""Gang planning on the live cache: all of minMember or nothing."""

from __future__ import annotations

import numpy as np

from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.config import default_config
from kubegpu.scheduling.live.cycle import Cycle
from kubegpu.scheduling.live.gangs import GangTimers, plan_gang

from .builders import node, pod


def _members(n: int) -> list:  # type: ignore[type-arg]
    return [pod(f"w{i}", gpus=8, labels={"scheduling.x-k8s.io/pod-group": "train"}) for i in range(n)]


def test_a_gang_that_does_not_fit_leaves_the_cache_as_it_was() -> None:
    cache = SchedulerCache()
    for i in range(3):
        cache.set_node(node(f"n{i}"))
    before = cache.requested.copy()
    plan = plan_gang(
        cache, Cycle(np.random.default_rng(0)), default_config().profiles[0], "default/train", _members(4), 4
    )
    assert not plan.admitted and plan.fitted == 3
    assert "3 of minMember 4 pods fit at once" in plan.message
    assert "0/3 nodes are available: 3 Insufficient nvidia.com/gpu." in plan.message
    assert (cache.requested == before).all() and not cache.placed


def test_a_gang_that_fits_is_assumed_on_distinct_gpus() -> None:
    cache = SchedulerCache()
    for i in range(4):
        cache.set_node(node(f"n{i}"))
    plan = plan_gang(
        cache, Cycle(np.random.default_rng(0)), default_config().profiles[0], "default/train", _members(4), 4
    )
    assert plan.admitted
    assert sorted(p.node for p in plan.placements) == ["n0", "n1", "n2", "n3"]
    assert all(placed.assumed for placed in cache.placed.values()) and len(cache.placed) == 4


def test_gang_timers_fire_once_per_timeout() -> None:
    timers = GangTimers()
    assert not timers.failed("g", 0.0, 5.0)
    assert not timers.failed("g", 4.9, 5.0)
    assert timers.failed("g", 5.0, 5.0)
    assert not timers.failed("g", 6.0, 5.0)
