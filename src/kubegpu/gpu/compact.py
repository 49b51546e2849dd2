"""The compact machine profile form: its schema, the MIG profile table, and its expansion into a Machine.

Owns what ``gpu/profiles/<name>.yaml`` may say (GPU defaults, a PCIe path per GPU,
NVLink pairs, MIG layouts; checked with :mod:`kubegpu.common.validation`, every
problem named by its key path), the MIG profiles of each GPU product, the stable
simulated UUIDs, and :func:`expand`. :mod:`kubegpu.gpu.profiles` reads files and
imports this module only for a profile that is not already expanded (the shipped
ones come with their canonical JSON), so a plugin's start does not build these
classes. Must not read files.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubegpu.common.validation import (
    Check,
    Invalid,
    Issue,
    Loc,
    after,
    checked,
    model,
    nullable,
    strict_bool,
    strict_int,
    strict_str,
    tuple_of,
    validate,
)
from kubegpu.gpu import errors
from kubegpu.gpu.model import Fabric, Gpu, Machine, MigDevice, PcieLink, Topology, VgpuHost, parse_compute_capability

#: The namespace of :func:`stable_uuid` (uuid5).
_UUID_NAMESPACE = "0b4b1f0e-6a57-4d5c-9f4e-6b7562656770"


@dataclass(frozen=True)
class MigProfileSpec:
    """Size and engines of one MIG profile on one GPU product."""

    memory_mib: int
    multiprocessors: int
    gi_slices: int
    ci_slices: int
    copy_engines: int
    decoders: int
    jpeg_engines: int
    ofa_engines: int


def _spec(mem: int, sms: int, gi: int, ci: int, ce: int, dec: int, jpg: int = 0, ofa: int = 0) -> MigProfileSpec:
    return MigProfileSpec(mem, sms, gi, ci, ce, dec, jpg, ofa)


#: MIG profiles per product (memory in MiB as NVML reports the GPU instance).
MIG_PROFILES: dict[str, dict[str, MigProfileSpec]] = {
    "NVIDIA A100-SXM4-80GB": {
        "1g.10gb": _spec(9856, 14, 1, 1, 1, 0),
        "1g.10gb+me": _spec(9856, 14, 1, 1, 1, 1, 1, 1),
        "1g.20gb": _spec(19968, 14, 1, 1, 1, 1),
        "2g.20gb": _spec(19968, 28, 2, 2, 2, 1),
        "3g.40gb": _spec(40192, 42, 3, 3, 3, 2),
        "4g.40gb": _spec(40192, 56, 4, 4, 4, 2),
        "7g.80gb": _spec(80384, 98, 7, 7, 7, 5, 1, 1),
        "1c.2g.20gb": _spec(19968, 14, 2, 1, 2, 1),
    },
    "NVIDIA A100-SXM4-40GB": {
        "1g.5gb": _spec(4864, 14, 1, 1, 1, 0),
        "1g.5gb+me": _spec(4864, 14, 1, 1, 1, 1, 1, 1),
        "1g.10gb": _spec(9856, 14, 1, 1, 1, 1),
        "2g.10gb": _spec(9856, 28, 2, 2, 2, 1),
        "3g.20gb": _spec(19968, 42, 3, 3, 3, 2),
        "4g.20gb": _spec(19968, 56, 4, 4, 4, 2),
        "7g.40gb": _spec(40192, 98, 7, 7, 7, 5, 1, 1),
    },
    "NVIDIA H100 80GB HBM3": {
        "1g.10gb": _spec(9984, 16, 1, 1, 1, 1, 1),
        "1g.20gb": _spec(19968, 16, 1, 1, 1, 1, 1),
        "2g.20gb": _spec(19968, 32, 2, 2, 2, 2, 2),
        "3g.40gb": _spec(40448, 60, 3, 3, 3, 3, 3),
        "4g.40gb": _spec(40448, 64, 4, 4, 4, 4, 4),
        "7g.80gb": _spec(80896, 132, 7, 7, 8, 7, 7, 1),
    },
    "NVIDIA H200": {
        "1g.18gb": _spec(16896, 16, 1, 1, 1, 1, 1),
        "1g.35gb": _spec(33536, 16, 1, 1, 1, 1, 1),
        "2g.35gb": _spec(33536, 32, 2, 2, 2, 2, 2),
        "3g.71gb": _spec(67840, 60, 3, 3, 3, 3, 3),
        "4g.71gb": _spec(67840, 64, 4, 4, 4, 4, 4),
        "7g.141gb": _spec(135424, 132, 7, 7, 8, 7, 7, 1),
    },
}


def _number(value: Any, loc: Loc, issues: list[Issue]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        issues.append(Issue(loc, "Input should be a valid number"))
    return value


def _text(value: Any, loc: Loc, issues: list[Issue]) -> Any:
    """A string, or a scalar YAML read as a number (``12.4``) taken as its text."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        issues.append(Issue(loc, "Input should be a valid string"))
        return value
    return str(value)


def _any(value: Any, loc: Loc, issues: list[Issue]) -> Any:
    return value


def _non_empty(value: tuple[Any, ...]) -> tuple[Any, ...]:
    if not value:
        raise ValueError("must not be empty")
    return value


def _opt(check: Check) -> dict[str, Any]:
    return checked(nullable(check))


@dataclass(frozen=True, kw_only=True)
class _GpuFields:
    """The per-GPU keys a profile may give in ``gpu:`` (defaults) or in a ``gpus[]`` entry."""

    product_name: str | None = field(default=None, metadata=_opt(strict_str))
    memory_mib: int | None = field(default=None, metadata=_opt(strict_int))
    compute_capability: str | None = field(default=None, metadata=_opt(_text))
    mig_capable: bool | None = field(default=None, metadata=_opt(strict_bool))
    power_limit_w: float | None = field(default=None, metadata=_opt(_number))
    max_sm_clock_mhz: int | None = field(default=None, metadata=_opt(strict_int))
    max_mem_clock_mhz: int | None = field(default=None, metadata=_opt(strict_int))
    multiprocessors: int | None = field(default=None, metadata=_opt(strict_int))
    pci_class: int | None = field(default=None, metadata=_opt(strict_int))


@dataclass(frozen=True, kw_only=True)
class _GpuEntry(_GpuFields):
    """One ``gpus[]`` entry: where the GPU sits, and anything that differs from the defaults."""

    pci_bus_id: str = field(metadata=checked(strict_str))
    pcie: tuple[str, ...] = field(metadata=checked(after(tuple_of(strict_str), _non_empty)))
    numa: int | None = field(default=None, metadata=_opt(strict_int))
    minor: int | None = field(default=None, metadata=_opt(strict_int))
    board: str | None = field(default=None, metadata=_opt(_text))
    mig: tuple[str, ...] = field(default=(), metadata=checked(tuple_of(strict_str)))
    mig_enabled: bool | None = field(default=None, metadata=_opt(strict_bool))
    uuid: str | None = field(default=None, metadata=_opt(strict_str))

    def value(self, defaults: _GpuFields, name: str) -> Any:
        """This entry's value of a per-GPU key, else the defaults'."""
        own = getattr(self, name)
        return getattr(defaults, name) if own is None else own


@dataclass(frozen=True, kw_only=True)
class _NvSwitch:
    fabric: str = field(metadata=checked(strict_str))
    links: int = field(metadata=checked(strict_int))


@dataclass(frozen=True, kw_only=True)
class _NvlinkFabric:
    cluster_uuid: str = field(metadata=checked(strict_str))
    clique_id: int = field(metadata=checked(strict_int))


@dataclass(frozen=True, kw_only=True)
class _Vgpu:
    host_driver_version: str = field(metadata=checked(_text))
    host_driver_branch: str = field(metadata=checked(_text))


@dataclass(frozen=True, kw_only=True)
class _Profile:
    """A compact profile document (module docstring), checked with the project's one validator."""

    name: str = field(metadata=checked(strict_str))
    description: str = field(default="", metadata=checked(_text))
    machine_type: str = field(default="unknown", metadata=checked(_text))
    driver_version: str = field(default="550.107.02", metadata=checked(_text))
    cuda_driver_version: str = field(default="12.4", metadata=checked(_text))
    gpu: _GpuFields = field(metadata=checked(model(_GpuFields)))
    gpus: tuple[_GpuEntry, ...] = field(metadata=checked(after(tuple_of(model(_GpuEntry)), _non_empty)))
    nvlink: Any = field(default=None, metadata=checked(_any))
    """``"i-j": count`` pairs; their rules need the GPU count, so they are checked on expansion."""
    nvswitch: _NvSwitch | None = field(default=None, metadata=_opt(model(_NvSwitch)))
    nvlink_fabric: _NvlinkFabric | None = field(default=None, metadata=_opt(model(_NvlinkFabric)))
    vgpu: _Vgpu | None = field(default=None, metadata=_opt(model(_Vgpu)))


def _cc(value: Any, where: str) -> tuple[int, int]:
    try:
        return parse_compute_capability(value)
    except ValueError as exc:
        raise errors.ProfileError(f"{where}: {exc}") from None


def _pcie_relation(a: Sequence[str], b: Sequence[str], board_a: str | None, board_b: str | None) -> PcieLink:
    if board_a is not None and board_a == board_b:
        return PcieLink.SAME_BOARD
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return PcieLink.CROSS_CPU
    if common == 1:
        return PcieLink.SAME_CPU
    if common == 2:
        return PcieLink.HOST_BRIDGE
    if common == len(a) == len(b):
        return PcieLink.SINGLE_SWITCH
    return PcieLink.MULTI_SWITCH


def stable_uuid(prefix: str, key: str) -> str:
    """A deterministic NVIDIA-style UUID (``GPU-…``/``MIG-…``) for a simulated device."""
    return f"{prefix}-{uuid.uuid5(uuid.UUID(_UUID_NAMESPACE), key)}"


def expand(data: Mapping[str, Any], source: str = "<profile>") -> Machine:
    """Expand a compact profile mapping (see module docstring) into a :class:`Machine`."""
    try:
        doc = validate(_Profile, data)
    except Invalid as exc:
        raise errors.ProfileError(f"{source}: {exc}") from None
    name = doc.name
    fabric = doc.nvswitch.fabric if doc.nvswitch is not None else None
    fabric_links = doc.nvswitch.links if doc.nvswitch is not None else 0
    nvlink_fabric = _fabric(doc.nvlink_fabric, source)
    vgpu = VgpuHost(doc.vgpu.host_driver_version, doc.vgpu.host_driver_branch) if doc.vgpu is not None else None

    gpus: list[Gpu] = []
    paths: list[list[str]] = []
    boards: list[str | None] = []
    numa: list[int | None] = []
    for i, raw in enumerate(doc.gpus):
        where = f"{source}: gpus[{i}]"

        def need(key: str, entry: _GpuEntry = raw, where: str = where) -> Any:
            value = entry.value(doc.gpu, key)
            if value is None:
                raise errors.ProfileError(f"{where}.{key}: required key is missing (here or in gpu)")
            return value

        paths.append(list(raw.pcie))
        boards.append(raw.board)
        numa.append(raw.numa)
        product = str(need("product_name"))
        uuid = raw.uuid or stable_uuid("GPU", f"{name}/gpu/{i}")
        mig_enabled = bool(raw.mig) if raw.mig_enabled is None else raw.mig_enabled
        mig_devices = _mig_devices(name, i, uuid, product, list(raw.mig), where)
        mig_capable = bool(raw.value(doc.gpu, "mig_capable"))

        def optional(key: str, default: Any, entry: _GpuEntry = raw) -> Any:
            value = entry.value(doc.gpu, key)
            return default if value is None else value

        gpus.append(
            Gpu(
                index=i,
                minor=i if raw.minor is None else raw.minor,
                uuid=uuid,
                product_name=product,
                memory_mib=int(need("memory_mib")),
                pci_bus_id=raw.pci_bus_id,
                numa_node=raw.numa,
                compute_capability=_cc(need("compute_capability"), where),
                mig_capable=mig_capable,
                mig_enabled=mig_enabled,
                mig_devices=mig_devices,
                power_limit_w=float(optional("power_limit_w", 300.0)),
                max_sm_clock_mhz=int(optional("max_sm_clock_mhz", 1410)),
                max_mem_clock_mhz=int(optional("max_mem_clock_mhz", 1215)),
                multiprocessors=int(optional("multiprocessors", 108)),
                pci_class=int(optional("pci_class", 0x0302)),
                serial=f"{1320000000000 + i}",
                vbios_version="92.00.45.00.05",
                fabric=nvlink_fabric,
                vgpu=vgpu,
            )
        )
        if mig_enabled and not mig_capable:
            raise errors.ProfileError(f"{where}: MIG enabled on a GPU that is not mig_capable")

    n = len(gpus)
    nvlink = [[0] * n for _ in range(n)]
    links = doc.nvlink or {}
    if not isinstance(links, Mapping):
        raise errors.ProfileError(f"{source}: nvlink: Input should be a valid dictionary")
    for key, count in links.items():
        where = f"{source}: nvlink.{key}"
        try:
            a, b = (int(x) for x in str(key).split("-"))
        except ValueError:
            raise errors.ProfileError(f"{where}: key must look like 'i-j'") from None
        if not (0 <= a < n and 0 <= b < n) or a == b:
            raise errors.ProfileError(f"{where}: GPU index out of range or a self link")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise errors.ProfileError(f"{where}: link count must be a non-negative int, got {count!r}")
        nvlink[a][b] = nvlink[b][a] = count
    pcie = tuple(
        tuple(None if i == j else _pcie_relation(paths[i], paths[j], boards[i], boards[j]) for j in range(n))
        for i in range(n)
    )
    topology = Topology(
        pcie=pcie,
        nvlink=tuple(tuple(r) for r in nvlink),
        numa=tuple(numa),
        nvswitch=tuple(fabric for _ in range(n)),
        nvswitch_links=tuple(fabric_links for _ in range(n)),
    )
    try:
        return Machine(
            name=name,
            description=doc.description,
            gpus=tuple(gpus),
            topology=topology,
            driver_version=doc.driver_version,
            cuda_driver_version=doc.cuda_driver_version,
            machine_type=doc.machine_type,
        )
    except ValueError as exc:
        raise errors.ProfileError(f"{source}: {exc}") from exc


def _fabric(doc: _NvlinkFabric | None, source: str) -> Fabric | None:
    if doc is None:
        return None
    try:
        cluster = str(uuid.UUID(doc.cluster_uuid))
    except ValueError:
        raise errors.ProfileError(f"{source}: nvlink_fabric.cluster_uuid: {doc.cluster_uuid!r} is not a UUID") from None
    if doc.clique_id < 0:
        raise errors.ProfileError(f"{source}: nvlink_fabric.clique_id: must be >= 0, got {doc.clique_id}")
    return Fabric(cluster, doc.clique_id)


def _mig_devices(
    machine: str, gpu_index: int, parent_uuid: str, product: str, layout: list[Any], where: str
) -> tuple[MigDevice, ...]:
    table = MIG_PROFILES.get(product, {})
    devices = []
    for j, profile in enumerate(layout):
        if not isinstance(profile, str) or profile not in table:
            known = ", ".join(table) or "none"
            raise errors.ProfileError(f"{where}.mig[{j}]: unknown MIG profile {profile!r} for {product} ({known})")
        spec = table[profile]
        devices.append(
            MigDevice(
                uuid=stable_uuid("MIG", f"{machine}/gpu/{gpu_index}/mig/{j}"),
                parent_uuid=parent_uuid,
                parent_index=gpu_index,
                index=j,
                profile=profile,
                gi_id=0 if spec.gi_slices == 7 else j + 1,
                ci_id=0,
                memory_mib=spec.memory_mib,
                multiprocessors=spec.multiprocessors,
                gi_slices=spec.gi_slices,
                ci_slices=spec.ci_slices,
                copy_engines=spec.copy_engines,
                decoders=spec.decoders,
                jpeg_engines=spec.jpeg_engines,
                ofa_engines=spec.ofa_engines,
            )
        )
    used = sum(d.gi_slices for d in devices)
    if used > 7:
        raise errors.ProfileError(f"{where}.mig: the layout uses {used} GPU slices; a GPU has 7")
    return tuple(devices)
