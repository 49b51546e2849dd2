"""Pod attribution: device IDs from pod-resources resolve to GPUs and MIG devices of the machine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.gpu import profiles
from kubegpu.monitoring import attribution
from kubegpu.monitoring.attribution import ContainerDevices, PodRef

DGX = profiles.load("dgx-a100")
MIG = profiles.load("a100-mig")
G0, G1 = DGX.gpus[0].uuid, DGX.gpus[1].uuid
MIG_2_3 = MIG.gpus[2].mig_devices[3]


def row(
    device_ids: list[str], resource: str = "nvidia.com/gpu", pod: str = "p", container: str = "c"
) -> ContainerDevices:
    return ContainerDevices("ns", pod, container, resource, tuple(device_ids))


@pytest.mark.parametrize(
    ("device_id", "expected"),
    [
        (G0, G0),
        (f"{G0}::3", G0),
        (f"{G0}/vgpu2", G0),
        ("1", G1),
        ("7", DGX.gpus[7].uuid),
        ("8", None),
        ("GPU-not-here", None),
        ("", None),
    ],
    ids=["uuid", "time-slicing-replica", "gke-vgpu", "index", "last-index", "index-out-of-range", "unknown", "empty"],
)
def test_gpu_device_ids_resolve_to_the_gpu_uuid(device_id: str, expected: str | None) -> None:
    result = attribution.attribute([row([device_id])], attribution.device_index(DGX))
    if expected is None:
        assert result.holders == {}
        assert result.unresolved == (device_id,)
    else:
        assert result.holders == {expected: (PodRef("ns", "p", "c"),)}


@pytest.mark.parametrize(
    "device_id",
    [MIG_2_3.uuid, f"{MIG_2_3.uuid}::1", MIG_2_3.id_index],
    ids=["mig-uuid", "mig-replica", "mig-index"],
)
def test_mig_device_ids_resolve_to_the_mig_device(device_id: str) -> None:
    result = attribution.attribute([row([device_id], "nvidia.com/mig-1g.10gb")], attribution.device_index(MIG))
    assert result.holders == {MIG_2_3.uuid: (PodRef("ns", "p", "c"),)}


@pytest.mark.parametrize(
    ("resource", "extra", "attributed"),
    [
        ("nvidia.com/gpu", (), True),
        ("nvidia.com/gpu.shared", (), True),
        ("nvidia.com/mig-3g.40gb", (), True),
        ("nvidia.com/mig-1g.10gb.shared", (), True),
        ("example.com/gpu", (), False),
        ("example.com/gpu", ("example.com/gpu",), True),
        ("cpu", (), False),
    ],
    ids=["gpu", "shared", "mig", "mig-shared", "foreign", "foreign-listed", "cpu"],
)
def test_only_nvidia_resources_and_listed_extras_are_attributed(
    resource: str, extra: tuple[str, ...], attributed: bool
) -> None:
    result = attribution.attribute([row([G0], resource)], attribution.device_index(DGX), extra)
    assert (G0 in result.holders) is attributed


def test_a_gpu_shared_by_several_containers_has_every_holder_in_stable_order() -> None:
    rows = [
        row([f"{G0}::1", f"{G0}::2"], "nvidia.com/gpu.shared", pod="b", container="main"),
        row([f"{G0}::0"], "nvidia.com/gpu.shared", pod="a", container="side"),
        row([f"{G0}::3"], "nvidia.com/gpu.shared", pod="a", container="main"),
    ]
    result = attribution.attribute(rows, attribution.device_index(DGX))
    assert result.holders[G0] == (PodRef("ns", "a", "main"), PodRef("ns", "a", "side"), PodRef("ns", "b", "main"))


def test_a_container_with_two_gpus_holds_both() -> None:
    result = attribution.attribute([row([G0, G1])], attribution.device_index(DGX))
    assert result.holders == {G0: (PodRef("ns", "p", "c"),), G1: (PodRef("ns", "p", "c"),)}


@settings(deadline=None)
@given(
    holdings=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]), st.integers(0, 7), st.integers(0, 3)),
        max_size=30,
    )
)
def test_every_holding_appears_exactly_once_whatever_the_replicas(holdings: list[tuple[str, str, int, int]]) -> None:
    rows = [row([f"{DGX.gpus[g].uuid}::{r}"], "nvidia.com/gpu.shared", pod=p, container=c) for p, c, g, r in holdings]
    result = attribution.attribute(rows, attribution.device_index(DGX))
    expected: dict[str, set[PodRef]] = {}
    for p, c, g, _ in holdings:
        expected.setdefault(DGX.gpus[g].uuid, set()).add(PodRef("ns", p, c))
    assert {k: set(v) for k, v in result.holders.items()} == expected
    assert all(list(v) == sorted(set(v)) for v in result.holders.values())
