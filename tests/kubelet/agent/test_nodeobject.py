"""The Node the agent registers and reports: labels, taints, capacity/allocatable, conditions, lease."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kubegpu.kubelet.agent import config, lease, nodeobject

T0 = 1_800_000_000.0


def cfg(**kw: Any) -> config.AgentConfig:
    base: dict[str, Any] = {"node_name": "gpu-1", "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"}}
    return config.AgentConfig(**{**base, **kw})


def test_registration_carries_default_labels_then_node_labels_and_the_taints() -> None:
    c = cfg(labels={"pool": "train", "kubernetes.io/os": "linux"}, taints=config.parse_taints("gpu=yes:NoSchedule"))
    node = nodeobject.node_manifest(c)
    meta: Any = node["metadata"]
    assert meta["name"] == "gpu-1"
    assert meta["labels"]["kubernetes.io/hostname"] == "gpu-1"
    assert meta["labels"]["pool"] == "train"
    assert node["spec"] == {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}


def test_an_existing_node_gets_only_the_labels_it_lacks() -> None:
    c = cfg(labels={"pool": "train"})
    existing = {"metadata": {"labels": {**nodeobject.default_labels("gpu-1"), "pool": "old", "other": "x"}}}
    assert nodeobject.registration_patch(c, existing) == {"metadata": {"labels": {"pool": "train"}}}
    existing["metadata"]["labels"]["pool"] = "train"
    assert nodeobject.registration_patch(c, existing) is None


def test_device_capacity_counts_all_devices_allocatable_only_healthy_and_a_removed_resource_is_zero() -> None:
    status = {
        "nvidia.com/gpu": {"capacity": 8, "allocatable": 7, "allocated": ["a", "b", "c", "d"], "removed": False},
        "nvidia.com/mig-1g.10gb": {"capacity": 0, "allocatable": 0, "removed": True},
    }
    assert nodeobject.device_counts(status) == {"nvidia.com/gpu": (8, 7), "nvidia.com/mig-1g.10gb": (0, 0)}


def test_allocatable_is_capacity_minus_reserved_and_devices_are_never_reduced_by_what_pods_hold() -> None:
    c = cfg(reserved={"cpu": Fraction(1, 2), "memory": Fraction(2 * 1024**3)})
    capacity, allocatable = nodeobject.capacity_and_allocatable(c, {"nvidia.com/gpu": (8, 8)})
    assert capacity == {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    assert allocatable == {"cpu": "63500m", "memory": str(510 * 1024**3), "pods": "110", "nvidia.com/gpu": "8"}


@pytest.mark.parametrize(("value", "text"), [(Fraction(64), "64"), (Fraction(1, 2), "500m"), (Fraction(1, 3), "333m")])
def test_quantities_are_written_as_integers_or_millis(value: Fraction, text: str) -> None:
    assert nodeobject.format_quantity(value) == text


def test_conditions_are_the_kubelets_and_a_transition_time_moves_only_with_the_status() -> None:
    first = nodeobject.conditions(None, T0)
    assert [(c["type"], c["status"], c["reason"]) for c in first] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    assert first[3]["message"] == "kubelet is posting ready status"
    later = nodeobject.conditions(first, T0 + 60)
    assert later[3]["lastTransitionTime"] == nodeobject.rfc3339(T0)
    assert later[3]["lastHeartbeatTime"] == nodeobject.rfc3339(T0 + 60)
    was_not_ready = [{**c, "status": "Unknown"} if c["type"] == "Ready" else c for c in first]
    assert nodeobject.conditions(was_not_ready, T0 + 60)[3]["lastTransitionTime"] == nodeobject.rfc3339(T0 + 60)


def test_a_status_that_differs_only_in_heartbeats_counts_as_unchanged() -> None:
    devices = {"nvidia.com/gpu": (8, 8)}
    a = nodeobject.node_status(cfg(), devices, None, {"bootID": "b"}, T0)
    b = nodeobject.node_status(cfg(), devices, a["conditions"], {"bootID": "b"}, T0 + 10)
    assert a != b
    assert nodeobject.without_heartbeats(a) == nodeobject.without_heartbeats(b)
    c = nodeobject.node_status(cfg(), {"nvidia.com/gpu": (8, 7)}, a["conditions"], {"bootID": "b"}, T0 + 10)
    assert nodeobject.without_heartbeats(a) != nodeobject.without_heartbeats(c)


def test_times_are_rfc3339_seconds_and_micro_time_for_leases() -> None:
    assert nodeobject.rfc3339(T0 + 0.9) == "2027-01-15T08:00:00Z"
    assert nodeobject.micro_time(T0 + 0.25) == "2027-01-15T08:00:00.250000Z"


def test_the_lease_is_named_after_the_node_held_by_it_and_owned_by_the_node() -> None:
    body: Any = lease.lease_manifest("gpu-1", "uid-1", 40, T0)
    assert body["metadata"] == {
        "name": "gpu-1",
        "namespace": "kube-node-lease",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "gpu-1", "uid": "uid-1"}],
    }
    assert body["spec"] == {
        "holderIdentity": "gpu-1",
        "leaseDurationSeconds": 40,
        "renewTime": nodeobject.micro_time(T0),
    }


def test_renewing_keeps_the_resource_version_read_and_moves_renew_time() -> None:
    read = {"metadata": {"name": "gpu-1", "namespace": "kube-node-lease", "resourceVersion": "42"}, "spec": {}}
    body: Any = lease.renewed(read, "gpu-1", "uid-1", 40, T0 + 10)
    assert body["metadata"]["resourceVersion"] == "42"
    assert body["spec"]["renewTime"] == nodeobject.micro_time(T0 + 10)
    assert read["spec"] == {}


def test_the_gpu_devices_annotation_lists_healthy_gpus_in_the_plugins_order() -> None:
    status = {
        "nvidia.com/gpu": {
            "devices": [
                {"id": "GPU-b", "health": "Healthy"},
                {"id": "GPU-a", "health": "Unhealthy"},
                {"id": "GPU-c", "health": "Healthy"},
            ]
        },
        "nvidia.com/mig-1g.10gb": {"devices": [{"id": "MIG-x", "health": "Healthy"}]},
    }
    assert nodeobject.gpu_devices(status) == "GPU-b,GPU-c"
    assert nodeobject.gpu_devices({}) == ""
    assert nodeobject.gpu_devices({"nvidia.com/gpu": {"removed": True, "devices": []}}) == ""
