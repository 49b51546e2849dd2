"""distributed and packed: NVIDIA's greedy replica policy, deterministic, and grouped by parent GPU for MIG."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubegpu.placement import errors, shared
from kubegpu.placement.shared import SharedDevice


def replicas(gpus: dict[str, int]) -> list[SharedDevice]:
    """Time-slicing replicas as NVIDIA names them: ``<gpu>::<n>``."""
    return [SharedDevice(f"{gpu}::{r}", gpu) for gpu, count in gpus.items() for r in range(count)]


def per_gpu(ids: list[str]) -> dict[str, int]:
    return dict(Counter(i.split("::")[0] for i in ids))


# NVIDIA's allocate_test.go and reference section f examples: (policy, replicas, available or None=all, size, counts)
NVIDIA_EXAMPLES = [
    ("distributed-2x4-size-2", "distributed", {"gpu0": 4, "gpu1": 4}, None, 2, {"gpu0": 1, "gpu1": 1}),
    (
        "distributed-3x2-size-3",
        "distributed",
        {"gpu0": 2, "gpu1": 2, "gpu2": 2},
        None,
        3,
        {"gpu0": 1, "gpu1": 1, "gpu2": 1},
    ),
    ("distributed-2x4-size-4", "distributed", {"gpu0": 4, "gpu1": 4}, None, 4, {"gpu0": 2, "gpu1": 2}),
    ("distributed-single-gpu", "distributed", {"gpu0": 4}, None, 1, {"gpu0": 1}),
    (
        "distributed-partly-allocated",
        "distributed",
        {"GPU-0": 2, "GPU-1": 2},
        ["GPU-0::0", "GPU-0::1", "GPU-1::1"],
        2,
        {"GPU-0": 1, "GPU-1": 1},
    ),
    ("packed-2x4-size-2", "packed", {"gpu0": 4, "gpu1": 4}, None, 2, {"gpu0": 2}),
    ("packed-3x2-size-3", "packed", {"gpu0": 2, "gpu1": 2, "gpu2": 2}, None, 3, {"gpu0": 2, "gpu1": 1}),
    ("packed-2x4-size-4", "packed", {"gpu0": 4, "gpu1": 4}, None, 4, {"gpu0": 4}),
    ("packed-2x4-size-5", "packed", {"gpu0": 4, "gpu1": 4}, None, 5, {"gpu0": 4, "gpu1": 1}),
    (
        "packed-fills-the-busier-gpu",
        "packed",
        {"a": 4, "b": 4},
        ["a::2", "a::3", "b::0", "b::1", "b::2", "b::3"],
        2,
        {"a": 2},
    ),
]


@pytest.mark.parametrize(
    ("policy", "gpus", "available", "size", "counts"),
    [c[1:] for c in NVIDIA_EXAMPLES],
    ids=[c[0] for c in NVIDIA_EXAMPLES],
)
def test_per_gpu_counts_match_nvidias_greedy_policy(
    policy: str, gpus: dict[str, int], available: list[str] | None, size: int, counts: dict[str, int]
) -> None:
    devices = replicas(gpus)
    offered = [d.id for d in devices] if available is None else available
    assert per_gpu(shared.pick(policy, devices, offered, [], size)) == counts


def test_ties_go_to_the_gpu_listed_first_and_its_first_free_replica() -> None:
    devices = replicas({"gpu0": 2, "gpu1": 2})
    assert shared.pick("distributed", devices, ["gpu1::1", "gpu1::0", "gpu0::1", "gpu0::0"], [], 3) == [
        "gpu0::0",
        "gpu1::0",
        "gpu0::1",
    ]


def test_must_include_comes_first_as_given_and_counts_as_allocated_and_taken() -> None:
    devices = replicas({"g0": 2, "g1": 2, "g2": 2})
    # g1 holds the must-include replica: allocated 1 and already serving this request, so distributed spreads away.
    chosen = shared.pick("distributed", devices, [d.id for d in devices], ["g1::1"], 3)
    assert chosen == ["g1::1", "g0::0", "g2::0"]
    packed = shared.pick("packed", devices, [d.id for d in devices], ["g1::1"], 2)
    assert packed == ["g1::1", "g1::0"]


def mig(layout: dict[str, int]) -> list[SharedDevice]:
    """MIG devices of one profile, grouped by their parent GPU (NVIDIA groups by the MIG UUID itself)."""
    return [SharedDevice(f"MIG-{gpu}-{j}", f"GPU-{gpu}") for gpu, count in layout.items() for j in range(count)]


def test_packed_mig_devices_fill_the_parent_gpu_that_is_already_busy() -> None:
    devices = mig({"a": 3, "b": 3})
    free = ["MIG-a-1", "MIG-a-2", "MIG-b-0", "MIG-b-1", "MIG-b-2"]  # MIG-a-0 is in use
    assert shared.pick("packed", devices, free, [], 2) == ["MIG-a-1", "MIG-a-2"]


def test_distributed_mig_devices_spread_over_parent_gpus_starting_with_the_idle_one() -> None:
    devices = mig({"a": 3, "b": 3})
    free = ["MIG-a-1", "MIG-a-2", "MIG-b-0", "MIG-b-1", "MIG-b-2"]
    assert shared.pick("distributed", devices, free, [], 2) == ["MIG-b-0", "MIG-a-1"]


ERRORS = [
    ("unknown-policy", "spread", ["g0::0"], [], 1, "unknown shared-device policy 'spread'"),
    ("size-zero", "packed", ["g0::0"], [], 0, "size must be a positive number of devices"),
    ("unknown-id", "packed", ["gpu9::0"], [], 1, "available device 'gpu9::0' is not a device of this resource"),
    ("duplicate", "packed", ["g0::0", "g0::0"], [], 1, "listed twice in available"),
    (
        "must-include-unavailable",
        "packed",
        ["g0::0"],
        ["g0::1"],
        1,
        "must-include device 'g0::1' is not in the available",
    ),
    ("must-include-too-many", "packed", ["g0::0", "g0::1"], ["g0::0", "g0::1"], 1, "must-include lists 2 devices"),
    ("not-enough", "distributed", ["g0::0", "g0::1"], [], 3, "not enough available devices: 3 more needed"),
]


@pytest.mark.parametrize(
    ("policy", "available", "must", "size", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_impossible_requests_raise_naming_the_problem(
    policy: str, available: list[str], must: list[str], size: int, message: str
) -> None:
    with pytest.raises(errors.PlacementError, match=message):
        shared.pick(policy, replicas({"g0": 2, "g1": 2}), available, must, size)


@st.composite
def shared_requests(draw: st.DrawFn) -> tuple[list[SharedDevice], list[str], list[str], int]:
    gpus = {f"g{i}": draw(st.integers(1, 5)) for i in range(draw(st.integers(1, 5)))}
    devices = replicas(gpus)
    available = draw(st.lists(st.sampled_from([d.id for d in devices]), min_size=1, unique=True))
    size = draw(st.integers(1, len(available)))
    must = draw(st.lists(st.sampled_from(available), max_size=size, unique=True))
    return devices, available, must, size


@settings(max_examples=200, deadline=None)
@given(request=shared_requests(), policy=st.sampled_from(shared.POLICIES), data=st.data())
def test_answer_is_must_include_then_distinct_available_devices_of_exact_size_whatever_the_order(
    request: tuple[list[SharedDevice], list[str], list[str], int], policy: str, data: st.DataObject
) -> None:
    devices, available, must, size = request
    chosen = shared.pick(policy, devices, available, must, size)
    assert len(chosen) == size == len(set(chosen))
    assert chosen[: len(must)] == must
    assert set(chosen) <= set(available)
    assert shared.pick(policy, devices, data.draw(st.permutations(available)), must, size) == chosen


@settings(max_examples=100, deadline=None)
@given(gpus=st.integers(1, 6), per=st.integers(1, 6), data=st.data())
def test_distributed_on_a_free_node_keeps_per_gpu_counts_within_one(gpus: int, per: int, data: st.DataObject) -> None:
    devices = replicas({f"g{i}": per for i in range(gpus)})
    size = data.draw(st.integers(1, gpus * per))
    counts = per_gpu(shared.pick("distributed", devices, [d.id for d in devices], [], size))
    values = [counts.get(f"g{i}", 0) for i in range(gpus)]
    assert max(values) - min(values) <= 1
