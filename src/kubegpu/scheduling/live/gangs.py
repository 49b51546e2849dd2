"""Gang bookkeeping: pod groups placed all together (at least ``minMember`` pods) or not at all.

Owns :class:`GangPlan` and :func:`plan_gang`: try every pending member of a
group through the normal scheduling cycle on the cache, assuming each
placement so the next member sees it, largest request first (the hardest to
fit go while there is most room, as the core's :mod:`kubegpu.scheduling.core.gang`
does); if fewer than ``minMember`` found a node, every assumption is undone
and the cache is exactly as before. Also owns :class:`GangTimers`, which says
when a group that keeps failing has waited ``scheduleTimeoutSeconds`` and
its members get ``FailedScheduling``. Must not write to the API; time is
passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.cycle import Cycle, FitError, Placement, Profile
from kubegpu.scheduling.live.objects import PodInfo


@dataclass(frozen=True)
class GangPlan:
    group: str
    admitted: bool
    placements: tuple[Placement, ...]
    failures: tuple[FitError, ...] = ()
    min_member: int = 1

    @property
    def message(self) -> str:
        """What the members' FailedScheduling says when the gang does not fit."""
        first = self.failures[0].message if self.failures else ""
        fit = len(self.placements) if self.admitted else self.fitted
        return f"pod group {self.group}: {fit} of minMember {self.min_member} pods fit at once. {first}".strip()

    fitted: int = 0


def plan_gang(
    cache: SchedulerCache, cycle: Cycle, profile: Profile, group: str, members: Sequence[PodInfo], min_member: int
) -> GangPlan:
    """Place all of ``members`` (at least ``min_member``) on the cache as assumed pods, or none of them."""
    order = sorted(members, key=lambda p: (-p.gpus, -p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.key))
    placed: list[Placement] = []
    failures: list[FitError] = []
    for pod in order:
        decision = cycle.schedule(cache, profile, pod)
        if isinstance(decision, Placement):
            cache.add_pod(pod, decision.node, decision.gpus, assumed=True)
            placed.append(decision)
        else:
            failures.append(decision)
    if len(placed) >= min_member:
        return GangPlan(group, True, tuple(placed), tuple(failures), min_member, len(placed))
    for p in placed:
        cache.remove_pod(p.pod.uid)
    return GangPlan(group, False, (), tuple(failures), min_member, len(placed))


@dataclass
class GangTimers:
    """When each failing group started waiting; a group past its timeout is reported and starts again."""

    since: dict[str, float] = field(default_factory=dict)

    def failed(self, group: str, now: float, timeout_s: float) -> bool:
        """Record a failed attempt; True when the group has now waited its whole timeout."""
        start = self.since.setdefault(group, now)
        if now - start >= timeout_s:
            self.since[group] = now
            return True
        return False

    def done(self, group: str) -> None:
        self.since.pop(group, None)
