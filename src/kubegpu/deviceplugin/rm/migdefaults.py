"""NVIDIA's default MIG resources under ``migStrategy: mixed``, as its "Running with config" lists them.

Owns the list NVIDIA's plugin appends to ``resources.mig`` at start under mixed
(``rm.AddDefaultResourcesToConfig``): one ``{pattern: <profile>, name: nvidia.com/mig-<profile>}`` per MIG
profile the node's MIG-capable GPUs can be partitioned into — not only the ones configured now — whose
compute slices equal its GPU slices, in go-nvlib's visit order (GPUs by index, then GPU-instance profile
enum), each profile once. The profiles a GPU supports come from the product's table
(:data:`kubegpu.gpu.compact.MIG_PROFILES`); a product without one offers the profiles its MIG devices
have now (all we know of it). Pure: no I/O; must not decide how resources are advertised
(:mod:`kubegpu.deviceplugin.rm.resource_map`).
"""

from __future__ import annotations

from kubegpu.deviceplugin import naming
from kubegpu.gpu.compact import MIG_PROFILES
from kubegpu.gpu.model import Gpu, Machine
from kubegpu.gpu.nvml import decode


def _profiles(gpu: Gpu) -> list[str]:
    """The full-compute profiles ``gpu`` supports, by GPU-instance profile enum."""
    table = MIG_PROFILES.get(gpu.product_name)
    if table is not None:
        sized = [
            (name, spec.gi_slices, spec.memory_mib) for name, spec in table.items() if spec.ci_slices == spec.gi_slices
        ]
    else:
        sized = [(m.profile, m.gi_slices, m.memory_mib) for m in gpu.mig_devices if m.ci_slices == m.gi_slices]
    keyed: dict[str, int] = {}
    for name, slices, memory in sized:
        try:
            keyed.setdefault(name, decode.gi_profile_id(name, slices, memory, gpu.memory_mib))
        except ValueError:
            continue  # a spelling no NVML profile has cannot be visited by NVIDIA either
    return sorted(keyed, key=keyed.__getitem__)


def mixed_mig_resources(machine: Machine) -> list[dict[str, str]]:
    """``resources.mig`` entries NVIDIA adds under mixed for ``machine``, in its order."""
    out: dict[str, dict[str, str]] = {}
    for gpu in sorted(machine.gpus, key=lambda g: g.index):
        if not gpu.mig_capable:
            continue
        for profile in _profiles(gpu):
            out.setdefault(
                profile, {"pattern": profile, "name": naming.resource_name(naming.mig_resource_suffix(profile))}
            )
    return list(out.values())
