"""Discovery through nvidia-ml-py and the fake libnvidia-ml.so.1 equals the simulated backend's machine."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubegpu.gpu import profiles
from kubegpu.gpu.model import Machine, MigDevice
from kubegpu.gpu.nvml import binding
from kubegpu.gpu.simulated import SimulatedBackend
from tests.fake_nvml import harness
from tests.fake_nvml.harness import OpenMachine

pytest_plugins = ["tests.fake_nvml.fixtures"]


def comparable(machine: Machine) -> Machine:
    """The machine with what NVML cannot know made neutral.

    A profile names its NVSwitch fabric freely; NVML only shows which GPUs share
    switches. Fabrics are renamed by order of first appearance, and the name and
    description (profile metadata) are blanked.
    """
    names: dict[str, str] = {}
    for fabric in machine.topology.nvswitch:
        if fabric is not None and fabric not in names:
            names[fabric] = f"fabric{len(names)}"
    topology = replace(
        machine.topology, nvswitch=tuple(None if f is None else names[f] for f in machine.topology.nvswitch)
    )
    return replace(machine, name="", description="", topology=topology)


@pytest.mark.parametrize("profile", profiles.available())
def test_every_profile_discovers_through_nvml_as_the_simulated_backend_gives_it(
    profile: str, nvml_machine: OpenMachine
) -> None:
    _, backend = nvml_machine(profile)
    expected = SimulatedBackend(profile).discover()
    got = backend.discover()
    assert comparable(got) == comparable(expected)
    # Spot checks that make a failure readable (and guard the comparison itself).
    assert [g.uuid for g in got.gpus] == [g.uuid for g in expected.gpus]
    assert [d.profile for d in got.mig_devices()] == [d.profile for d in expected.mig_devices()]
    assert got.topology.pcie == expected.topology.pcie
    assert got.topology.nvlink == expected.topology.nvlink


def test_fabric_names_group_gpus_that_share_nvswitches(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("hgx-h200")
    topology = backend.discover().topology
    assert len(set(topology.nvswitch)) == 1
    assert topology.nvswitch[0] is not None and topology.nvswitch[0].startswith("nvswitch:")
    assert topology.nvswitch_links == (18,) * 8
    assert all(topology.nvlink[i][j] == 0 for i in range(8) for j in range(8))


def test_gpus_without_nvlink_have_no_fabric_and_pcie_only_links(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("pcie-4xt4")
    machine = backend.discover()
    assert machine.topology.nvswitch == (None,) * 4
    assert machine.topology.nvswitch_links == (0,) * 4
    assert machine.topology.pcie[0][1] is not None and machine.topology.pcie[0][1].value == "multi-switch"
    assert machine.topology.pcie[0][2] is not None and machine.topology.pcie[0][2].value == "cross-cpu"


def test_mig_profile_attributes_and_compute_instance_splits_are_spelled_like_go_nvlib(
    nvml_machine: OpenMachine,
) -> None:
    base = profiles.load("a100-mig")
    layout = ("1g.10gb+me", "1c.2g.20gb", "1g.20gb", "3g.40gb")
    spec = profiles.mig_profiles()[base.gpus[0].product_name]
    migs = tuple(
        MigDevice(
            uuid=profiles.stable_uuid("MIG", f"attr/{j}"),
            parent_uuid=base.gpus[0].uuid,
            parent_index=0,
            index=j,
            profile=name,
            gi_id=j + 1,
            ci_id=0,
            memory_mib=spec[name].memory_mib,
            multiprocessors=spec[name].multiprocessors,
            gi_slices=spec[name].gi_slices,
            ci_slices=spec[name].ci_slices,
            copy_engines=spec[name].copy_engines,
            decoders=spec[name].decoders,
            jpeg_engines=spec[name].jpeg_engines,
            ofa_engines=spec[name].ofa_engines,
        )
        for j, name in enumerate(layout)
    )
    machine = replace(
        base, name="mig-attrs", gpus=(replace(base.gpus[0], mig_enabled=True, mig_devices=migs), *base.gpus[1:])
    )
    _, backend = nvml_machine(machine)
    got = backend.discover().gpus[0].mig_devices
    assert [d.profile for d in got] == list(layout)
    assert [(d.gi_slices, d.ci_slices) for d in got] == [(1, 1), (2, 1), (1, 1), (3, 3)]


def test_numa_node_and_machine_type_come_from_the_sysfs_root(nvml_machine: OpenMachine) -> None:
    node, backend = nvml_machine("dgx-a100")
    assert [g.numa_node for g in backend.discover().gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    # -1 in sysfs means "no NUMA affinity"; a missing file means the same.
    numa_files = sorted((node.sysfs_root / "bus" / "pci" / "devices").glob("*/numa_node"))
    numa_files[0].write_text("-1\n")
    numa_files[1].unlink()
    (node.sysfs_root / "class" / "dmi" / "id" / "product_name").unlink()
    machine = backend.discover()
    assert [g.numa_node for g in machine.gpus][:3] == [None, None, 0]
    assert machine.topology.numa[:2] == (None, None)
    assert machine.machine_type == "unknown"


def test_driver_and_cuda_versions_are_nvml_s(nvml_machine: OpenMachine) -> None:
    _, backend = nvml_machine("hgx-h200")
    machine = backend.discover()
    assert (machine.driver_version, machine.cuda_driver_version) == ("560.35.03", "12.6")
    assert backend.name.startswith("nvml:") and backend.name.endswith("libnvidia-ml.so.1")


def test_the_sysfs_root_defaults_to_the_environment_then_to_slash_sys(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubegpu.gpu.nvml import NvmlBackend

    monkeypatch.delenv("KUBEGPU_SYSFS_ROOT", raising=False)
    assert NvmlBackend().sysfs_root == "/sys"
    monkeypatch.setenv("KUBEGPU_SYSFS_ROOT", "/host/sys")
    assert NvmlBackend().sysfs_root == "/host/sys"
    assert NvmlBackend(sysfs_root="/elsewhere").sysfs_root == "/elsewhere"


@pytest.mark.parametrize("product", sorted(profiles.mig_profiles()))
def test_every_mig_profile_of_a_product_is_named_through_nvml_as_the_simulated_backend_names_it(
    product: str, tmp_path: Path, nvml_machine: OpenMachine
) -> None:
    # One GPU per profile, so every GPU- and compute-instance size the product offers is walked.
    names = list(profiles.mig_profiles()[product])
    machine = harness.mig_machine(tmp_path, product, [[name] for name in names])
    _, backend = nvml_machine(machine)
    got = backend.discover()
    assert [d.profile for d in got.mig_devices()] == names
    assert comparable(got) == comparable(machine)


def test_a_driver_without_the_versioned_profile_calls_is_read_with_the_unversioned_ones(
    nvml_machine: OpenMachine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, backend = nvml_machine("a100-mig")
    backend.discover()  # NVML started with every entry point
    real = binding.loaded()
    refused: list[str] = []

    class OlderDriver:
        """The same libnvidia-ml.so.1 without the versioned profile entry points (drivers before 470)."""

        def __getattr__(self, name: str) -> Any:
            if name.endswith("ProfileInfoV"):
                refused.append(name)
                raise AttributeError(name)  # what ctypes raises for a symbol the library lacks
            return getattr(real, name)

    monkeypatch.setattr(binding, "_library", OlderDriver())
    got = backend.discover()
    assert [d.profile for d in got.mig_devices()] == [
        d.profile for d in SimulatedBackend("a100-mig").discover().mig_devices()
    ]
    assert set(refused) == {"nvmlDeviceGetGpuInstanceProfileInfoV", "nvmlGpuInstanceGetComputeInstanceProfileInfoV"}


def test_vgpus_are_read_from_the_pci_config_space_as_gfd_reads_them(nvml_machine: OpenMachine) -> None:
    import dataclasses

    from kubegpu.gpu.model import VgpuHost

    base = profiles.load("pcie-4xt4")
    host = VgpuHost("550.54.16", "r550_40")
    vm = dataclasses.replace(base, gpus=tuple(dataclasses.replace(g, vgpu=host) for g in base.gpus))
    _, backend = nvml_machine(vm)
    assert [g.vgpu for g in backend.discover().gpus] == [host] * 4
