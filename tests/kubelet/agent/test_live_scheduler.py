"""scheduler → API → node agent → plugin → container runtime options, all real processes.

Two emulated dgx-a100 nodes (agent + plugin each) and ``kubegpu scheduler`` with a profile named for this
test (so that on a real cluster, ``KUBEGPU_TEST_KUBECONFIG``, no other scheduler takes the pod and the pod
stays off real nodes: it selects this test's node label).
"""

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
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

GPU = "nvidia.com/gpu"
POOL = "kubegpu.io/test-pool"


@pytest.fixture
def cluster(kube: KubeEnv, tmp_path: Path) -> Iterator[tuple[dict[str, LocalNode], str]]:
    """Nodes ``a`` and ``b`` and a scheduler; yields ({node name: its LocalNode}, the profile's schedulerName)."""
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
                        "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 1}]}},
                        "pluginConfig": [
                            {
                                "name": "NodeResourcesFit",
                                "args": {
                                    "scoringStrategy": {
                                        "type": "MostAllocated",
                                        "resources": [{"name": GPU, "weight": 100}],
                                    }
                                },
                            }
                        ],
                    }
                ],
            }
        )
    )
    nodes: dict[str, LocalNode] = {}
    with contextlib.ExitStack() as stack:
        for suffix in ("a", "b"):
            name = kube.name(f"gpu-{suffix}")
            node = stack.enter_context(
                LocalNode(
                    kubelet_args=[
                        "--kubeconfig",
                        str(kube.kubeconfig),
                        "--node-name",
                        name,
                        "--node-labels",
                        f"{POOL}={kube.namespace}",
                        "--node-status-update-frequency",
                        "1s",
                    ]
                )
            )
            node.start_kubelet()
            node.start_plugin()
            nodes[name] = node
        first = next(iter(nodes.values()))
        first.spawn(
            "scheduler",
            [
                "scheduler",
                "--kubeconfig",
                str(kube.kubeconfig),
                "--config",
                str(config),
                "--metrics-listen",
                f"127.0.0.1:{free_port()}",
            ],
        )
        yield nodes, profile
    client = kube.client()
    for name in nodes:
        with contextlib.suppress(ApiError):
            client.delete(Lease, name, namespace="kube-node-lease")


def first_log(nodes: dict[str, LocalNode]) -> str:
    return next(iter(nodes.values())).log_tail("scheduler", 30)


def test_a_4_gpu_pod_binds_through_the_scheduler_and_its_container_gets_4_gpus_of_that_node(
    kube: KubeEnv, cluster: tuple[dict[str, LocalNode], str]
) -> None:
    nodes, profile = cluster
    client = kube.client()

    def ready(name: str) -> bool:
        try:
            node = client.get(Node, name)
        except ApiError as exc:  # the node agent has not registered its Node yet
            if exc.status.code == 404:
                return False
            raise
        taints = (node.spec.taints if node.spec else None) or []
        allocatable = (node.status.allocatable if node.status else None) or {}
        return allocatable.get(GPU) == "8" and not any(t.key == "node.kubernetes.io/not-ready" for t in taints)

    for name in nodes:
        wait_until(lambda name=name: ready(name), within=60, what=f"node {name} Ready with 8 GPUs")

    client.create(
        Pod.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "train"},
                "spec": {
                    "schedulerName": profile,
                    "nodeSelector": {POOL: kube.namespace},
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base", "resources": {"limits": {GPU: 4}}}
                    ],
                },
            }
        )
    )

    def running() -> Pod | None:
        pod = client.get(Pod, "train")
        return pod if pod.status and pod.status.phase == "Running" else None

    try:
        pod = wait_until(running, within=60, what="pod train bound by the scheduler and Running")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{client.get(Pod, 'train').to_dict()}\n{first_log(nodes)}") from None
    assert pod.spec and pod.spec.nodeName in nodes and pod.metadata and pod.metadata.annotations
    bound = nodes[pod.spec.nodeName]
    visible = json.loads(pod.metadata.annotations["kubegpu.io/runtime-options"])["main"]["envs"][
        "NVIDIA_VISIBLE_DEVICES"
    ].split(",")
    assert len(set(visible)) == 4
    assert set(visible) <= {d["id"] for d in bound.status()["resources"][GPU]["devices"]}
    held = {p["name"]: p["containers"]["main"][GPU] for p in bound.status()["pods"] if p["namespace"] == kube.namespace}
    assert set(held["train"]) == set(visible)
    other = next(n for name, n in nodes.items() if name != pod.spec.nodeName)
    assert not [p for p in other.status()["pods"] if p["namespace"] == kube.namespace]
