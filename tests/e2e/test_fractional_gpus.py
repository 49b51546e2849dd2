"""Fractional GPUs end to end: scheduler → API → node agent → plugin with ``--node-name --gpu-milli``.

Real processes on the in-process API server (or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names; the profile and
node label are this test's own). A dgx-a100 node advertises GPUs 0-2 as ``kubegpu.io/gpu-milli`` (1000 units
each) and GPUs 3-7 whole. Two 500-milli pods share the GPU the scheduler chose, each container told its share; a
600-milli pod goes to another GPU; a pod bound by hand (``spec.nodeName``, no scheduler) asking 600 cannot get
the half-used GPU (the kubelet's own accounting plus the plugin's one-GPU rule), and one asking more than any one
GPU has left fails admission; a pod asking both forms gets a FailedScheduling event and is never bound.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube.resources.core_v1 import Event, Pod

from kubegpu.gpu import profiles
from tests.e2e.gpucluster import GPU, POOL, GpuCluster
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = [pytest.mark.live_scheduler, pytest.mark.e2e]

MILLI = "kubegpu.io/gpu-milli"
MACHINE = profiles.load("dgx-a100")
SHARED = [g.uuid for g in MACHINE.gpus[:3]]


@pytest.fixture
def cluster(kube: KubeEnv, tmp_path: Path) -> Iterator[GpuCluster]:
    """One dgx-a100 node whose plugin advertises GPUs 0-2 as milli units, and a scheduler."""
    with GpuCluster(kube, tmp_path, plugin_args=("--gpu-milli", "0,1,2")) as gpus:
        yield gpus


def _pod(name: str, namespace: str, limits: dict[str, int], profile: str = "", node: str = "") -> Pod:
    spec: dict[str, Any] = {
        "nodeSelector": {POOL: namespace},
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}],
    }
    if profile:
        spec["schedulerName"] = profile
    if node:
        spec["nodeName"] = node
    return Pod.from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def test_fractional_pods_share_the_chosen_gpu_and_the_kubelet_guards_the_rest(
    kube: KubeEnv, cluster: GpuCluster
) -> None:
    client = kube.client()
    (name,) = cluster.nodes
    node = cluster.nodes[name].local

    def ready() -> bool:
        got = cluster.node_object(name)
        allocatable = (got.status.allocatable if got and got.status else None) or {}
        return cluster.ready(name, gpus=5) and allocatable.get(MILLI) == "3000"

    wait_until(ready, within=60, what=f"node {name} Ready with 3000 {MILLI}, 5 GPUs and its published GPUs")

    def settled(pod_name: str) -> Pod | None:
        pod = client.get(Pod, pod_name)
        return pod if pod.status and pod.status.phase in ("Running", "Failed") else None

    def run(pod: Pod) -> tuple[Pod, dict[str, str]]:
        assert pod.metadata is not None and pod.metadata.name is not None
        pod_name = pod.metadata.name
        client.create(pod)
        try:
            got = wait_until(lambda: settled(pod_name), within=60, what=f"pod {pod_name} Running or Failed")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{cluster.logs()}") from None
        assert got.status is not None
        assert got.status.phase == "Running", (pod_name, got.status.reason, got.status.message)
        assert got.metadata is not None and got.metadata.annotations is not None
        options = json.loads(got.metadata.annotations["kubegpu.io/runtime-options"])
        return got, options["main"]["envs"]

    first, first_env = run(_pod("half-a", kube.namespace, {MILLI: 500}, cluster.profile))
    assert first.metadata is not None and first.metadata.annotations is not None
    chosen = first.metadata.annotations["kubegpu.io/gpu-devices"]
    assert chosen in SHARED and first.metadata.annotations["kubegpu.io/gpu-milli"] == "500"
    assert first_env["NVIDIA_VISIBLE_DEVICES"] == chosen
    assert first_env["KUBEGPU_GPU_MILLI"] == "500"
    assert first_env["CUDA_DEVICE_MEMORY_LIMIT"] == f"{MACHINE.gpus[0].memory_mib // 2}m"

    # Bound by hand: no scheduler, no annotation. The kubelet counts the units; the plugin keeps a share on one
    # GPU, so 600 can never land on the GPU that has 500 left.
    _, manual_env = run(_pod("by-hand", kube.namespace, {MILLI: 600}, node=name))
    assert manual_env["NVIDIA_VISIBLE_DEVICES"] in SHARED
    assert manual_env["NVIDIA_VISIBLE_DEVICES"] != chosen
    assert manual_env["KUBEGPU_GPU_MILLI"] == "600"

    second, second_env = run(_pod("half-b", kube.namespace, {MILLI: 500}, cluster.profile))
    assert second.metadata is not None and second.metadata.annotations is not None
    assert second.metadata.annotations["kubegpu.io/gpu-devices"] == chosen  # best fit: the half-used GPU
    assert second_env["NVIDIA_VISIBLE_DEVICES"] == chosen and second_env["KUBEGPU_GPU_MILLI"] == "500"
    assert f"pod={kube.namespace}/half-b" in node.log("plugin")  # the plugin honoured the annotation, by name

    third, third_env = run(_pod("sixty", kube.namespace, {MILLI: 600}, cluster.profile))
    assert third.metadata is not None and third.metadata.annotations is not None
    other = third.metadata.annotations["kubegpu.io/gpu-devices"]
    # Neither the full GPU nor the one the hand-bound pod holds 600 of: the scheduler counts that pod too.
    assert other in SHARED and other not in (chosen, manual_env["NVIDIA_VISIBLE_DEVICES"])
    assert third_env["NVIDIA_VISIBLE_DEVICES"] == other and third_env["KUBEGPU_GPU_MILLI"] == "600"

    # 800 units are free in all (400 on each of two GPUs), enough for the kubelet's count, but no one GPU has 500:
    # a pod bound by hand fails admission with the reason, nothing allocated.
    client.create(_pod("spread", kube.namespace, {MILLI: 500}, node=name))
    spread = wait_until(lambda: settled("spread"), within=60, what="pod spread Failed")
    assert spread.status is not None and spread.status.phase == "Failed"
    assert spread.status.reason == "UnexpectedAdmissionError", spread.status
    assert "no single GPU has 500 units available" in (spread.status.message or "")

    client.create(_pod("both", kube.namespace, {GPU: 1, MILLI: 500}, cluster.profile))

    def refused() -> str | None:
        for event in client.list(Event, namespace=kube.namespace):
            if event.involvedObject.name == "both" and event.reason == "FailedScheduling":
                return event.message
        return None

    message = wait_until(refused, within=30, what="a FailedScheduling event for the pod asking both forms")
    assert message is not None and GPU in message and MILLI in message and "not both" in message
    both = client.get(Pod, "both")
    assert both.spec is not None and not both.spec.nodeName
