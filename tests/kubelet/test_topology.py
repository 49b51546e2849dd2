"""NUMA hints for device resources and the topology manager's policies."""

from __future__ import annotations

import pytest

from kubegpu.kubelet import topology
from kubegpu.kubelet.devices import Device, ResourceDevices
from kubegpu.kubelet.topology import Hint


def devs(numa: list[int | None]) -> ResourceDevices:
    return ResourceDevices.from_snapshot(
        Device(f"d{i}", "Healthy", None if n is None else (n,)) for i, n in enumerate(numa)
    )


def test_verified_hints_for_two_of_four_devices_on_two_nodes() -> None:
    # kubelet-device-manager.md §10 [verified]: [{0} preferred, {1} preferred, {0,1} not preferred].
    state = devs([0, 0, 1, 1])
    hints = topology.device_hints(state, [0, 1], ["d0", "d1", "d2", "d3"], [], 2)
    assert hints == [Hint(frozenset({0}), True), Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]


def test_a_node_without_enough_free_devices_gives_no_hint() -> None:
    hints = topology.device_hints(devs([0, 0, 1, 1]), [0, 1], ["d0", "d2", "d3"], [], 2)
    assert hints == [Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]


def test_reusable_devices_must_lie_inside_the_mask() -> None:
    hints = topology.device_hints(devs([0, 0, 1, 1]), [0, 1], ["d2", "d3"], ["d0"], 2)
    assert hints == [Hint(frozenset({0, 1}), False)]


def test_preference_is_the_smallest_mask_that_could_ever_hold_the_request() -> None:
    # Only node 1 has room now, but node 0 could hold 2 devices: {1} is preferred, {0,1} not.
    hints = topology.device_hints(devs([0, 0, 1, 1]), [0, 1], ["d2", "d3"], [], 2)
    assert hints == [Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]


@pytest.mark.parametrize(
    ("policy", "hints", "best", "admit"),
    [
        ("none", {"r": []}, Hint(None, True), True),
        ("best-effort", {"r": [Hint(frozenset({0, 1}), False)]}, Hint(frozenset({0, 1}), False), True),
        ("restricted", {"r": [Hint(frozenset({0, 1}), False)]}, Hint(frozenset({0, 1}), False), False),
        (
            "restricted",
            {"r": [Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]},
            Hint(frozenset({1}), True),
            True,
        ),
        ("restricted", {"r": []}, Hint(frozenset({0, 1}), False), False),
        ("restricted", {"r": None}, Hint(frozenset({0, 1}), True), True),
        ("single-numa-node", {"r": [Hint(frozenset({0, 1}), True)]}, Hint(None, False), False),
        (
            "single-numa-node",
            {"r": [Hint(frozenset({0}), True), Hint(frozenset({1}), True)]},
            Hint(frozenset({0}), True),
            True,
        ),
        ("single-numa-node", {"r": None}, Hint(None, True), True),
        (
            "best-effort",
            {"a": [Hint(frozenset({0}), True), Hint(frozenset({1}), True)], "b": [Hint(frozenset({1}), True)]},
            Hint(frozenset({1}), True),
            True,
        ),
        (
            "restricted",
            {"a": [Hint(frozenset({0}), True)], "b": [Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]},
            Hint(frozenset({0}), False),
            False,
        ),
    ],
    ids=[
        "none-admits-everything",
        "best-effort-admits-unpreferred",
        "restricted-rejects-unpreferred",
        "restricted-takes-the-preferred-single-node",
        "restricted-rejects-no-possible-affinity",
        "no-preference-is-preferred-any",
        "single-numa-rejects-two-nodes",
        "single-numa-picks-the-narrowest-lowest",
        "single-numa-no-preference-is-any",
        "two-resources-agree-on-node-1",
        "two-resources-disagree",
    ],
)
def test_policies_merge_hints_like_the_topology_manager(
    policy: str, hints: dict[str, list[Hint] | None], best: Hint, admit: bool
) -> None:
    assert topology.merge(policy, [0, 1], hints) == (best, admit)
