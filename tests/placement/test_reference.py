"""The literal oracle enumerates exactly go-gpuallocator's partitions, in its order."""

from __future__ import annotations

import pytest

from kubegpu.placement import reference, weights
from tests.placement.topologies import DGX1_VOLTA

# go-gpuallocator's TestBestEffortIterateGPUPartitions on [0, 1, 2, 3] (None = padding).
ITERATE = [
    ("size-0", 0, []),
    ("size-1", 1, [((0,),), ((1,),), ((2,),), ((3,),)]),
    ("size-2", 2, [((0, 1), (2, 3)), ((0, 2), (1, 3)), ((0, 3), (1, 2))]),
    (
        "size-3",
        3,
        [((0, 1, 2), (3, None, None)), ((0, 1, 3), (2, None, None)), ((0, 2, 3), (1, None, None)),
         ((0, None, None), (1, 2, 3))],
    ),
    ("size-4", 4, [((0, 1, 2, 3),)]),
    ("too-many", 5, []),
]  # fmt: skip


@pytest.mark.parametrize(("size", "expected"), [c[1:] for c in ITERATE], ids=[c[0] for c in ITERATE])
def test_partitions_are_upstreams_in_upstreams_order(size: int, expected: list[tuple[reference.Group, ...]]) -> None:
    assert list(reference.partitions([0, 1, 2, 3], size)) == expected


@pytest.mark.parametrize(("n", "size", "count"), [(6, 2, 15), (8, 2, 105), (8, 4, 35), (7, 3, 70), (5, 2, 15)])
def test_partition_counts_are_those_of_set_partitions_with_one_padded_set(n: int, size: int, count: int) -> None:
    assert sum(1 for _ in reference.partitions(list(range(n)), size)) == count


def test_the_order_of_available_decides_upstream_ties() -> None:
    # DGX-1 Volta, size 2 from all 8: two partitions reach 920; upstream keeps the one it meets first.
    w = weights.best_effort(DGX1_VOLTA)
    forward = reference.best_effort(w, list(range(8)), [], 2)
    backward = reference.best_effort(w, list(range(7, -1, -1)), [], 2)
    assert forward is not None and backward is not None
    assert forward.score == backward.score == 920
    assert forward.chosen == (0, 3)
    assert backward.chosen != forward.chosen


def test_upstream_returns_nothing_when_size_exceeds_available() -> None:
    assert reference.best_effort(((0, 1), (1, 0)), [0, 1], [], 3) is None
