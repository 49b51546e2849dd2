"""The Node object the agent registers and the status it reports, built from the emulator's state.

Owns the translation, as the kubelet's node-status setters do it, of flags and
device-manager state into a Node: default labels (``kubernetes.io/hostname``,
``kubernetes.io/os``, ``kubernetes.io/arch`` and their ``beta.`` forms) plus
``--node-labels``, taints from ``--register-with-taints``, capacity and
allocatable (flags minus reserved; for each plugin resource capacity = all
devices, allocatable = healthy devices, a resource removed after its grace
period at 0 — never minus what pods hold: the scheduler accounts for pods),
the four conditions with their reasons and messages (a condition's
``lastTransitionTime`` moves only when its status changes), addresses,
``daemonEndpoints`` and ``nodeInfo``. Also timestamps in the API's two
formats. Pure: no clock, no I/O; the caller passes the time.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from fractions import Fraction

from kubegpu.kubelet.agent.config import AgentConfig
from kubegpu.kubelet.pod import parse_quantity

#: The kubelet whose behaviour the emulator follows (reference/kubelet-device-manager.md).
KUBELET_VERSION = "v1.32.10-kubegpu"
CONTAINER_RUNTIME_VERSION = "kubegpu-emulated://0.1.0"
KUBELET_PORT = 10250

#: (type, status, reason, message) of a healthy kubelet's conditions, in the kubelet's order.
HEALTHY_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def rfc3339(epoch: float) -> str:
    """``metav1.Time``: seconds precision, UTC, ``Z``."""
    return datetime.datetime.fromtimestamp(int(epoch), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(epoch: float) -> str:
    """``metav1.MicroTime`` (Lease renewTime/acquireTime): microseconds, UTC, ``Z``."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_labels(node_name: str) -> dict[str, str]:
    return {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node_name,
        "kubernetes.io/os": "linux",
    }


def node_manifest(config: AgentConfig) -> dict[str, object]:
    """The Node the agent creates at registration (status follows with the first status update)."""
    spec: dict[str, object] = {}
    if config.taints:
        spec["taints"] = [t.to_json() for t in config.taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": config.node_name,
            "labels": {**default_labels(config.node_name), **config.labels},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
    }


def registration_patch(config: AgentConfig, existing: Mapping[str, object]) -> dict[str, object] | None:
    """What to merge into a Node that already exists (a restarted agent): missing labels; None when nothing.

    Like the kubelet, an existing node keeps its taints and the labels others set; only the
    agent's own labels are (re)applied.
    """
    meta = existing.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    have = dict(labels) if isinstance(labels, Mapping) else {}
    want = {**default_labels(config.node_name), **config.labels}
    missing = {k: v for k, v in want.items() if have.get(k) != v}
    return {"metadata": {"labels": missing}} if missing else None


def device_counts(resource_status: Mapping[str, Mapping[str, object]]) -> dict[str, tuple[int, int]]:
    """(capacity, allocatable) per plugin resource from ``DeviceManager.resource_status()``."""
    out: dict[str, tuple[int, int]] = {}
    for name, state in resource_status.items():
        if state.get("removed"):
            out[name] = (0, 0)
            continue
        capacity, allocatable = state.get("capacity"), state.get("allocatable")
        out[name] = (capacity if isinstance(capacity, int) else 0, allocatable if isinstance(allocatable, int) else 0)
    return out


#: Node annotation the scheduler reads: the node's healthy ``nvidia.com/gpu`` device IDs in the plugin's order.
GPU_DEVICES_ANNOTATION = "kubegpu.io/gpu-devices"
GPU_RESOURCE = "nvidia.com/gpu"


def gpu_devices(resource_status: Mapping[str, Mapping[str, object]]) -> str:
    """The annotation's value: healthy whole-GPU device IDs, comma-separated, in the plugin's listing order.

    Healthy only: the scheduler numbers the node's allocatable GPUs 0..n-1 and maps index i to the i-th ID.
    """
    state = resource_status.get(GPU_RESOURCE)
    if state is None or state.get("removed"):
        return ""
    devices = state.get("devices")
    if not isinstance(devices, list):
        return ""
    return ",".join(
        str(d["id"]) for d in devices if isinstance(d, Mapping) and d.get("health") == "Healthy" and "id" in d
    )


def format_quantity(value: Fraction) -> str:
    """A quantity as the API writes it: an integer, else millis (rounded down)."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{int(value * 1000)}m"


def capacity_and_allocatable(
    config: AgentConfig, devices: Mapping[str, tuple[int, int]]
) -> tuple[dict[str, str], dict[str, str]]:
    capacity = dict(config.capacity)
    allocatable: dict[str, str] = {}
    for name, text in capacity.items():
        free = parse_quantity(text) - config.reserved.get(name, Fraction(0))
        allocatable[name] = text if name not in config.reserved else format_quantity(max(free, Fraction(0)))
    for name, (cap, alloc) in sorted(devices.items()):
        capacity[name] = str(cap)
        allocatable[name] = str(alloc)
    return capacity, allocatable


def conditions(previous: object, now: float) -> list[dict[str, str]]:
    """The node's conditions, heartbeat ``now``; a transition time is kept while the status stays."""
    before: dict[str, Mapping[str, object]] = {}
    if isinstance(previous, list):
        before = {str(c.get("type")): c for c in previous if isinstance(c, Mapping)}
    out = []
    stamp = rfc3339(now)
    for kind, status, reason, message in HEALTHY_CONDITIONS:
        old = before.get(kind)
        transition = stamp
        if old is not None and old.get("status") == status and isinstance(old.get("lastTransitionTime"), str):
            transition = str(old["lastTransitionTime"])
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": transition,
            }
        )
    return out


def node_status(
    config: AgentConfig,
    devices: Mapping[str, tuple[int, int]],
    previous_conditions: object,
    node_info: Mapping[str, str],
    now: float,
) -> dict[str, object]:
    """The full ``status`` of the Node."""
    capacity, allocatable = capacity_and_allocatable(config, devices)
    return {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": conditions(previous_conditions, now),
        "addresses": [
            {"type": "InternalIP", "address": config.internal_ip},
            {"type": "Hostname", "address": config.node_name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
        "nodeInfo": {
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "containerRuntimeVersion": CONTAINER_RUNTIME_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
            **node_info,
        },
    }


def without_heartbeats(status: Mapping[str, object]) -> dict[str, object]:
    """``status`` minus what changes on every report (heartbeat times): equal means nothing to send."""
    out = dict(status)
    conds = out.get("conditions")
    if isinstance(conds, list):
        out["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"} for c in conds]
    return out
