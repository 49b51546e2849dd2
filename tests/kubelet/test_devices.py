"""ListAndWatch snapshots: full replacement, exact "Healthy", capacity and allocatable."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.kubelet.devices import Device, ResourceDevices


def snap(*health: str) -> ResourceDevices:
    return ResourceDevices.from_snapshot(Device(f"d{i}", h) for i, h in enumerate(health))


@pytest.mark.parametrize(
    ("health", "capacity", "allocatable"),
    [
        (("Healthy",) * 4, 4, 4),
        (("Healthy", "Healthy", "Healthy", "Unhealthy"), 4, 3),
        (("healthy",), 1, 0),
        (("",), 1, 0),
        (("HEALTHY", "Healthy "), 2, 0),
        ((), 0, 0),
    ],
    ids=[
        "all-healthy",
        "one-unhealthy-verified",
        "lower-case",
        "empty-string",
        "upper-and-trailing-space",
        "empty-list",
    ],
)
def test_only_exactly_healthy_counts_as_allocatable(health: tuple[str, ...], capacity: int, allocatable: int) -> None:
    state = snap(*health)
    assert (state.capacity, state.allocatable) == (capacity, allocatable)


def test_a_disconnect_makes_every_device_unhealthy_but_keeps_capacity() -> None:
    state = snap("Healthy", "Healthy", "Unhealthy")
    state.mark_unhealthy()
    assert (state.capacity, state.allocatable) == (3, 0)
    assert state.unhealthy == {"d0", "d1", "d2"}


def test_devices_are_ordered_as_the_plugin_lists_them_and_unknown_ids_go_last() -> None:
    state = ResourceDevices.from_snapshot([Device("b", "Healthy"), Device("a", "Healthy")])
    assert state.ordered({"a", "b", "z", "c"}) == ["b", "a", "c", "z"]


def test_topology_alignment_needs_one_device_with_a_numa_node() -> None:
    assert not ResourceDevices.from_snapshot(
        [Device("a", "Healthy"), Device("b", "Healthy", ())]
    ).has_topology_alignment()
    assert ResourceDevices.from_snapshot(
        [Device("a", "Healthy"), Device("b", "Healthy", (1,))]
    ).has_topology_alignment()


@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from(["Healthy", "Unhealthy", "healthy", ""]))))
def test_capacity_counts_every_distinct_healthy_and_unhealthy_id(entries: list[tuple[str, str]]) -> None:
    state = ResourceDevices.from_snapshot(Device(i, h) for i, h in entries)
    assert state.healthy == {i for i, h in entries if h == "Healthy"}
    assert state.capacity == len(state.healthy) + len(state.unhealthy)
    assert set(state.all) == {i for i, _ in entries}
