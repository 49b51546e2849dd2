"""Machine profiles: simulated machines shipped as YAML data, and the canonical JSON form.

Owns reading a profile (``gpu/profiles/<name>.yaml``, compact: GPU defaults, a
PCIe path per GPU, NVLink pairs, MIG layouts) into a :class:`~kubegpu.gpu.model.Machine`,
and converting machines to and from the canonical, fully expanded JSON form
that the fake NVML library and ``--topology`` files read. Must not simulate
behaviour over time (that is :mod:`kubegpu.gpu.simulated`) and must not talk to NVML.

Each shipped profile has its canonical expansion precomputed beside it
(``gpu/profiles/canonical/<name>.json``, written by :func:`write_canonical`), tagged
with the CRC-32 of the YAML it came from: a plugin starting on a shipped profile
reads that JSON and never imports PyYAML (~16 ms of its start). A YAML file whose
CRC no longer matches its twin is parsed as before, so a stale twin costs time,
never a wrong machine; ``tests/gpu/test_profiles.py`` keeps the twins current.

Profile format (checked with :mod:`kubegpu.common.validation`, the project's one validator: every
problem is named by its key path, unknown keys included)::

    name: dgx-a100                 # must equal the file name
    description: text
    machine_type: NVIDIA DGX A100  # DMI product name
    driver_version: 550.107.02
    cuda_driver_version: "12.4"
    gpu: {product_name, memory_mib, compute_capability: "8.0", ...}   # defaults
    nvswitch: {fabric: fabric0, links: 12}   # optional: every GPU on one fabric
    gpus:
      - {pci_bus_id: "00000000:07:00.0", numa: 0, pcie: [cpu0, hb0, sw0, sw0a],
         minor: 0, board: b0, mig: [1g.10gb, 2g.20gb]}   # minor/board/mig optional
    nvlink: {"0-3": 2, "0-1": 1}   # direct GPU-to-GPU link counts

PCIe relationships come from the paths: no common element is cross-CPU, only
the CPU in common is same-CPU, CPU and host bridge is host-bridge, a common
switch is single-switch when both GPUs sit directly under it and multi-switch
otherwise; GPUs with the same ``board`` are same-board.
"""

from __future__ import annotations

import functools
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubegpu.common.validation import (
    MISSING_KEY,
    UNKNOWN_KEY,
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
from kubegpu.gpu.model import Gpu, Machine, MigDevice, PcieLink, Topology

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


#: Keys of the ``--topology`` JSON form.
_TOPOLOGY_KEYS = {"gpus", "pcie", "nvlink", "numa", "nvswitch", "nvswitch_links"}


def profiles_dir() -> Path:
    """The directory of the shipped profiles inside the installed package (a plain directory: the wheel is
    installed unzipped, so ``importlib.resources`` and what it imports are not needed at start)."""
    return Path(__file__).parent / "profiles"


def canonical_path(name: str) -> Path:
    """Where the precomputed canonical JSON of shipped profile ``name`` lives."""
    return profiles_dir() / "canonical" / f"{name}.json"


def canonical_document(name: str) -> str:
    """The text :func:`write_canonical` writes for shipped profile ``name``: its YAML's CRC-32 and expansion."""
    raw = (profiles_dir() / f"{name}.yaml").read_bytes()
    machine = _load_path(profiles_dir() / f"{name}.yaml", name, use_canonical=False)
    document = {"yaml_crc32": zlib.crc32(raw), "machine": machine_to_dict(machine)}
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def write_canonical() -> list[Path]:
    """Write the canonical twin of every shipped profile (``python -m kubegpu.gpu.profiles``); the paths written."""
    written = []
    for name in available():
        path = canonical_path(name)
        path.parent.mkdir(exist_ok=True)
        path.write_text(canonical_document(name), encoding="utf-8")
        written.append(path)
    return written


def available() -> list[str]:
    """Names of the shipped profiles, sorted."""
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def load(name_or_path: str) -> Machine:
    """Load a shipped profile by name, or a profile YAML / canonical JSON file by path.

    A shipped profile is parsed once per process (the package's files do not change
    under it; a :class:`Machine` is immutable); a file is read anew at every call.
    Raises :class:`~kubegpu.gpu.errors.ProfileError` naming the file and key on bad input.
    """
    if name_or_path in available():
        return _load_shipped(name_or_path)
    return _load_path(Path(name_or_path), name_or_path)


@functools.cache
def _load_shipped(name: str) -> Machine:
    return _load_path(profiles_dir() / f"{name}.yaml", name, use_canonical=True)


def _canonical_twin(name: str, raw: bytes) -> Machine | None:
    """The precomputed machine of shipped profile ``name`` when its twin was made from exactly ``raw``."""
    try:
        document = json.loads(canonical_path(name).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("yaml_crc32") != zlib.crc32(raw):
        return None
    return machine_from_dict(document["machine"], source=str(canonical_path(name)))


def _load_path(path: Path, name_or_path: str, use_canonical: bool = False) -> Machine:
    if not path.is_file():
        raise errors.ProfileError(
            f"unknown machine profile {name_or_path!r}: not a shipped profile ({', '.join(available())}) and not a file"
        )
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise errors.ProfileError(f"{path}: not a machine profile (not UTF-8 text)") from None
    except OSError as exc:
        raise errors.ProfileError(f"{path}: cannot read: {exc.strerror}") from exc
    if use_canonical and (machine := _canonical_twin(path.stem, raw)) is not None:
        return machine
    try:
        data = json.loads(text) if path.suffix == ".json" else _parse_yaml(text)
    except (ValueError, RecursionError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise errors.ProfileError(f"{path}: not valid YAML/JSON: {first}") from None
    if not isinstance(data, dict):
        raise errors.ProfileError(f"{path}: top level must be a mapping")
    if "topology" in data:  # canonical JSON
        return machine_from_dict(data, source=str(path))
    return from_profile(data, source=str(path))


class _YamlError(ValueError):
    """PyYAML's error, as a ValueError, so that callers need not import PyYAML to catch it."""


def _parse_yaml(text: str) -> Any:
    """The YAML document in ``text``, with libyaml's safe loader when PyYAML was built with it (several times
    faster), else the pure-Python one. PyYAML is imported here, on the first profile that needs it."""
    import yaml

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise _YamlError(str(exc) or type(exc).__name__) from None


def _need(data: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise errors.ProfileError(f"{where}.{key}: {MISSING_KEY}")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise errors.ProfileError(f"{where}.{key}: expected {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _check_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            raise errors.ProfileError(f"{where}.{key}: {UNKNOWN_KEY}")


def _cc(value: Any, where: str) -> tuple[int, int]:
    try:
        major, minor = str(value).split(".")
        return int(major), int(minor)
    except ValueError:
        raise errors.ProfileError(f"{where}: compute capability must look like '8.0', got {value!r}") from None


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
    import uuid  # only when a profile is expanded (the shipped ones come expanded)

    return f"{prefix}-{uuid.uuid5(uuid.UUID(_UUID_NAMESPACE), key)}"


def from_profile(data: Mapping[str, Any], source: str = "<profile>") -> Machine:
    """Expand a compact profile mapping (see module docstring) into a :class:`Machine`."""
    try:
        doc = validate(_Profile, data)
    except Invalid as exc:
        raise errors.ProfileError(f"{source}: {exc}") from None
    name = doc.name
    fabric = doc.nvswitch.fabric if doc.nvswitch is not None else None
    fabric_links = doc.nvswitch.links if doc.nvswitch is not None else 0

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


# --- canonical JSON -------------------------------------------------------------------------


def topology_to_dict(t: Topology) -> dict[str, Any]:
    """The ``--topology FILE`` JSON form of a topology."""
    return {
        "gpus": t.size,
        "pcie": [[None if link is None else link.value for link in row] for row in t.pcie],
        "nvlink": [list(row) for row in t.nvlink],
        "numa": list(t.numa),
        "nvswitch": list(t.nvswitch),
        "nvswitch_links": list(t.nvswitch_links),
    }


def topology_from_dict(data: Mapping[str, Any], source: str = "<topology>") -> Topology:
    """Read the ``--topology FILE`` JSON form; errors name the key and position."""
    if not isinstance(data, Mapping):
        raise errors.ProfileError(f"{source}: top level must be an object")
    _check_keys(data, _TOPOLOGY_KEYS, source)
    n = _need(data, "gpus", source, int)
    if n < 1:
        raise errors.ProfileError(f"{source}.gpus: must be at least 1, got {n}")
    pcie_raw = _need(data, "pcie", source, list)
    nvlink_raw = _need(data, "nvlink", source, list)
    for key, rows in (("pcie", pcie_raw), ("nvlink", nvlink_raw)):
        if len(rows) != n or any(not isinstance(r, list) or len(r) != n for r in rows):
            raise errors.ProfileError(f"{source}.{key}: must be a {n}x{n} matrix")
    pcie: list[tuple[PcieLink | None, ...]] = []
    for i, row in enumerate(pcie_raw):
        out: list[PcieLink | None] = []
        for j, cell in enumerate(row):
            if i == j:
                out.append(None)
                continue
            try:
                out.append(PcieLink(cell))
            except ValueError:
                names = ", ".join(p.value for p in PcieLink)
                raise errors.ProfileError(f"{source}.pcie[{i}][{j}]: {cell!r} is not one of {names}") from None
        pcie.append(tuple(out))
    nvlink: list[tuple[int, ...]] = []
    for i, row in enumerate(nvlink_raw):
        for j, cell in enumerate(row):
            if not isinstance(cell, int) or isinstance(cell, bool) or cell < 0:
                raise errors.ProfileError(f"{source}.nvlink[{i}][{j}]: expected a link count, got {cell!r}")
        nvlink.append(tuple(0 if i == j else c for j, c in enumerate(row)))
    numa = data.get("numa") or [None] * n
    nvswitch = data.get("nvswitch") or [None] * n
    links = data.get("nvswitch_links") or [(0 if s is None else 12) for s in nvswitch]
    for key, values in (("numa", numa), ("nvswitch", nvswitch), ("nvswitch_links", links)):
        if not isinstance(values, list) or len(values) != n:
            raise errors.ProfileError(f"{source}.{key}: must be a list of {n} entries")
    for i, node in enumerate(numa):
        if node is not None and (not isinstance(node, int) or isinstance(node, bool)):
            raise errors.ProfileError(f"{source}.numa[{i}]: expected int or null, got {node!r}")
    try:
        return Topology(
            pcie=tuple(pcie),
            nvlink=tuple(nvlink),
            numa=tuple(numa),
            nvswitch=tuple(None if s is None else str(s) for s in nvswitch),
            nvswitch_links=tuple(int(x) for x in links),
        )
    except ValueError as exc:
        raise errors.ProfileError(f"{source}: {exc}") from exc


def machine_to_dict(m: Machine) -> dict[str, Any]:
    """The canonical, fully expanded JSON form of a machine (what the fake NVML reads)."""
    return {
        "name": m.name,
        "description": m.description,
        "machine_type": m.machine_type,
        "driver_version": m.driver_version,
        "cuda_driver_version": m.cuda_driver_version,
        "gpus": [
            {
                "index": g.index,
                "minor": g.minor,
                "uuid": g.uuid,
                "product_name": g.product_name,
                "memory_mib": g.memory_mib,
                "pci_bus_id": g.pci_bus_id,
                "numa_node": g.numa_node,
                "compute_capability": f"{g.compute_capability[0]}.{g.compute_capability[1]}",
                "mig_capable": g.mig_capable,
                "mig_enabled": g.mig_enabled,
                "power_limit_w": g.power_limit_w,
                "max_sm_clock_mhz": g.max_sm_clock_mhz,
                "max_mem_clock_mhz": g.max_mem_clock_mhz,
                "multiprocessors": g.multiprocessors,
                "pci_class": g.pci_class,
                "serial": g.serial,
                "vbios_version": g.vbios_version,
                "mig_devices": [
                    {
                        "uuid": d.uuid,
                        "index": d.index,
                        "profile": d.profile,
                        "gi_id": d.gi_id,
                        "ci_id": d.ci_id,
                        "memory_mib": d.memory_mib,
                        "multiprocessors": d.multiprocessors,
                        "gi_slices": d.gi_slices,
                        "ci_slices": d.ci_slices,
                        "copy_engines": d.copy_engines,
                        "decoders": d.decoders,
                        "encoders": d.encoders,
                        "jpeg_engines": d.jpeg_engines,
                        "ofa_engines": d.ofa_engines,
                    }
                    for d in g.mig_devices
                ],
            }
            for g in m.gpus
        ],
        "topology": topology_to_dict(m.topology),
    }


def machine_from_dict(data: Mapping[str, Any], source: str = "<machine>") -> Machine:
    """Read the canonical JSON form back (inverse of :func:`machine_to_dict`)."""
    try:
        topology = topology_from_dict(data["topology"], f"{source}: topology")
        gpus = []
        for g in data["gpus"]:
            cc = _cc(g["compute_capability"], f"{source}: gpus[{g['index']}]")
            gpu = Gpu(
                index=int(g["index"]),
                minor=int(g["minor"]),
                uuid=str(g["uuid"]),
                product_name=str(g["product_name"]),
                memory_mib=int(g["memory_mib"]),
                pci_bus_id=str(g["pci_bus_id"]),
                numa_node=g["numa_node"],
                compute_capability=cc,
                mig_capable=bool(g["mig_capable"]),
                mig_enabled=bool(g["mig_enabled"]),
                power_limit_w=float(g["power_limit_w"]),
                max_sm_clock_mhz=int(g["max_sm_clock_mhz"]),
                max_mem_clock_mhz=int(g["max_mem_clock_mhz"]),
                multiprocessors=int(g["multiprocessors"]),
                pci_class=int(g["pci_class"]),
                serial=str(g.get("serial", "")),
                vbios_version=str(g.get("vbios_version", "")),
            )
            migs = tuple(MigDevice(parent_uuid=gpu.uuid, parent_index=gpu.index, **d) for d in g.get("mig_devices", []))
            gpus.append(replace(gpu, mig_devices=migs))
        return Machine(
            name=str(data["name"]),
            description=str(data.get("description", "")),
            gpus=tuple(gpus),
            topology=topology,
            driver_version=str(data["driver_version"]),
            cuda_driver_version=str(data["cuda_driver_version"]),
            machine_type=str(data.get("machine_type", "unknown")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.ProfileError(f"{source}: not a canonical machine description: {exc!r}") from exc


def export_json(m: Machine) -> str:
    """The canonical JSON text of a machine, stable for diffs."""
    return json.dumps(machine_to_dict(m), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    for written in write_canonical():
        print(written)
