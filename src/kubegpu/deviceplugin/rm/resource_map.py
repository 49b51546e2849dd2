"""Resource naming: which advertised devices each extended resource has, as NVIDIA's plugin names them.

Owns the MIG and replica devices (the value type is the runtime's
:class:`~kubegpu.deviceplugin.rm.devices.Device`: ID, parent GPU, NVIDIA index
``"i"``/``"i:j"``, NUMA node, device paths, GI/CI, replica number; their IDs and
names are spelled by :mod:`kubegpu.deviceplugin.naming`) and the pure function
(:class:`~kubegpu.gpu.model.Machine`, :class:`~kubegpu.deviceplugin.config.effective.Config`)
-> :class:`ResourceMap`: MIG strategies none / single / mixed with NVIDIA's
names (``nvidia.com/mig-1g.10gb``, ``+`` -> ``.``) and startup errors, resource
patterns and renames, sharing replicas with their renames and device
selections, the MPS constraints, kubegpu's ``--gpu-milli`` split (the selected whole GPUs leave
their resource and become 1000 ``kubegpu.io/gpu-milli`` units each), and one socket name per resource. Resources
with no devices do not appear. Must not do I/O: MIG capability minors are
passed in (:mod:`kubegpu.deviceplugin.rm.mig_caps` reads them).

Orders are deterministic where NVIDIA iterates Go maps: resources by name,
devices by GPU index, then MIG index, then replica number; ``devices: N``
selects the first N devices in that order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kubegpu.deviceplugin import naming
from kubegpu.deviceplugin.config import flags, v1
from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.config.v1 import ReplicatedResource
from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.rm import devices
from kubegpu.deviceplugin.rm.devices import Device
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.gpu.model import Gpu, Machine, MigDevice

if TYPE_CHECKING:
    # Imported where MIG devices are mapped: a machine without MIG never loads the minor table's parser.
    from kubegpu.deviceplugin.rm import mig_caps

#: MPS server client limits: 48 from compute capability 7.5 (NVIDIA's "Volta" threshold), else 16.
MPS_MAX_CLIENTS_NEW = 48
MPS_MAX_CLIENTS_OLD = 16

_STANDARD_PROFILE = re.compile(r"\d+g\.\d+gb(?:[+-].*)?")


class ResourceMapError(DevicePluginError, ValueError):
    """The machine cannot be advertised under this config; the message is NVIDIA's startup error."""


def is_standard_profile(profile: str) -> bool:
    """True for profiles whose compute slices equal their GPU slices (``1g.10gb``, not ``1c.2g.20gb``)."""
    return _STANDARD_PROFILE.fullmatch(profile) is not None


def mig_resource_name(profile: str, config: Config) -> str | None:
    """The resource a MIG profile is advertised under: the first matching ``resources.mig`` pattern, else
    (mixed strategy, profiles whose compute and GPU slices agree) ``nvidia.com/mig-<profile>``; None if neither."""
    name = _match(config.resources.mig, profile)
    if name is None and config.flags.mig_strategy == "mixed" and is_standard_profile(profile):
        name = naming.resource_name(naming.mig_resource_suffix(profile))
    return name


def mps_max_clients(compute_capability: tuple[int, int]) -> int:
    return MPS_MAX_CLIENTS_NEW if compute_capability >= (7, 5) else MPS_MAX_CLIENTS_OLD


def mig_device(gpu: Gpu, mig: MigDevice, minors: mig_caps.MigMinors) -> Device:
    """The advertised device of a MIG device: its ID is the MIG UUID, its NUMA node the parent's."""
    from kubegpu.deviceplugin.rm import mig_caps

    try:
        paths = mig_caps.mig_device_paths(gpu.minor, mig.gi_id, mig.ci_id, minors)
    except mig_caps.MigCapsError as exc:
        raise ResourceMapError(f"error getting device paths for MIG {mig.uuid}: {exc}") from None
    return Device(
        id=mig.uuid,
        gpu_uuid=gpu.uuid,
        gpu_index=gpu.index,
        index=mig.id_index,
        numa=gpu.numa_node,
        paths=paths,
        mig=(mig.gi_id, mig.ci_id),
    )


def replicate(device: Device, n: int) -> Device:
    """Replica ``n`` of ``device``: same GPU, index, NUMA node and paths; ID ``<uuid>::<n>``."""
    return replace(device, id=naming.replica_id(device.id, n), replica=n)


@dataclass(frozen=True)
class ResourceMap:
    """Every resource to advertise (sorted by name) and the warnings building it produced."""

    resources: tuple[Resource, ...]
    warnings: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Resource]:
        return iter(self.resources)

    def __len__(self) -> int:
        return len(self.resources)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.resources)

    def get(self, name: str) -> Resource | None:
        for resource in self.resources:
            if resource.name == name:
                return resource
        return None

    def __getitem__(self, name: str) -> Resource:
        resource = self.get(name)
        if resource is None:
            raise KeyError(name)
        return resource


# --- building -------------------------------------------------------------------------------


def build(machine: Machine, config: Config, minors: mig_caps.MigMinors | None = None) -> ResourceMap:
    """The resources of ``machine`` under ``config``.

    ``minors`` is the host's ``mig-minors`` table; None uses the driver's fixed numbering
    (right for simulated machines). Raises :class:`ResourceMapError` with NVIDIA's texts.
    """
    warnings: list[str] = []
    try:
        by_name = _devices_from_resources(machine, config, minors, warnings)
    except ResourceMapError as exc:
        raise ResourceMapError(f"error building device map from config.resources: {exc}") from None
    try:
        shared = _with_replicas(config, by_name)
    except ResourceMapError as exc:
        raise ResourceMapError(
            f"error updating device map with replicas from replicatedResources config: {exc}"
        ) from None
    if config.flags.plugin.gpu_milli is not None:
        try:
            shared = _with_milli(machine, config.flags.plugin.gpu_milli, shared)
        except ResourceMapError as exc:
            raise ResourceMapError(f"error advertising --gpu-milli GPUs as {naming.MILLI_RESOURCE}: {exc}") from None
    built = tuple(_resource(name, devs, config) for name, devs in sorted(shared.items()) if devs)
    _check_mps(config, built, machine)
    return ResourceMap(resources=built, warnings=tuple(warnings))


def _match(patterns: Sequence[v1.ResourcePattern], value: str) -> str | None:
    for entry in patterns:
        if v1.pattern_matches(entry.pattern, value):
            return entry.name
    return None


def _devices_from_resources(
    machine: Machine, config: Config, minors: mig_caps.MigMinors | None, warnings: list[str]
) -> dict[str, list[Device]]:
    strategy = config.flags.mig_strategy
    gpus: dict[str, list[Device]] = {}
    for gpu in machine.gpus:
        if gpu.mig_enabled and strategy != "none":
            continue
        name = _match(config.resources.gpus, gpu.product_name)
        if name is None:
            raise ResourceMapError(
                f"error building GPU device map: GPU name '{gpu.product_name}' does not match any resource patterns"
            )
        gpus.setdefault(name, []).append(devices.whole_gpu(gpu))
    if strategy == "none":
        return gpus

    migs: dict[str, list[Device]] = {}
    for gpu in machine.gpus:
        if not gpu.mig_enabled:
            continue
        # The driver's numbering is a table of ~4,000 minors: built only for a machine with MIG devices.
        if not minors:
            from kubegpu.deviceplugin.rm import mig_caps

            minors = mig_caps.driver_layout()
        for mig in gpu.mig_devices:
            name = mig_resource_name(mig.profile, config)
            if name is None:
                raise ResourceMapError(
                    f"error building MIG device map: MIG profile '{mig.profile}' does not match any resource patterns"
                )
            migs.setdefault(name, []).append(mig_device(gpu, mig, minors))

    uniform = strategy == "single"
    for gpu in machine.gpus:
        if gpu.mig_enabled and not gpu.mig_devices:
            if uniform:
                raise ResourceMapError(
                    "invalid MIG configuration: at least one device with migEnabled=true was not configured "
                    f"correctly: device {gpu.index} has no MIG devices configured"
                )
            warnings.append(f"device {gpu.index} has no MIG devices configured")
    if uniform:
        kinds = {_mig_attributes(m) for m in machine.mig_devices() if machine.gpus[m.parent_index].mig_enabled}
        if len(kinds) > 1:
            raise ResourceMapError("invalid MIG configuration: more than one MIG device type present on node")
        if gpus and migs:
            raise ResourceMapError("all devices on the node must be configured with the same migEnabled value")
    for name, devs in migs.items():
        gpus.setdefault(name, []).extend(devs)
    return gpus


def _mig_attributes(mig: MigDevice) -> tuple[object, ...]:
    """What NVML's device attributes compare (profile, size and engines), for the single-strategy check."""
    return (
        mig.profile,
        mig.memory_mib,
        mig.multiprocessors,
        mig.gi_slices,
        mig.ci_slices,
        mig.copy_engines,
        mig.decoders,
        mig.encoders,
        mig.jpeg_engines,
        mig.ofa_engines,
    )


def _selected(entry: ReplicatedResource, candidates: Sequence[Device]) -> list[Device]:
    """The devices of a resource that ``entry.devices`` selects, in device order."""
    selection = entry.devices
    if selection == "all":
        return list(candidates)
    if isinstance(selection, int):
        if selection > len(candidates):
            raise ResourceMapError(
                f"requested {selection} devices to be replicated, but only {len(candidates)} devices available"
            )
        return list(candidates[:selection])
    chosen: list[Device] = []
    for ref in selection:
        found = _find_ref(ref, candidates)
        if found is None:
            by_index = ref.replace(":", "").isdigit()
            raise ResourceMapError(f"no matching device {'at index' if by_index else 'with UUID'}: {ref}")
        if found not in chosen:
            chosen.append(found)
    return [d for d in candidates if d in chosen]


def _find_ref(ref: str, candidates: Sequence[Device]) -> Device | None:
    for device in candidates:
        if ref in (device.index, device.id):
            return device
        if ref.startswith("MIG-GPU-") and device.mig is not None:
            # Legacy MIG UUID: MIG-GPU-<parent uuid>/<gi>/<ci>.
            parent, _, rest = ref[len("MIG-") :].partition("/")
            if parent == device.gpu_uuid and rest == f"{device.mig[0]}/{device.mig[1]}":
                return device
    return None


def _with_replicas(config: Config, by_name: dict[str, list[Device]]) -> dict[str, list[Device]]:
    block = config.replicated
    if block is None or not block.resources:
        return by_name
    shared_names = {entry.name for entry in block.resources}
    out: dict[str, list[Device]] = {name: list(devs) for name, devs in by_name.items() if name not in shared_names}
    for entry in block.resources:
        original = by_name.get(entry.name, [])
        try:
            chosen = _selected(entry, original)
        except ResourceMapError as exc:
            raise ResourceMapError(
                f"unable to get IDs of devices to replicate for '{entry.name}' resource: {exc}"
            ) from None
        if not chosen:
            continue
        for device in original:
            if device not in chosen:
                out.setdefault(entry.name, []).append(device)
        target = out.setdefault(entry.published_name, [])
        for device in chosen:
            target.extend(replicate(device, n) for n in range(entry.replicas))
    return out


def _with_milli(machine: Machine, text: str, by_name: dict[str, list[Device]]) -> dict[str, list[Device]]:
    """Move the whole GPUs ``--gpu-milli`` selects out of their resource into ``kubegpu.io/gpu-milli`` units.

    A GPU is in exactly one resource, so the kubelet's own accounting keeps whole and fractional use apart.
    """
    try:
        selection = flags.gpu_milli_selection(text)
    except ValueError as exc:
        raise ResourceMapError(str(exc)) from None
    whole = [d for devs in by_name.values() for d in devs if d.replica is None and d.mig is None]
    whole.sort(key=_order)
    if selection == flags.ALL_CLASSES:
        chosen = whole
    else:
        chosen = []
        for ref in selection:
            found = next((d for d in whole if ref in (d.index, d.id)), None)
            if found is None:
                raise ResourceMapError(f"no whole GPU {'at index' if ref.isdigit() else 'with UUID'}: {ref}")
            chosen.append(found)
    if not chosen:
        return by_name
    moved = {d.id for d in chosen}
    out = {name: [d for d in devs if d.id not in moved] for name, devs in by_name.items()}
    units = out.setdefault(naming.MILLI_RESOURCE, [])
    for device in sorted(chosen, key=_order):
        units.extend(devices.milli_units(machine.gpus[device.gpu_index]))
    return out


def _resource(name: str, devs: list[Device], config: Config) -> Resource:
    ordered = tuple(sorted(devs, key=_order))
    replicas = 1 + max((d.replica for d in ordered if d.replica is not None), default=0)
    shared = any(d.replica is not None for d in ordered)
    block = config.replicated
    fail = bool(shared and block is not None and block.fail_requests_greater_than_one)
    return Resource(
        name=name,
        devices=ordered,
        sharing=config.sharing_strategy if shared else "none",
        replicas=replicas,
        fail_requests_greater_than_one=fail,
    )


def _order(device: Device) -> tuple[int, int, int, int]:
    mig_index = -1 if device.mig is None else int(device.index.partition(":")[2])
    replica = -1 if device.replica is None else device.replica
    milli = -1 if device.milli is None else device.milli
    return (device.gpu_index, mig_index, replica, milli)


def _check_mps(config: Config, built: Sequence[Resource], machine: Machine) -> None:
    if config.sharing_strategy != "mps":
        return
    for resource in built:
        if not resource.is_shared:
            continue
        if resource.has_mig:
            raise ResourceMapError("sharing using MPS is not supported for MIG devices")
        for device in resource.devices:
            limit = mps_max_clients(machine.gpus[device.gpu_index].compute_capability)
            if resource.replicas > limit:
                raise ResourceMapError(
                    "invalid MPS configuration: invalid device maximum allowed replicas exceeded: "
                    f"{resource.replicas} > {limit}"
                )
