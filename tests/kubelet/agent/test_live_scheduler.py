"""scheduler → API → node agent → plugin → container runtime options, all real processes.

Two emulated dgx-a100 nodes (agent + plugin each, the plugins not publishing their GPUs: the scheduler counts
them) and ``kubegpu scheduler`` with a profile named for this test (so that on a real cluster,
``KUBEGPU_TEST_KUBECONFIG``, no other scheduler takes the pod and the pod stays off real nodes: it selects this
test's node label).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gpucluster import GPU, GpuCluster
from tests.kubeapi.fixture import KubeEnv

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

MOST_ALLOCATED = {
    "name": "NodeResourcesFit",
    "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": GPU, "weight": 100}]}},
}


@pytest.fixture
def cluster(kube: KubeEnv, tmp_path: Path) -> Iterator[GpuCluster]:
    with GpuCluster(
        kube,
        tmp_path,
        ["dgx-a100", "dgx-a100"],
        publish=False,
        score=[{"name": "NodeResourcesFit", "weight": 1}],
        plugin_config=[MOST_ALLOCATED],
    ) as cluster:
        yield cluster


def test_a_4_gpu_pod_binds_through_the_scheduler_and_its_container_gets_4_gpus_of_that_node(
    kube: KubeEnv, cluster: GpuCluster
) -> None:
    cluster.wait_ready()
    got = cluster.run("train", 4)
    assert got.node in cluster.nodes
    bound = cluster.nodes[got.node]
    assert len(set(got.main)) == 4
    assert set(got.main) <= {d["id"] for d in bound.local.status()["resources"][GPU]["devices"]}
    assert set(bound.held(kube.namespace)["train"]["main"]) == set(got.main)
    other = next(n for name, n in cluster.nodes.items() if name != got.node)
    assert not other.held(kube.namespace)
