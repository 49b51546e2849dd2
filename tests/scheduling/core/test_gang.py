"""Gang scheduling: at least minMember pods of a group are placed, or none and the cluster is unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.framework import Scheduler
from kubegpu.scheduling.core.gang import schedule_gang
from kubegpu.scheduling.core.model import NodeSpec, PodSpec
from kubegpu.scheduling.core.policies import build_profile
from kubegpu.scheduling.core.workload import TargetWorkload
from tests.scheduling.helpers import cluster, node, pod


def make(pods: list[PodSpec], *nodes: NodeSpec) -> tuple[ClusterState, Scheduler]:
    state = cluster(*nodes)
    rng = np.random.default_rng(0)
    return state, Scheduler(state, build_profile("fgd", state, TargetWorkload.from_pods(pods), pods, rng), rng)


def test_a_group_that_fits_is_placed_whole() -> None:
    pods = [pod(f"w{i}", gpus=4, group="job", min_member=3) for i in range(3)]
    state, s = make(pods, node("a"), node("b"))
    result = schedule_gang(s, pods)
    assert result.admitted and len(result.placements) == 3 and len(state.bindings) == 3


def test_a_group_short_of_min_member_is_rolled_back_completely() -> None:
    pods = [pod(f"w{i}", gpus=4, group="job", min_member=3) for i in range(3)]
    state, s = make(pods, node("a"), node("b", gpus=2))
    state.bind(pod("other", gpus=1, milli=500), 1, [0])
    before = (state.gpu_free.copy(), state.cpu_free.copy())
    result = schedule_gang(s, pods)
    assert not result.admitted and result.placements == ()
    assert set(state.bindings) == {"other"}
    assert np.array_equal(before[0], state.gpu_free) and np.array_equal(before[1], state.cpu_free)


def test_min_member_below_group_size_admits_a_partial_group() -> None:
    pods = [pod(f"w{i}", gpus=8, group="job", min_member=2) for i in range(3)]
    _, s = make(pods, node("a"), node("b"))
    result = schedule_gang(s, pods)
    assert result.admitted and len(result.placements) == 2 and [p.name for p in result.unplaced] == ["w2"]


def test_pods_of_different_groups_or_an_impossible_min_member_are_rejected() -> None:
    _, s = make([pod("x", gpus=1)], node("a"))
    with pytest.raises(InvalidSpec, match="share a group name"):
        schedule_gang(s, [pod("a", group="g1"), pod("b", group="g2")])
    with pytest.raises(InvalidSpec, match=r"minMember 3 must be within 1\.\.2"):
        schedule_gang(s, [pod("a", group="g"), pod("b", group="g")], min_member=3)
