"""devicesToAllocate: checks and texts, reuse, the GetPreferredAllocation arguments, how answers are used."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.kubelet import allocation, errors
from kubegpu.kubelet.allocation import PreferredQuery, Request
from kubegpu.kubelet.devices import Device, ResourceDevices

R = "example.com/gpu"


def state(n: int = 4, unhealthy: Sequence[int] = (), numa: Sequence[int | None] | None = None) -> ResourceDevices:
    devs = []
    for i in range(n):
        node = None if numa is None else numa[i]
        devs.append(Device(f"d{i}", "Unhealthy" if i in unhealthy else "Healthy", None if node is None else (node,)))
    return ResourceDevices.from_snapshot(devs)


def request(required: int, **kw: object) -> Request:
    defaults: dict[str, object] = {
        "pod_uid": "uid-1",
        "container": "c",
        "resource": R,
        "required": required,
        "existing": None,
        "registered": True,
        "devices": state(),
        "in_use": frozenset(),
    }
    defaults.update(kw)
    return Request(**defaults)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (
            request(2, existing=frozenset({"d0"})),
            'pod "uid-1" container "c" changed request for resource "example.com/gpu" from 1 to 2',
        ),
        (request(1, registered=False), "cannot allocate unregistered device example.com/gpu"),
        (
            request(1, devices=ResourceDevices()),
            "no healthy devices present; cannot allocate unhealthy devices example.com/gpu",
        ),
        (
            request(1, devices=state(4, unhealthy=[0, 1, 2, 3])),
            "no healthy devices present; cannot allocate unhealthy devices",
        ),
        (
            request(1, existing=frozenset({"d1"}), devices=state(4, unhealthy=[1])),
            "previously allocated devices are no longer healthy; cannot allocate unhealthy devices example.com/gpu",
        ),
        (
            request(9, devices=state(8)),
            "requested number of devices unavailable for example.com/gpu. Requested: 9, Available: 8",
        ),
        (request(3, in_use=frozenset({"d0", "d1"})), "Requested: 3, Available: 2"),
        (request(2, devices=state(4, unhealthy=[0, 1, 2])), "Requested: 2, Available: 1"),
        (request(3, reusable=("d0",), in_use=frozenset({"d0", "d1", "d2"})), "Requested: 2, Available: 1"),
        # Registration and health are checked before the count (kubernetes#109595).
        (request(0, registered=False), "cannot allocate unregistered device"),
        (request(0, devices=ResourceDevices()), "no healthy devices present"),
    ],
    ids=[
        "changed-request",
        "unregistered",
        "restored-not-yet-registered",
        "all-unhealthy",
        "held-device-became-unhealthy",
        "nine-on-eight",
        "others-hold-devices",
        "unhealthy-not-available",
        "requested-counts-what-reuse-left",
        "zero-request-unregistered",
        "zero-request-no-healthy",
    ],
)
def test_refusals_carry_the_kubelets_text(req: Request, message: str) -> None:
    with pytest.raises(errors.AllocationError) as exc:
        allocation.plan(req)
    assert message in str(exc.value)


def test_a_container_that_already_holds_its_devices_needs_no_allocation() -> None:
    assert allocation.plan(request(2, existing=frozenset({"d0", "d1"}))) is None


def test_without_topology_the_plugin_is_asked_with_all_available_and_the_full_request() -> None:
    plan = allocation.plan(request(2, in_use=frozenset({"d1"})))
    assert plan is not None
    assert plan.query == PreferredQuery(available=("d0", "d2", "d3"), must_include=(), size=2)
    assert allocation.complete(plan, ["d3", "d2"]) == ("d3", "d2")


def test_verified_reuse_example_init_two_then_app_three() -> None:
    # kubelet-device-manager.md §7 [verified]: available=[4 ids], must_include=[the 2 reused], allocation_size=3.
    plan = allocation.plan(request(3, reusable=("d2", "d3"), in_use=frozenset({"d2", "d3"})))
    assert plan is not None
    assert plan.picked == ("d2", "d3")
    assert plan.query == PreferredQuery(available=("d0", "d1", "d2", "d3"), must_include=("d2", "d3"), size=3)
    assert allocation.complete(plan, ["d2", "d3", "d1"]) == ("d2", "d3", "d1")


def test_reuse_alone_can_satisfy_a_request_without_asking_the_plugin() -> None:
    plan = allocation.plan(request(2, reusable=("d3", "d1", "d0"), in_use=frozenset({"d0", "d1", "d3"})))
    assert plan is not None and plan.query is None
    assert allocation.complete(plan) == ("d3", "d1")


@pytest.mark.parametrize(
    ("answer", "chosen"),
    [
        ([], ("d0", "d2")),
        (["d3"], ("d3", "d0")),
        (["bogus", "d3", "d3"], ("d3", "d0")),
        (["d2", "d3", "d0"], ("d2", "d3")),
        (["d1"], ("d0", "d2")),
    ],
    ids=[
        "no-answer-fills-in-listing-order",
        "short-answer-is-filled",
        "unknown-and-duplicate-ids-ignored",
        "long-answer-truncated",
        "in-use-device-in-answer-ignored",
    ],
)
def test_the_answer_is_intersected_with_what_was_offered_and_filled_up(
    answer: list[str], chosen: tuple[str, ...]
) -> None:
    plan = allocation.plan(request(2, in_use=frozenset({"d1"})))
    assert plan is not None
    assert allocation.complete(plan, answer) == chosen


NUMA = [0, 0, 1, 1, None]


def test_with_an_affinity_that_holds_more_than_needed_only_aligned_devices_are_offered() -> None:
    plan = allocation.plan(request(1, devices=state(5, numa=NUMA), affinity=frozenset({1})))
    assert plan is not None
    assert plan.query == PreferredQuery(available=("d2", "d3"), must_include=(), size=1)
    assert allocation.complete(plan, ["d0"]) == ("d2",)


def test_when_aligned_devices_do_not_suffice_they_are_all_taken_then_the_rest_is_offered() -> None:
    plan = allocation.plan(request(3, devices=state(5, numa=NUMA), affinity=frozenset({1})))
    assert plan is not None
    assert plan.picked == ("d2", "d3")
    assert plan.query == PreferredQuery(available=("d0", "d1", "d2", "d3", "d4"), must_include=("d2", "d3"), size=3)
    # No answer: unaligned devices come before devices without topology.
    assert allocation.complete(plan, []) == ("d2", "d3", "d0")
    assert allocation.complete(plan, ["d4"]) == ("d2", "d3", "d4")


def test_split_by_affinity_puts_a_multi_numa_device_in_the_group_of_its_first_ranked_node() -> None:
    devs = ResourceDevices.from_snapshot(
        [
            Device("a", "Healthy", (0, 1)),
            Device("b", "Healthy", (1,)),
            Device("c", "Healthy", (0,)),
            Device("d", "Healthy"),
        ]
    )
    aligned, unaligned, without = allocation.split_by_affinity(devs, ["a", "b", "c", "d"], frozenset({1}))
    assert (aligned, unaligned, without) == (["a", "b"], ["c"], ["d"])
    assert allocation.split_by_affinity(devs, ["a", "d"], None) == ([], [], ["a", "d"])


def test_an_impossible_completion_reports_what_it_got() -> None:
    plan = allocation.Plan(R, 3, ("d0",), 2, PreferredQuery(("d0",), ("d0",), 3), (), ())
    with pytest.raises(
        errors.AllocationError, match=r"unexpectedly allocated less resources than required\. Requested: 3, Got: 1"
    ):
        allocation.complete(plan)


@given(
    n=st.integers(1, 8),
    required=st.integers(1, 8),
    in_use=st.sets(st.integers(0, 7)),
    unhealthy=st.sets(st.integers(0, 7)),
    reuse=st.sets(st.integers(0, 7)),
    answer=st.lists(st.integers(0, 9), max_size=10),
    numa=st.lists(st.sampled_from([None, 0, 1]), min_size=8, max_size=8),
    affinity=st.sampled_from([None, frozenset({0}), frozenset({1}), frozenset({0, 1})]),
)
def test_a_completed_allocation_is_k_distinct_devices_never_anothers(
    n: int,
    required: int,
    in_use: set[int],
    unhealthy: set[int],
    reuse: set[int],
    answer: list[int],
    numa: list[int | None],
    affinity: frozenset[int] | None,
) -> None:
    devices = state(n, unhealthy=sorted(unhealthy), numa=numa)
    reusable = tuple(f"d{i}" for i in sorted(reuse) if i < n)
    busy = frozenset(f"d{i}" for i in in_use if i < n) | frozenset(reusable)
    req = request(required, devices=devices, in_use=busy, reusable=reusable, affinity=affinity)
    try:
        plan = allocation.plan(req)
    except errors.AllocationError:
        return
    assert plan is not None
    chosen = allocation.complete(plan, [f"d{i}" for i in answer])
    assert len(chosen) == len(set(chosen)) == required
    taken_from_reuse = set(chosen) & set(reusable)
    assert set(chosen) - taken_from_reuse <= devices.healthy - busy
    if plan.query is not None:
        assert plan.query.size == required
        assert set(plan.query.must_include) <= set(plan.query.available)
