"""The whole label set of every shipped profile × MIG strategy × sharing, against GPU feature discovery's rules.

The rules are written here a second time, as GFD states them (``internal/lm``: the machine-type, NVML/CUDA
version, resource, MIG-strategy, IMEX and vGPU labelers), as a table from label to rule over the machine's
hardware facts; nothing here calls the label code except to get the labels under test. The facts (names,
sizes, MIG devices) are the machine model's: they are the input GFD reads from NVML, not labels.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from kubegpu.deviceplugin.config import effective, v1
from kubegpu.deviceplugin.gfd import labels
from kubegpu.gpu import errors, profiles
from kubegpu.gpu.model import Fabric, Gpu, Machine, VgpuHost

SHARING: dict[str, tuple[list[str], str | None, int]] = {
    # name: (flags, config text, replicas of nvidia.com/gpu)
    "no_sharing": ([], None, 1),
    "time_slicing": ([], "sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}", 4),
    "mps": ([], "sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}", 2),
}
STRATEGY_OF = {"no_sharing": "none", "time_slicing": "time-slicing", "mps": "mps"}
FAMILIES = [((1, 0), "tesla"), ((2, 0), "fermi"), ((3, 0), "kepler"), ((5, 0), "maxwell"), ((6, 0), "pascal"),
            ((7, 0), "volta"), ((7, 5), "turing"), ((8, 0), "ampere"), ((8, 9), "ada-lovelace"),
            ((9, 0), "hopper"), ((10, 0), "blackwell"), ((12, 0), "blackwell"), ((13, 0), "rubin")]  # fmt: skip


def family(cc: tuple[int, int]) -> str:
    """GFD's architecture names: the last row at or below the capability within its major (7.5+ is turing)."""
    rows = [name for (major, minor), name in FAMILIES if major == cc[0] and minor <= cc[1]]
    return rows[-1] if rows else "undefined"


def clean(text: str) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9\-_. ]", "", text).split())


#: Whole-GPU labels: label suffix -> rule over (first GPU of the model, GPUs of the model, replicas, shared).
GpuRule = Callable[[Gpu, int, int, bool], str]
WHOLE_GPU: dict[str, GpuRule] = {
    "gpu.product": lambda g, n, r, shared: clean(g.product_name) + ("-SHARED" if shared else ""),
    "gpu.count": lambda g, n, r, shared: str(n),
    "gpu.replicas": lambda g, n, r, shared: str(r),
    "gpu.sharing-strategy": lambda g, n, r, shared: "",  # filled per sharing below
    "gpu.memory": lambda g, n, r, shared: str(g.memory_mib),
    "gpu.family": lambda g, n, r, shared: family(g.compute_capability),
    "gpu.compute.major": lambda g, n, r, shared: str(g.compute_capability[0]),
    "gpu.compute.minor": lambda g, n, r, shared: str(g.compute_capability[1]),
}
#: MIG labels (on nvidia.com/gpu.* under single, nvidia.com/mig-<profile>.* under mixed): suffix -> attribute.
MIG_ATTRIBUTES = {
    "memory": "memory_mib", "multiprocessors": "multiprocessors", "slices.gi": "gi_slices",
    "slices.ci": "ci_slices", "engines.copy": "copy_engines", "engines.decoder": "decoders",
    "engines.encoder": "encoders", "engines.jpeg": "jpeg_engines", "engines.ofa": "ofa_engines",
}  # fmt: skip


def expected(machine: Machine, strategy: str, sharing: str) -> dict[str, str] | None:
    """GFD's labels for ``machine``; None where GFD refuses (MPS on a node with MIG enabled)."""
    gpus = machine.gpus
    mig_on = [g for g in gpus if g.mig_enabled]
    if sharing == "mps" and mig_on:
        return None
    _, _, replicas = SHARING[sharing]
    major, minor, *rest = machine.driver_version.split(".")
    rev = rest[0] if rest else ""
    cuda_major, cuda_minor = machine.cuda_driver_version.split(".")[:2]
    out = {
        "gpu.machine": clean(machine.machine_type) or "unknown",
        "cuda.driver.major": major, "cuda.driver.minor": minor, "cuda.driver.rev": rev,
        "cuda.driver-version.major": major, "cuda.driver-version.minor": minor,
        "cuda.driver-version.revision": rev, "cuda.driver-version.full": machine.driver_version,
        "cuda.runtime.major": cuda_major, "cuda.runtime.minor": cuda_minor,
        "cuda.runtime-version.major": cuda_major, "cuda.runtime-version.minor": cuda_minor,
        "cuda.runtime-version.full": f"{cuda_major}.{cuda_minor}",
        "gpu.mode": "compute",
        "mig.capable": str(any(g.mig_capable for g in gpus)).lower(),
        "mps.capable": str(sharing == "mps").lower(),
    }  # fmt: skip
    # Whole GPUs (every profile holds one model): MIG-disabled GPUs carry the sharing, MIG-enabled ones do not
    # (replicas 0); the count is every GPU of the model.
    whole = [g for g in gpus if not g.mig_enabled]
    first, shared = (whole[0], replicas > 1) if whole else (gpus[0], False)
    reps = replicas if whole else 0
    for suffix, rule in WHOLE_GPU.items():
        out[suffix] = rule(first, len(gpus), reps, shared)
    out["gpu.sharing-strategy"] = STRATEGY_OF[sharing] if whole and replicas > 1 else "none"
    if strategy != "none":
        out["mig.strategy"] = strategy
    if strategy == "single" and mig_on:
        migs = [m for g in mig_on for m in g.mig_devices]
        valid = len(mig_on) == len(gpus) and all(g.mig_devices for g in mig_on) and len({m.profile for m in migs}) == 1
        if not valid:
            out.update({"gpu.product": clean(mig_on[0].product_name) + "-MIG-INVALID", "gpu.count": "0",
                        "gpu.replicas": "0", "gpu.memory": "0", "gpu.sharing-strategy": ""})  # fmt: skip
        else:
            m = migs[0]
            out["gpu.product"] = f"{clean(first.product_name)}-MIG-{m.profile}" + ("-SHARED" if replicas > 1 else "")
            out["gpu.count"] = str(len(migs))
            out["gpu.replicas"] = str(replicas)
            out["gpu.sharing-strategy"] = STRATEGY_OF[sharing] if replicas > 1 else "none"
            out.update({f"gpu.{k}": str(getattr(m, attr)) for k, attr in MIG_ATTRIBUTES.items()})
    if strategy == "mixed":
        for m in (m for g in mig_on for m in g.mig_devices):
            name = "mig-" + m.profile.replace("+", ".")
            same = [d for g in mig_on for d in g.mig_devices if d.profile == m.profile]
            # The sharing above names nvidia.com/gpu only: MIG resources are not shared.
            out[f"{name}.product"] = f"{clean(gpus[m.parent_index].product_name)}-MIG-{clean(m.profile)}"
            out[f"{name}.count"] = str(len(same))
            out[f"{name}.replicas"] = "1"
            out[f"{name}.sharing-strategy"] = "none"
            out.update({f"{name}.{k}": str(getattr(same[0], attr)) for k, attr in MIG_ATTRIBUTES.items()})
    fabrics = {(g.fabric.cluster_uuid, g.fabric.clique_id) for g in gpus if g.fabric is not None}
    if len(fabrics) == 1:
        cluster, clique = fabrics.pop()
        out["gpu.clique"] = f"{cluster}.{clique}"
    vgpus = [g.vgpu for g in gpus if g.vgpu is not None]
    if vgpus:
        out.update({"vgpu.present": "true", "vgpu.host-driver-version": vgpus[-1].host_driver_version,
                    "vgpu.host-driver-branch": vgpus[-1].host_driver_branch})  # fmt: skip
    return {f"nvidia.com/{k}": v for k, v in out.items()}


def computed(machine: Machine, strategy: str, sharing: str) -> dict[str, str]:
    """The labels under test, with the config ``kubegpu labels`` loads (GFD's flags and checks, not the plugin's:
    GFD labels a mixed-strategy MPS node the plugin would refuse to serve)."""
    flags, text, _ = SHARING[sharing]
    parser = argparse.ArgumentParser()
    effective.add_gfd_arguments(parser)
    args = parser.parse_args(["--mig-strategy", strategy, "--use-node-feature-api=false", *flags])
    file = None if text is None else v1.parse_data(yaml.safe_load(text))
    cfg = effective.resolve(effective.GFD_FLAGS, args, {}, file)
    return labels.labels(machine, cfg, machine_type=machine.machine_type, timestamp=None)


CASES = [(p, s, sh) for p in profiles.available() for s in ("none", "single", "mixed") for sh in SHARING]


@pytest.mark.parametrize(("profile", "strategy", "sharing"), CASES, ids=["-".join(c) for c in CASES])
def test_every_profile_strategy_and_sharing_gets_gfds_whole_label_set(
    profile: str, strategy: str, sharing: str
) -> None:
    machine = profiles.load(profile)
    want = expected(machine, strategy, sharing)
    if want is None:
        with pytest.raises(labels.LabelError, match="MIG-enabled"):
            computed(machine, strategy, sharing)
        return
    assert computed(machine, strategy, sharing) == want


def test_the_nvlink_fabric_profile_is_labelled_with_its_clique() -> None:
    got = computed(profiles.load("gb200-nvl72-tray"), "none", "no_sharing")
    assert got["nvidia.com/gpu.clique"] == "6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10.1"


def _with_gpus(machine: Machine, **changes: Any) -> Machine:
    return dataclasses.replace(machine, gpus=tuple(dataclasses.replace(g, **changes) for g in machine.gpus))


@pytest.mark.parametrize(
    ("fabrics", "clique"),
    [
        ([Fabric("6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10", 3)] * 4, "6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10.3"),
        (
            [Fabric("6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10", 3), None, None, None],
            "6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10.3",
        ),
        ([Fabric("6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10", c) for c in (1, 1, 2, 2)], None),
        (
            [Fabric(u, 1) for u in ("6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10", "00000000-0000-4000-8000-000000000001")]
            * 2,
            None,
        ),
        ([None] * 4, None),
    ],
    ids=["all_agree", "only_attached_gpus_count", "two_cliques", "two_clusters", "none_attached"],
)
def test_the_clique_label_needs_every_attached_gpu_to_agree(fabrics: list[Fabric | None], clique: str | None) -> None:
    base = profiles.load("pcie-4xt4")
    machine = dataclasses.replace(
        base, gpus=tuple(dataclasses.replace(g, fabric=f) for g, f in zip(base.gpus, fabrics, strict=True))
    )
    assert computed(machine, "none", "no_sharing").get("nvidia.com/gpu.clique") == clique


def test_vgpu_labels_only_when_the_gpus_are_vgpus() -> None:
    plain = computed(profiles.load("pcie-4xt4"), "none", "no_sharing")
    assert not [k for k in plain if k.startswith("nvidia.com/vgpu.")]  # GFD writes no vgpu.present=false
    vm = _with_gpus(profiles.load("pcie-4xt4"), vgpu=VgpuHost("550.54.16", "r550_40"))
    got = computed(vm, "none", "no_sharing")
    assert {k: v for k, v in got.items() if k.startswith("nvidia.com/vgpu.")} == {
        "nvidia.com/vgpu.present": "true",
        "nvidia.com/vgpu.host-driver-version": "550.54.16",
        "nvidia.com/vgpu.host-driver-branch": "r550_40",
    }


def test_a_profile_file_declares_vgpus_and_the_nvlink_fabric() -> None:
    data = {
        "name": "vm-2xa10",
        "machine_type": "KVM",
        "gpu": {"product_name": "NVIDIA A10-24Q", "memory_mib": 24576, "compute_capability": "8.6"},
        "vgpu": {"host_driver_version": "550.54.16", "host_driver_branch": "r550_40"},
        "nvlink_fabric": {"cluster_uuid": "6A0F3C1E58B24D7E9C412F8E7D5B9A10", "clique_id": 7},
        "gpus": [
            {"pci_bus_id": "00000000:05:00.0", "pcie": ["cpu0"]},
            {"pci_bus_id": "00000000:06:00.0", "pcie": ["cpu0"]},
        ],
    }
    machine = profiles.from_profile(data)
    assert machine.gpus[1].vgpu == VgpuHost("550.54.16", "r550_40")
    assert machine.gpus[0].fabric == Fabric("6a0f3c1e-58b2-4d7e-9c41-2f8e7d5b9a10", 7)  # canonical text form
    assert profiles.machine_from_dict(profiles.machine_to_dict(machine)) == machine
    with pytest.raises(errors.ProfileError, match=r"nvlink_fabric\.cluster_uuid"):
        profiles.from_profile({**data, "nvlink_fabric": {"cluster_uuid": "not-a-uuid", "clique_id": 1}})
