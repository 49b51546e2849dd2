"""The placement API: policy names and the two entry points the plugin and the scheduler call.

Owns which policy means what: ``best-effort`` and ``topology`` place whole
GPUs with the partition solver under their pair weights, ``distributed`` and
``packed`` place shared devices (replicas, MIG devices) with the greedy
per-GPU counter. Must not do I/O and must not know about gRPC: an impossible
request is a :class:`~kubegpu.placement.errors.PlacementError`, which callers
map (the plugin to ``INVALID_ARGUMENT``, the CLI to exit 2).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubegpu.gpu.model import Topology
from kubegpu.placement import errors, names, partition, shared, subsets
from kubegpu.placement import weights as weights_

BEST_EFFORT = names.BEST_EFFORT
TOPOLOGY = names.TOPOLOGY
DISTRIBUTED = names.DISTRIBUTED
PACKED = names.PACKED
WHOLE_GPU_POLICIES = names.WHOLE_GPU_POLICIES
SHARED_POLICIES = names.SHARED_POLICIES
POLICIES = names.POLICIES
DEFAULT_WHOLE_GPU_POLICY = names.DEFAULT_WHOLE_GPU_POLICY
DEFAULT_SHARED_POLICY = names.DEFAULT_SHARED_POLICY


def pair_weights(policy: str, topology: Topology) -> weights_.Matrix:
    """The pair weights a whole-GPU policy optimises on ``topology`` (cached per topology object)."""
    if policy not in WHOLE_GPU_POLICIES:
        if policy in SHARED_POLICIES:
            raise errors.PlacementError(
                f"policy {policy!r} places replicas and MIG devices; whole GPUs use {' or '.join(WHOLE_GPU_POLICIES)}"
            )
        raise errors.PlacementError(f"unknown placement policy {policy!r} (choose from {', '.join(POLICIES)})")
    # A caller passes the same Topology object on every request; hashing one costs more than a small
    # request's whole answer, so the recent ones are remembered by identity (the entry keeps it alive).
    key = (policy, id(topology))
    hit = _recent.get(key)
    if hit is not None and hit[0] is topology:
        return hit[1]
    matrix = weights_.best_effort(topology) if policy == BEST_EFFORT else weights_.topology_aware(topology)
    if len(_recent) >= _RECENT:
        _recent.pop(next(iter(_recent)))
    _recent[key] = (topology, matrix)
    return matrix


_RECENT = 32
_recent: dict[tuple[str, int], tuple[Topology, weights_.Matrix]] = {}


def solve(
    policy: str, topology: Topology, available: Sequence[int], must_include: Sequence[int], size: int
) -> subsets.Solution:
    """Like :func:`pick`, with the partition the answer came from (for explanations and benchmarks)."""
    return partition.solve(pair_weights(policy, topology), available, must_include, size)


def pick(
    policy: str, topology: Topology, available: Sequence[int], must_include: Sequence[int], size: int
) -> list[int]:
    """Choose ``size`` whole GPUs by index, ascending.

    Parameters:
        policy: ``topology`` (default) or ``best-effort``.
        topology: the node's GPU topology (:class:`kubegpu.gpu.model.Topology`).
        available: indices that may be chosen; their order never changes the answer.
        must_include: indices that must be chosen (kubelet's init-container reuse); each must be available.
        size: how many GPUs.

    The result holds every must-include GPU, only available GPUs, exactly
    ``size`` of them; anything else raises :class:`~kubegpu.placement.errors.PlacementError`.
    """
    return list(solve(policy, topology, available, must_include, size).chosen)


def prepare(policy: str, topology: Topology, sizes: Sequence[int] | None = None) -> None:
    """Build the cached tables for ``policy`` on ``topology`` now (all sizes by default).

    Requests build what they need on first use; a plugin on a 16-GPU node can
    call this once at start so that no request pays for it.
    """
    partition.tables(pair_weights(policy, topology)).prepare(sizes)


def pick_shared(
    policy: str,
    devices: Sequence[shared.SharedDevice],
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
) -> list[str]:
    """Choose ``size`` shared devices (replicas or MIG devices) by ID.

    Parameters:
        policy: ``distributed`` (default) or ``packed``.
        devices: every device of the resource with its group (the physical GPU), in the resource's order.
        available: IDs that may be chosen; their order never changes the answer.
        must_include: IDs that must be chosen; each must be available.
        size: how many devices.

    Returns the must-include IDs as given, then the picks in pick order.
    """
    if policy in WHOLE_GPU_POLICIES:
        raise errors.PlacementError(
            f"policy {policy!r} places whole GPUs; replicas and MIG devices use {' or '.join(SHARED_POLICIES)}"
        )
    return shared.pick(policy, devices, available, must_include, size)
