"""Allocate responses for every NVIDIA device-list strategy: what one container gets for its device IDs.

Owns, as NVIDIA's plugin builds them (reference section d): the checks of a
request (unknown device, ``failRequestsGreaterThanOne``), the device IDs given
to the runtime (replica suffixes stripped and de-duplicated; UUIDs or NVIDIA
indices by ``--device-id-strategy``), and the edits of each strategy and their
combinations — ``envvar`` (``NVIDIA_VISIBLE_DEVICES``), ``volume-mounts``
(``/dev/null`` mounts under ``/var/run/nvidia-container-devices``),
``cdi-annotations`` (one ``cdi.k8s.io/nvidia-device-plugin_<uuid4>`` annotation
per call) and ``cdi-cri`` (``cdi_devices``) with vendor
``k8s.device-plugin.nvidia.com``; ``--pass-device-specs`` device nodes; IMEX
channels; gdrcopy/GDS/MOFED env; MPS env and mounts; a fractional (``kubegpu.io/gpu-milli``) container's
units all on one GPU and its share env (:mod:`.milli`).

Health is deliberately not checked, as NVIDIA does not: the kubelet only hands
out healthy devices, and a container restart must get its devices again.

Pure: the only questions about the host (does a control device node exist?) go
through the ``exists`` function the caller passes, and the per-call UUID comes
from ``new_uuid``. Produces :class:`ContainerEdits`; the gRPC server turns them
into protobuf.

The settings it depends on are a :class:`~.response_options.ResponseOptions` (defined apart, so
that a plugin's start builds them without loading this module; re-exported here).

Deterministic where NVIDIA is not: with ``--device-id-strategy index`` the
indices keep the request's first-seen order (NVIDIA's come from a Go map), and
device specs follow the request order with duplicates dropped (NVIDIA repeats
``/dev/nvidiaN`` for two replicas of one GPU, in map order).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kubegpu.deviceplugin import naming
from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.rm import milli
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.deviceplugin.rm.response_options import FEATURES as FEATURES
from kubegpu.deviceplugin.rm.response_options import IMEX_CHANNEL_DIR as IMEX_CHANNEL_DIR
from kubegpu.deviceplugin.rm.response_options import ResponseOptions as ResponseOptions
from kubegpu.deviceplugin.rm.response_options import imex_channel_node as imex_channel_node

#: The environment variable the NVIDIA container runtime reads.
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
IMEX_CHANNELS_ENV = "NVIDIA_IMEX_CHANNELS"
#: The CDI vendor of NVIDIA's plugin (not ``nvidia.com``, which its unit tests mock).
CDI_VENDOR = "k8s.device-plugin.nvidia.com"
CDI_GPU_CLASS = "gpu"
CDI_IMEX_CLASS = "imex-channel"
CDI_ANNOTATION_PLUGIN = "nvidia-device-plugin"
VOLUME_MOUNT_DIR = "/var/run/nvidia-container-devices"
#: Control nodes passed with ``--pass-device-specs``, in NVIDIA's order, when present.
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
MPS_PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"


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
    """Raise :class:`InvalidRequest` naming the first unknown ID.

    An empty request is valid, as in NVIDIA's ``ValidateRequest``: it gets the response NVIDIA's
    ``getAllocateResponse`` builds for no devices (an empty ``NVIDIA_VISIBLE_DEVICES`` with ``envvar``, the
    control device nodes with ``passDeviceSpecs``, the IMEX/MPS/feature edits, no CDI GPU device).
    """
    for device_id in device_ids:
        if device_id not in resource.by_id:
            raise invalid(resource.name, f"unknown device: {device_id}")


def cdi_name(cdi_class: str, name: str) -> str:
    """A fully-qualified CDI device name, e.g. ``k8s.device-plugin.nvidia.com/gpu=GPU-…``."""
    return f"{CDI_VENDOR}/{cdi_class}={name}"


def mps_pipe_dir(root: str, resource: str) -> str:
    """``<root>/<resource name>/pipe`` (``/mps/nvidia.com/gpu/pipe`` in containers)."""
    return posixpath.join(root, resource, "pipe")


def host_path(dev_root: str, path: str) -> str:
    """``path`` on the host when the host's device nodes live under ``dev_root``."""
    return posixpath.join(dev_root, path.lstrip("/"))


def check(resource: Resource, device_ids: Sequence[str]) -> None:
    """NVIDIA's request checks; raises :class:`~kubegpu.deviceplugin.errors.InvalidRequest` with its texts."""
    validate(resource, device_ids)
    if resource.is_milli and device_ids:  # an empty request is valid (above) and has no GPU to be on
        try:
            milli.one_gpu(resource, device_ids)
        except milli.ShareError as exc:
            raise invalid(resource.name, str(exc)) from None
    sharing, fail_greater_than_one = resource.sharing, resource.fail_requests_greater_than_one
    if (
        sharing != "none"
        and fail_greater_than_one
        and len(device_ids) > 1
        and any(naming.REPLICA_SEPARATOR in i for i in device_ids)
    ):
        raise invalid(resource.name, f"maximum request size for shared resources is 1; found {len(device_ids)}")


def runtime_ids(resource: Resource, device_ids: Sequence[str], id_strategy: str) -> list[str]:
    """The IDs the container runtime gets: physical UUIDs, or NVIDIA indices, de-duplicated in request order."""
    physical = naming.unique_physical_ids(device_ids)
    if id_strategy != "index":
        return physical
    by_physical = {d.physical_id: d.index for d in resource.devices}
    return list(dict.fromkeys(by_physical[p] for p in physical))


def random_uuid() -> str:
    """A random (version 4, RFC 4122 variant) UUID as text, like ``str(uuid.uuid4())``; the ``uuid`` module is
    not imported for it (it imports ``platform``, ~2.5 ms of the plugin's start)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def container_edits(
    resource: Resource,
    device_ids: Sequence[str],
    options: ResponseOptions,
    *,
    exists: Callable[[str], bool],
    new_uuid: Callable[[], str] = random_uuid,
) -> ContainerEdits:
    """The edits for one container request, after :func:`check`.

    ``exists(path)`` answers whether a control device node (``/dev/nvidiactl`` …) exists where the
    plugin runs; ``new_uuid()`` gives the per-call CDI annotation UUID.
    """
    check(resource, device_ids)
    ids = runtime_ids(resource, device_ids, options.device_id_strategy)
    envs: dict[str, str] = {}
    mounts: list[Mount] = []
    specs: list[DeviceSpec] = []
    annotations: dict[str, str] = {}
    cdi_devices: tuple[str, ...] = ()

    if options.any_cdi:
        names = [cdi_name(CDI_GPU_CLASS, i) for i in ids]
        names += [cdi_name(CDI_IMEX_CLASS, str(c)) for c in options.imex_channels]
        names += [cdi_name(f, "all") for f, _ in FEATURES if options.feature_enabled(f) and f in options.cdi_features]
        if names and "cdi-annotations" in options.device_list_strategies:
            key = f"{options.cdi_annotation_prefix}{CDI_ANNOTATION_PLUGIN}_{new_uuid()}"
            annotations[key] = ",".join(names)
        if names and "cdi-cri" in options.device_list_strategies:
            cdi_devices = tuple(names)

    sharing = resource.sharing
    if sharing == "mps":
        pipe = mps_pipe_dir(options.mps_container_root, resource.name)
        envs[MPS_PIPE_ENV] = pipe
        mounts.append(Mount(container_path=pipe, host_path=mps_pipe_dir(options.mps_root, resource.name)))
        mounts.append(Mount(container_path="/dev/shm", host_path=posixpath.join(options.mps_root, "shm")))

    if resource.is_milli and device_ids:
        envs.update(milli.share_env(resource, device_ids, mps=options.mps))

    for feature, env in FEATURES:
        if options.feature_enabled(feature):
            envs[env] = "enabled"

    if not options.only_cdi:
        if "envvar" in options.device_list_strategies:
            envs[VISIBLE_DEVICES_ENV] = ",".join(ids)
            if options.imex_channels:
                envs[IMEX_CHANNELS_ENV] = ",".join(str(c) for c in options.imex_channels)
        if "volume-mounts" in options.device_list_strategies:
            # NVIDIA overwrites the envvar value when both strategies are on.
            envs[VISIBLE_DEVICES_ENV] = VOLUME_MOUNT_DIR
            mounts += [Mount(container_path=f"{VOLUME_MOUNT_DIR}/{i}", host_path="/dev/null") for i in ids]
            mounts += [
                Mount(container_path=f"{VOLUME_MOUNT_DIR}/imex/{c}", host_path="/dev/null")
                for c in options.imex_channels
            ]
        if options.pass_device_specs:
            specs = _device_specs(resource, device_ids, options, exists)

    return ContainerEdits(
        envs=envs,
        mounts=tuple(mounts),
        devices=tuple(specs),
        annotations=annotations,
        cdi_devices=cdi_devices,
    )


def _device_specs(
    resource: Resource, device_ids: Sequence[str], options: ResponseOptions, exists: Callable[[str], bool]
) -> list[DeviceSpec]:
    paths = [p for p in CONTROL_NODES if exists(p)]
    for device_id in device_ids:
        paths.extend(resource.by_id[device_id].paths)
    paths += [imex_channel_node(c) for c in options.imex_channels]
    unique = list(dict.fromkeys(paths))
    return [DeviceSpec(container_path=p, host_path=host_path(options.dev_root, p), permissions="rw") for p in unique]


def allocate_all(
    resource: Resource,
    requests: Sequence[Sequence[str]],
    options: ResponseOptions,
    *,
    exists: Callable[[str], bool],
    new_uuid: Callable[[], str] = random_uuid,
) -> list[ContainerEdits]:
    """One :class:`ContainerEdits` per container request, in order; any bad request fails the whole call."""
    return [container_edits(resource, ids, options, exists=exists, new_uuid=new_uuid) for ids in requests]
