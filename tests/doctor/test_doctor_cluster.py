"""``kubegpu doctor``'s cluster checks through the API (the in-process server, or a real cluster with
KUBEGPU_TEST_KUBECONFIG): a healthy GPU node passes; a GPU node without GPUs or plugin pod, a GPU pod stuck Pending
with its event, and a missing or stale scheduler Lease are each named with the fix.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from typing import Any

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.core_v1 import Container, EventSource, ObjectReference, PodSpec, ResourceRequirements
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node, Pod

from tests.kubeapi.fixture import KubeEnv

ENV = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}


def doctor(kube: KubeEnv) -> tuple[int, dict[str, dict[str, Any]]]:
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "doctor", "--no-node", "--json", "--kubeconfig", str(kube.kubeconfig),
         "--scheduler-namespace", kube.namespace],
        capture_output=True, text=True, timeout=60, check=False, env=ENV,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def gpu_node(kube: KubeEnv, suffix: str, gpus: int) -> str:
    name = kube.name(suffix)
    client = kube.client()
    client.create(Node(metadata=ObjectMeta(name=name, labels={"nvidia.com/gpu.present": "true"})))
    status = {
        "capacity": {"nvidia.com/gpu": str(gpus), "cpu": "8"},
        "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "8"},
    }
    client.patch(Node.Status, name, {"status": status})
    return name


def running_plugin(kube: KubeEnv, node: str) -> None:
    client = kube.client()
    name = f"plugin-{node}"[:63]
    client.create(
        Pod(
            metadata=ObjectMeta(name=name, labels={"app.kubernetes.io/component": "device-plugin"}),
            spec=PodSpec(nodeName=node, containers=[Container(name="device-plugin", image="kubegpu:0.1.0")]),
        )
    )
    client.patch(Pod.Status, name, {"status": {"phase": "Running"}})


def lease(kube: KubeEnv, renewed: datetime.datetime) -> None:
    kube.client().create(
        Lease(
            metadata=ObjectMeta(name="kubegpu-scheduler"),
            spec=LeaseSpec(holderIdentity="kubegpu-scheduler-abc", leaseDurationSeconds=15, renewTime=renewed),
        )
    )


def test_a_working_cluster_passes_every_check(kube: KubeEnv) -> None:
    node = gpu_node(kube, "gpu-ok", 8)
    running_plugin(kube, node)
    lease(kube, datetime.datetime.now(datetime.UTC))
    code, checks = doctor(kube)
    assert list(checks) == [
        "GPU nodes advertise nvidia.com/gpu",
        "device-plugin pods",
        "pods waiting for GPUs",
        "scheduler leader",
    ]
    if not kube.real:  # a real cluster has its own nodes and pods
        assert code == 0, checks
    assert checks["scheduler leader"]["ok"] and "held by kubegpu-scheduler-abc" in checks["scheduler leader"]["detail"]


def test_each_cluster_fault_is_named_with_its_fix(kube: KubeEnv) -> None:
    empty = gpu_node(kube, "gpu-empty", 0)
    client = kube.client()
    client.create(
        Pod(
            metadata=ObjectMeta(name="trainer"),
            spec=PodSpec(
                containers=[
                    Container(
                        name="c",
                        image="nvidia/cuda:12.4.1-base",
                        resources=ResourceRequirements(limits={"nvidia.com/gpu": "4"}),
                    )
                ]
            ),
        )
    )
    client.create(
        Event(
            metadata=ObjectMeta(name="trainer.1"),
            involvedObject=ObjectReference(kind="Pod", name="trainer", namespace=kube.namespace),
            reason="FailedScheduling",
            message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            source=EventSource(component="gpu-scheduler"),
        )
    )
    lease(kube, datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5))
    code, checks = doctor(kube)
    assert code == 1
    assert empty in checks["GPU nodes advertise nvidia.com/gpu"]["detail"]
    assert "device plugin is not registered" in checks["GPU nodes advertise nvidia.com/gpu"]["fix"]
    assert empty in checks["device-plugin pods"]["detail"]
    stuck = checks["pods waiting for GPUs"]["detail"]
    assert f"{kube.namespace}/trainer Pending" in stuck and "Insufficient nvidia.com/gpu" in stuck
    assert "last renewed" in checks["scheduler leader"]["detail"] and not checks["scheduler leader"]["ok"]


def test_no_lease_means_no_scheduler_ever_led(kube: KubeEnv) -> None:
    _, checks = doctor(kube)
    assert "does not exist" in checks["scheduler leader"]["detail"]
    assert checks["scheduler leader"]["fix"].startswith("start the scheduler")


def test_a_pods_image_is_checked_against_this_nodes_driver(kube: KubeEnv, tmp_path: Any) -> None:
    kube.client().create(
        Pod(
            metadata=ObjectMeta(name="inference"),
            spec=PodSpec(containers=[Container(name="c", image="nvidia/cuda:12.6.2-runtime-ubuntu22.04")]),
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "doctor", "--json", "--machine", "dgx-a100", "--socket-dir", str(tmp_path),
         "--kubeconfig", str(kube.kubeconfig), "--scheduler-namespace", kube.namespace,
         "--pod", f"{kube.namespace}/inference"],
        capture_output=True, text=True, timeout=60, check=False, env=ENV,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    check = next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "CUDA compatibility")
    assert not check["ok"]
    assert check["detail"].startswith(f"pod {kube.namespace}/inference (image nvidia/cuda:12.6.2-runtime-ubuntu22.04)")
    assert "needs CUDA 12.6" in check["detail"]


def test_an_unknown_pod_is_bad_input(kube: KubeEnv) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubegpu", "doctor", "--no-node", "--kubeconfig", str(kube.kubeconfig),
         "--pod", f"{kube.namespace}/missing"],
        capture_output=True, text=True, timeout=60, check=False, env=ENV,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith(f"kubegpu doctor: error: --pod {kube.namespace}/missing: ")
    assert len(done.stderr.strip().splitlines()) == 1
