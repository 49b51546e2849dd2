"""NodeResourcesFit scores against kube-scheduler's integer arithmetic, worked out by hand per case."""

from __future__ import annotations

import numpy as np
import pytest

from kubegpu.scheduling.core.noderesources import BIN_PACKING_SHAPE
from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.config import TUTORIAL_RESOURCES
from kubegpu.scheduling.live.scoring import NodeResourcesFit, ResourceWeight

from .builders import node, pod


def _cache_with_six_gpus_used() -> SchedulerCache:
    cache = SchedulerCache()
    cache.set_node(node("busy"))
    cache.set_node(node("empty"))
    for i in range(6):
        cache.add_pod(pod(f"running-{i}", gpus=1, node="busy"), "busy", (i,))
    return cache


def _scores(cache: SchedulerCache, plugin: NodeResourcesFit, p: object) -> dict[str, int]:
    idx = np.arange(len(cache.names))
    return dict(zip(cache.names, (int(s) for s in plugin.score(cache, p, idx)), strict=True))  # type: ignore[arg-type]


# Each expected value is kube-scheduler's arithmetic done by hand, e.g. MostAllocated on "busy":
# gpu 7*100/8 = 87, cpu 7000*100/64000 = 10, memory 7Gi*100/512Gi = 1; (87*100 + 10 + 1) / 102 = 85.
CASES = [
    ("MostAllocated", TUTORIAL_RESOURCES, {"busy": 85, "empty": 11}),
    ("LeastAllocated", TUTORIAL_RESOURCES, {"busy": 13, "empty": 87}),
    # GPU only: 7*100/8 = 87 and 1*100/8 = 12.
    ("MostAllocated", (ResourceWeight("nvidia.com/gpu", 1),), {"busy": 87, "empty": 12}),
    # cpu (weight 1) and memory (weight 1) only: busy (10 + 1) / 2 = 5, empty (1 + 0) / 2 = 0.
    ("MostAllocated", (ResourceWeight("cpu", 1), ResourceWeight("memory", 1)), {"busy": 5, "empty": 0}),
]


@pytest.mark.parametrize(("strategy", "weights", "expected"), CASES, ids=["most", "least", "gpu-only", "cpu-memory"])
def test_node_resources_fit_matches_integer_arithmetic(
    strategy: str, weights: tuple[ResourceWeight, ...], expected: dict[str, int]
) -> None:
    cache = _cache_with_six_gpus_used()
    assert _scores(cache, NodeResourcesFit(strategy, weights), pod("new", gpus=1)) == expected


def test_unset_requests_score_as_100m_and_200mi_and_unrequested_gpus_are_skipped() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n", cpu="4", memory="8Gi"))
    p = pod("p", cpu=None, memory=None)
    # cpu 100*100/4000 = 2, memory 200Mi*100/8Gi = 2; the GPU (weight 100) is not requested, so not scored.
    assert _scores(cache, NodeResourcesFit("MostAllocated", TUTORIAL_RESOURCES), p) == {"n": 2}


def test_requested_to_capacity_ratio_uses_the_broken_linear_shape() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n"))
    for i in range(3):
        cache.add_pod(pod(f"r{i}", gpus=1, node="n"), "n", (i,))
    plugin = NodeResourcesFit("RequestedToCapacityRatio", (ResourceWeight("nvidia.com/gpu", 1),), BIN_PACKING_SHAPE)
    # utilisation 5*100/8 = 62 -> shape 0..10 scaled to 0..100 -> 62.
    assert _scores(cache, plugin, pod("p", gpus=2)) == {"n": 62}


def test_any_extended_resource_can_be_weighted() -> None:
    cache = SchedulerCache()
    cache.set_node(node("n", gpus=0, cpu="4", extra={"example.com/fpga": "10"}))
    cache.add_pod(pod("r", cpu=None, memory=None, extra={"example.com/fpga": "4"}, node="n"), "n")
    plugin = NodeResourcesFit("MostAllocated", (ResourceWeight("example.com/fpga", 2), ResourceWeight("cpu", 1)))
    # fpga 5*100/10 = 50; cpu (100 default of the running pod + 500) *100/4000 = 15; (50*2 + 15) / 3 = 38.
    assert _scores(cache, plugin, pod("p", cpu="500m", extra={"example.com/fpga": "1"})) == {"n": 38}
