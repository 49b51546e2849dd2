"""Resources: the value a server serves, and NVIDIA's socket names."""

from __future__ import annotations

import pytest

from kubegpu.deviceplugin.rm import resources
from kubegpu.deviceplugin.rm.devices import Device


def test_duplicate_device_ids_are_refused() -> None:
    device = Device(id="GPU-a", gpu_uuid="GPU-a", gpu_index=0, index="0", numa=0)
    with pytest.raises(ValueError, match="not unique"):
        resources.Resource("nvidia.com/gpu", (device, device))


def test_a_resource_name_without_domain_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a domain"):
        resources.Resource("gpu", ())
