"""Allocate responses: the envvar strategy, one response per container, NVIDIA's error text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.deviceplugin import allocate
from kubegpu.deviceplugin.devices import Device, replica_id
from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.resources import Resource

GPUS = Resource(
    "nvidia.com/gpu",
    tuple(Device(id=f"GPU-{n}", gpu_uuid=f"GPU-{n}", gpu_index=n, index=str(n), numa=n // 2) for n in range(4)),
)
REPLICAS = Resource(
    "nvidia.com/gpu.shared",
    tuple(
        Device(id=replica_id(f"GPU-{n}", r), gpu_uuid=f"GPU-{n}", gpu_index=n, index=str(n), numa=0, replica=r)
        for n in range(2)
        for r in range(4)
    ),
)


@pytest.mark.parametrize(
    ("resource", "requested", "visible"),
    [
        (GPUS, ["GPU-1"], "GPU-1"),
        (GPUS, ["GPU-3", "GPU-0"], "GPU-3,GPU-0"),
        (GPUS, ["GPU-2", "GPU-2", "GPU-1"], "GPU-2,GPU-1"),
        (REPLICAS, ["GPU-0::0", "GPU-0::3"], "GPU-0"),
        (REPLICAS, ["GPU-1::2", "GPU-0::0", "GPU-1::0"], "GPU-1,GPU-0"),
    ],
    ids=["one", "order-kept", "duplicates-dropped", "replicas-of-one-gpu", "replicas-first-seen-order"],
)
def test_visible_devices_are_the_physical_ids_joined_by_comma(
    resource: Resource, requested: list[str], visible: str
) -> None:
    edits = allocate.container_edits(resource, requested)
    assert edits.envs == {"NVIDIA_VISIBLE_DEVICES": visible}
    assert (edits.mounts, edits.devices, edits.annotations, edits.cdi_devices) == ((), (), {}, ())


def test_unknown_device_id_is_invalid_with_nvidias_text_naming_the_id() -> None:
    with pytest.raises(InvalidRequest) as caught:
        allocate.container_edits(GPUS, ["GPU-0", "GPU-9", "GPU-8"])
    assert (
        str(caught.value) == 'invalid allocation request for "nvidia.com/gpu": invalid request: unknown device: GPU-9'
    )


def test_a_replica_id_of_a_whole_gpu_resource_is_unknown() -> None:
    with pytest.raises(InvalidRequest, match="unknown device: GPU-0::0"):
        allocate.container_edits(GPUS, ["GPU-0::0"])


def test_an_empty_container_request_is_invalid() -> None:
    with pytest.raises(InvalidRequest, match="no devices requested"):
        allocate.container_edits(GPUS, [])


def test_one_response_per_container_request_in_order() -> None:
    result = allocate.allocate(GPUS, [["GPU-2"], ["GPU-0", "GPU-1"], ["GPU-3"]])
    assert [e.envs["NVIDIA_VISIBLE_DEVICES"] for e in result] == ["GPU-2", "GPU-0,GPU-1", "GPU-3"]


def test_no_container_requests_give_no_responses() -> None:
    assert allocate.allocate(GPUS, []) == []


def test_one_bad_container_request_fails_the_whole_call() -> None:
    with pytest.raises(InvalidRequest, match="GPU-7"):
        allocate.allocate(GPUS, [["GPU-0"], ["GPU-7"]])


_known = st.sampled_from([d.id for d in REPLICAS.devices])


@given(st.lists(_known, min_size=1, max_size=40))
def test_known_ids_always_give_their_distinct_physical_ids(requested: list[str]) -> None:
    (value,) = allocate.container_edits(REPLICAS, requested).envs.values()
    visible = value.split(",")
    assert len(visible) == len(set(visible))
    assert set(visible) == {i.split("::")[0] for i in requested}


@given(st.lists(st.one_of(_known, st.text(max_size=12)), min_size=1, max_size=20))
def test_any_unknown_id_is_refused_naming_the_first_one(requested: list[str]) -> None:
    unknown = [i for i in requested if i not in REPLICAS.by_id]
    if not unknown:
        allocate.container_edits(REPLICAS, requested)
        return
    with pytest.raises(InvalidRequest) as caught:
        allocate.container_edits(REPLICAS, requested)
    assert str(caught.value).endswith(f"unknown device: {unknown[0]}")
