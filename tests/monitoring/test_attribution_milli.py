"""Fractional pods (``kubegpu.io/gpu-milli``) are attributed to their one GPU, beside every other holder of it."""

from __future__ import annotations

from kubegpu.gpu import profiles
from kubegpu.monitoring.attribution import ContainerDevices, PodRef, attribute, device_index

MACHINE = profiles.load("dgx-a100")
GPU = MACHINE.gpus[2].uuid


def test_two_shares_of_one_gpu_are_both_its_holders_without_a_resource_flag() -> None:
    rows = [
        ContainerDevices("ns", "a", "main", "kubegpu.io/gpu-milli", tuple(f"{GPU}::m{k}" for k in range(500))),
        ContainerDevices("ns", "b", "main", "kubegpu.io/gpu-milli", tuple(f"{GPU}::m{k}" for k in range(500, 800))),
    ]
    got = attribute(rows, device_index(MACHINE))
    assert got.of(GPU) == (PodRef("ns", "a", "main"), PodRef("ns", "b", "main")) and not got.unresolved
