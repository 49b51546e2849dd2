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

Profile format (its schema and expansion live in :mod:`kubegpu.gpu.compact`, checked with
:mod:`kubegpu.common.validation`, the project's one validator: every problem is named by its key
path, unknown keys included)::

    name: dgx-a100                 # must equal the file name
    description: text
    machine_type: NVIDIA DGX A100  # DMI product name
    driver_version: 550.107.02
    cuda_driver_version: "12.4"
    gpu: {product_name, memory_mib, compute_capability: "8.0", ...}   # defaults
    nvswitch: {fabric: fabric0, links: 12}   # optional: every GPU on one fabric
    nvlink_fabric: {cluster_uuid: <uuid>, clique_id: 1}   # optional: every GPU registered with a multi-node
                                   # NVLink fabric (NVML fabric info; GPU feature discovery's gpu.clique)
    vgpu: {host_driver_version: 550.54.16, host_driver_branch: r550_40}   # optional: vGPUs of a VM
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
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubegpu.common.validation import MISSING_KEY, UNKNOWN_KEY
from kubegpu.gpu import errors
from kubegpu.gpu.model import Fabric, Gpu, Machine, MigDevice, PcieLink, Topology, VgpuHost, parse_compute_capability

if TYPE_CHECKING:
    from kubegpu.gpu.compact import MigProfileSpec

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
    try:
        return machine_from_dict(document.get("machine") or {}, source=str(canonical_path(name)))
    except errors.ProfileError:  # a damaged twin: the YAML is the source
        return None


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


def from_profile(data: Mapping[str, Any], source: str = "<profile>") -> Machine:
    """Expand a compact profile mapping (module docstring) into a :class:`Machine` (:mod:`.compact`)."""
    from kubegpu.gpu import compact

    return compact.expand(data, source)


def stable_uuid(prefix: str, key: str) -> str:
    """A deterministic NVIDIA-style UUID (``GPU-…``/``MIG-…``) for a simulated device (:mod:`.compact`)."""
    from kubegpu.gpu import compact

    return compact.stable_uuid(prefix, key)


def mig_profiles() -> dict[str, dict[str, MigProfileSpec]]:
    """The MIG profiles of each GPU product a profile may lay out (:data:`.compact.MIG_PROFILES`)."""
    from kubegpu.gpu import compact

    return compact.MIG_PROFILES


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


def compute_capability(value: Any, where: str) -> tuple[int, int]:
    """``'8.0'`` as ``(8, 0)``; a ProfileError naming ``where`` otherwise."""
    try:
        return parse_compute_capability(value)
    except ValueError as exc:
        raise errors.ProfileError(f"{where}: {exc}") from None


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
                "fabric": None
                if g.fabric is None
                else {"cluster_uuid": g.fabric.cluster_uuid, "clique_id": g.fabric.clique_id},
                "vgpu": None
                if g.vgpu is None
                else {
                    "host_driver_version": g.vgpu.host_driver_version,
                    "host_driver_branch": g.vgpu.host_driver_branch,
                },
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
            cc = compute_capability(g["compute_capability"], f"{source}: gpus[{g['index']}]")
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
                fabric=Fabric(str(g["fabric"]["cluster_uuid"]), int(g["fabric"]["clique_id"]))
                if g.get("fabric")
                else None,
                vgpu=VgpuHost(str(g["vgpu"]["host_driver_version"]), str(g["vgpu"]["host_driver_branch"]))
                if g.get("vgpu")
                else None,
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
