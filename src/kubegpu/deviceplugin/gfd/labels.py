"""Node labels compatible with NVIDIA's GPU feature discovery (reference section i).

Owns computing the label set of a machine under a config: product (sanitised,
``-SHARED`` when shared and not renamed, MIG single and ``-MIG-INVALID``
variants), count, replicas, sharing strategy, memory, family, compute
capability, mode, MIG/MPS capability, MIG strategy, per-profile MIG labels
(mixed) and MIG attributes on ``nvidia.com/gpu.*`` (single), driver and CUDA
versions, machine type, the NVLink clique (``gpu.clique``), the vGPU host (``vgpu.*``) and the timestamp; and
the NFD feature-file text.
Pure: the machine type and timestamp are passed in; reading files and writing
the feature file is :mod:`kubegpu.deviceplugin.gfd.command`'s job.

Deterministic where GFD iterates Go maps: when a node mixes GPU models, the
whole-GPU labels describe the model of the lowest-index MIG-disabled GPU.
MIG resource names follow the plugin's (``resources.mig`` patterns are honoured).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.config.v1 import ReplicatedResource
from kubegpu.deviceplugin.errors import DevicePluginError
from kubegpu.deviceplugin.rm import resource_map
from kubegpu.gpu.model import Gpu, Machine, MigDevice

PREFIX = "nvidia.com"
GPU = f"{PREFIX}/gpu"
_UNSAFE = re.compile(r"[^A-Za-z0-9\-_. ]")


class LabelError(DevicePluginError, ValueError):
    """The machine cannot be labelled (bad driver version, MPS with MIG enabled)."""


def sanitise(text: str) -> str:
    """GFD's sanitising: drop characters outside ``[A-Za-z0-9-_. ]``, then join the words with ``-``."""
    return "-".join(_UNSAFE.sub("", text).split())


@dataclass(frozen=True)
class _Sharing:
    """Sharing information of one resource name (GFD's ``replicationInfo``); None config = sharing disabled."""

    config: Config | None
    name: str

    @property
    def replicas(self) -> int:
        if self.config is None:
            return 0
        entry = self._find()
        return entry.replicas if entry is not None and entry.replicas > 0 else 1

    def _find(self) -> ReplicatedResource | None:
        if self.config is None or self.config.replicated is None:
            return None
        return self.config.replicated.find(self.name)

    @property
    def shared(self) -> bool:
        entry = self._find()
        return entry is not None and entry.replicas > 1

    @property
    def renamed(self) -> bool:
        entry = self._find()
        return entry is not None and entry.rename is not None

    @property
    def strategy(self) -> str:
        if self.config is not None and self.replicas > 1:
            return self.config.sharing_strategy
        return "none"


def _product(sharing: _Sharing, *parts: str) -> str:
    words = [sanitise(p) for p in parts if p]
    if sharing.shared and not sharing.renamed:
        words.append("SHARED")
    return "-".join(words)


def _base(name: str, sharing: _Sharing, count: int, *parts: str) -> dict[str, str]:
    return {
        f"{name}.product": _product(sharing, *parts),
        f"{name}.count": str(count),
        f"{name}.replicas": str(sharing.replicas),
        f"{name}.sharing-strategy": sharing.strategy,
    }


def _gpu_labels(gpu: Gpu, count: int, config: Config | None) -> dict[str, str]:
    sharing = _Sharing(config, GPU)
    labels = _base(GPU, sharing, count, gpu.product_name)
    if gpu.memory_mib:
        labels[f"{GPU}.memory"] = str(gpu.memory_mib)
    major, minor = gpu.compute_capability
    if major:
        labels[f"{GPU}.family"] = gpu.architecture
        labels[f"{GPU}.compute.major"] = str(major)
        labels[f"{GPU}.compute.minor"] = str(minor)
    return labels


def _mig_labels(name: str, parent: Gpu, mig: MigDevice, count: int, config: Config) -> dict[str, str]:
    labels = _base(name, _Sharing(config, name), count, parent.product_name, "MIG", mig.profile)
    attributes = {
        "memory": mig.memory_mib,
        "multiprocessors": mig.multiprocessors,
        "slices.gi": mig.gi_slices,
        "slices.ci": mig.ci_slices,
        "engines.copy": mig.copy_engines,
        "engines.decoder": mig.decoders,
        "engines.encoder": mig.encoders,
        "engines.jpeg": mig.jpeg_engines,
        "engines.ofa": mig.ofa_engines,
    }
    labels.update({f"{name}.{key}": str(value) for key, value in attributes.items()})
    return labels


def _whole_gpu_labels(machine: Machine, config: Config) -> dict[str, str]:
    """GFD's ``newGPULabelers``: per model, counted over every GPU of that model, MIG-enabled or not;
    MIG-enabled models without sharing labels, MIG-disabled models (which win) with them."""
    counts: dict[str, int] = {}
    for gpu in machine.gpus:
        counts[gpu.product_name] = counts.get(gpu.product_name, 0) + 1
    labels: dict[str, str] = {}
    for mig_enabled, with_config in ((True, None), (False, config)):
        firsts: dict[str, Gpu] = {}
        for gpu in machine.gpus:
            if gpu.mig_enabled == mig_enabled:
                firsts.setdefault(gpu.product_name, gpu)
        # Lowest index last, so its model is the one described.
        for gpu in sorted(firsts.values(), key=lambda g: g.index, reverse=True):
            labels.update(_gpu_labels(gpu, counts[gpu.product_name], with_config))
    return labels


def _invalid_single(gpu: Gpu) -> dict[str, str]:
    return {
        f"{GPU}.product": "-".join((sanitise(gpu.product_name), "MIG", "INVALID")),
        f"{GPU}.count": "0",
        f"{GPU}.replicas": "0",
        f"{GPU}.memory": "0",
        f"{GPU}.sharing-strategy": "",
    }


def _single_labels(machine: Machine, config: Config) -> dict[str, str]:
    enabled = [g for g in machine.gpus if g.mig_enabled]
    if not enabled:
        return {}
    if any(not g.mig_devices for g in enabled) or len(enabled) != len(machine.gpus):
        return _invalid_single(enabled[0])
    migs = [m for g in enabled for m in g.mig_devices]
    if len({m.profile for m in migs}) != 1:
        return _invalid_single(enabled[0])
    first = migs[0]
    return _mig_labels(GPU, machine.gpus[first.parent_index], first, len(migs), config)


def _mixed_labels(machine: Machine, config: Config) -> dict[str, str]:
    groups: dict[str, tuple[MigDevice, int]] = {}
    for gpu in machine.gpus:
        if not gpu.mig_enabled:
            continue
        for mig in gpu.mig_devices:
            name = resource_map.mig_resource_name(mig.profile, config)
            if name is None:
                continue
            first, count = groups.get(name, (mig, 0))
            groups[name] = (first, count + 1)
    labels: dict[str, str] = {}
    for name, (first, count) in sorted(groups.items()):
        labels.update(_mig_labels(name, machine.gpus[first.parent_index], first, count, config))
    return labels


def _version_labels(machine: Machine) -> dict[str, str]:
    parts = machine.driver_version.split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        raise LabelError(f"driver version {machine.driver_version!r} is not of the form X.Y[.Z]")
    major, minor, rev = parts[0], parts[1], parts[2] if len(parts) == 3 else ""
    cuda = machine.cuda_driver_version.split(".")
    if len(cuda) < 2 or not all(p.isdigit() for p in cuda[:2]):
        raise LabelError(f"CUDA driver version {machine.cuda_driver_version!r} is not of the form X.Y")
    return {
        f"{PREFIX}/cuda.driver.major": major,
        f"{PREFIX}/cuda.driver.minor": minor,
        f"{PREFIX}/cuda.driver.rev": rev,
        f"{PREFIX}/cuda.driver-version.major": major,
        f"{PREFIX}/cuda.driver-version.minor": minor,
        f"{PREFIX}/cuda.driver-version.revision": rev,
        f"{PREFIX}/cuda.driver-version.full": machine.driver_version,
        f"{PREFIX}/cuda.runtime.major": cuda[0],
        f"{PREFIX}/cuda.runtime.minor": cuda[1],
        f"{PREFIX}/cuda.runtime-version.major": cuda[0],
        f"{PREFIX}/cuda.runtime-version.minor": cuda[1],
        f"{PREFIX}/cuda.runtime-version.full": f"{cuda[0]}.{cuda[1]}",
    }


def _mode(gpus: Iterable[Gpu]) -> str:
    modes = {{0x0302: "compute", 0x0300: "graphics"}.get(g.pci_class, "unknown") for g in gpus}
    return modes.pop() if len(modes) == 1 else "unknown"


def _clique_labels(machine: Machine) -> dict[str, str]:
    """GFD's IMEX labeler: ``gpu.clique`` = ``<cluster UUID>.<clique id>`` when every fabric-attached GPU agrees
    on both; nothing when no GPU is attached or they disagree (GFD logs "non-unique" and labels nothing)."""
    fabrics = [g.fabric for g in machine.gpus if g.fabric is not None]
    clusters = {f.cluster_uuid for f in fabrics}
    cliques = {f.clique_id for f in fabrics}
    if len(clusters) != 1 or len(cliques) != 1:
        return {}
    return {f"{GPU}.clique": f"{clusters.pop()}.{cliques.pop()}"}


def _vgpu_labels(machine: Machine) -> dict[str, str]:
    """GFD's vGPU labeler: ``vgpu.present=true`` and the host driver's version and branch (the last vGPU's, as
    GFD's loop leaves them) when the GPUs are vGPUs; nothing otherwise (GFD writes no ``false``)."""
    hosts = [g.vgpu for g in machine.gpus if g.vgpu is not None]
    if not hosts:
        return {}
    return {
        f"{PREFIX}/vgpu.present": "true",
        f"{PREFIX}/vgpu.host-driver-version": hosts[-1].host_driver_version,
        f"{PREFIX}/vgpu.host-driver-branch": hosts[-1].host_driver_branch,
    }


def labels(machine: Machine, config: Config, *, machine_type: str, timestamp: int | None) -> dict[str, str]:
    """Every label of ``machine`` under ``config``, sorted by key. ``timestamp`` None leaves it out."""
    out: dict[str, str] = {}
    if timestamp is not None:
        out[f"{PREFIX}/gfd.timestamp"] = str(timestamp)
    out.update(_version_labels(machine))
    out[f"{PREFIX}/gpu.machine"] = sanitise(machine_type) or "unknown"
    if machine.gpus:
        out.update(_whole_gpu_labels(machine, config))
        strategy = config.flags.mig_strategy
        if strategy != "none":
            out[f"{PREFIX}/mig.strategy"] = strategy
            out.update(_single_labels(machine, config) if strategy == "single" else _mixed_labels(machine, config))
        out[f"{GPU}.mode"] = _mode(machine.gpus)
    out[f"{PREFIX}/mig.capable"] = str(any(g.mig_capable for g in machine.gpus)).lower()
    mps = config.sharing_strategy == "mps"
    if mps and any(g.mig_enabled for g in machine.gpus):
        raise LabelError("sharing using MPS is not supported on a node with MIG-enabled GPUs")
    out[f"{PREFIX}/mps.capable"] = str(mps).lower()
    out.update(_clique_labels(machine))
    out.update(_vgpu_labels(machine))
    return dict(sorted(out.items()))


def feature_file(values: Mapping[str, str]) -> str:
    """The NFD feature-file form: one ``key=value`` line per label."""
    return "".join(f"{key}={value}\n" for key, value in values.items())
