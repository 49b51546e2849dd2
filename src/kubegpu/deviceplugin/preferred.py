"""GetPreferredAllocation: which of the available devices a container should get.

Owns validating a preferred-allocation request and the simple placement policy
used until :mod:`kubegpu.placement` provides the real ones. The policy, in
:func:`preferred`: keep every must-include device, then add devices one at a
time, preferring (1) the target NUMA node, (2) the strongest links to the
devices already picked (NVLink, NVSwitch, PCIe closeness, weighted as
go-gpuallocator weighs them), (3) the lowest position in the resource's device
order. The target NUMA node is the one most represented among the must-include
devices, or — without any — the node with the fewest available devices that
still holds the whole request (best fit keeps big NUMA-local blocks for big
requests), else the node with the most. The answer depends only on the sets
given, not their order. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kubegpu.deviceplugin.devices import Device
from kubegpu.deviceplugin.errors import InvalidRequest
from kubegpu.deviceplugin.resources import Resource
from kubegpu.gpu.model import PcieLink, Topology

#: go-gpuallocator's PCIe link weights (closest common ancestor).
PCIE_WEIGHT = {
    PcieLink.CROSS_CPU: 10,
    PcieLink.SAME_CPU: 20,
    PcieLink.HOST_BRIDGE: 30,
    PcieLink.MULTI_SWITCH: 40,
    PcieLink.SINGLE_SWITCH: 50,
    PcieLink.SAME_BOARD: 60,
}
#: Weight of one NVLink between two GPUs (go-gpuallocator: 100 per link).
NVLINK_WEIGHT = 100


def _invalid(resource_name: str, reason: str) -> InvalidRequest:
    return InvalidRequest(f'invalid preferred allocation request for "{resource_name}": {reason}')


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def pair_score(topology: Topology, a: Device, b: Device) -> int:
    """How well two devices' GPUs are connected; 0 for two devices on one GPU.

    Unlike go-gpuallocator, GPUs on one NVSwitch fabric get credit for their
    switch links (NVIDIA gives NVSwitch pairs 0, a known TODO upstream).
    """
    i, j = a.gpu_index, b.gpu_index
    if i == j or not (0 <= i < topology.size and 0 <= j < topology.size):
        return 0
    score = NVLINK_WEIGHT * topology.nvlink[i][j]
    if topology.same_fabric(i, j):
        score += NVLINK_WEIGHT * min(topology.nvswitch_links[i], topology.nvswitch_links[j])
    link = topology.pcie[i][j]
    if link is not None:
        score += PCIE_WEIGHT[link]
    return score


def _target_numa(picked: Sequence[Device], candidates: Sequence[Device], needed: int) -> int | None:
    def numa_key(numa: int | None) -> int:
        return -1 if numa is None else numa

    if picked:
        counts = Counter(d.numa for d in picked)
        return min(counts, key=lambda n: (-counts[n], numa_key(n)))
    counts = Counter(d.numa for d in candidates)
    fitting = [n for n in counts if counts[n] >= needed]
    if fitting:
        return min(fitting, key=lambda n: (counts[n], numa_key(n)))
    return min(counts, key=lambda n: (-counts[n], numa_key(n)))


def validate(
    resource: Resource, available: Sequence[str], must_include: Sequence[str], size: int
) -> tuple[list[str], list[str]]:
    """The de-duplicated available and must-include lists, or :class:`InvalidRequest` naming what is wrong."""
    name = resource.name
    avail, must = _unique(available), _unique(must_include)
    if size < 1:
        raise _invalid(name, f"allocation size must be at least 1, got {size}")
    for device_id in [*avail, *must]:
        if device_id not in resource.by_id:
            raise _invalid(name, f"unknown device: {device_id}")
    avail_set = set(avail)
    for device_id in must:
        if device_id not in avail_set:
            raise _invalid(name, f"must-include device {device_id} is not among the available devices")
    if size < len(must):
        raise _invalid(name, f"allocation size {size} is smaller than the {len(must)} must-include devices")
    if size > len(avail):
        raise _invalid(name, f"allocation size {size} exceeds the {len(avail)} available devices")
    return avail, must


def preferred(
    resource: Resource,
    topology: Topology,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
) -> list[str]:
    """Exactly ``size`` IDs: every must-include ID plus the best of the rest, in resource order.

    Raises :class:`InvalidRequest` for an impossible request rather than answering short.
    """
    avail, must = validate(resource, available, must_include, size)
    position = {d.id: n for n, d in enumerate(resource.devices)}
    picked = [resource.by_id[i] for i in must]
    must_set = set(must)
    candidates = [resource.by_id[i] for i in avail if i not in must_set]
    target = _target_numa(picked, candidates, size - len(picked))
    while len(picked) < size:
        best = max(
            candidates,
            key=lambda c: (
                c.numa == target,
                sum(pair_score(topology, c, p) for p in picked),
                -position[c.id],
            ),
        )
        picked.append(best)
        candidates.remove(best)
    return sorted((d.id for d in picked), key=position.__getitem__)
