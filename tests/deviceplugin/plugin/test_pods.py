"""The plugin's cache of its node's pods against an API server: the re-list on a miss, the promise kept by
Allocate, pods of other nodes ignored."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod

from kubegpu.deviceplugin.plugin.pods import NodePods
from kubegpu.deviceplugin.rm import picks, resource_map
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import plugin_config
from tests.kubeapi.fixture import KubeEnv
from tests.polling import eventually

pytestmark = pytest.mark.live_scheduler

MACHINE = profiles.load("pcie-4xt4")
GPU = resource_map.build(MACHINE, plugin_config()).resources[0]
ID = [g.uuid for g in MACHINE.gpus]


def _create(kube: KubeEnv, name: str, node: str, chosen: list[int] | None, gpus: int = 2) -> None:
    meta: dict[str, Any] = {"name": name}
    if chosen is not None:
        meta["annotations"] = {picks.DEVICES_ANNOTATION: ",".join(ID[i] for i in chosen)}
    limits = {"nvidia.com/gpu": str(gpus)}
    spec = {"nodeName": node, "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]}
    kube.client().create(Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}))


async def test_a_pod_the_watch_has_not_delivered_is_found_by_the_relist(kube: KubeEnv) -> None:
    node = kube.name("n")
    cache = NodePods(node, kube.async_client())  # never started: the cache is empty, as a lagging watch's
    try:
        _create(kube, "placed", node, [3, 1])
        assert await cache.preferred(GPU, ID, [], 2) == [ID[3], ID[1]]
        assert cache.relists == 1
    finally:
        await cache.stop()


async def test_allocate_refuses_devices_other_than_the_promised(kube: KubeEnv) -> None:
    node = kube.name("n")
    _create(kube, "placed", node, [0, 2])
    cache = NodePods(node, kube.async_client())
    cache.start()
    try:
        await eventually(lambda: len(cache.pods) == 1, within=10, what="the pod in the cache")
        assert await cache.preferred(GPU, ID, [], 2) == [ID[0], ID[2]]
        with pytest.raises(
            picks.PickUnavailable, match=f"the kubelet allocates .* but the scheduler chose {ID[0]},{ID[2]}"
        ):
            cache.allocating(GPU, [[ID[0], ID[1]]])
        assert await cache.preferred(GPU, ID, [], 2) == [ID[0], ID[2]]
        cache.allocating(GPU, [[ID[2], ID[0]]])
        # Given all its devices, the pod is no candidate any more: an unplaced pod's request goes to the policy.
        assert await cache.preferred(GPU, ID[1:], [], 2) is None
    finally:
        await cache.stop()


async def test_pods_of_other_nodes_are_not_cached(kube: KubeEnv) -> None:
    mine, other = kube.name("mine"), kube.name("other")
    _create(kube, "here", mine, [0, 1])
    _create(kube, "there", other, [2, 3])
    cache = NodePods(mine, kube.async_client())
    cache.start()
    try:
        await eventually(lambda: cache.synced.is_set(), within=10, what="the first list")
        assert {p.name for p in cache.pods.values()} == {"here"}
        _create(kube, "later", mine, [2, 3])
        await eventually(lambda: len(cache.pods) == 2, within=10, what="the watch delivering the new pod")
        kube.client().delete(Pod, "here", grace_period=0)
        await eventually(lambda: {p.name for p in cache.pods.values()} == {"later"}, within=10, what="the deletion")
    finally:
        await cache.stop()
