"""Real Pod and Node objects (the YAML a user or a kubelet writes) for the live scheduler's tests."""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Node, Pod

from kubegpu.scheduling.live import objects

GI = 1024**3


def node_obj(
    name: str,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
    pods: str = "110",
) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return Node.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {
                "capacity": allocatable,
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def pod_obj(
    name: str,
    gpus: int = 0,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    namespace: str = "default",
    scheduler: str = "gpu-scheduler",
    node: str = "",
    priority: int | None = None,
    extra: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    annotations: dict[str, str] | None = None,
) -> Pod:
    requests: dict[str, str] = {**(extra or {})}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    body: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": limits}}],
        **(spec or {}),
    }
    if node:
        body["nodeName"] = node
    if priority is not None:
        body["priority"] = priority
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{namespace}-{name}",
                "labels": labels or {},
                "annotations": annotations or {},
                "creationTimestamp": created,
            },
            "spec": body,
        }
    )


def pod(name: str, **kw: Any) -> objects.PodInfo:
    return objects.pod_info(pod_obj(name, **kw))


def node(name: str, **kw: Any) -> objects.NodeInfo:
    return objects.node_info(node_obj(name, **kw))
