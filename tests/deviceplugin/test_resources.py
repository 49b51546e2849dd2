"""Resources: NVIDIA's socket names and the whole-GPU resource map."""

from __future__ import annotations

import pytest

from kubegpu.deviceplugin import resources
from kubegpu.deviceplugin.devices import Device
from kubegpu.gpu import profiles
from kubegpu.gpu.model import Machine, Topology


@pytest.mark.parametrize(
    ("name", "socket"),
    [
        ("nvidia.com/gpu", "nvidia-gpu.sock"),
        ("nvidia.com/gpu.shared", "nvidia-gpu.shared.sock"),
        ("nvidia.com/mig-1g.10gb", "nvidia-mig-1g.10gb.sock"),
    ],
    ids=["gpu", "shared", "mig"],
)
def test_socket_name_is_nvidia_dash_name_part(name: str, socket: str) -> None:
    assert resources.socket_name(name) == socket


@pytest.mark.parametrize("profile", ["dgx-a100", "a100-mig", "pcie-4xt4"])
def test_every_gpu_is_one_nvidia_com_gpu_device(profile: str) -> None:
    machine = profiles.load(profile)
    (gpu,) = resources.build(machine)
    assert gpu.name == "nvidia.com/gpu"
    assert gpu.socket_name == "nvidia-gpu.sock"
    assert [d.id for d in gpu.devices] == [g.uuid for g in machine.gpus]
    assert set(gpu.by_id) == {g.uuid for g in machine.gpus}


def test_a_machine_without_gpus_has_no_resource_to_register() -> None:
    empty = Machine(name="empty", description="", gpus=(), topology=Topology((), (), (), (), ()))
    assert resources.build(empty) == ()


def test_duplicate_device_ids_are_refused() -> None:
    device = Device(id="GPU-a", gpu_uuid="GPU-a", gpu_index=0, index="0", numa=0)
    with pytest.raises(ValueError, match="not unique"):
        resources.Resource("nvidia.com/gpu", (device, device))


def test_a_resource_name_without_domain_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a domain"):
        resources.Resource("gpu", ())
