"""Device IDs: replica suffixes, de-duplication, and whole-GPU devices built from machine profiles."""

from __future__ import annotations

import pytest

from kubegpu.deviceplugin.rm import devices
from kubegpu.gpu import profiles


@pytest.mark.parametrize("profile", ["dgx-a100", "dgx1-v100", "pcie-4xt4", "hgx-h200", "a100-mig"])
def test_a_whole_gpu_device_is_its_uuid_with_numa_index_and_device_node(profile: str) -> None:
    machine = profiles.load(profile)
    result = [devices.whole_gpu(g) for g in machine.gpus]
    assert [d.id for d in result] == [g.uuid for g in machine.gpus]
    assert [d.numa for d in result] == [g.numa_node for g in machine.gpus]
    assert [d.index for d in result] == [str(g.index) for g in machine.gpus]
    assert all(
        d.paths == (f"/dev/nvidia{g.minor}",) and d.mig is None for d, g in zip(result, machine.gpus, strict=True)
    )
