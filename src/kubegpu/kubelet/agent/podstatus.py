"""What the agent does with a pod bound to its node, and the pod status it reports, as the kubelet does.

Owns: turning an API Pod into the emulator's :class:`~kubegpu.kubelet.pod.Pod`
(the same parse ``kubegpu kubelet admit`` uses); the decision per pod event
(admit, finish a deletion, release a finished pod's devices, nothing); the
status of an admitted pod (``Running``, conditions ``PodReadyToStartContainers``,
``Initialized``, ``ContainersReady``, ``Ready`` and the scheduler's
``PodScheduled`` kept, ``containerStatuses`` running, plain init containers
terminated ``Completed``, sidecars running); the status of a rejected pod
(``Failed``, the admission reason, ``Pod was rejected: <message>``) and its
Warning Event; the ``kubegpu.io/runtime-options`` annotation that records each
container's runtime options (devices, envs, mounts, device nodes, CDI devices,
annotations) for tests and people. Pure: no clock, no I/O.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from kubegpu.kubelet import pod
from kubegpu.kubelet.agent.nodeobject import rfc3339

#: Annotation on a running pod: JSON {container: {resources, envs, mounts, devices, annotations, cdi_devices}}.
RUNTIME_OPTIONS_ANNOTATION = "kubegpu.io/runtime-options"
REJECTED_PREFIX = "Pod was rejected: "
TERMINAL_PHASES = ("Succeeded", "Failed")
#: What of a container's admit answer goes into the annotation.
_OPTION_KEYS = ("resources", "envs", "mounts", "devices", "annotations", "cdi_devices")


class Action(enum.Enum):
    ADMIT = "admit"
    #: ``deletionTimestamp`` set: free the devices, then delete with grace period 0.
    FINISH_DELETION = "finish-deletion"
    #: The pod is finished (or gone): its devices are free.
    RELEASE = "release"
    NOTHING = "nothing"


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def uid_of(api_pod: Mapping[str, Any]) -> str:
    return str(_get(api_pod, "metadata", "uid") or "")


def phase_of(api_pod: Mapping[str, Any]) -> str:
    return str(_get(api_pod, "status", "phase") or "Pending")


def key_of(api_pod: Mapping[str, Any]) -> tuple[str, str]:
    return str(_get(api_pod, "metadata", "namespace") or "default"), str(_get(api_pod, "metadata", "name") or "")


def to_kubelet_pod(api_pod: Mapping[str, Any]) -> pod.Pod:
    """The pod the device manager admits; PodManifestError when the API object is not a valid Pod."""
    return pod.parse({**api_pod, "apiVersion": "v1", "kind": "Pod"})


def decide(api_pod: Mapping[str, Any], admitted: bool) -> Action:
    """What the agent does on seeing ``api_pod`` (``admitted``: the emulator holds it)."""
    if _get(api_pod, "metadata", "deletionTimestamp"):
        return Action.FINISH_DELETION
    phase = _get(api_pod, "status", "phase")
    if phase in TERMINAL_PHASES:
        return Action.RELEASE if admitted else Action.NOTHING
    if admitted and phase == "Running":
        return Action.NOTHING
    # Pending, or admitted but its status never reached the API (the agent stopped in between):
    # admission is idempotent for a pod the emulator holds (no second Allocate).
    return Action.ADMIT


def runtime_options(admit_result: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each container's runtime options out of ``Node.admit``'s answer."""
    containers = admit_result.get("containers")
    if not isinstance(containers, Mapping):
        return {}
    return {
        name: {k: entry[k] for k in _OPTION_KEYS if k in entry}
        for name, entry in containers.items()
        if isinstance(entry, Mapping)
    }


def runtime_options_patch(admit_result: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of the pod's metadata recording its containers' runtime options."""
    value = json.dumps(runtime_options(admit_result), sort_keys=True, separators=(",", ":"))
    return {"metadata": {"annotations": {RUNTIME_OPTIONS_ANNOTATION: value}}}


def container_id(uid: str, container: str) -> str:
    return "kubegpu://" + hashlib.sha256(f"{uid}/{container}".encode()).hexdigest()


def _condition(kind: str, status: str, stamp: str, before: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    old = before.get(kind)
    transition = stamp
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        transition = str(old["lastTransitionTime"])
    return {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": transition}


def _previous_conditions(api_pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    conds = _get(api_pod, "status", "conditions")
    if not isinstance(conds, list):
        return {}
    return {str(c.get("type")): c for c in conds if isinstance(c, Mapping)}


def _container_specs(api_pod: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
    specs = _get(api_pod, "spec", field)
    return [c for c in specs if isinstance(c, Mapping)] if isinstance(specs, list) else []


def running_status(api_pod: Mapping[str, Any], host_ip: str, now: float) -> dict[str, Any]:
    """The ``status`` of an admitted pod whose containers all started."""
    stamp = rfc3339(now)
    before = _previous_conditions(api_pod)
    uid = uid_of(api_pod)
    start = _get(api_pod, "status", "startTime") or stamp
    conditions = [
        _condition(kind, "True", stamp, before)
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
    ]
    scheduled = before.get("PodScheduled")
    conditions.append(dict(scheduled) if scheduled is not None else _condition("PodScheduled", "True", stamp, {}))

    def status(spec: Mapping[str, Any], terminated: bool) -> dict[str, Any]:
        name = str(spec.get("name"))
        state: dict[str, Any]
        if terminated:
            state = {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": stamp,
                    "finishedAt": stamp,
                    "containerID": container_id(uid, name),
                }
            }
        else:
            state = {"running": {"startedAt": stamp}}
        return {
            "name": name,
            "image": spec.get("image", ""),
            "imageID": spec.get("image", ""),
            "containerID": container_id(uid, name),
            "ready": not terminated,
            "started": not terminated,
            "restartCount": 0,
            "state": state,
        }

    out: dict[str, Any] = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start,
        "containerStatuses": [status(c, False) for c in _container_specs(api_pod, "containers")],
    }
    inits = _container_specs(api_pod, "initContainers")
    if inits:
        out["initContainerStatuses"] = [status(c, c.get("restartPolicy") != "Always") for c in inits]
    qos = _get(api_pod, "status", "qosClass")
    if qos:
        out["qosClass"] = qos
    return out


def rejected_status(api_pod: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    """The kubelet's ``rejectPod`` status: Failed, the admission reason, the message after a fixed prefix."""
    out: dict[str, Any] = {"phase": "Failed", "reason": reason, "message": REJECTED_PREFIX + message}
    scheduled = _previous_conditions(api_pod).get("PodScheduled")
    if scheduled is not None:
        out["conditions"] = [dict(scheduled)]
    qos = _get(api_pod, "status", "qosClass")
    if qos:
        out["qosClass"] = qos
    return out


def event_manifest(
    api_pod: Mapping[str, Any], node_name: str, reason: str, message: str, kind: str, now: float, suffix: str
) -> dict[str, Any]:
    """A core/v1 Event about ``api_pod`` from this node's kubelet (``suffix`` makes the name unique)."""
    namespace, name = key_of(api_pod)
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{suffix}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": name,
            "namespace": namespace,
            "uid": uid_of(api_pod),
        },
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": "kubelet", "host": node_name},
        "reportingComponent": "kubelet",
        "reportingInstance": node_name,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
