"""Nodes: the not-ready taint the control plane puts on new nodes and lifts once they report Ready."""

from __future__ import annotations

import datetime as dt
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


def test_the_status_subresource_never_changes_spec(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("n-sub")
    client.create(Node(metadata=ObjectMeta(name=name)))
    patched = client.patch(
        Node.Status, name, {"spec": {"unschedulable": True}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}
    )
    assert patched.status.allocatable == {"nvidia.com/gpu": "4"}
    assert not patched.spec.unschedulable


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


def test_a_cordoned_node_gets_the_unschedulable_taint(kube: KubeEnv) -> None:
    client = kube.client()
    name = kube.name("n-cordon")
    client.create(Node(metadata=ObjectMeta(name=name)))
    client.patch(Node, name, {"spec": {"unschedulable": True}})
    wait_until(
        lambda: ("node.kubernetes.io/unschedulable", "NoSchedule") in _taints(kube, name),
        within=60,
        what="unschedulable taint",
    )
    client.patch(Node, name, {"spec": {"unschedulable": None}})
    wait_until(
        lambda: ("node.kubernetes.io/unschedulable", "NoSchedule") not in _taints(kube, name),
        within=60,
        what="unschedulable taint gone",
    )


def test_a_node_whose_kubelet_goes_silent_turns_unknown_and_unreachable(tmp_path: Any) -> None:
    from lightkube import Client, KubeConfig
    from lightkube.models.coordination_v1 import LeaseSpec
    from lightkube.resources.coordination_v1 import Lease

    from tests.kubeapi import KubeApiServer

    with KubeApiServer(tmp_path / "kubeconfig", node_monitor_grace_period=2.0) as server:
        client = Client(config=KubeConfig.from_file(server.kubeconfig))
        for name in ("silent", "alive"):
            client.create(Node.from_dict({"metadata": {"name": name}, **_ready("True")}))
        client.create(
            Lease(
                metadata=ObjectMeta(name="alive", namespace="kube-node-lease"),
                spec=LeaseSpec(holderIdentity="alive", leaseDurationSeconds=40),
            )
        )

        def ready(name: str) -> str:
            node = client.get(Node, name)
            return next(c.status for c in node.status.conditions if c.type == "Ready")

        def renew() -> None:  # as a node agent renews its Lease
            stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            client.patch(Lease, "alive", {"spec": {"renewTime": stamp}}, namespace="kube-node-lease")

        def silent_is_unknown() -> bool:
            renew()
            return ready("silent") == "Unknown"

        wait_until(silent_is_unknown, within=30, what="the silent node Unknown")
        node = client.get(Node, "silent")
        taints = {(t.key, t.effect) for t in node.spec.taints or []}
        assert ("node.kubernetes.io/unreachable", "NoSchedule") in taints
        assert next(c for c in node.status.conditions if c.type == "Ready").reason == "NodeStatusUnknown"
        renew()
        assert ready("alive") == "True"
        client.patch(Node.Status, "silent", _ready("True"))  # the kubelet is back
        wait_until(
            lambda: (
                ("node.kubernetes.io/unreachable", "NoSchedule")
                not in {(t.key, t.effect) for t in client.get(Node, "silent").spec.taints or []}
            ),
            within=30,
            what="taint lifted",
        )
