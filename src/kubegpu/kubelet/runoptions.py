"""Container runtime options from cached Allocate responses, merged the kubelet's way.

Owns ``deviceRunContainerOptions``: how the ``ContainerAllocateResponse`` of
each resource a container uses becomes one set of envs, mounts, device nodes,
annotations and CDI devices for the runtime. Pure: no I/O.

Kubelet rules kept here: envs and annotations are keyed by name, device nodes
and mounts by container path; the first value seen wins and a later,
different one is skipped with an error log line (we also return it in
``conflicts``); duplicate CDI device names are dropped; mounts never get an
SELinux relabel. The kubelet walks resources in Go map order (random); we walk
them in the order of the container's limits, and keys of one response sorted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubegpu.api.deviceplugin.v1beta1 import api_pb2


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool

    def to_json(self) -> dict[str, object]:
        # The kubelet names each mount after its container path and never relabels it.
        return {
            "name": self.container_path,
            "container_path": self.container_path,
            "host_path": self.host_path,
            "read_only": self.read_only,
            "selinux_relabel": False,
        }


@dataclass(frozen=True)
class DeviceNode:
    container_path: str
    host_path: str
    permissions: str

    def to_json(self) -> dict[str, object]:
        return {"container_path": self.container_path, "host_path": self.host_path, "permissions": self.permissions}


@dataclass(frozen=True)
class RunOptions:
    """What the device manager hands the container runtime for one container."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceNode, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()
    #: The kubelet's error log lines for skipped conflicting settings.
    conflicts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "envs": dict(self.envs),
            "mounts": [m.to_json() for m in self.mounts],
            "devices": [d.to_json() for d in self.devices],
            "annotations": dict(self.annotations),
            "cdi_devices": list(self.cdi_devices),
            "conflicts": list(self.conflicts),
        }


def merge(responses: Iterable[tuple[str, api_pb2.ContainerAllocateResponse]]) -> RunOptions:
    """Merge the cached responses of one container, given as (resource, response) in walk order."""
    envs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    mounts: dict[str, Mount] = {}
    devices: dict[str, DeviceNode] = {}
    cdi: list[str] = []
    conflicts: list[str] = []
    for resource, resp in responses:
        for key in sorted(resp.envs):
            value = resp.envs[key]
            if key in envs:
                if envs[key] != value:
                    conflicts.append(
                        f"Environment variable has conflicting setting: {key}={value!r} from {resource} "
                        f"skipped, {envs[key]!r} kept"
                    )
                continue
            envs[key] = value
        for spec in resp.devices:
            if spec.container_path in devices:
                kept = devices[spec.container_path].host_path
                if kept != spec.host_path:
                    conflicts.append(
                        f"Container device has conflicting mapping host devices: {spec.container_path} -> "
                        f"{spec.host_path} from {resource} skipped, {kept} kept"
                    )
                continue
            devices[spec.container_path] = DeviceNode(spec.container_path, spec.host_path, spec.permissions)
        for mount in resp.mounts:
            if mount.container_path in mounts:
                kept = mounts[mount.container_path].host_path
                if kept != mount.host_path:
                    conflicts.append(
                        f"Container mount has conflicting mapping host mounts: {mount.container_path} -> "
                        f"{mount.host_path} from {resource} skipped, {kept} kept"
                    )
                continue
            mounts[mount.container_path] = Mount(mount.container_path, mount.host_path, mount.read_only)
        for key in sorted(resp.annotations):
            value = resp.annotations[key]
            if key in annotations:
                if annotations[key] != value:
                    conflicts.append(
                        f"Annotation has conflicting setting: {key}={value!r} from {resource} "
                        f"skipped, {annotations[key]!r} kept"
                    )
                continue
            annotations[key] = value
        for device in resp.cdi_devices:
            if device.name not in cdi:
                cdi.append(device.name)
    return RunOptions(
        envs=envs,
        mounts=tuple(mounts.values()),
        devices=tuple(devices.values()),
        annotations=annotations,
        cdi_devices=tuple(cdi),
        conflicts=tuple(conflicts),
    )
