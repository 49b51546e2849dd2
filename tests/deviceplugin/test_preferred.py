"""GetPreferredAllocation policy: validation, hand-checked picks on shipped machines, and properties."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubegpu.deviceplugin import preferred, resources
from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.gpu import profiles
from kubegpu.gpu.model import Machine

PROFILES = ["dgx-a100", "dgx1-v100", "pcie-4xt4", "hgx-h200", "a100-mig"]
MACHINES: dict[str, Machine] = {name: profiles.load(name) for name in PROFILES}
GPU_RESOURCES = {name: resources.build(m)[0] for name, m in MACHINES.items()}


def pick(profile: str, available: list[int], must: list[int], size: int) -> list[int]:
    """Run the policy with GPU indices instead of UUIDs."""
    machine = MACHINES[profile]
    uuid = [g.uuid for g in machine.gpus]
    result = preferred.preferred(
        GPU_RESOURCES[profile], machine.topology, [uuid[i] for i in available], [uuid[i] for i in must], size
    )
    return [uuid.index(u) for u in result]


ALL = list(range(8))


@pytest.mark.parametrize(
    ("profile", "available", "must", "size", "expected"),
    [
        ("dgx-a100", ALL, [], 4, [0, 1, 2, 3]),
        ("dgx-a100", ALL, [], 2, [0, 1]),
        ("dgx-a100", ALL, [5], 2, [4, 5]),
        ("dgx-a100", [0, 4, 5, 6], [], 2, [4, 5]),
        ("dgx-a100", [0, 1, 2, 4, 5, 6], [], 3, [0, 1, 2]),
        ("dgx-a100", ALL, [], 8, ALL),
        ("dgx1-v100", ALL, [], 2, [0, 3]),
        ("dgx1-v100", ALL, [2], 2, [2, 3]),
        ("dgx1-v100", ALL, [4], 2, [4, 7]),
        ("pcie-4xt4", [0, 1, 2, 3], [], 2, [0, 1]),
        ("pcie-4xt4", [0, 2, 3], [], 2, [2, 3]),
        ("pcie-4xt4", [0, 2, 3], [0], 2, [0, 2]),
    ],
    ids=[
        "a100-4-fills-numa0",
        "a100-2-same-switch",
        "a100-must5-partner-on-its-switch",
        "a100-best-fit-numa1-keeps-no-lonely-gpu",
        "a100-3-on-one-numa",
        "a100-all-8",
        "v100-2-double-nvlink-pair",
        "v100-must2-double-nvlink-partner",
        "v100-must4-double-nvlink-partner",
        "t4-2-same-switch",
        "t4-best-fit-avoids-cross-cpu",
        "t4-must-include-kept-even-across-cpus",
    ],
)
def test_preferred_picks_numa_local_best_linked_gpus(
    profile: str, available: list[int], must: list[int], size: int, expected: list[int]
) -> None:
    assert pick(profile, available, must, size) == expected


@pytest.mark.parametrize(
    ("available", "must", "size", "message"),
    [
        ([0, 1], [], 0, "allocation size must be at least 1, got 0"),
        ([0, 1], [], -3, "allocation size must be at least 1, got -3"),
        ([0, 1], [], 3, "allocation size 3 exceeds the 2 available devices"),
        ([0, 1], [2], 2, "is not among the available devices"),
        ([0, 1, 2], [0, 1], 1, "allocation size 1 is smaller than the 2 must-include devices"),
        ([], [], 1, "allocation size 1 exceeds the 0 available devices"),
    ],
    ids=["size-zero", "size-negative", "size-over-available", "must-not-available", "size-under-must", "none"],
)
def test_impossible_requests_are_invalid_never_short(
    available: list[int], must: list[int], size: int, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message) as caught:
        pick("dgx-a100", available, must, size)
    assert str(caught.value).startswith('invalid preferred allocation request for "nvidia.com/gpu": ')


@pytest.mark.parametrize("where", ["available", "must"])
def test_unknown_ids_are_invalid_naming_the_id(where: str) -> None:
    machine = MACHINES["dgx-a100"]
    uuids = [g.uuid for g in machine.gpus]
    available = [*uuids, "GPU-nope"] if where == "available" else uuids
    must = ["GPU-nope"] if where == "must" else []
    with pytest.raises(InvalidRequest, match="unknown device: GPU-nope"):
        preferred.preferred(GPU_RESOURCES["dgx-a100"], machine.topology, available, must, 1)


def test_duplicates_in_the_request_count_once() -> None:
    machine = MACHINES["dgx-a100"]
    u = [g.uuid for g in machine.gpus]
    result = preferred.preferred(GPU_RESOURCES["dgx-a100"], machine.topology, [u[0], u[0], u[1]], [u[1], u[1]], 2)
    assert sorted(result) == sorted([u[0], u[1]])
    with pytest.raises(InvalidRequest, match="exceeds the 2 available"):
        preferred.preferred(GPU_RESOURCES["dgx-a100"], machine.topology, [u[0], u[0], u[1]], [], 3)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, list[int], list[int], int]:
    profile = draw(st.sampled_from(PROFILES))
    count = len(MACHINES[profile].gpus)
    available = draw(st.lists(st.integers(0, count - 1), min_size=1, unique=True))
    must = draw(st.lists(st.sampled_from(available), unique=True))
    size = draw(st.integers(max(1, len(must)), len(available)))
    return profile, available, must, size


@given(requests(), st.randoms(use_true_random=False))
def test_answer_includes_must_stays_in_available_has_exact_size_and_ignores_order(
    request: tuple[str, list[int], list[int], int], rnd: random.Random
) -> None:
    profile, available, must, size = request
    result = pick(profile, available, must, size)
    assert len(result) == size == len(set(result))
    assert set(must) <= set(result) <= set(available)
    shuffled_available, shuffled_must = available[:], must[:]
    rnd.shuffle(shuffled_available)
    rnd.shuffle(shuffled_must)
    assert pick(profile, shuffled_available + shuffled_available[:2], shuffled_must, size) == result


@given(requests(), st.integers(1, 4))
def test_asking_more_than_available_is_always_invalid(
    request: tuple[str, list[int], list[int], int], extra: int
) -> None:
    profile, available, must, _ = request
    with pytest.raises(InvalidRequest):
        pick(profile, available, must, len(available) + extra)
