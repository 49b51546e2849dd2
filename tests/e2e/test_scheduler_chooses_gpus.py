"""The scheduler chooses the GPUs on nodes that publish them: topology-aware sets, never an unhealthy GPU, and the
container gets exactly that set. Real processes (``kubegpu scheduler``, node agent, plugin with ``--node-name``) on
the in-process API server, or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names (this test's own profile and node label
keep other schedulers and real nodes out)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubegpu.gpu import faults
from kubegpu.scheduling.core import exactgpus
from tests.e2e.gpucluster import GpuCluster, GpuNode
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]


@pytest.fixture
def cluster(kube: KubeEnv, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[GpuCluster]:
    """One node of the machine the test names, publishing its GPUs; a scheduler with GPUTopology scoring."""
    with GpuCluster(
        kube,
        tmp_path,
        [request.param],
        score=[{"name": "GPUTopology", "weight": 2}],
        plugin_args=["--health-recovery-quiet-period", "0"],
    ) as cluster:
        cluster.wait_ready()
        yield cluster


def run(cluster: GpuCluster, pod_name: str, gpus: int) -> list[int]:
    """Run a pod asking ``gpus`` GPUs; the GPU indices its container sees (checked equal to the scheduler's pick)."""
    got = cluster.run(pod_name, gpus)
    assert sorted(got.main) == sorted(got.chosen), pod_name
    index = cluster.nodes[got.node].uuid_index()
    return sorted(index[d] for d in got.chosen)


def only(cluster: GpuCluster) -> GpuNode:
    (node,) = cluster.nodes.values()
    return node


@pytest.mark.parametrize("cluster", ["dgx-a100"], indirect=True)
def test_a_four_gpu_pod_on_a_dgx_a100_gets_the_annotated_four_gpus_of_one_numa_node(cluster: GpuCluster) -> None:
    one = run(cluster, "one", 1)
    four = run(cluster, "four", 4)  # lowest free indices (1-4) would cross NUMA nodes
    assert len(four) == 4 and not set(one) & set(four)
    assert len({only(cluster).machine.gpus[i].numa_node for i in four}) == 1


@pytest.mark.parametrize("cluster", ["dgx1-v100"], indirect=True)
def test_a_two_gpu_pod_on_dgx1_v100_gets_an_nvlink_pair(cluster: GpuCluster) -> None:
    three = run(cluster, "three", 3)
    a, b = run(cluster, "two", 2)
    assert not {a, b} & set(three)
    assert only(cluster).machine.topology.nvlink[a][b] > 0


@pytest.mark.parametrize("cluster", ["dgx-a100"], indirect=True)
def test_after_an_xid_the_scheduler_stops_choosing_that_gpu(cluster: GpuCluster) -> None:
    node = only(cluster)
    first = exactgpus.choose(cluster.published(node.name), set(), 4)
    assert first is not None
    bad = first.indices[0]  # what the scheduler would give a 4-GPU pod on this healthy node
    node.local.wait_for(lambda s: bool(s.get("resources")), timeout=30)
    node.local.inject(faults.Fault(kind="xid", gpu=bad, xid=79))

    def marked() -> bool:
        gpus = json.loads(cluster.annotations(node.name)[exactgpus.GPUS_ANNOTATION])["gpus"]
        return any(g["index"] == bad and g["health"] == "Unhealthy" for g in gpus)

    wait_until(marked, within=5, what=f"GPU {bad} Unhealthy in the Node's kubegpu.io/gpus")
    cluster.wait_ready(gpus=7)
    four = run(cluster, "four", 4)
    assert bad not in four
    assert len({node.machine.gpus[i].numa_node for i in four}) == 1
