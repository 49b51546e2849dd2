"""``--kubernetes-gpu-id-type device-name``: ``nvidiaN`` IDs resolve through the GPU's minor number."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kubegpu.gpu import profiles
from kubegpu.monitoring import attribution, devicenames
from kubegpu.monitoring.attribution import ContainerDevices, PodRef

DGX = profiles.load("dgx-a100")


def row(*ids: str) -> ContainerDevices:
    return ContainerDevices("ns", "pod", "main", "nvidia.com/gpu", ids)


@pytest.mark.parametrize(
    ("device_id", "expected"),
    [("nvidia3", "3"), ("nvidia5/vgpu2", "5/vgpu2"), ("nvidia99", "nvidia99"), ("GPU-abc", "GPU-abc"), ("3", "3")],
    ids=["name", "shared", "unknown-minor", "uuid", "index"],
)
def test_device_names_become_indices_by_minor_number(device_id: str, expected: str) -> None:
    assert devicenames.translate([row(device_id)], DGX)[0].device_ids == (expected,)


def test_the_minor_number_not_the_index_decides() -> None:
    gpus = list(DGX.gpus)
    gpus[0], gpus[1] = replace(gpus[0], minor=1), replace(gpus[1], minor=0)
    swapped = replace(DGX, gpus=tuple(gpus))
    rows = devicenames.translate([row("nvidia0")], swapped)
    holders = attribution.attribute(rows, attribution.device_index(swapped), ())
    assert holders.of(swapped.gpus[1].uuid) == (PodRef("ns", "pod", "main"),)
    assert holders.of(swapped.gpus[0].uuid) == ()
