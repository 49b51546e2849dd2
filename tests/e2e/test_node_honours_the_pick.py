"""The node honours the scheduler's pick: pods bound in the API with ``kubegpu.io/gpu-devices`` are admitted
by the kubelet emulator against a real ``kubegpu plugin`` process, which reads the pods from the API server
(in-process, or the cluster ``KUBEGPU_TEST_KUBECONFIG`` names)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod

from kubegpu import placement
from kubegpu.demo.localnode import LocalNode, pod_manifest
from kubegpu.gpu import profiles
from kubegpu.kubelet import errors as kubelet_errors
from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = pytest.mark.live_scheduler

MACHINE = profiles.load("dgx-a100")
UUID = [g.uuid for g in MACHINE.gpus]


@pytest.fixture
def node(kube: KubeEnv) -> Iterator[tuple[LocalNode, str]]:
    name = kube.name("gpu-node")
    kube.client().create(Node(metadata=ObjectMeta(name=name)))
    local = LocalNode("dgx-a100", plugin_args=["--node-name", name, "--kubeconfig", str(kube.kubeconfig)])
    with local:
        local.start_kubelet()
        local.start_plugin()
        local.wait_for(lambda s: s.get("resources", {}).get("nvidia.com/gpu", {}).get("allocatable") == 8, timeout=30)
        local.wait_log("plugin", "publishing the GPUs on the node")
        yield local, name


def bound(kube: KubeEnv, node_name: str, pod_name: str, gpus: int, chosen: list[int] | None) -> dict[str, Any]:
    """Create the pod in the API as the scheduler leaves it (annotated, bound); its manifest for the kubelet."""
    manifest = pod_manifest(pod_name, gpus, namespace=kube.namespace)
    del manifest["metadata"]["uid"]
    manifest["spec"]["nodeName"] = node_name
    if chosen is not None:
        manifest["metadata"]["annotations"] = {"kubegpu.io/gpu-devices": ",".join(UUID[i] for i in chosen)}
    created = kube.client().create(Pod.from_dict(manifest))
    out: dict[str, Any] = created.to_dict()
    return out


def devices(admitted: dict[str, Any]) -> list[str]:
    got: list[str] = admitted["containers"]["main"]["resources"]["nvidia.com/gpu"]
    return got


def test_a_four_gpu_pod_gets_exactly_the_annotated_gpus(node: tuple[LocalNode, str], kube: KubeEnv) -> None:
    local, name = node
    chosen = [1, 3, 5, 7]  # not what the plugin's own policy picks on a free DGX A100
    assert placement.pick("topology", MACHINE.topology, list(range(8)), [], 4) != chosen
    admitted = local.admit(bound(kube, name, "four", 4, chosen))
    assert sorted(devices(admitted)) == sorted(UUID[i] for i in chosen)
    visible = admitted["containers"]["main"]["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert sorted(visible) == sorted(UUID[i] for i in chosen)
    assert "honouring the scheduler's pick" in local.log("plugin")


def test_two_pods_admitted_back_to_back_each_get_their_pick(node: tuple[LocalNode, str], kube: KubeEnv) -> None:
    local, name = node
    first = bound(kube, name, "first", 2, [6, 2])
    second = bound(kube, name, "second", 2, [0, 7])
    assert sorted(devices(local.admit(first))) == sorted([UUID[6], UUID[2]])
    assert sorted(devices(local.admit(second))) == sorted([UUID[0], UUID[7]])


def test_a_pick_that_is_taken_fails_admission_with_the_reason(node: tuple[LocalNode, str], kube: KubeEnv) -> None:
    local, name = node
    # A pod the API never saw (bound by hand to the kubelet) takes GPUs the scheduler then chooses for another.
    squatter = devices(local.admit(pod_manifest("squatter", 1, namespace=kube.namespace)))
    taken = UUID.index(squatter[0])
    late = bound(kube, name, "late", 2, [taken, (taken + 1) % 8])
    with pytest.raises(kubelet_errors.ControlError) as caught:
        local.admit(late)
    assert caught.value.reason == "UnexpectedAdmissionError"
    assert f"pod {kube.namespace}/late: the scheduler chose nvidia.com/gpu devices" in caught.value.message
    assert f"not available (in use or unhealthy): {UUID[taken]}" in caught.value.message
    status = local.status()
    assert status["resources"]["nvidia.com/gpu"]["allocated"] == squatter  # nothing else was allocated


def test_a_pod_without_the_annotation_gets_what_the_policy_picks(node: tuple[LocalNode, str], kube: KubeEnv) -> None:
    local, name = node
    expected = placement.pick("topology", MACHINE.topology, list(range(8)), [], 2)
    admitted = local.admit(bound(kube, name, "plain", 2, None))
    assert sorted(devices(admitted)) == sorted(UUID[i] for i in expected)


def test_after_a_plugin_restart_and_a_deletion_the_successor_gets_its_pick(
    node: tuple[LocalNode, str], kube: KubeEnv
) -> None:
    local, name = node
    first = bound(kube, name, "first", 4, [0, 1, 2, 3])
    assert sorted(devices(local.admit(first))) == sorted(UUID[:4])
    local.stop("plugin")
    local.start_plugin()
    wait_until(lambda: local.log("plugin").count("msg=registered") == 2, within=30, what="the plugin registered again")
    # The successor was chosen the GPUs its predecessor held; the predecessor goes first, on both sides.
    local.delete(f"{kube.namespace}/first")
    kube.client().delete(Pod, "first", grace_period=0)
    successor = bound(kube, name, "successor", 2, [1, 3])
    assert sorted(devices(local.admit(successor))) == sorted([UUID[1], UUID[3]])
