"""The placement API: policy names, whole-GPU and shared entry points, and what topology adds to best-effort."""

from __future__ import annotations

import pytest

from kubegpu import placement
from kubegpu.gpu import profiles
from kubegpu.placement import partition, policies, weights
from tests.placement.topologies import NODE, PIX, build


def test_dgx_a100_size_4_from_all_free_is_one_numa_node_with_topology() -> None:
    topology = profiles.load("dgx-a100").topology
    chosen = placement.pick("topology", topology, range(8), [], 4)
    assert len({topology.numa[g] for g in chosen}) == 1
    assert chosen == [0, 1, 2, 3]


def test_dgx1_v100_acceptance_pairs_through_the_api() -> None:
    topology = profiles.load("dgx1-v100").topology
    assert placement.pick("best-effort", topology, range(8), [], 2) == [0, 3]
    assert placement.pick("best-effort", topology, [7, 6, 5, 4, 2, 1], [], 2) == [1, 2]


def test_topology_breaks_a_score_tie_towards_numa_local_sets_where_best_effort_does_not() -> None:
    # README's worked example: DGX-1 V100 with GPUs 0, 4, 5, 6, 7 free, two GPUs asked.
    topology = profiles.load("dgx1-v100").topology
    assert placement.pick("best-effort", topology, [0, 4, 5, 6, 7], [], 2) == [6, 7]  # leaves 0-4 across CPUs
    assert placement.pick("topology", topology, [0, 4, 5, 6, 7], [], 2) == [4, 7]  # leaves 5-6 on NUMA 1
    be = policies.solve("best-effort", topology, [0, 4, 5, 6, 7], [], 2)
    topo = policies.solve("topology", topology, [0, 4, 5, 6, 7], [], 2)
    assert be.partition == ((0, 4), (5,), (6, 7))
    assert topo.partition == ((0,), (4, 7), (5, 6))
    assert divmod(topo.score, weights.numa_scale(8)) == (be.score, 2)


def test_topology_pairs_gpus_of_one_nvswitch_fabric_where_best_effort_sees_only_pcie() -> None:
    # Two fabrics (0-1 and 2-3) whose PCIe switches cross them: best-effort pairs across fabrics.
    t = build(
        4,
        {(0, 2): PIX, (1, 3): PIX, (0, 1): NODE, (2, 3): NODE},
        {},
        numa=(0, 0, 0, 0),
        nvswitch=("a", "a", "b", "b"),
        nvswitch_links=(12, 12, 12, 12),
    )
    assert placement.pick("best-effort", t, range(4), [], 2) == [0, 2]
    assert placement.pick("topology", t, range(4), [], 2) == [0, 1]


def test_must_include_is_honoured_by_both_whole_gpu_policies() -> None:
    topology = profiles.load("dgx-a100").topology
    for policy in placement.WHOLE_GPU_POLICIES:
        chosen = placement.pick(policy, topology, range(8), [5, 2], 4)
        assert {2, 5} <= set(chosen) and len(chosen) == 4


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("packed", "policy 'packed' places replicas and MIG devices; whole GPUs use topology or best-effort"),
        ("nearest", "unknown placement policy 'nearest'"),
    ],
    ids=["shared-policy-for-whole-gpus", "unknown"],
)
def test_whole_gpu_pick_names_a_wrong_policy(policy: str, message: str) -> None:
    with pytest.raises(placement.PlacementError, match=message):
        placement.pick(policy, profiles.load("dgx-a100").topology, range(8), [], 2)


def test_shared_pick_refuses_a_whole_gpu_policy() -> None:
    devices = [placement.SharedDevice("g0::0", "g0")]
    with pytest.raises(placement.PlacementError, match="policy 'topology' places whole GPUs"):
        placement.pick_shared("topology", devices, ["g0::0"], [], 1)


def test_shared_pick_delegates_to_the_greedy_policy() -> None:
    devices = [placement.SharedDevice(f"g{g}::{r}", f"g{g}") for g in range(2) for r in range(2)]
    assert placement.pick_shared("packed", devices, [d.id for d in devices], [], 2) == ["g0::0", "g0::1"]
    assert placement.pick_shared("distributed", devices, [d.id for d in devices], [], 2) == ["g0::0", "g1::0"]


def test_defaults_are_topology_for_whole_gpus_and_distributed_for_shared_devices() -> None:
    assert placement.DEFAULT_WHOLE_GPU_POLICY == "topology"
    assert placement.DEFAULT_SHARED_POLICY == "distributed"
    assert set(placement.POLICIES) == {"best-effort", "topology", "distributed", "packed"}


def test_prepare_fills_every_residue_table_a_later_request_may_read() -> None:
    topology = profiles.load("pcie-4xt4").topology
    partition.tables.cache_clear()
    placement.prepare("best-effort", topology)
    tables = partition.tables(weights.best_effort(topology))
    # Asking only for residue 0 returns the table; masks of every other popcount are already filled (not -1).
    for size in range(2, 5):
        table = tables.best(size, 0)
        assert all(int(table[(1 << k) - 1]) >= 0 for k in range(5))
    assert placement.pick("best-effort", topology, range(4), [], 2) == [0, 1]
