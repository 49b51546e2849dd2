"""Reading the machine through NVML: GPUs, MIG devices, NVLink/NVSwitch links, PCIe relationships.

Owns the enumeration NVIDIA's plugin and go-nvlib do — index, minor, UUID,
name, memory, PCI bus id, compute capability, MIG mode and MIG devices (profile
names as go-nvlib forms them: the GPU/compute instance's profile id is the number
the board reports, e.g. 19 for an A100's 1g, so the NVML profile enum behind it is
found by walking ``nvmlDeviceGetGpuInstanceProfileInfo`` /
``nvmlGpuInstanceGetComputeInstanceProfileInfo`` over the enums and comparing ids,
and the ``GB`` comes from the GPU-instance profile's memory), NVLink remote PCI bus ids (GPU
peers and NVSwitches), ``nvmlDeviceGetTopologyCommonAncestor`` for every pair, the NVLink fabric
(``nvmlDeviceGetGpuFabricInfo``: cluster UUID and clique) —
plus the host facts NVML does not give, read from sysfs under an injectable
root: NUMA node, PCI class and the vGPU record of the PCI config space per GPU and the DMI product name. Returns the
:class:`~kubegpu.gpu.model.Machine` and the handles later calls need. Must not
start NVML (that is :mod:`.library`) and must not watch events or sample.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from kubegpu.gpu import errors
from kubegpu.gpu.model import Fabric, Gpu, Machine, MigDevice, PcieLink, Topology
from kubegpu.gpu.nvml import binding, decode

log = logging.getLogger(__name__)

T = TypeVar("T")

_NVLINK_TYPE_GPU = 0x00
_NVLINK_TYPE_SWITCH = 0x02
_MIB = 1024 * 1024


@dataclass(frozen=True)
class Inventory:
    """A discovered machine and the NVML handles behind it.

    ``gpu_handles[i]`` is GPU i's handle, ``mig_handles`` maps MIG UUIDs to
    theirs, ``nvlinks[i]`` lists GPU i's active NVLink numbers (for bandwidth fields).
    """

    machine: Machine
    gpu_handles: tuple[Any, ...]
    mig_handles: dict[str, Any]
    nvlinks: tuple[tuple[int, ...], ...]


def text(value: Any) -> str:
    """A string field of an NVML struct (bytes) as str; the binding's calls already return str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(what: str, fn: Callable[..., T], *args: Any) -> T:
    """Call NVML; an error becomes NvmlUnavailable naming what was being read."""
    try:
        return fn(*args)
    except binding.NvmlError as exc:
        raise errors.NvmlUnavailable(f"NVML: reading {what} failed: {exc}", code=exc.code) from None


def _optional(fn: Callable[..., T], *args: Any) -> T | None:
    """Call NVML for a value some GPUs or drivers lack; those errors become None."""
    try:
        return fn(*args)
    except binding.NvmlError as exc:
        if exc.code in (decode.ERROR_NOT_SUPPORTED, decode.ERROR_FUNCTION_NOT_FOUND, decode.ERROR_INVALID_ARGUMENT):
            return None
        raise


def _sysfs(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _sysfs_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _offered(what: str, query: Callable[[int], Any], count: int) -> dict[int, tuple[int, Any]]:
    """The profiles a GPU (or GPU instance) offers, by the id the board reports: ``{id: (enum, info)}``.

    NVML answers NOT_SUPPORTED for a profile enum the hardware lacks and INVALID_ARGUMENT
    for one this driver does not know; both are skipped, as go-nvlib skips them.
    """
    offered: dict[int, tuple[int, Any]] = {}
    for enum in range(count):
        try:
            info = query(enum)
        except binding.NvmlError as exc:
            if exc.code in (decode.ERROR_NOT_SUPPORTED, decode.ERROR_INVALID_ARGUMENT):
                continue
            raise errors.NvmlUnavailable(f"NVML: reading {what} {enum} failed: {exc}", code=exc.code) from None
        offered.setdefault(int(info.id), (enum, info))
    return offered


def _profile(what: str, offered: dict[int, tuple[int, Any]], profile_id: int) -> tuple[int, Any]:
    try:
        return offered[profile_id]
    except KeyError:
        known = ", ".join(str(i) for i in sorted(offered)) or "none"
        message = f"NVML: {what} has profile id {profile_id}, which the GPU does not offer ({known})"
        raise errors.NvmlUnavailable(message) from None


def _gpu_instance_profile(handle: Any, enum: int) -> Any:
    """A GPU-instance profile of a GPU: the versioned call, or the unversioned one on drivers without it."""
    try:
        return binding.nvmlDeviceGetGpuInstanceProfileInfoV(handle, enum)
    except binding.NvmlError as exc:
        if exc.code != decode.ERROR_FUNCTION_NOT_FOUND:
            raise
        return binding.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum)


def _compute_instance_profile(gi: Any, enum: int) -> Any:
    """A compute-instance profile of a GPU instance, with the engines shared (the one engine profile NVML has);
    the versioned call, or the unversioned one on drivers without it."""
    shared = binding.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    try:
        return binding.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, enum, shared)
    except binding.NvmlError as exc:
        if exc.code != decode.ERROR_FUNCTION_NOT_FOUND:
            raise
        return binding.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, enum, shared)


def _mig_devices(gpu_index: int, parent_uuid: str, handle: Any, memory_bytes: int) -> list[tuple[MigDevice, Any]]:
    where = f"GPU {gpu_index}"
    out: list[tuple[MigDevice, Any]] = []
    gi_profiles: dict[int, tuple[int, Any]] | None = None  # read once per GPU, on its first MIG device
    ci_profiles: dict[int, dict[int, tuple[int, Any]]] = {}  # by GPU-instance profile id
    count = _call(f"{where} MIG device count", binding.nvmlDeviceGetMaxMigDeviceCount, handle)
    for j in range(count):
        try:
            mig = binding.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
        except binding.NvmlError as exc:
            if exc.code == decode.ERROR_NOT_FOUND:  # an empty slot
                continue
            message = f"NVML: reading {where} MIG device {j} failed: {exc}"
            raise errors.NvmlUnavailable(message, code=exc.code) from None
        what = f"{where} MIG device {j}"
        uuid = _call(f"{what} UUID", binding.nvmlDeviceGetUUID, mig)
        attrs = _call(f"{what} attributes", binding.nvmlDeviceGetAttributes, mig)
        gi_id = _call(f"{what} GPU instance id", binding.nvmlDeviceGetGpuInstanceId, mig)
        ci_id = _call(f"{what} compute instance id", binding.nvmlDeviceGetComputeInstanceId, mig)
        gi = _call(f"{what} GPU instance", binding.nvmlDeviceGetGpuInstanceById, handle, gi_id)
        gi_info = _call(f"{what} GPU instance info", binding.nvmlGpuInstanceGetInfo, gi)
        ci = _call(f"{what} compute instance", binding.nvmlGpuInstanceGetComputeInstanceById, gi, ci_id)
        ci_info = _call(f"{what} compute instance info", binding.nvmlComputeInstanceGetInfo, ci)
        if gi_profiles is None:
            gi_profiles = _offered(
                f"{where} GPU instance profile",
                partial(_gpu_instance_profile, handle),
                binding.GPU_INSTANCE_PROFILE_COUNT,
            )
        gi_enum, gi_profile = _profile(f"{what} GPU instance", gi_profiles, int(gi_info.profileId))
        # What a GPU instance offers depends only on its profile: walked once per profile and GPU.
        if int(gi_info.profileId) not in ci_profiles:
            ci_profiles[int(gi_info.profileId)] = _offered(
                f"{what} compute instance profile",
                partial(_compute_instance_profile, gi),
                binding.COMPUTE_INSTANCE_PROFILE_COUNT,
            )
        ci_enum, _ = _profile(f"{what} compute instance", ci_profiles[int(gi_info.profileId)], int(ci_info.profileId))
        try:
            profile = decode.mig_profile_name(gi_enum, ci_enum, int(gi_profile.memorySizeMB), memory_bytes)
        except ValueError as exc:
            raise errors.NvmlUnavailable(f"NVML: {what}: {exc}") from None
        device = MigDevice(
            uuid=uuid,
            parent_uuid=parent_uuid,
            parent_index=gpu_index,
            index=j,
            profile=profile,
            gi_id=int(gi_id),
            ci_id=int(ci_id),
            memory_mib=int(attrs.memorySizeMB),
            multiprocessors=int(attrs.multiprocessorCount),
            gi_slices=int(attrs.gpuInstanceSliceCount),
            ci_slices=int(attrs.computeInstanceSliceCount),
            copy_engines=int(attrs.sharedCopyEngineCount),
            decoders=int(attrs.sharedDecoderCount),
            encoders=int(attrs.sharedEncoderCount),
            jpeg_engines=int(attrs.sharedJpegCount),
            ofa_engines=int(attrs.sharedOfaCount),
        )
        out.append((device, mig))
    return out


def _nvlinks(gpu_index: int, handle: Any) -> list[tuple[int, str, int | None]]:
    """Active links as (link number, remote PCI bus id, remote device type or None when NVML cannot say)."""
    links: list[tuple[int, str, int | None]] = []
    for link in range(binding.NVLINK_MAX_LINKS):
        try:
            active = binding.nvmlDeviceGetNvLinkState(handle, link)
        except binding.NvmlError as exc:
            # NOT_SUPPORTED: no NVLink at all; INVALID_ARGUMENT: past the GPU's last link.
            if exc.code not in (decode.ERROR_NOT_SUPPORTED, decode.ERROR_INVALID_ARGUMENT):
                log.warning("nvlink state unreadable", extra={"gpu": gpu_index, "link": link, "error": str(exc)})
            break
        if not active:
            continue
        what = f"GPU {gpu_index} NVLink {link} remote PCI info"
        remote = _call(what, binding.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
        kind = _optional(binding.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link)
        links.append((link, decode.nvml_bus_id(text(remote.busId)), kind))
    return links


def _gpu(index: int, handle: Any, sysfs_root: Path) -> tuple[Gpu, list[tuple[MigDevice, Any]]]:
    where = f"GPU {index}"
    uuid = _call(f"{where} UUID", binding.nvmlDeviceGetUUID, handle)
    memory_bytes = int(_call(f"{where} memory", binding.nvmlDeviceGetMemoryInfo, handle).total)
    bus_id = decode.nvml_bus_id(text(_call(f"{where} PCI info", binding.nvmlDeviceGetPciInfo, handle).busId))
    cc = _call(f"{where} compute capability", binding.nvmlDeviceGetCudaComputeCapability, handle)
    compute_capability = (int(cc[0]), int(cc[1]))
    mig_mode = _optional(binding.nvmlDeviceGetMigMode, handle)
    mig_enabled = mig_mode is not None and int(mig_mode[0]) == binding.DEVICE_MIG_ENABLE
    cores = _optional(binding.nvmlDeviceGetNumGpuCores, handle)
    per_sm = decode.cores_per_sm(compute_capability)
    limit_mw = _optional(binding.nvmlDeviceGetPowerManagementLimit, handle)
    sysfs_dir = sysfs_root / "bus" / "pci" / "devices" / decode.sysfs_pci_name(bus_id)
    numa_text = _sysfs(sysfs_dir / "numa_node")
    class_text = _sysfs(sysfs_dir / "class")
    migs = _mig_devices(index, uuid, handle, memory_bytes) if mig_enabled else []
    gpu = Gpu(
        index=index,
        minor=int(_call(f"{where} minor number", binding.nvmlDeviceGetMinorNumber, handle)),
        uuid=uuid,
        product_name=_call(f"{where} name", binding.nvmlDeviceGetName, handle),
        memory_mib=memory_bytes // _MIB,
        pci_bus_id=bus_id,
        numa_node=None if numa_text is None else decode.numa_node(numa_text),
        compute_capability=compute_capability,
        mig_capable=mig_mode is not None,
        mig_enabled=mig_enabled,
        mig_devices=tuple(d for d, _ in migs),
        power_limit_w=0.0 if limit_mw is None else limit_mw / 1000.0,
        max_sm_clock_mhz=int(_optional(binding.nvmlDeviceGetMaxClockInfo, handle, binding.CLOCK_SM) or 0),
        max_mem_clock_mhz=int(_optional(binding.nvmlDeviceGetMaxClockInfo, handle, binding.CLOCK_MEM) or 0),
        multiprocessors=0 if cores is None or per_sm is None else int(cores) // per_sm,
        # GPU feature discovery reads the class from sysfs too; a GPU is a 3D controller unless it says otherwise.
        pci_class=(decode.pci_class(class_text) if class_text is not None else None) or 0x0302,
        serial=_optional(binding.nvmlDeviceGetSerial, handle) or "",
        vbios_version=_optional(binding.nvmlDeviceGetVbiosVersion, handle) or "",
        fabric=_fabric(handle),
        # GPU feature discovery reads vGPUs from the PCI config space, not NVML: so do we.
        vgpu=decode.vgpu_host(_sysfs_bytes(sysfs_dir / "config")),
    )
    return gpu, migs


def _fabric(handle: Any) -> Fabric | None:
    """The NVLink fabric the GPU is registered with (``nvmlDeviceGetGpuFabricInfo``); None where there is none
    or the driver lacks the call."""
    info = _optional(binding.nvmlDeviceGetGpuFabricInfo, handle)
    if info is None:
        return None
    return decode.fabric(bytes(info.clusterUuid), int(info.status), int(info.cliqueId), int(info.state))


def _pcie(handles: tuple[Any, ...]) -> tuple[tuple[PcieLink | None, ...], ...]:
    n = len(handles)
    rows: list[list[PcieLink | None]] = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            try:
                level = binding.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
                link = decode.pcie_link(int(level))
            except (binding.NvmlError, ValueError) as exc:
                # Without an answer the pair is treated as the farthest apart, as scoring does for unknown links.
                log.warning("pcie relationship unknown", extra={"gpu": i, "peer": j, "error": str(exc)})
                link = PcieLink.CROSS_CPU
            rows[i][j] = rows[j][i] = link
    return tuple(tuple(r) for r in rows)


def discover(library: str, sysfs_root: Path) -> Inventory:
    """Enumerate every GPU NVML sees. NVML must be started.

    Raises :class:`~kubegpu.gpu.errors.NvmlUnavailable` when NVML reports no GPUs
    or a GPU cannot be read (the message names the GPU and what was being read).
    """
    count = _call("the GPU count", binding.nvmlDeviceGetCount)
    if count == 0:
        raise errors.NvmlUnavailable(f"NVML found no GPUs (library {library})")
    handles = tuple(_call(f"GPU {i} handle", binding.nvmlDeviceGetHandleByIndex, i) for i in range(count))
    gpus: list[Gpu] = []
    mig_handles: dict[str, Any] = {}
    for i, handle in enumerate(handles):
        gpu, migs = _gpu(i, handle, sysfs_root)
        gpus.append(gpu)
        mig_handles.update((d.uuid, h) for d, h in migs)

    index_of_bus = {g.pci_bus_id: g.index for g in gpus}
    nvlink = [[0] * count for _ in range(count)]
    switches: list[frozenset[str]] = []
    switch_links: list[int] = []
    active: list[tuple[int, ...]] = []
    for i, handle in enumerate(handles):
        links = _nvlinks(i, handle)
        active.append(tuple(link for link, _, _ in links))
        reached: set[str] = set()
        to_switch = 0
        for _, bus, kind in links:
            peer = index_of_bus.get(bus)
            # Drivers without nvmlDeviceGetNvLinkRemoteDeviceType: a remote that is none of our GPUs is a switch.
            if kind == _NVLINK_TYPE_SWITCH or (kind is None and peer is None):
                reached.add(bus)
                to_switch += 1
            elif peer is not None and peer != i:
                nvlink[i][peer] += 1
        switches.append(frozenset(reached))
        switch_links.append(to_switch)

    try:
        topology = Topology(
            pcie=_pcie(handles),
            nvlink=tuple(tuple(row) for row in nvlink),
            numa=tuple(g.numa_node for g in gpus),
            nvswitch=tuple(decode.fabrics(switches)),
            nvswitch_links=tuple(switch_links),
        )
        machine = Machine(
            name="nvml",
            description=_describe(gpus),
            gpus=tuple(gpus),
            topology=topology,
            driver_version=_call("the driver version", binding.nvmlSystemGetDriverVersion),
            cuda_driver_version=decode.cuda_version(
                int(_call("the CUDA driver version", binding.nvmlSystemGetCudaDriverVersion))
            ),
            machine_type=_machine_type(sysfs_root),
        )
    except ValueError as exc:
        raise errors.NvmlUnavailable(f"NVML reported an inconsistent machine: {exc}") from None
    return Inventory(machine=machine, gpu_handles=handles, mig_handles=mig_handles, nvlinks=tuple(active))


def _describe(gpus: list[Gpu]) -> str:
    counts = Counter(g.product_name for g in gpus)
    return ", ".join(f"{n}x {name}" for name, n in counts.items()) + " (NVML)"


def _machine_type(sysfs_root: Path) -> str:
    """The DMI product name, as GPU feature discovery reads it; ``unknown`` when unreadable."""
    value = _sysfs(sysfs_root / "class" / "dmi" / "id" / "product_name")
    return value.strip() if value and value.strip() else "unknown"
