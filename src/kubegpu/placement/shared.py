"""``distributed`` and ``packed``: which shared devices (replicas, MIG devices) to give a request.

Owns NVIDIA's greedy replica policy (k8s-device-plugin ``internal/rm``),
made deterministic and made to work for MIG. Devices are counted per *group*
— the physical GPU a time-slicing/MPS replica or a MIG device lives on. For
each group, ``allocated`` is its devices minus its candidates (so must-include
devices count as allocated); each pick takes a device from the best group by
the policy (``distributed``: fewest allocated, ``packed``: most), ties going to
the group this call has taken fewer from, then to the group listed first, and
within a group to the device listed first. Every pick raises its group's
allocated count. Upstream leaves the last two ties to Go map order and groups
MIG devices by their own UUID (every group of one, so packed and distributed
cannot differ); here the group is the parent GPU. Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubegpu.placement import errors, names

DISTRIBUTED = names.DISTRIBUTED
PACKED = names.PACKED
POLICIES = names.SHARED_POLICIES


@dataclass(frozen=True)
class SharedDevice:
    """One device of a shared resource: its kubelet device ID and the physical GPU it lives on.

    ``group`` is any stable key of the physical GPU (its UUID, say): replicas
    ``GPU-x::0`` … ``GPU-x::3`` and the MIG devices of GPU ``x`` all carry ``GPU-x``.
    """

    id: str
    group: str


@dataclass
class _Group:
    order: int
    allocated: int
    taken: int
    candidates: list[str]


def pick(
    policy: str, devices: Sequence[SharedDevice], available: Sequence[str], must_include: Sequence[str], size: int
) -> list[str]:
    """Choose ``size`` device IDs: the must-include ones (as given), then the policy's picks in pick order.

    Parameters:
        policy: ``distributed`` or ``packed``.
        devices: every device of the resource, in the resource's order (it breaks the last ties).
        available: the IDs that may be chosen (kubelet's available list; order does not matter).
        must_include: IDs that must be in the answer; each must be available.
        size: how many devices to choose.

    Raises :class:`~kubegpu.placement.errors.PlacementError` naming the problem.
    """
    if policy not in POLICIES:
        raise errors.PlacementError(f"unknown shared-device policy {policy!r} (choose from {', '.join(POLICIES)})")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise errors.PlacementError(f"size must be a positive number of devices, got {size!r}")
    group_of: dict[str, str] = {}
    for device in devices:
        if device.id in group_of:
            raise errors.PlacementError(f"device {device.id!r} is listed twice in the resource's devices")
        group_of[device.id] = device.group
    offered = set(_unique_known(available, group_of, "available"))
    required = _unique_known(must_include, group_of, "must-include")
    for device_id in required:
        if device_id not in offered:
            raise errors.PlacementError(f"must-include device {device_id!r} is not in the available list")
    if len(required) > size:
        raise errors.PlacementError(f"must-include lists {len(required)} devices but the request is for {size}")
    needed = size - len(required)
    candidates = offered - set(required)
    if len(candidates) < needed:
        raise errors.PlacementError(
            f"not enough available devices: {needed} more needed besides must-include, {len(candidates)} available"
        )

    groups: dict[str, _Group] = {}
    for device in devices:
        group = groups.get(device.group)
        if group is None:
            group = groups[device.group] = _Group(order=len(groups), allocated=0, taken=0, candidates=[])
        if device.id in candidates:
            group.candidates.append(device.id)
        else:
            group.allocated += 1
    for device_id in required:
        # A group already serving this request counts as touched, as upstream seeds it.
        groups[group_of[device_id]].taken += 1

    sign = 1 if policy == DISTRIBUTED else -1
    picks: list[str] = []
    for _ in range(needed):
        best = min((g for g in groups.values() if g.candidates), key=lambda g: (sign * g.allocated, g.taken, g.order))
        picks.append(best.candidates.pop(0))
        best.allocated += 1
        best.taken += 1
    return [*required, *picks]


def _unique_known(ids: Sequence[str], group_of: dict[str, str], where: str) -> list[str]:
    seen: set[str] = set()
    for device_id in ids:
        if device_id not in group_of:
            raise errors.PlacementError(f"{where} device {device_id!r} is not a device of this resource")
        if device_id in seen:
            raise errors.PlacementError(f"device {device_id!r} is listed twice in {where}")
        seen.add(device_id)
    return list(ids)
