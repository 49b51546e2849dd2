"""Pair weights: how much two GPUs of one node are worth together, per policy.

Owns the numbers. ``best-effort`` uses go-gpuallocator's table exactly: a PCIe
relationship scores 10 (cross CPU) to 60 (same board) and every direct NVLink
100; GPUs that reach each other only through an NVSwitch fabric get no NVLink
credit, as upstream (NVML reports the switch, not the peer, as the remote end).
``topology`` fixes that and adds NUMA: a common fabric counts as NVLinks (the
smaller of the two GPUs' fabric link counts), and a same-NUMA pair adds one
tie-breaking point below any link difference. Must not choose GPUs (that is
:mod:`kubegpu.placement.partition`) and must not do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubegpu.gpu.model import PcieLink, Topology

#: go-gpuallocator's score per PCIe common ancestor.
PCIE_WEIGHT: dict[PcieLink, int] = {
    PcieLink.CROSS_CPU: 10,
    PcieLink.SAME_CPU: 20,
    PcieLink.HOST_BRIDGE: 30,
    PcieLink.MULTI_SWITCH: 40,
    PcieLink.SINGLE_SWITCH: 50,
    PcieLink.SAME_BOARD: 60,
}

#: go-gpuallocator's score per NVLink between two GPUs.
NVLINK_WEIGHT = 100

Matrix = tuple[tuple[int, ...], ...]


def nvlinks(topology: Topology, i: int, j: int, *, fabric: bool) -> int:
    """NVLinks between GPUs ``i`` and ``j``: direct links, plus the shared fabric's when ``fabric``.

    A fabric pair's bandwidth is bounded by the GPU with fewer links into the
    fabric, hence the minimum.
    """
    count = topology.nvlink[i][j]
    if fabric and topology.same_fabric(i, j):
        count += min(topology.nvswitch_links[i], topology.nvswitch_links[j])
    return count


def link_score(topology: Topology, i: int, j: int, *, fabric: bool) -> int:
    """go-gpuallocator's pair score of ``i`` and ``j``; with ``fabric``, NVSwitch counts as NVLink."""
    if i == j:
        return 0
    link = topology.pcie[i][j]
    pcie = 0 if link is None else PCIE_WEIGHT[link]
    return pcie + NVLINK_WEIGHT * nvlinks(topology, i, j, fabric=fabric)


def best_effort(topology: Topology) -> Matrix:
    """Pair weights of go-gpuallocator's best-effort policy."""
    n = topology.size
    return tuple(tuple(link_score(topology, i, j, fabric=False) for j in range(n)) for i in range(n))


def numa_scale(n: int) -> int:
    """The factor that keeps NUMA tie-breaking below any link difference on ``n`` GPUs.

    A partition of ``n`` GPUs has at most n(n-1)/2 pairs, so that many
    same-NUMA points can never add up to one scaled link point.
    """
    return n * (n - 1) // 2 + 1


def topology_aware(topology: Topology) -> Matrix:
    """Pair weights of the ``topology`` policy: fabric-aware link score, scaled, plus 1 for the same NUMA node."""
    n = topology.size
    scale = numa_scale(n)
    rows = []
    for i in range(n):
        row = []
        for j in range(n):
            if i == j:
                row.append(0)
                continue
            same_numa = topology.numa[i] is not None and topology.numa[i] == topology.numa[j]
            row.append(scale * link_score(topology, i, j, fabric=True) + int(same_numa))
        rows.append(tuple(row))
    return tuple(rows)


def set_score(weights: Matrix, gpus: Iterable[int]) -> int:
    """Sum of the pair weights over every unordered pair of ``gpus``."""
    members = sorted(set(gpus))
    return sum(weights[a][b] for k, a in enumerate(members) for b in members[k + 1 :])
