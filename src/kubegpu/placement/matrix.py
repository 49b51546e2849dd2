"""The pair matrix of a machine's GPUs as ``nvidia-smi topo -m`` spells it: ``X``, ``NV12,SYS``, ``PIX`` ...

Owns the text of one cell — the PCIe relationship, prefixed with the NVLink count between the pair (on an
NVSwitch fabric the fewer of the two GPUs' fabric links) — for ``kubegpu topology show`` and for the GPU
description the device plugin publishes on its Node: one source for both. Pure: no I/O, no printing.
"""

from __future__ import annotations

from kubegpu.gpu.model import Topology
from kubegpu.placement import weights


def link_cell(topology: Topology, i: int, j: int) -> str:
    """The cell of GPUs ``i`` and ``j``: ``X`` on the diagonal, else ``NV<n>,<pcie>`` or just ``<pcie>``."""
    if i == j:
        return "X"
    link = topology.pcie[i][j]
    pcie = "?" if link is None else link.smi
    count = weights.nvlinks(topology, i, j, fabric=True)
    return f"NV{count},{pcie}" if count else pcie


def link_matrix(topology: Topology) -> list[list[str]]:
    """Every cell, rows and columns by GPU index."""
    n = topology.size
    return [[link_cell(topology, i, j) for j in range(n)] for i in range(n)]
