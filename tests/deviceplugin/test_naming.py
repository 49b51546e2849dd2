"""Device IDs and resource names as NVIDIA spells them: replica suffixes, the shared rename, MIG names, sockets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.deviceplugin import naming


@pytest.mark.parametrize(
    ("device_id", "physical"),
    [
        ("GPU-a", "GPU-a"),
        ("GPU-a::0", "GPU-a"),
        ("GPU-a::12", "GPU-a"),
        ("MIG-b::3", "MIG-b"),
        ("GPU-a::1::2", "GPU-a"),  # anything after the first :: is the replica part
        ("", ""),
    ],
    ids=["plain", "replica-0", "replica-12", "mig-replica", "first-separator-wins", "empty"],
)
def test_strip_replica_drops_everything_after_the_first_double_colon(device_id: str, physical: str) -> None:
    assert naming.strip_replica(device_id) == physical


@pytest.mark.parametrize(
    ("requested", "visible"),
    [
        (["foo", "bar", "foo"], ["foo", "bar"]),
        (["GPU-a::0", "GPU-a::3"], ["GPU-a"]),
        (["GPU-b::1", "GPU-a::0", "GPU-b::0"], ["GPU-b", "GPU-a"]),
        ([], []),
    ],
    ids=["nvidia-example-dedup", "nvidia-example-replicas", "first-seen-order", "empty"],
)
def test_unique_physical_ids_strips_and_dedups_in_first_seen_order(requested: list[str], visible: list[str]) -> None:
    assert naming.unique_physical_ids(requested) == visible


_ids = st.lists(
    st.sampled_from(["GPU-a", "GPU-b", "GPU-c"]).flatmap(
        lambda base: st.one_of(st.just(base), st.integers(0, 5).map(lambda n: naming.replica_id(base, n)))
    )
)


@given(_ids)
def test_unique_physical_ids_property_keeps_each_physical_id_once_in_order(requested: list[str]) -> None:
    result = naming.unique_physical_ids(requested)
    assert len(result) == len(set(result))
    assert set(result) == {naming.strip_replica(i) for i in requested}
    firsts = [naming.strip_replica(i) for i in requested]
    assert result == sorted(result, key=firsts.index)


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
    assert naming.socket_name(name) == socket


@pytest.mark.parametrize(
    ("device_id", "physical", "replica"),
    [("GPU-a", "GPU-a", None), ("GPU-a::3", "GPU-a", 3), ("GPU-a::x", "GPU-a", None), ("MIG-b::0", "MIG-b", 0)],
    ids=["plain", "replica", "non-numeric-annotation", "mig-replica-0"],
)
def test_an_annotated_id_splits_into_physical_id_and_replica(
    device_id: str, physical: str, replica: int | None
) -> None:
    annotated = naming.AnnotatedID(device_id)
    assert (annotated.physical, annotated.replica) == (physical, replica)


@given(st.from_regex(r"(GPU|MIG)-[0-9a-f]{1,8}", fullmatch=True), st.integers(0, 1000))
def test_a_replica_id_round_trips(device_id: str, n: int) -> None:
    annotated = naming.AnnotatedID.replica_of(device_id, n)
    assert (annotated.physical, annotated.replica) == (device_id, n)


@pytest.mark.parametrize(
    ("name", "shared"),
    [("nvidia.com/gpu", "nvidia.com/gpu.shared"), ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb.shared")],
    ids=["gpu", "mig"],
)
def test_the_default_shared_rename_appends_dot_shared(name: str, shared: str) -> None:
    assert naming.shared_name(name) == shared


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/mig-1g.10gb", True),
        ("nvidia.com/gpu.other", False),
        ("example.com/gpu", False),
    ],
    ids=["gpu", "shared", "mig", "renamed", "other-domain"],
)
def test_the_default_gpu_resources_are_gpu_its_shared_rename_and_mig(name: str, expected: bool) -> None:
    assert naming.is_nvidia_gpu_resource(name) is expected
