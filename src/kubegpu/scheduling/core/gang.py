"""Gang scheduling: a pod group is placed with at least ``min_member`` pods, or not at all.

Owns :func:`schedule_gang`: place the group's pods one by one through the
normal pipeline, largest GPU request first (big pods are the hardest to
fit, so trying them while the cluster has the most room gives the group its
best chance); if fewer than ``min_member`` found a node, unbind every pod
placed so far, leaving the cluster exactly as it was. Must not choose nodes
itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.framework import Placement, Scheduler
from kubegpu.scheduling.core.model import PodSpec


@dataclass(frozen=True, slots=True)
class GangResult:
    """The outcome for one group: whether it was admitted, where its pods went, which found no node."""

    group: str
    admitted: bool
    placements: tuple[Placement, ...]
    unplaced: tuple[PodSpec, ...]


def min_member_of(pods: Sequence[PodSpec]) -> int:
    """The group's minMember: the largest one its pods declare, or all of them when none does."""
    declared = max((p.min_member for p in pods), default=0)
    return declared or len(pods)


def schedule_gang(scheduler: Scheduler, pods: Sequence[PodSpec], min_member: int | None = None) -> GangResult:
    """Place the group all together (at least ``min_member`` pods) or roll every placement back."""
    if not pods:
        raise InvalidSpec("a pod group needs at least one pod")
    groups = {p.group for p in pods}
    if len(groups) != 1:
        raise InvalidSpec(f"pods of one gang must share a group name, got {sorted(groups)}")
    group = groups.pop()
    need = min_member if min_member is not None else min_member_of(pods)
    if not 1 <= need <= len(pods):
        raise InvalidSpec(f"group {group!r}: minMember {need} must be within 1..{len(pods)}")
    order = sorted(pods, key=lambda p: (-p.total_gpu_milli, -p.cpu_milli, -p.memory_mib, p.name))
    placed: list[Placement] = []
    unplaced: list[PodSpec] = []
    for pod in order:
        decision = scheduler.schedule(pod)
        if isinstance(decision, Placement):
            placed.append(decision)
        else:
            unplaced.append(pod)
    if len(placed) >= need:
        return GangResult(group, True, tuple(placed), tuple(unplaced))
    for placement in reversed(placed):
        scheduler.state.unbind(placement.pod.name)
    return GangResult(group, False, (), tuple(pods))
