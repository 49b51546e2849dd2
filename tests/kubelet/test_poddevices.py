"""Per-container device bookkeeping: allocated sets, reuse sets and checkpoint entries."""

from __future__ import annotations

from kubegpu.api.deviceplugin.v1beta1 import api_pb2
from kubegpu.kubelet.poddevices import PodDevices

R = "example.com/gpu"


def store() -> PodDevices:
    s = PodDevices()
    s.insert("p1", "init", R, {0: ["a", "b"]}, api_pb2.ContainerAllocateResponse(envs={"E": "ab"}))
    s.insert("p1", "app", R, {0: ["a"], 1: ["c"]}, api_pb2.ContainerAllocateResponse(envs={"E": "ac"}))
    s.insert("p2", "app", R, {-1: ["d"]}, api_pb2.ContainerAllocateResponse())
    return s


def test_allocated_devices_are_the_union_over_every_container() -> None:
    assert store().devices() == {R: {"a", "b", "c", "d"}}


def test_container_devices_is_none_when_the_container_holds_nothing() -> None:
    s = store()
    assert s.container_devices("p1", "app", R) == frozenset({"a", "c"})
    assert s.container_devices("p1", "app", "other/r") is None
    assert s.container_devices("p9", "app", R) is None


def test_init_devices_become_reusable_and_app_devices_are_taken_out_again() -> None:
    s = store()
    reuse: dict[str, set[str]] = {}
    s.add_container_allocated("p1", "init", reuse)
    assert reuse == {R: {"a", "b"}}
    s.remove_container_allocated("p1", "app", reuse)
    assert reuse == {R: {"b"}}


def test_entries_round_trip_with_their_cached_responses() -> None:
    s = store()
    again = PodDevices.from_entries(s.to_entries())
    assert again.devices() == s.devices()
    assert again.container_allocations("p1", "app")[R].response.envs["E"] == "ac"
    assert again.container_allocations("p1", "app")[R].numa == {0: ["a"], 1: ["c"]}


def test_save_and_restore_undo_a_pods_changes() -> None:
    s = store()
    saved = s.save_pod("p1")
    s.insert("p1", "extra", R, {0: ["z"]}, api_pb2.ContainerAllocateResponse())
    s.restore_pod("p1", saved)
    assert s.container_devices("p1", "extra", R) is None
    unknown = s.save_pod("p3")
    s.insert("p3", "c", R, {0: ["y"]}, api_pb2.ContainerAllocateResponse())
    s.restore_pod("p3", unknown)
    assert not s.has_pod("p3")
