"""The scheduler chooses the GPUs on nodes that publish them: topology-aware sets, never an unhealthy GPU, and the
container gets exactly that set. Real processes (``kubegpu scheduler``, node agent, plugin with ``--node-name``) on
the in-process API server, or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names (this test's own profile and node label
keep other schedulers and real nodes out)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from lightkube import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod

from kubegpu.demo.localnode import LocalNode, free_port
from kubegpu.gpu import faults, profiles
from kubegpu.scheduling.core import exactgpus
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

GPU = "nvidia.com/gpu"
POOL = "kubegpu.io/test-pool"


class Emulated:
    """One emulated node (agent + plugin publishing on it) and a scheduler with a GPUTopology profile."""

    def __init__(self, kube: KubeEnv, node: LocalNode, name: str, profile: str, machine: str) -> None:
        self.kube, self.node, self.name, self.profile = kube, node, name, profile
        self.machine = profiles.load(machine)

    def annotations(self) -> dict[str, str]:
        got = self.kube.client().get(Node, self.name)
        return dict((got.metadata.annotations if got.metadata else None) or {})

    def wait_ready(self, gpus: int) -> None:
        def ready() -> bool:
            got = self.kube.client().get(Node, self.name)
            allocatable = (got.status.allocatable if got.status else None) or {}
            taints = (got.spec.taints if got.spec else None) or []
            return (
                allocatable.get(GPU) == str(gpus)
                and exactgpus.GPUS_ANNOTATION in self.annotations()
                and not any(t.key == "node.kubernetes.io/not-ready" for t in taints)
            )

        wait_until(ready, within=60, what=f"node {self.name} Ready with {gpus} GPUs and its published GPUs")

    def run(self, pod_name: str, gpus: int) -> list[int]:
        """Create a pod asking ``gpus`` GPUs, wait for it Running; the GPU indices its container sees."""
        client = self.kube.client()
        client.create(
            Pod.from_dict(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": pod_name},
                    "spec": {
                        "schedulerName": self.profile,
                        "nodeSelector": {POOL: self.kube.namespace},
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "x", "resources": {"limits": {GPU: gpus}}}],
                    },
                }
            )
        )

        def running() -> Pod | None:
            pod = client.get(Pod, pod_name)
            return pod if pod.status and pod.status.phase == "Running" else None

        try:
            pod = wait_until(running, within=60, what=f"pod {pod_name} Running")
        except AssertionError as exc:
            logs = f"{self.node.log_tail('scheduler', 30)}\n{self.node.log_tail('plugin', 30)}"
            raise AssertionError(f"{exc}\n{logs}") from None
        assert pod.metadata is not None and pod.metadata.annotations is not None
        chosen = pod.metadata.annotations["kubegpu.io/gpu-devices"].split(",")
        options = json.loads(pod.metadata.annotations["kubegpu.io/runtime-options"])
        visible = options["main"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
        assert sorted(visible) == sorted(chosen), pod_name
        index = {g.uuid: g.index for g in self.machine.gpus}
        return sorted(index[d] for d in chosen)


@pytest.fixture
def emulated(kube: KubeEnv, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Emulated]:
    machine: str = request.param
    profile = kube.name("gpu-scheduler")
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "profiles": [
                    {
                        "schedulerName": profile,
                        "plugins": {"score": {"enabled": [{"name": "GPUTopology", "weight": 2}]}},
                    }
                ],
            }
        )
    )
    name = kube.name("gpu-a")
    kubeconfig = str(kube.kubeconfig)
    node = LocalNode(
        machine,
        kubelet_args=[
            "--kubeconfig", kubeconfig, "--node-name", name, "--node-labels", f"{POOL}={kube.namespace}",
            "--node-status-update-frequency", "1s",
        ],
        plugin_args=["--node-name", name, "--kubeconfig", kubeconfig, "--health-recovery-quiet-period", "0"],
    )  # fmt: skip
    with node:
        node.start_kubelet()
        node.start_plugin()
        node.spawn(
            "scheduler",
            ["scheduler", "--kubeconfig", kubeconfig, "--config", str(config), "--metrics-listen",
             f"127.0.0.1:{free_port()}"],
        )  # fmt: skip
        yield Emulated(kube, node, name, profile, machine)
    with contextlib.suppress(ApiError):
        kube.client().delete(Lease, name, namespace="kube-node-lease")


@pytest.mark.parametrize("emulated", ["dgx-a100"], indirect=True)
def test_a_four_gpu_pod_on_a_dgx_a100_gets_the_annotated_four_gpus_of_one_numa_node(emulated: Emulated) -> None:
    emulated.wait_ready(8)
    one = emulated.run("one", 1)
    four = emulated.run("four", 4)  # lowest free indices (1-4) would cross NUMA nodes
    assert len(four) == 4 and not set(one) & set(four)
    assert len({emulated.machine.gpus[i].numa_node for i in four}) == 1


@pytest.mark.parametrize("emulated", ["dgx1-v100"], indirect=True)
def test_a_two_gpu_pod_on_dgx1_v100_gets_an_nvlink_pair(emulated: Emulated) -> None:
    emulated.wait_ready(8)
    three = emulated.run("three", 3)
    a, b = emulated.run("two", 2)
    assert not {a, b} & set(three)
    assert emulated.machine.topology.nvlink[a][b] > 0


@pytest.mark.parametrize("emulated", ["dgx-a100"], indirect=True)
def test_after_an_xid_the_scheduler_stops_choosing_that_gpu(emulated: Emulated) -> None:
    emulated.wait_ready(8)
    published = exactgpus.read(emulated.name, emulated.annotations()[exactgpus.GPUS_ANNOTATION])
    first = exactgpus.choose(published, set(), 4)
    assert first is not None
    bad = first.indices[0]  # what the scheduler would give a 4-GPU pod on this healthy node
    emulated.node.wait_for(lambda s: bool(s.get("resources")), timeout=30)
    emulated.node.inject(faults.Fault(kind="xid", gpu=bad, xid=79))

    def marked() -> bool:
        gpus = json.loads(emulated.annotations()[exactgpus.GPUS_ANNOTATION])["gpus"]
        return any(g["index"] == bad and g["health"] == "Unhealthy" for g in gpus)

    wait_until(marked, within=5, what=f"GPU {bad} Unhealthy in the Node's kubegpu.io/gpus")
    emulated.wait_ready(7)
    four = emulated.run("four", 4)
    assert bad not in four
    assert len({emulated.machine.gpus[i].numa_node for i in four}) == 1
