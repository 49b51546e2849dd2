"""Pair weights: go-gpuallocator's table for best-effort; NVSwitch and NUMA for topology."""

from __future__ import annotations

import pytest

from kubegpu.gpu import profiles
from kubegpu.placement import weights
from tests.placement.topologies import DGX1_VOLTA, NODE, PIX, build


@pytest.mark.parametrize(
    ("pair", "expected"),
    [((2, 3), 250), ((0, 3), 230), ((0, 4), 210), ((0, 1), 150), ((0, 5), 10), ((1, 3), 130)],
    ids=["two-links-single-switch", "two-links-host-bridge", "two-links-cross-cpu", "one-link", "pcie-only", "phb"],
)
def test_best_effort_pair_scores_on_dgx1_volta_follow_the_upstream_table(pair: tuple[int, int], expected: int) -> None:
    w = weights.best_effort(DGX1_VOLTA)
    a, b = pair
    assert w[a][b] == w[b][a] == expected


@pytest.mark.parametrize(
    ("profile", "pair", "expected"),
    [("dgx-a100", (0, 1), 40), ("dgx-a100", (0, 2), 20), ("dgx-a100", (0, 4), 10), ("hgx-h200", (0, 1), 20)],
    ids=["a100-multi-switch", "a100-same-cpu", "a100-cross-cpu", "h200-same-cpu"],
)
def test_best_effort_gives_nvswitch_pairs_no_nvlink_credit(profile: str, pair: tuple[int, int], expected: int) -> None:
    topology = profiles.load(profile).topology
    assert weights.best_effort(topology)[pair[0]][pair[1]] == expected


def test_topology_counts_a_common_fabric_as_the_fewer_fabric_links() -> None:
    t = build(3, {}, {}, nvswitch=("f", "f", "g"), nvswitch_links=(12, 6, 12))
    assert weights.nvlinks(t, 0, 1, fabric=True) == 6
    assert weights.nvlinks(t, 0, 1, fabric=False) == 0
    assert weights.nvlinks(t, 0, 2, fabric=True) == 0  # different fabrics do not reach each other


def test_topology_weights_scale_the_link_score_and_add_one_for_the_same_numa_node() -> None:
    t = build(3, {(0, 1): PIX, (0, 2): PIX, (1, 2): NODE}, {(1, 2): 1}, numa=(0, 0, 1))
    w = weights.topology_aware(t)
    scale = weights.numa_scale(3)
    assert w[0][1] == 50 * scale + 1
    assert w[0][2] == 50 * scale
    assert w[1][2] == 120 * scale


def test_numa_points_never_outweigh_one_link_point() -> None:
    # Every pair of 16 GPUs on one NUMA node cannot add up to the smallest link difference.
    assert weights.numa_scale(16) > 16 * 15 // 2


def test_set_score_sums_every_pair_once() -> None:
    w = weights.best_effort(DGX1_VOLTA)
    assert weights.set_score(w, [0, 1, 2, 3]) == 150 + 130 + 230 + 230 + 130 + 250
    assert weights.set_score(w, [5]) == 0
