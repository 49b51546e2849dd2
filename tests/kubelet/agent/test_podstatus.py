"""What the agent does with each pod bound to its node, and the status, annotation and event it writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubegpu.kubelet import errors
from kubegpu.kubelet.agent import podstatus
from kubegpu.kubelet.agent.nodeobject import rfc3339
from kubegpu.kubelet.agent.podstatus import Action

T0 = 1_800_000_000.0
SCHEDULED = {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2027-01-15T07:59:00Z"}


def api_pod(phase: str = "Pending", deleting: bool = False, init: bool = False, **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": "ml", "uid": "u-1", "resourceVersion": "7"}
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    spec: dict[str, Any] = {
        "nodeName": "gpu-1",
        "containers": [
            {"name": "main", "image": "cuda:12", "resources": {"limits": {"nvidia.com/gpu": 4, "cpu": "2"}}}
        ],
    }
    if init:
        spec["initContainers"] = [
            {"name": "warmup", "image": "cuda:12"},
            {"name": "proxy", "image": "envoy", "restartPolicy": "Always"},
        ]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": [SCHEDULED], **status}}


@pytest.mark.parametrize(
    ("pod", "admitted", "action"),
    [
        (api_pod(), False, Action.ADMIT),
        (api_pod(), True, Action.ADMIT),
        (api_pod("Running"), True, Action.NOTHING),
        (api_pod("Running"), False, Action.ADMIT),
        (api_pod("Running", deleting=True), True, Action.FINISH_DELETION),
        (api_pod("Pending", deleting=True), False, Action.FINISH_DELETION),
        (api_pod("Succeeded"), True, Action.RELEASE),
        (api_pod("Failed"), True, Action.RELEASE),
        (api_pod("Failed"), False, Action.NOTHING),
    ],
    ids=[
        "new",
        "admitted-status-not-written",
        "running",
        "running-but-state-lost",
        "deleting",
        "deleting-never-admitted",
        "succeeded",
        "failed-held",
        "rejected",
    ],
)
def test_each_pod_event_maps_to_the_kubelets_action(pod: dict[str, Any], admitted: bool, action: Action) -> None:
    assert podstatus.decide(pod, admitted) is action


def test_an_api_pod_becomes_the_emulators_pod_with_its_uid_and_extended_limits() -> None:
    kpod = podstatus.to_kubelet_pod(api_pod(init=True))
    assert (kpod.namespace, kpod.name, kpod.uid) == ("ml", "train", "u-1")
    assert kpod.containers[0].limits == (("nvidia.com/gpu", 4),)
    assert [c.name for c in kpod.init_containers] == ["warmup", "proxy"]


def test_an_api_pod_with_a_fractional_gpu_is_refused_naming_the_field() -> None:
    pod = api_pod()
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    with pytest.raises(errors.PodManifestError, match=r"spec.containers\[0\].resources.limits\[nvidia.com/gpu\]"):
        podstatus.to_kubelet_pod(pod)


def test_running_status_has_the_kubelets_conditions_and_keeps_the_schedulers() -> None:
    status = podstatus.running_status(api_pod(qosClass="Burstable"), "10.0.0.7", T0)
    assert status["phase"] == "Running"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert SCHEDULED in status["conditions"]
    assert (status["hostIP"], status["hostIPs"], status["startTime"]) == ("10.0.0.7", [{"ip": "10.0.0.7"}], rfc3339(T0))
    assert status["qosClass"] == "Burstable"
    (main,) = status["containerStatuses"]
    assert (main["name"], main["image"], main["ready"], main["started"], main["restartCount"]) == (
        "main",
        "cuda:12",
        True,
        True,
        0,
    )
    assert main["state"] == {"running": {"startedAt": rfc3339(T0)}}
    assert main["containerID"] == podstatus.container_id("u-1", "main")
    assert "initContainerStatuses" not in status


def test_plain_init_containers_completed_and_sidecars_run() -> None:
    status = podstatus.running_status(api_pod(init=True), "127.0.0.1", T0)
    warmup, proxy = status["initContainerStatuses"]
    assert warmup["state"]["terminated"]["reason"] == "Completed"
    assert warmup["state"]["terminated"]["exitCode"] == 0
    assert not warmup["ready"]
    assert "running" in proxy["state"] and proxy["ready"]


def test_a_rejected_pod_is_failed_with_the_reason_and_the_kubelets_prefixed_message() -> None:
    message = (
        "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: 9, Available: 8, which is unexpected"
    )
    status = podstatus.rejected_status(api_pod(), "UnexpectedAdmissionError", message)
    assert status == {
        "phase": "Failed",
        "reason": "UnexpectedAdmissionError",
        "message": "Pod was rejected: " + message,
        "conditions": [SCHEDULED],
    }


def test_the_runtime_options_annotation_holds_each_containers_devices_and_options() -> None:
    result = {
        "pod": {"namespace": "ml", "name": "train", "uid": "u-1"},
        "containers": {
            "main": {
                "init": False,
                "resources": {"nvidia.com/gpu": ["GPU-a", "GPU-b"]},
                "envs": {"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b"},
                "mounts": [],
                "devices": [],
                "annotations": {},
                "cdi_devices": [],
                "numa_affinity": None,
            }
        },
        "allocate_rpcs": 1,
    }
    patch = podstatus.runtime_options_patch(result)
    value = json.loads(patch["metadata"]["annotations"][podstatus.RUNTIME_OPTIONS_ANNOTATION])
    assert value == {
        "main": {
            "resources": {"nvidia.com/gpu": ["GPU-a", "GPU-b"]},
            "envs": {"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b"},
            "mounts": [],
            "devices": [],
            "annotations": {},
            "cdi_devices": [],
        }
    }


def test_the_event_is_from_the_nodes_kubelet_about_the_pod() -> None:
    event = podstatus.event_manifest(api_pod(), "gpu-1", "UnexpectedAdmissionError", "m", "Warning", T0, "abc")
    assert event["metadata"] == {"name": "train.abc", "namespace": "ml"}
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "train",
        "namespace": "ml",
        "uid": "u-1",
    }
    assert (event["type"], event["reason"], event["source"]) == (
        "Warning",
        "UnexpectedAdmissionError",
        {"component": "kubelet", "host": "gpu-1"},
    )
