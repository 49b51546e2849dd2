"""The hardware model: a machine, its GPUs, MIG devices and the links between GPUs.

Owns the immutable description of what a node holds, the same for every backend
(simulated profiles, NVML): identities (index, minor, UUID, PCI bus id), sizes,
compute capability, MIG layout, NUMA placement and the pairwise topology.
Must not do I/O and must not know about Kubernetes, resources or allocation.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class PcieLink(enum.Enum):
    """How two GPUs reach each other over PCIe: their closest common ancestor.

    Values are the spellings used in topology files; the NVML level each maps
    to is noted (``nvmlDeviceGetTopologyCommonAncestor``).
    """

    SAME_BOARD = "same-board"  # NVML_TOPOLOGY_INTERNAL: two GPUs on one board
    SINGLE_SWITCH = "single-switch"  # NVML_TOPOLOGY_SINGLE: one PCIe switch
    MULTI_SWITCH = "multi-switch"  # NVML_TOPOLOGY_MULTIPLE: several switches, no host bridge
    HOST_BRIDGE = "host-bridge"  # NVML_TOPOLOGY_HOSTBRIDGE: the same host bridge
    SAME_CPU = "same-cpu"  # NVML_TOPOLOGY_NODE: the same CPU / NUMA node
    CROSS_CPU = "cross-cpu"  # NVML_TOPOLOGY_SYSTEM: across the CPU interconnect

    @property
    def smi(self) -> str:
        """The ``nvidia-smi topo -m`` abbreviation."""
        return _SMI[self]


_SMI = {
    PcieLink.SAME_BOARD: "PSB",
    PcieLink.SINGLE_SWITCH: "PIX",
    PcieLink.MULTI_SWITCH: "PXB",
    PcieLink.HOST_BRIDGE: "PHB",
    PcieLink.SAME_CPU: "NODE",
    PcieLink.CROSS_CPU: "SYS",
}


def parse_compute_capability(value: object) -> tuple[int, int]:
    """``'8.0'`` (or ``8.0``) as ``(8, 0)``; ValueError for anything else."""
    try:
        major, minor = str(value).split(".")
        return int(major), int(minor)
    except ValueError:
        raise ValueError(f"compute capability must look like '8.0', got {value!r}") from None


@dataclass(frozen=True)
class Fabric:
    """The multi-node NVLink fabric a GPU is registered with: NVML's GPU fabric info when its state is
    "completed" with status success (GB200 NVL72-like systems; None on GPUs without one, HGX boards included).

    ``cluster_uuid`` is the NVLink domain's UUID in its canonical text form; ``clique_id`` the GPU's clique
    (the GPUs that can reach each other over NVLink) within it.
    """

    cluster_uuid: str
    clique_id: int


@dataclass(frozen=True)
class VgpuHost:
    """What a vGPU guest learns of its host from the GPU's PCI config space: the host driver's version and
    branch (``550.54.16`` / ``r550_40``)."""

    host_driver_version: str
    host_driver_branch: str


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (a GPU instance with one compute instance) on a MIG-enabled GPU.

    ``profile`` is spelled as go-nvlib spells it (``1g.10gb``, ``1c.2g.20gb``,
    ``1g.10gb+me``); the resource name derived from it is the plugin's business.
    """

    uuid: str
    parent_uuid: str
    parent_index: int
    index: int  # position among the parent's MIG devices: the "j" of index "i:j"
    profile: str
    gi_id: int
    ci_id: int
    memory_mib: int
    multiprocessors: int
    gi_slices: int
    ci_slices: int
    copy_engines: int = 1
    decoders: int = 0
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0

    @property
    def id_index(self) -> str:
        """NVIDIA's index string for a MIG device: ``"<parent index>:<mig index>"``."""
        return f"{self.parent_index}:{self.index}"


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as NVML enumerates it."""

    index: int
    minor: int
    uuid: str
    product_name: str
    memory_mib: int
    pci_bus_id: str  # NVML form: 00000000:07:00.0
    numa_node: int | None
    compute_capability: tuple[int, int]
    mig_capable: bool = False
    mig_enabled: bool = False
    mig_devices: tuple[MigDevice, ...] = ()
    power_limit_w: float = 300.0
    max_sm_clock_mhz: int = 1410
    max_mem_clock_mhz: int = 1215
    multiprocessors: int = 108
    pci_class: int = 0x0302  # 0x0302 3D controller (compute), 0x0300 VGA (graphics)
    serial: str = ""
    vbios_version: str = ""
    fabric: Fabric | None = None  # the NVLink fabric it is attached to, None: not fabric-attached
    vgpu: VgpuHost | None = None  # set when this is a vGPU of a virtual machine

    @property
    def device_node(self) -> str:
        """The character device of this GPU, e.g. ``/dev/nvidia3``."""
        return f"/dev/nvidia{self.minor}"

    @property
    def architecture(self) -> str:
        """Architecture family from compute capability, as GPU feature discovery names it."""
        return architecture(self.compute_capability)


def architecture(cc: tuple[int, int]) -> str:
    """Family name for a compute capability (GFD's ``nvidia.com/gpu.family`` values)."""
    major, minor = cc
    if major == 1:
        return "tesla"
    if major == 2:
        return "fermi"
    if major == 3:
        return "kepler"
    if major == 5:
        return "maxwell"
    if major == 6:
        return "pascal"
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ada-lovelace" if minor >= 9 else "ampere"
    if major == 9:
        return "hopper"
    if major in (10, 12):
        return "blackwell"
    if major == 13:
        return "rubin"
    return "undefined"


@dataclass(frozen=True)
class Topology:
    """Pairwise links between the GPUs of one machine, indexed by GPU index.

    ``pcie[i][j]`` is the PCIe relationship (``None`` on the diagonal),
    ``nvlink[i][j]`` the number of direct GPU-to-GPU NVLinks (NVSwitch links
    are not direct: they are in ``nvswitch``), ``nvswitch[i]`` the NVSwitch
    fabric a GPU is attached to (``None`` when none) and ``nvswitch_links[i]``
    how many of its links go to that fabric, ``numa[i]`` its NUMA node.
    """

    pcie: tuple[tuple[PcieLink | None, ...], ...]
    nvlink: tuple[tuple[int, ...], ...]
    numa: tuple[int | None, ...]
    nvswitch: tuple[str | None, ...]
    nvswitch_links: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.numa)

    def __post_init__(self) -> None:
        n = len(self.numa)
        for name, rows in (("pcie", self.pcie), ("nvlink", self.nvlink)):
            if len(rows) != n or any(len(r) != n for r in rows):
                raise ValueError(f"topology: {name} must be a {n}x{n} matrix")
        if len(self.nvswitch) != n or len(self.nvswitch_links) != n:
            raise ValueError(f"topology: nvswitch and nvswitch_links need {n} entries")
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                if self.pcie[i][j] is None:
                    raise ValueError(f"topology: pcie[{i}][{j}] is missing")
                if self.pcie[i][j] != self.pcie[j][i]:
                    raise ValueError(f"topology: pcie[{i}][{j}] and pcie[{j}][{i}] differ")
                if self.nvlink[i][j] != self.nvlink[j][i]:
                    raise ValueError(f"topology: nvlink[{i}][{j}] and nvlink[{j}][{i}] differ")
                if self.nvlink[i][j] < 0:
                    raise ValueError(f"topology: nvlink[{i}][{j}] is negative")

    def same_fabric(self, i: int, j: int) -> bool:
        """True when GPUs ``i`` and ``j`` hang off one NVSwitch fabric."""
        return i != j and self.nvswitch[i] is not None and self.nvswitch[i] == self.nvswitch[j]


@dataclass(frozen=True)
class Machine:
    """A whole node: its GPUs in NVML index order, their topology and host facts."""

    name: str
    description: str
    gpus: tuple[Gpu, ...]
    topology: Topology
    driver_version: str = "550.107.02"
    cuda_driver_version: str = "12.4"  # CUDA driver API version, "major.minor"
    machine_type: str = "unknown"  # DMI product name
    hostname: str = ""
    extras: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.topology.size != len(self.gpus):
            raise ValueError(
                f"machine {self.name}: topology covers {self.topology.size} GPUs, machine has {len(self.gpus)}"
            )
        for position, gpu in enumerate(self.gpus):
            if gpu.index != position:
                raise ValueError(f"machine {self.name}: GPU at position {position} has index {gpu.index}")
        uuids = [g.uuid for g in self.gpus] + [m.uuid for g in self.gpus for m in g.mig_devices]
        if len(set(uuids)) != len(uuids):
            raise ValueError(f"machine {self.name}: UUIDs are not unique")

    def gpu_by_uuid(self, uuid: str) -> Gpu | None:
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        return None

    def mig_devices(self) -> tuple[MigDevice, ...]:
        return tuple(m for g in self.gpus for m in g.mig_devices)
