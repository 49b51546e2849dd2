"""The live cycle on nodes that publish their GPUs (``kubegpu.io/gpus``): filter, exact pick, interconnect score."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kubegpu.deviceplugin.rm import nodegpus, resource_map
from kubegpu.gpu import profiles
from kubegpu.scheduling.live import config
from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.cycle import NO_GPU_SET, Cycle, FitError, Placement, Profile
from kubegpu.scheduling.live.objects import NodeInfo
from kubegpu.scheduling.live.scoring import GpuTopology, NodeResourcesFit
from tests.deviceplugin.fixtures.build import plugin_config

from .builders import node, pod


def described(name: str, profile: str, unhealthy: frozenset[int] = frozenset()) -> NodeInfo:
    """A Node as the plugin with ``--node-name`` annotates it, for an emulated ``profile``."""
    machine = profiles.load(profile)
    served = resource_map.build(machine, plugin_config()).resources
    bad = {"nvidia.com/gpu": {machine.gpus[i].uuid for i in unhealthy}}
    text = nodegpus.node_annotations(nodegpus.describe(machine, served, bad))[nodegpus.GPUS_ANNOTATION]
    assert text is not None
    return dataclasses.replace(node(name, gpus=len(machine.gpus) - len(unhealthy)), gpus_text=text)


def schedule(cache: SchedulerCache, gpus: int, profile: Profile | None = None, seed: int = 0) -> Placement | FitError:
    return Cycle(np.random.default_rng(seed)).schedule(cache, profile or Profile("gpu-scheduler"), pod("p", gpus=gpus))


def test_a_four_gpu_pod_on_a_dgx_a100_gets_four_gpus_of_one_numa_node_by_uuid() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a100", "dgx-a100"))
    cache.add_pod(pod("first", gpus=1, node="a100"), "a100", (0,))
    decision = schedule(cache, 4)
    assert isinstance(decision, Placement) and len(decision.gpus) == 4 and 0 not in decision.gpus
    machine = profiles.load("dgx-a100")
    assert len({machine.gpus[i].numa_node for i in decision.gpus}) == 1
    assert [cache.device_id("a100", i) for i in decision.gpus] == [machine.gpus[i].uuid for i in decision.gpus]


def test_a_two_gpu_pod_on_dgx1_v100_gets_an_nvlink_pair() -> None:
    cache = SchedulerCache()
    cache.set_node(described("v100", "dgx1-v100"))
    decision = schedule(cache, 2)
    assert isinstance(decision, Placement)
    a, b = decision.gpus
    assert profiles.load("dgx1-v100").topology.nvlink[a][b] > 0


@pytest.mark.parametrize(
    ("case", "unhealthy", "held", "unknown", "want", "fits"),
    [
        ("all free", frozenset(), 0, 0, 8, True),
        ("unhealthy GPUs are not chosen", frozenset({1, 2, 3, 4, 5}), 0, 0, 4, False),
        ("three healthy are enough for three", frozenset({1, 2, 3, 4, 5}), 0, 0, 3, True),
        ("GPUs of pods bound by others count as in use", frozenset(), 0, 6, 4, False),
        ("held and unknown together", frozenset(), 2, 2, 4, True),
        ("held and unknown leave too few", frozenset(), 3, 2, 4, False),
    ],
)
def test_a_described_node_fits_only_when_enough_healthy_free_gpus_are_left(
    case: str, unhealthy: frozenset[int], held: int, unknown: int, want: int, fits: bool
) -> None:
    cache = SchedulerCache()
    cache.set_node(described("n", "dgx-a100", unhealthy))
    if held:
        cache.add_pod(pod("held", gpus=held, node="n"), "n", tuple(i for i in range(8) if i not in unhealthy)[:held])
    if unknown:
        cache.add_pod(pod("other-scheduler", gpus=unknown, node="n"), "n", ())
    decision = schedule(cache, want, Profile("gpu-scheduler", resource_filter=False))
    assert isinstance(decision, Placement) is fits, case
    if isinstance(decision, Placement):
        assert not set(decision.gpus) & (set(unhealthy) | set(cache.gpus_used.get("n", set())))
    else:
        assert decision.reasons == {NO_GPU_SET: 1}


def test_a_terminating_pod_still_holds_its_gpus() -> None:
    cache = SchedulerCache()
    cache.set_node(described("n", "dgx-a100"))
    cache.add_pod(pod("going", gpus=6, node="n"), "n", (0, 1, 2, 3, 4, 5))
    assert isinstance(schedule(cache, 4, Profile("gpu-scheduler", resource_filter=False)), FitError)
    cache.remove_pod("uid-default-going")
    assert isinstance(schedule(cache, 4), Placement)


def test_with_gpu_topology_a_four_gpu_pod_prefers_the_node_whose_free_gpus_are_well_connected() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a-scattered", "dgx1-v100"))
    cache.set_node(described("b-island", "dgx1-v100"))
    # dgx1-v100: GPUs 0-3 and 4-7 are NVLink islands. Leave 0, 1, 6, 7 free on one node, 0-3 on the other.
    cache.add_pod(pod("x", gpus=4, node="a-scattered"), "a-scattered", (2, 3, 4, 5))
    cache.add_pod(pod("y", gpus=4, node="b-island"), "b-island", (4, 5, 6, 7))
    scores = GpuTopology().score(cache, pod("p", gpus=4), np.arange(2))
    assert scores[1] == 100 and scores[0] < 100
    profile = Profile("gpu-scheduler", scorers=((NodeResourcesFit(), 1), (GpuTopology(), 1)))
    for seed in range(8):
        decision = schedule(cache, 4, profile, seed)
        assert isinstance(decision, Placement) and decision.node == "b-island"
        assert decision.gpus == (0, 1, 2, 3)


def test_gpu_topology_scores_nothing_for_one_gpu_pods_and_undescribed_nodes() -> None:
    cache = SchedulerCache()
    cache.set_node(described("a", "dgx-a100"))
    cache.set_node(node("b", gpus=8))
    assert GpuTopology().score(cache, pod("p", gpus=1), np.arange(2)).tolist() == [0, 0]
    assert GpuTopology().score(cache, pod("p", gpus=2), np.arange(2)).tolist() == [100, 0]


def test_an_unreadable_description_counts_the_node_as_undescribed() -> None:
    cache = SchedulerCache()
    cache.set_node(dataclasses.replace(node("n", gpus=4), gpus_text='{"version": "v9"}'))
    assert "n" not in cache.described and "version" in cache.description_errors["n"]
    decision = schedule(cache, 2)
    assert isinstance(decision, Placement) and decision.gpus == (0, 1)


def test_gpu_topology_is_a_score_plugin_with_a_weight_in_the_profile() -> None:
    raw = {
        "apiVersion": config.API_VERSION,
        "kind": config.KIND,
        "profiles": [{"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "GPUTopology", "weight": 3}]}}}],
    }
    (profile,) = config.parse(raw).profiles
    assert [(p.name, w) for p, w in profile.scorers] == [("NodeResourcesFit", 1), ("GPUTopology", 3)]
    raw["profiles"][0]["plugins"] = {"filter": {"enabled": [{"name": "GPUTopology"}]}}  # type: ignore[index]
    with pytest.raises(config.ConfigError, match="is a score plugin"):
        config.parse(raw)
