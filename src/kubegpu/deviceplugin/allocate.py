"""Allocate responses: what a container gets for the device IDs the kubelet chose.

Owns validating one container's requested IDs against a resource and building
its :class:`ContainerEdits` — for now NVIDIA's ``envvar`` device-list strategy
(``NVIDIA_VISIBLE_DEVICES=<ids joined by ,>``, replica suffixes stripped,
duplicates dropped, first-seen order). The issue-3 strategies (volume-mounts,
CDI, device specs, MPS) extend :func:`container_edits`. Health is deliberately
not checked here, as NVIDIA does not: the kubelet only hands out healthy
devices, and a container restart must get its devices again.
Pure: no I/O, no gRPC (the server converts edits to protobuf).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kubegpu.deviceplugin import devices
from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.resources import Resource

#: The environment variable the NVIDIA container runtime reads.
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceSpec:
    container_path: str
    host_path: str
    permissions: str = "rw"


@dataclass(frozen=True)
class ContainerEdits:
    """Everything one ``ContainerAllocateResponse`` carries."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[DeviceSpec, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: tuple[str, ...] = ()


def invalid(resource_name: str, reason: str) -> InvalidRequest:
    """An error worded as NVIDIA words them: ``invalid allocation request for "<r>": invalid request: <reason>``."""
    return InvalidRequest(f'invalid allocation request for "{resource_name}": invalid request: {reason}')


def validate(resource: Resource, device_ids: Sequence[str]) -> None:
    """Raise :class:`InvalidRequest` naming the first unknown ID, or when no ID is requested.

    NVIDIA would answer an empty request with an empty ``NVIDIA_VISIBLE_DEVICES``;
    the kubelet never sends one, so we refuse it instead of guessing what the
    runtime makes of an empty list.
    """
    if not device_ids:
        raise invalid(resource.name, "no devices requested")
    for device_id in device_ids:
        if device_id not in resource.by_id:
            raise invalid(resource.name, f"unknown device: {device_id}")


def container_edits(resource: Resource, device_ids: Sequence[str]) -> ContainerEdits:
    """Validated edits for one container request (envvar strategy)."""
    validate(resource, device_ids)
    visible = devices.unique_physical_ids(device_ids)
    return ContainerEdits(envs={VISIBLE_DEVICES_ENV: ",".join(visible)})


def allocate(resource: Resource, requests: Sequence[Sequence[str]]) -> list[ContainerEdits]:
    """One :class:`ContainerEdits` per container request, in request order; any bad request fails the whole call."""
    return [container_edits(resource, ids) for ids in requests]
