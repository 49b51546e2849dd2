"""Harness for the fake libnvidia-ml.so.1: build it, stage a node around it, inject events and errors.

Owns the test-side half of the fake's interface: building the library once per
source version (cached under the temp dir, keyed by a hash of the sources), a
staged node — driver root holding the library as a driver installs it
(``libnvidia-ml.so.1`` and ``libnvidia-ml.so.<driver version>``, plus
``libcuda.so.<driver version>`` and its ``libcuda.so.1`` link, which CDI spec
generation looks for), the machine's canonical JSON
(``kubegpu.gpu.profiles.export_json``, the simulated backend's own truth),
a sysfs tree with NUMA nodes, PCI classes and config spaces and the DMI product name, and the
control directory — and writing control-journal lines. Must not fake anything
above the C library: the code under test talks to the library through its own ctypes binding
(``kubegpu.gpu.nvml.binding``), the fake's own tests through nvidia-ml-py.

Control journal (``$KUBEGPU_FAKE_NVML_CONTROL/events``, one line each, appended):
``xid GPU XID [GI CI]``, ``ecc-sbe GPU``, ``ecc-dbe GPU``, ``lost GPU``,
``recover GPU``, ``wait-error CODE``, ``register-error GPU CODE``.
``$KUBEGPU_FAKE_NVML_CONTROL/init-error`` holding an NVML code makes nvmlInit fail.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from kubegpu.gpu import profiles
from kubegpu.gpu.model import Machine, VgpuHost
from kubegpu.gpu.nvml import NvmlBackend, decode

FAKE_DIR = Path(__file__).resolve().parent
SOURCES = ("api.c", "mig.c", "state.c", "json.c", "cuda_stub.c", "json.h", "fake.h", "nvml_abi.h", "build.sh")

# NVML return codes the tests inject.
NOT_SUPPORTED = decode.ERROR_NOT_SUPPORTED
NO_PERMISSION = decode.ERROR_NO_PERMISSION
DRIVER_NOT_LOADED = decode.ERROR_DRIVER_NOT_LOADED
LIB_RM_VERSION_MISMATCH = decode.ERROR_LIB_RM_VERSION_MISMATCH
UNKNOWN = decode.ERROR_UNKNOWN


#: The libcuda stub build.sh writes next to the library (exports nothing; staged as libcuda.so.<driver version>).
CUDA_STUB = "libcuda.so.1"


class NoCompiler(RuntimeError):
    """There is no C compiler to build the fake library with."""


def compiler() -> str | None:
    """The C compiler build.sh will use, or None."""
    return shutil.which(os.environ.get("CC", "cc"))


def library() -> Path:
    """The built fake library, building it when these sources were not built before."""
    if compiler() is None:
        raise NoCompiler(f"no C compiler ({os.environ.get('CC', 'cc')}) to build the fake libnvidia-ml.so.1")
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((FAKE_DIR / name).read_bytes())
    out = Path(tempfile.gettempdir()) / f"kubegpu-fake-nvml-{digest.hexdigest()[:16]}"
    lib = out / decode.LIBRARY_NAME
    if not lib.exists() or not (out / CUDA_STUB).exists():
        subprocess.run(["sh", str(FAKE_DIR / "build.sh"), str(out)], check=True, capture_output=True, text=True)
    return lib


@dataclass(frozen=True)
class FakeNode:
    """One staged node: pass ``driver_root`` and ``sysfs_root`` to the backend and ``env`` to processes."""

    root: Path
    machine: Machine
    driver_root: Path
    sysfs_root: Path
    control: Path
    profile_json: Path

    @property
    def library_dir(self) -> Path:
        return self.driver_root / "usr" / "lib" / "x86_64-linux-gnu"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to see this machine through the fake library."""
        return {
            "KUBEGPU_FAKE_NVML_PROFILE": str(self.profile_json),
            "KUBEGPU_FAKE_NVML_CONTROL": str(self.control),
        }

    def inject(self, line: str) -> None:
        """Append one control line in a single write, so a reader never sees half of it."""
        fd = os.open(self.control / "events", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line.rstrip("\n") + "\n").encode())
        finally:
            os.close(fd)

    def xid(self, gpu: int, xid: int, gi: int | None = None, ci: int | None = None) -> None:
        scope = "" if gi is None or ci is None else f" {gi} {ci}"
        self.inject(f"xid {gpu} {xid}{scope}")

    def ecc(self, gpu: int, double_bit: bool = True) -> None:
        self.inject(f"ecc-{'dbe' if double_bit else 'sbe'} {gpu}")

    def lost(self, gpu: int) -> None:
        self.inject(f"lost {gpu}")

    def recover(self, gpu: int) -> None:
        self.inject(f"recover {gpu}")

    def wait_error(self, code: int = UNKNOWN) -> None:
        self.inject(f"wait-error {code}")

    def register_error(self, gpu: int, code: int) -> None:
        self.inject(f"register-error {gpu} {code}")

    def init_error(self, code: int | None) -> None:
        path = self.control / "init-error"
        if code is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(f"{code}\n")


def pci_config(vgpu: VgpuHost | None) -> bytes:
    """A GPU's 256-byte PCI config space as sysfs shows it to a privileged reader: NVIDIA's vendor id and, for a
    vGPU, a capability list (power management, then NVIDIA's vendor-specific capability: the "VF" signature, one
    record of another type, then the host-driver record with the version and branch, 10 NUL-padded bytes each)."""
    config = bytearray(256)
    config[0:2] = (0x10DE).to_bytes(2, "little")
    if vgpu is None:
        return bytes(config)
    config[0x06] |= 0x10  # status: has a capability list
    config[0x34] = 0x60  # the first capability
    config[0x60:0x62] = bytes([0x01, 0xC8])  # power management, next at 0xC8
    other = bytes([0x16, 3, 0xAA])  # a record of type 0x16, 3 bytes long
    host = bytes([0x00, 22]) + vgpu.host_driver_version.encode().ljust(10, b"\0")
    host += vgpu.host_driver_branch.encode().ljust(10, b"\0")
    body = bytes([0x09, 0x00, 0]) + b"VF" + other + host
    config[0xC8 : 0xC8 + len(body)] = body
    config[0xCA] = len(body)
    return bytes(config)


def stage(root: Path, machine: Machine | str, lib: Path | None = None) -> FakeNode:
    """A node under ``root`` showing ``machine`` (a Machine or a profile name/path) through ``lib``."""
    machine = machine if isinstance(machine, Machine) else profiles.load(machine)
    root.mkdir(parents=True, exist_ok=True)
    node = FakeNode(
        root=root,
        machine=machine,
        driver_root=root / "driver",
        sysfs_root=root / "sys",
        control=root / "control",
        profile_json=root / f"{machine.name}.json",
    )
    node.profile_json.write_text(profiles.export_json(machine))
    node.control.mkdir(exist_ok=True)
    node.library_dir.mkdir(parents=True, exist_ok=True)
    nvml = lib if lib is not None else library()
    version = machine.driver_version
    # Symlinks, not copies: one process loads one NVML library, and every node then resolves to the same file.
    links = {
        decode.LIBRARY_NAME: nvml,
        f"libnvidia-ml.so.{version}": nvml,
        f"libcuda.so.{version}": nvml.parent / CUDA_STUB,
        "libcuda.so.1": Path(f"libcuda.so.{version}"),  # the soname link, relative as ldconfig makes it
    }
    for name, target in links.items():
        link = node.library_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    for gpu in machine.gpus:
        device = node.sysfs_root / "bus" / "pci" / "devices" / decode.sysfs_pci_name(gpu.pci_bus_id)
        device.mkdir(parents=True, exist_ok=True)
        (device / "numa_node").write_text(f"{-1 if gpu.numa_node is None else gpu.numa_node}\n")
        (device / "class").write_text(f"0x{gpu.pci_class:04x}00\n")
        (device / "config").write_bytes(pci_config(gpu.vgpu))
    dmi = node.sysfs_root / "class" / "dmi" / "id"
    dmi.mkdir(parents=True, exist_ok=True)
    (dmi / "product_name").write_text(f"{machine.machine_type}\n")
    return node


#: The ``nvml_machine`` fixture: stage a machine (profile name or Machine) and open a backend on it.
OpenMachine = Callable[..., tuple[FakeNode, NvmlBackend]]


#: MIG-capable products the fake has profile tables for: (memory MiB, compute capability) of the whole GPU.
MIG_PRODUCTS = {
    "NVIDIA A100-SXM4-80GB": (81920, "8.0"),
    "NVIDIA A100-SXM4-40GB": (40960, "8.0"),
    "NVIDIA H100 80GB HBM3": (81559, "9.0"),
    "NVIDIA H200": (143771, "9.0"),
}


def mig_machine(root: Path, product: str, layouts: list[list[str]]) -> Machine:
    """A machine of one GPU of ``product`` per MIG layout (empty: MIG off), written as a profile under ``root``."""
    memory, cc = MIG_PRODUCTS[product]
    name = "mig-" + "".join(c for c in product.lower() if c.isalnum())
    gpus = [
        {"pci_bus_id": f"00000000:{0x10 + i:02X}:00.0", "numa": 0, "pcie": ["cpu0", f"hb{i}"], "mig": layout}
        for i, layout in enumerate(layouts)
    ]
    for gpu in gpus:
        if not gpu["mig"]:
            del gpu["mig"]
    doc = {
        "name": name,
        "description": f"{product} with MIG",
        "machine_type": "test",
        "driver_version": "550.107.02",
        "cuda_driver_version": "12.4",
        "gpu": {
            "product_name": product,
            "memory_mib": memory,
            "compute_capability": cc,
            "mig_capable": True,
            "power_limit_w": 400,
            "max_sm_clock_mhz": 1410,
            "max_mem_clock_mhz": 1593,
            "multiprocessors": 108,
        },
        "gpus": gpus,
    }
    path = root / "profiles" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return profiles.load(str(path))
