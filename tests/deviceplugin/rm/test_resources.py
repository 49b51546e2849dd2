"""Resources: the value a server serves, and NVIDIA's socket names."""

from __future__ import annotations

import pytest

from kubegpu.deviceplugin.rm import resources
from kubegpu.deviceplugin.rm.devices import Device


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


def test_duplicate_device_ids_are_refused() -> None:
    device = Device(id="GPU-a", gpu_uuid="GPU-a", gpu_index=0, index="0", numa=0)
    with pytest.raises(ValueError, match="not unique"):
        resources.Resource("nvidia.com/gpu", (device, device))


def test_a_resource_name_without_domain_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a domain"):
        resources.Resource("gpu", ())
