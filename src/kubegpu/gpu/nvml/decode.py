"""Pure decoding of what NVML answers into the hardware model's terms.

Owns the rules that turn NVML numbers into our values: MIG profile names as
go-nvlib spells them (from GPU/compute-instance profile ids and memory sizes),
PCIe common-ancestor levels, CUDA driver versions, CUDA cores per SM, PCI bus
id spellings (NVML and sysfs), sysfs text, NVSwitch fabric grouping, NVLink fabric info, the vGPU record of
the PCI config space, event
masks and where ``libnvidia-ml.so.1`` is looked for. Must not call NVML or
do I/O (no files, clocks or threads): every function here is a table or a
calculation, tested with tables and properties.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kubegpu.gpu.backend import HealthEventKind
from kubegpu.gpu.driver import LIBRARY_DIRS
from kubegpu.gpu.model import Fabric, PcieLink, VgpuHost

#: The file NVML lives in, as the dynamic loader and NVIDIA's plugin name it.
LIBRARY_NAME = "libnvidia-ml.so.1"


# NVML return codes (nvmlReturn_t) the backend distinguishes.
SUCCESS = 0
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NO_PERMISSION = 4
ERROR_NOT_FOUND = 6
ERROR_INSUFFICIENT_SIZE = 7
ERROR_DRIVER_NOT_LOADED = 9
ERROR_TIMEOUT = 10
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_LIB_RM_VERSION_MISMATCH = 18
ERROR_ARGUMENT_VERSION_MISMATCH = 25
ERROR_UNKNOWN = 999

# nvmlEventType* masks.
EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID_CRITICAL = 0x8
#: What the health watcher registers on every GPU (NVIDIA's plugin registers the same three).
HEALTH_EVENTS = EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC | EVENT_SINGLE_BIT_ECC

#: GPU/compute instance id in event data meaning "the whole GPU, not one MIG device".
WHOLE_GPU = 0xFFFFFFFF

# nvmlGpuInstanceProfile ids.
GI_1_SLICE, GI_2_SLICE, GI_3_SLICE, GI_4_SLICE, GI_7_SLICE, GI_8_SLICE, GI_6_SLICE = range(7)
GI_1_SLICE_REV1, GI_2_SLICE_REV1, GI_1_SLICE_REV2 = 0x7, 0x8, 0x9
GI_1_SLICE_GFX, GI_2_SLICE_GFX, GI_4_SLICE_GFX = 0xA, 0xB, 0xC
GI_1_SLICE_NO_ME, GI_2_SLICE_NO_ME = 0xD, 0xE
GI_1_SLICE_ALL_ME, GI_2_SLICE_ALL_ME = 0xF, 0x10

# nvmlComputeInstanceProfile ids.
CI_1_SLICE, CI_2_SLICE, CI_3_SLICE, CI_4_SLICE, CI_7_SLICE, CI_8_SLICE, CI_6_SLICE = range(7)
CI_1_SLICE_REV1, CI_7_SLICE_NVL = 0x7, 0x8

_GI_SLICES = {
    GI_1_SLICE: 1,
    GI_1_SLICE_REV1: 1,
    GI_1_SLICE_REV2: 1,
    GI_1_SLICE_GFX: 1,
    GI_1_SLICE_NO_ME: 1,
    GI_1_SLICE_ALL_ME: 1,
    GI_2_SLICE: 2,
    GI_2_SLICE_REV1: 2,
    GI_2_SLICE_GFX: 2,
    GI_2_SLICE_NO_ME: 2,
    GI_2_SLICE_ALL_ME: 2,
    GI_3_SLICE: 3,
    GI_4_SLICE: 4,
    GI_4_SLICE_GFX: 4,
    GI_6_SLICE: 6,
    GI_7_SLICE: 7,
    GI_8_SLICE: 8,
}
_CI_SLICES = {
    CI_1_SLICE: 1,
    CI_1_SLICE_REV1: 1,
    CI_2_SLICE: 2,
    CI_3_SLICE: 3,
    CI_4_SLICE: 4,
    CI_6_SLICE: 6,
    CI_7_SLICE: 7,
    CI_7_SLICE_NVL: 7,
    CI_8_SLICE: 8,
}
_GI_ATTRIBUTE = {
    GI_1_SLICE_REV1: "+me",
    GI_2_SLICE_REV1: "+me",
    GI_1_SLICE_ALL_ME: "+me.all",
    GI_2_SLICE_ALL_ME: "+me.all",
    GI_1_SLICE_GFX: "+gfx",
    GI_2_SLICE_GFX: "+gfx",
    GI_4_SLICE_GFX: "+gfx",
    GI_1_SLICE_NO_ME: "-me",
    GI_2_SLICE_NO_ME: "-me",
}

_MIB = 1024 * 1024
_GIB = 1024 * _MIB


def mig_memory_gb(gpu_memory_bytes: int, mig_memory_mib: int) -> int:
    """The ``GB`` of a MIG profile name: the instance's share of the GPU rounded up to eighths,
    times the GPU's memory in whole GiB (rounded up), rounded half away from zero (go-nvlib's rule)."""
    if gpu_memory_bytes <= 0:
        raise ValueError(f"GPU memory must be positive, got {gpu_memory_bytes}")
    fraction = mig_memory_mib * _MIB / gpu_memory_bytes
    fraction = math.ceil(fraction * 8) / 8
    total_gb = (gpu_memory_bytes + _GIB - 1) // _GIB
    return math.floor(fraction * total_gb + 0.5)


def mig_profile_name(gi_profile_id: int, ci_profile_id: int, mig_memory_mib: int, gpu_memory_bytes: int) -> str:
    """The go-nvlib spelling of a MIG device's profile: ``<G>g.<GB>gb`` or ``<C>c.<G>g.<GB>gb``,
    plus ``+me``, ``+me.all``, ``+gfx`` or ``-me`` from the GPU-instance profile.

    Raises ValueError for a profile id that no known NVML version defines.
    """
    if gi_profile_id not in _GI_SLICES:
        raise ValueError(f"unknown GPU instance profile id {gi_profile_id}")
    if ci_profile_id not in _CI_SLICES:
        raise ValueError(f"unknown compute instance profile id {ci_profile_id}")
    g = _GI_SLICES[gi_profile_id]
    c = _CI_SLICES[ci_profile_id]
    gb = mig_memory_gb(gpu_memory_bytes, mig_memory_mib)
    base = f"{g}g.{gb}gb" if c == g else f"{c}c.{g}g.{gb}gb"
    return base + _GI_ATTRIBUTE.get(gi_profile_id, "")


_ATTRIBUTE_PROFILES = {
    ("+me", 1): GI_1_SLICE_REV1,
    ("+me", 2): GI_2_SLICE_REV1,
    ("+me.all", 1): GI_1_SLICE_ALL_ME,
    ("+me.all", 2): GI_2_SLICE_ALL_ME,
    ("+gfx", 1): GI_1_SLICE_GFX,
    ("+gfx", 2): GI_2_SLICE_GFX,
    ("+gfx", 4): GI_4_SLICE_GFX,
    ("-me", 1): GI_1_SLICE_NO_ME,
    ("-me", 2): GI_2_SLICE_NO_ME,
}
_PLAIN_PROFILES = {2: GI_2_SLICE, 3: GI_3_SLICE, 4: GI_4_SLICE, 6: GI_6_SLICE, 7: GI_7_SLICE, 8: GI_8_SLICE}


def gi_profile_id(profile: str, gi_slices: int, mig_memory_mib: int, gpu_memory_mib: int) -> int:
    """The GPU-instance profile enum of a profile spelled the go-nvlib way (the inverse of
    :func:`mig_profile_name` for the GPU-instance part): the attribute picks the revision, and a one-slice
    instance with more than an eighth of the GPU's memory is the double-memory ``1_SLICE_REV2``.

    Raises ValueError for a spelling no GPU-instance profile has.
    """
    gi_part = profile.split(".", 1)[1] if profile.split(".", 1)[0].endswith("c") else profile  # 1c.2g.20gb
    cut = min((i for i in (gi_part.find("+"), gi_part.find("-")) if i >= 0), default=len(gi_part))
    attribute = gi_part[cut:]
    if attribute:
        found = _ATTRIBUTE_PROFILES.get((attribute, gi_slices))
    elif gi_slices == 1:
        found = GI_1_SLICE_REV2 if mig_memory_mib * 8 > gpu_memory_mib else GI_1_SLICE
    else:
        found = _PLAIN_PROFILES.get(gi_slices)
    if found is None:
        raise ValueError(f"no GPU instance profile is spelled {profile!r} with {gi_slices} slices")
    return found


_PCIE_LEVELS = {
    0: PcieLink.SAME_BOARD,  # NVML_TOPOLOGY_INTERNAL
    10: PcieLink.SINGLE_SWITCH,  # NVML_TOPOLOGY_SINGLE
    20: PcieLink.MULTI_SWITCH,  # NVML_TOPOLOGY_MULTIPLE
    30: PcieLink.HOST_BRIDGE,  # NVML_TOPOLOGY_HOSTBRIDGE
    40: PcieLink.SAME_CPU,  # NVML_TOPOLOGY_NODE
    50: PcieLink.CROSS_CPU,  # NVML_TOPOLOGY_SYSTEM
}


def pcie_link(level: int) -> PcieLink:
    """The PCIe relationship for an ``nvmlDeviceGetTopologyCommonAncestor`` level."""
    try:
        return _PCIE_LEVELS[level]
    except KeyError:
        raise ValueError(f"unknown NVML topology level {level}") from None


def cuda_version(value: int) -> str:
    """``nvmlSystemGetCudaDriverVersion``'s integer (12040) as ``major.minor`` (``12.4``)."""
    if value <= 0:
        raise ValueError(f"CUDA driver version must be positive, got {value}")
    return f"{value // 1000}.{value % 1000 // 10}"


def cores_per_sm(cc: tuple[int, int]) -> int | None:
    """CUDA cores per streaming multiprocessor for a compute capability (the CUDA samples' table).

    NVML reports cores, not SMs, for a whole GPU; dividing by this gives the SM count.
    None for an architecture the table does not know.
    """
    major, minor = cc
    if major == 3:
        return 192
    if major == 5:
        return 128
    if major == 6:
        return 64 if minor == 0 else 128
    if major == 7:
        return 64
    if major == 8:
        return 64 if minor == 0 else 128
    if major in (9, 10, 11, 12):
        return 128
    return None


def nvml_bus_id(bus_id: str) -> str:
    """A PCI bus id in NVML's spelling: 8-digit domain, upper case (``00000000:07:00.0``)."""
    text = bus_id.strip()
    parts = text.split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3 or "." not in parts[2]:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    domain, bus, rest = parts
    device, function = rest.split(".", 1)
    try:
        return f"{int(domain, 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{int(function, 16):X}"
    except ValueError:
        raise ValueError(f"not a PCI bus id: {bus_id!r}") from None


def sysfs_pci_name(bus_id: str) -> str:
    """The sysfs directory name of a PCI device (``0000:07:00.0``) for an NVML bus id."""
    domain, rest = nvml_bus_id(bus_id).split(":", 1)
    return f"{int(domain, 16):04x}:{rest.lower()}"


def numa_node(text: str) -> int | None:
    """A sysfs ``numa_node`` file's content; -1 (no NUMA affinity) and garbage are None."""
    try:
        node = int(text.strip())
    except ValueError:
        return None
    return node if node >= 0 else None


def pci_class(text: str) -> int | None:
    """A sysfs ``class`` file (``0x030200``) as the 16-bit class code (``0x0302``); None when unreadable."""
    try:
        return int(text.strip(), 16) >> 8
    except ValueError:
        return None


def fabrics(switches: Sequence[frozenset[str]]) -> list[str | None]:
    """NVSwitch fabric labels per GPU from the switch bus ids each GPU's NVLinks reach.

    GPUs that share a switch (directly or through other GPUs) are one fabric,
    named ``nvswitch:<lowest switch bus id>`` so the name is stable across
    runs; a GPU without switch links has no fabric.
    """
    parent = list(range(len(switches)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, reached in enumerate(switches):
        for bus in reached:
            if bus in owner:
                parent[root(i)] = root(owner[bus])
            else:
                owner[bus] = i
    members: dict[int, set[str]] = {}
    for i, reached in enumerate(switches):
        members.setdefault(root(i), set()).update(reached)
    return [f"nvswitch:{min(members[root(i)])}" if reached else None for i, reached in enumerate(switches)]


def event_kind(event_type: int) -> HealthEventKind | None:
    """The health event for an NVML event type bit; None for types the watcher does not report."""
    if event_type & EVENT_XID_CRITICAL:
        return HealthEventKind.XID
    if event_type & EVENT_DOUBLE_BIT_ECC:
        return HealthEventKind.ECC_DBE
    if event_type & EVENT_SINGLE_BIT_ECC:
        return HealthEventKind.ECC_SBE
    return None


def instance_id(value: int) -> int | None:
    """A GPU/compute instance id from event data; 0xFFFFFFFF (the whole GPU) is None."""
    return None if value == WHOLE_GPU else value


def library_candidates(container_driver_root: str, driver_root: str) -> list[str]:
    """Where ``libnvidia-ml.so.1`` is looked for, in order: the container driver root's library
    directories, then the driver root's. (The default loader path is the last resort, tried by name.)
    """
    out: list[str] = []
    for root in (container_driver_root, driver_root):
        if not root:
            continue
        base = root.rstrip("/")
        for directory in LIBRARY_DIRS:
            path = f"{base}{directory}/{LIBRARY_NAME}"
            if path not in out:
                out.append(path)
    return out


_INIT_CAUSES = {
    ERROR_LIBRARY_NOT_FOUND: "the NVML library could not be loaded",
    ERROR_DRIVER_NOT_LOADED: "the NVIDIA kernel driver is not loaded",
    ERROR_LIB_RM_VERSION_MISMATCH: (
        "driver/library version mismatch: the NVML library does not match the loaded kernel driver "
        "(reboot or reload the driver after an upgrade)"
    ),
    ERROR_NO_PERMISSION: "no permission to use the GPUs (are /dev/nvidia* accessible to this process?)",
}


def init_failure(code: int, library: str, error: str) -> str:
    """One line saying why NVML could not start, naming the library that was loaded."""
    cause = _INIT_CAUSES.get(code, f"NVML initialisation failed: {error}")
    return f"{cause} (NVML error {code}: {error}; library {library})"


def not_found(searched: Sequence[str]) -> str:
    """One line saying the library was not found, listing every place looked at."""
    return f"{LIBRARY_NAME} not found; looked in: {', '.join(searched)}"


#: ``NVML_GPU_FABRIC_STATE_COMPLETED``: the GPU's registration with the NVLink fabric finished.
FABRIC_STATE_COMPLETED = 3


def fabric(cluster_uuid: bytes, status: int, clique_id: int, state: int) -> Fabric | None:
    """go-nvlib's ``IsFabricAttached`` + GFD's ``GetFabricIDs`` over ``nvmlGpuFabricInfo_t``: attached when the
    registration completed with success and the cluster UUID is not all zeros; the UUID in its text form."""
    # nvidia-ml-py declares ``state`` (an unsigned char in nvml.h) as a 32-bit field: only its low byte is ours.
    if (state & 0xFF) != FABRIC_STATE_COMPLETED or status != 0 or not any(cluster_uuid):
        return None
    return Fabric(uuid_text(bytes(cluster_uuid[:16])), int(clique_id))


def uuid_text(raw: bytes) -> str:
    """16 bytes as a UUID's text (``str(uuid.UUID(bytes=raw))``) without importing ``uuid``, which imports
    ``platform``: the plugin's start on NVML reads every GPU's fabric info."""
    if len(raw) != 16:
        raise ValueError(f"a UUID is 16 bytes, got {len(raw)}")
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


#: PCI config space: the status register's "capability list" bit, the first capability's pointer, the vendor-specific
#: capability's id; and NVIDIA's vGPU capability: the "VF" signature after id/next/length, its records from byte 5,
#: the host-driver record (type 0) holding 10 bytes of version and 10 of branch after its type and length bytes.
_PCI_STATUS, _PCI_STATUS_CAP_LIST, _PCI_CAP_POINTER, _PCI_CAP_VENDOR = 0x06, 0x10, 0x34, 0x09
_VGPU_SIGNATURE, _VGPU_RECORDS, _VGPU_FIELD = b"VF", 5, 10


def vgpu_host(config: bytes) -> VgpuHost | None:
    """The vGPU host driver a GPU's PCI config space (sysfs ``config``) names, as GPU feature discovery reads it:
    the vendor-specific capability with the ``VF`` signature, then its host-driver record; None when the GPU is
    no vGPU, or the config space is cut short (an unprivileged reader sees 64 bytes, GFD needs 256)."""
    if len(config) < 256 or not config[_PCI_STATUS] & _PCI_STATUS_CAP_LIST:
        return None
    seen: set[int] = set()
    pos = config[_PCI_CAP_POINTER]
    while pos and pos not in seen and pos + 2 < len(config) and config[pos] != 0xFF:
        seen.add(pos)
        if config[pos] == _PCI_CAP_VENDOR:
            return _vgpu_record(config[pos : pos + config[pos + 2]])
        pos = config[pos + 1]
    return None


def _vgpu_record(capability: bytes) -> VgpuHost | None:
    if capability[3:5] != _VGPU_SIGNATURE:
        return None
    pos = _VGPU_RECORDS
    while pos < len(capability) and capability[pos] != 0:
        step = capability[pos + 1] if pos + 1 < len(capability) else 0
        if step == 0:
            return None  # a record of no length never ends
        pos += step
    end = pos + 2 + 2 * _VGPU_FIELD
    if pos >= len(capability) or end > len(capability):
        return None
    version = capability[pos + 2 : pos + 2 + _VGPU_FIELD].strip(b"\0").decode(errors="replace")
    branch = capability[pos + 2 + _VGPU_FIELD : end].strip(b"\0").decode(errors="replace")
    return VgpuHost(version, branch)
