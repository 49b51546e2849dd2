"""scheduler → API → node agent → plugin with ``--node-name``: the container gets exactly the GPUs the scheduler
wrote on the pod (``kubegpu.io/gpu-devices``), not the ones the plugin's own policy would pick. All real processes,
on the in-process API server (or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names; the profile and node label are this
test's own, so no other scheduler or node takes the pods)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubegpu import placement
from tests.e2e.gpucluster import GpuCluster
from tests.kubeapi.fixture import KubeEnv

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]


@pytest.fixture
def cluster(kube: KubeEnv, tmp_path: Path) -> Iterator[GpuCluster]:
    """One dgx-a100 node (agent + plugin publishing on it) and a scheduler."""
    with GpuCluster(kube, tmp_path, ["dgx-a100"]) as cluster:
        yield cluster


def test_the_container_gets_the_gpus_in_the_schedulers_annotation(kube: KubeEnv, cluster: GpuCluster) -> None:
    cluster.wait_ready()
    (node,) = cluster.nodes.values()
    placed: dict[str, set[str]] = {}
    for pod_name, gpus in (("one", 1), ("four", 4)):
        got = cluster.run(pod_name, gpus)
        assert sorted(got.main) == sorted(got.chosen), pod_name
        assert len(got.chosen) == gpus
        placed[pod_name] = set(got.chosen)
    # With one GPU taken, the plugin's own policy would give the 4-GPU pod another set than the scheduler chose.
    uuid = [g.uuid for g in node.machine.gpus]
    free = [i for i in range(8) if uuid[i] not in placed["one"]]
    own = {uuid[i] for i in placement.pick("topology", node.machine.topology, free, [], 4)}
    if own != placed["four"]:
        assert f"pod={kube.namespace}/four" in node.local.log("plugin")  # honoured, logged with the pod's name
