"""The fast solver returns go-gpuallocator's best-effort answer: upstream's tables, the oracle, the edge cases."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubegpu.gpu import profiles
from kubegpu.gpu.model import Topology
from kubegpu.placement import errors, partition, reference, weights
from tests.placement.topologies import DGX1_PASCAL, DGX1_VOLTA, RTX8000, requests, topologies


def _strip(groups: tuple[reference.Group, ...]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(g for g in group if g is not None) for group in groups)


def _allocate_in_turn(topology: Topology, sizes: list[int]) -> list[list[int]]:
    """go-gpuallocator's Allocator: each call picks from what is still free, sorted by index."""
    w = weights.best_effort(topology)
    free = list(range(topology.size))
    answers = []
    for size in sizes:
        chosen = list(partition.solve(w, free, [], size).chosen)
        answers.append(chosen)
        free = [g for g in free if g not in chosen]
    return answers


# (node, sizes in turn, expected answers) — go-gpuallocator's besteffort_test.go Allocator tables.
UPSTREAM_IN_TURN = [
    ("volta-one", DGX1_VOLTA, [1] * 8, [[i] for i in range(8)]),
    ("volta-two", DGX1_VOLTA, [2] * 4, [[0, 3], [1, 2], [4, 7], [5, 6]]),
    ("volta-four", DGX1_VOLTA, [4, 4], [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("volta-eight", DGX1_VOLTA, [8], [list(range(8))]),
    ("pascal-one", DGX1_PASCAL, [1] * 8, [[i] for i in range(8)]),
    ("pascal-two", DGX1_PASCAL, [2] * 4, [[0, 2], [1, 3], [4, 6], [5, 7]]),
    ("pascal-four", DGX1_PASCAL, [4, 4], [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("pascal-eight", DGX1_PASCAL, [8], [list(range(8))]),
    ("rtx8000-one", RTX8000, [1] * 4, [[0], [1], [2], [3]]),
    ("rtx8000-two", RTX8000, [2, 2], [[0, 3], [1, 2]]),
    ("rtx8000-four", RTX8000, [4], [[0, 1, 2, 3]]),
]


@pytest.mark.parametrize(
    ("node", "sizes", "expected"), [c[1:] for c in UPSTREAM_IN_TURN], ids=[c[0] for c in UPSTREAM_IN_TURN]
)
def test_allocating_in_turn_matches_upstream_allocator_tables(
    node: Topology, sizes: list[int], expected: list[list[int]]
) -> None:
    assert _allocate_in_turn(node, sizes) == expected


@pytest.mark.parametrize("node", [DGX1_VOLTA, DGX1_PASCAL, RTX8000], ids=["volta", "pascal", "rtx8000"])
def test_a_full_node_has_nothing_left_for_one_more_gpu(node: Topology) -> None:
    w = weights.best_effort(node)
    with pytest.raises(errors.PlacementError, match="cannot pick 1 GPUs from 0 available"):
        partition.solve(w, [], [], 1)


# go-gpuallocator's TestBestEffortAllocate on the DGX-1 Volta node: (available, required, size, expected).
UPSTREAM_POLICY = [
    ("single-nvlink-prefer-same-switch", [0, 2, 4, 5], [], 2, [4, 5]),
    ("single-nvlink-prefer-same-socket", [0, 4, 5, 6], [], 2, [5, 6]),
    ("prefer-dual-nvlink-same-socket", [0, 3, 1], [], 2, [0, 3]),
    ("prefer-dual-nvlink-cross-socket", [0, 1, 4], [], 2, [0, 4]),
    ("must-include-size-1", list(range(8)), [4], 1, [4]),
    ("must-include-size-2", list(range(8)), [4], 2, [4, 7]),
    ("must-include-size-4", list(range(8)), [4], 4, [4, 5, 6, 7]),
    ("must-include-full-set", list(range(8)), [0, 2, 4, 6], 4, [0, 2, 4, 6]),
]


@pytest.mark.parametrize(
    ("available", "required", "size", "expected"), [c[1:] for c in UPSTREAM_POLICY], ids=[c[0] for c in UPSTREAM_POLICY]
)
def test_dgx1_volta_requests_match_upstream_policy_tables(
    available: list[int], required: list[int], size: int, expected: list[int]
) -> None:
    w = weights.best_effort(DGX1_VOLTA)
    assert list(partition.solve(w, available, required, size).chosen) == expected


# Where upstream answers [] we raise, naming the problem.
UPSTREAM_EMPTY = [
    ("must-include-unavailable", [1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], 4, "must-include GPU 0 is not in the available"),
    (
        "must-include-too-many",
        list(range(8)),
        [1, 2, 3, 4, 5, 6],
        4,
        "must-include lists 6 GPUs but the request is for 4",
    ),
    (
        "required-more-than-available",
        [1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5, 6],
        1,
        "must-include GPU 6 is not in the available",
    ),
    ("size-zero", [0, 1], [], 0, "size must be a positive number"),
    ("more-than-available", [0, 1], [], 3, "cannot pick 3 GPUs from 2 available"),
    ("unknown-gpu", [0, 9], [], 1, "available GPU 9 is not on this node"),
    ("duplicate", [0, 0], [], 1, "GPU 0 is listed twice in available"),
]


@pytest.mark.parametrize(
    ("available", "required", "size", "message"), [c[1:] for c in UPSTREAM_EMPTY], ids=[c[0] for c in UPSTREAM_EMPTY]
)
def test_impossible_requests_raise_a_placement_error_naming_the_problem(
    available: list[int], required: list[int], size: int, message: str
) -> None:
    with pytest.raises(errors.PlacementError, match=message):
        partition.solve(weights.best_effort(DGX1_VOLTA), available, required, size)


def test_dgx1_v100_profile_answers_the_worked_example_of_reference_section_f() -> None:
    w = weights.best_effort(profiles.load("dgx1-v100").topology)
    first = partition.solve(w, range(8), [], 2)
    assert first.chosen == (0, 3)
    assert first.score == 920
    assert first.partition == ((0, 3), (1, 2), (4, 7), (5, 6))
    second = partition.solve(w, [1, 2, 4, 5, 6, 7], [], 2)
    assert second.chosen == (1, 2)
    assert second.score == 690


def test_the_best_set_may_sit_in_the_last_slot_of_a_seven_set_partition() -> None:
    # go-gpuallocator's TestBestEffortAllocateRetainsBestPartition: 14 GPUs, only NVLinks, no PCIe links.
    w = [[0] * 14 for _ in range(14)]
    for a in range(0, 12, 2):
        w[a][a + 1] = w[a + 1][a] = 200
    w[12][13] = w[13][12] = 400
    solution = partition.solve(tuple(map(tuple, w)), range(14), [], 2)
    assert solution.chosen == (12, 13)
    assert solution.partition == tuple((a, a + 1) for a in range(0, 14, 2))


def test_where_upstream_would_return_the_padded_set_the_best_full_set_is_returned() -> None:
    # 5 GPUs, size 3: the best partition is {0,1,2}{3,4,pad}; upstream returns [3, 4, nil], which no caller can use.
    w = [[10] * 5 for _ in range(5)]
    w[3][4] = w[4][3] = 200
    matrix = tuple(tuple(0 if i == j else w[i][j] for j in range(5)) for i in range(5))
    literal = reference.best_effort(matrix, list(range(5)), [], 3)
    assert literal is not None
    assert literal.upstream_set == (3, 4, None)
    assert partition.solve(matrix, range(5), [], 3).chosen == (0, 1, 2) == literal.chosen


def _check_against_reference(
    topology: Topology, request: tuple[list[int], list[int], int], policy_weights: str, vectorised: bool | None = None
) -> None:
    available, must, size = request
    w = weights.best_effort(topology) if policy_weights == "best-effort" else weights.topology_aware(topology)
    fast = partition.solve(w, available, must, size, vectorised=vectorised)
    slow = reference.best_effort(w, sorted(available), must, size)
    assert slow is not None
    assert fast.chosen == slow.chosen
    assert fast.score == slow.score
    assert fast.partition == _strip(slow.partition)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    topology=topologies(max_gpus=8),
    policy_weights=st.sampled_from(["best-effort", "topology"]),
    vectorised=st.booleans(),
)
def test_on_up_to_8_gpus_the_answer_and_partition_equal_exhaustive_search(
    data: st.DataObject, topology: Topology, policy_weights: str, vectorised: bool
) -> None:
    # Both table engines: plain Python (what nodes of up to 12 GPUs use) and numpy (what larger ones use).
    _check_against_reference(topology, data.draw(requests(topology.size)), policy_weights, vectorised)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("profile", ["hgx2-v100", "pcie-16xa40"])
def test_on_16_gpu_profiles_answers_equal_exhaustive_search_on_up_to_12_free(profile: str, seed: int) -> None:
    # Up to 12 free GPUs keeps the literal enumeration at ~15k partitions; every size is tried.
    topology = profiles.load(profile).topology
    rng = random.Random(seed)
    available = rng.sample(range(16), rng.randint(8, 12))
    for size in range(2, len(available) + 1):
        must = rng.sample(available, rng.randint(0, min(2, size)))
        _check_against_reference(topology, (available, must, size), rng.choice(["best-effort", "topology"]))


@pytest.mark.parametrize("vectorised", [False, True], ids=["plain", "numpy"])
@pytest.mark.parametrize("must", [[], [0], [5], [3, 9], [2, 6, 9]], ids=["none", "lowest", "one", "two", "three"])
def test_when_every_pair_ties_the_first_split_in_upstream_order_wins(must: list[int], vectorised: bool) -> None:
    # Uniform weights make every split optimal: only upstream's enumeration order decides (10 GPUs, all sizes).
    w = tuple(tuple(0 if i == j else 10 for j in range(10)) for i in range(10))
    for size in range(max(1, len(must)), 11):
        fast = partition.solve(w, range(10), must, size, vectorised=vectorised)
        slow = reference.best_effort(w, list(range(10)), must, size)
        assert slow is not None
        assert (fast.chosen, fast.partition) == (slow.chosen, _strip(slow.partition)), size


@settings(max_examples=200, deadline=None)
@given(data=st.data(), topology=topologies(max_gpus=8))
def test_order_of_available_never_changes_the_answer(data: st.DataObject, topology: Topology) -> None:
    available, must, size = data.draw(requests(topology.size))
    shuffled = data.draw(st.permutations(available))
    w = weights.best_effort(topology)
    assert partition.solve(w, shuffled, must, size) == partition.solve(w, sorted(available), must, size)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), topology=topologies(max_gpus=8))
def test_answer_holds_must_include_only_available_gpus_and_exactly_size(
    data: st.DataObject, topology: Topology
) -> None:
    available, must, size = data.draw(requests(topology.size))
    chosen = partition.solve(weights.topology_aware(topology), available, must, size).chosen
    assert len(chosen) == size == len(set(chosen))
    assert set(must) <= set(chosen) <= set(available)
    assert list(chosen) == sorted(chosen)


def test_the_partition_of_a_full_16_gpu_node_covers_every_gpu_once() -> None:
    solution = partition.solve(weights.best_effort(profiles.load("hgx2-v100").topology), range(16), [], 3)
    assert sorted(itertools.chain.from_iterable(solution.partition)) == list(range(16))
    assert [len(s) for s in solution.partition].count(1) == 1  # 16 = 5 triples + the padded set


def test_more_than_sixteen_gpus_is_refused_with_a_clear_error() -> None:
    w = tuple(tuple(0 if i == j else 10 for j in range(17)) for i in range(17))
    with pytest.raises(errors.PlacementError, match="at most 16 GPUs per node, this one has 17"):
        partition.solve(w, range(17), [], 2)


def test_placing_on_an_8_gpu_node_never_loads_numpy() -> None:
    # The device plugin imports placement; numpy would cost it ~16 MiB and ~0.2 s on every node.
    code = (
        "import sys; from kubegpu import placement; from kubegpu.gpu import profiles; "
        "t = profiles.load('dgx-a100').topology; placement.prepare('topology', t); "
        "print(placement.pick('topology', t, range(8), [3], 4), 'numpy' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.split("]")[-1].strip() == "False"
