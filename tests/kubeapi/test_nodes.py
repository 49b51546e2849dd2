"""Nodes: the not-ready taint the control plane puts on new nodes and lifts once they report Ready."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node

from tests.kubeapi.fixture import KubeEnv
from tests.polling import wait_until

pytestmark = pytest.mark.live_scheduler

NOT_READY = "node.kubernetes.io/not-ready"


def _taints(kube: KubeEnv, name: str) -> set[tuple[str, str]]:
    node = kube.client().get(Node, name)
    return {(t.key, t.effect) for t in (node.spec.taints if node.spec else None) or []}


def _ready(status: str) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": status,
                    "reason": "KubeletReady",
                    "message": "test",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }


def test_a_new_node_carries_the_not_ready_taint(kube: KubeEnv) -> None:
    name = kube.name("n-new")
    kube.client().create(Node(metadata=ObjectMeta(name=name)))
    assert (NOT_READY, "NoSchedule") in _taints(kube, name)


def test_the_not_ready_taint_goes_when_ready_turns_true_and_returns_when_false(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("n-life")
    client.create(Node(metadata=ObjectMeta(name=name, labels={"kubernetes.io/hostname": name})))
    client.patch(Node.Status, name, _ready("True"))
    wait_until(lambda: (NOT_READY, "NoSchedule") not in _taints(kube, name), within=60, what="not-ready taint gone")
    client.patch(Node.Status, name, _ready("False"))
    wait_until(lambda: (NOT_READY, "NoSchedule") in _taints(kube, name), within=60, what="not-ready taint back")


def test_a_node_created_with_ready_true_loses_the_taint(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("n-ready")
    client.create(Node.from_dict({"metadata": {"name": name}, **_ready("True")}))
    wait_until(lambda: (NOT_READY, "NoSchedule") not in _taints(kube, name), within=60, what="not-ready taint gone")


def test_node_taints_set_by_users_are_kept(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("n-user")
    client.create(
        Node.from_dict(
            {"metadata": {"name": name}, "spec": {"taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]}}
        )
    )
    client.patch(Node.Status, name, _ready("True"))
    wait_until(lambda: _taints(kube, name) == {("gpu", "NoSchedule")}, within=60, what="only the user's taint")


def test_a_main_resource_update_does_not_change_node_status(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("n-status")
    client.create(Node.from_dict({"metadata": {"name": name}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}))
    patched = client.patch(
        Node, name, {"metadata": {"labels": {"x": "y"}}, "status": {"capacity": {"nvidia.com/gpu": "1"}}}
    )
    assert patched.metadata.labels["x"] == "y"
    assert patched.status.capacity["nvidia.com/gpu"] == "8"


def test_the_status_subresource_changes_only_status(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("n-sub")
    client.create(Node(metadata=ObjectMeta(name=name)))
    patched = client.patch(
        Node.Status,
        name,
        {"metadata": {"labels": {"ignored": "yes"}}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}},
    )
    assert patched.status.allocatable == {"nvidia.com/gpu": "4"}
    assert "ignored" not in (patched.metadata.labels or {})


def test_nodes_are_selected_by_label(kube: KubeEnv) -> None:
    client = kube.client()
    for suffix, product in (("a", "A100"), ("b", "H100"), ("c", "")):
        labels = {"kubegpu.io/test": kube.prefix}
        if product:
            labels["nvidia.com/gpu.product"] = product
        client.create(Node(metadata=ObjectMeta(name=kube.name(suffix), labels=labels)))

    def names(selector: str) -> set[str]:
        answer = kube.http().get("/api/v1/nodes", params={"labelSelector": f"kubegpu.io/test={kube.prefix},{selector}"})
        return {i["metadata"]["name"][len(kube.prefix) :] for i in answer.json()["items"]}

    assert names("nvidia.com/gpu.product=A100") == {"a"}
    assert names("nvidia.com/gpu.product==A100") == {"a"}
    assert names("nvidia.com/gpu.product!=A100") == {"b", "c"}
    assert names("nvidia.com/gpu.product in (A100,H100)") == {"a", "b"}
    assert names("nvidia.com/gpu.product notin (A100)") == {"b", "c"}
    assert names("nvidia.com/gpu.product") == {"a", "b"}
    assert names("!nvidia.com/gpu.product") == {"c"}
