"""Priority preemption: which lower-priority pods to evict, and from which node, so a pod fits.

Owns :func:`plan_preemption` and :func:`preempt`, following kube-scheduler's
DefaultPreemption: on every node, remove all pods of strictly lower priority;
if the pod then fits, give back ("reprieve") as many of them as possible,
most important first (higher priority, then earlier bound), keeping only
those without which the pod no longer fits. Among the nodes that work, pick
the one whose most important victim has the lowest priority, then the lowest
sum of victim priorities, then the fewest victims, then the lowest seeded
node rank. Pods of equal or higher priority are never victims. Must not
decide where pods without a priority conflict go (that is the profile's job).

The what-if checks unbind and rebind pods on the real :class:`ClusterState`
(restoring each pod to the same GPUs), so every check uses the same
accounting as binding does.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubegpu.scheduling.core.cluster import Binding, ClusterState
from kubegpu.scheduling.core.framework import Placement, Scheduler
from kubegpu.scheduling.core.model import PodSpec

# kube-scheduler adds this to every priority before summing, so negative priorities still order correctly.
_PRIORITY_OFFSET = 2**31


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    """Evict ``victims`` from ``node`` and the pod fits there."""

    node: int
    victims: tuple[Binding, ...]

    def key(self, rank: int) -> tuple[int, int, int, int]:
        priorities = [v.pod.priority for v in self.victims]
        return (max(priorities), sum(p + _PRIORITY_OFFSET for p in priorities), len(priorities), rank)


@dataclass(frozen=True, slots=True)
class PreemptionResult:
    """Where the preemptor went and whom it evicted."""

    placement: Placement
    victims: tuple[Binding, ...]


def _victims_on(state: ClusterState, pod: PodSpec, node: int) -> tuple[Binding, ...] | None:
    """The minimal-by-reprieve victims on one node, or None when even evicting all lower pods is not enough."""
    lower = [b for b in state.pods_on_node[node].values() if b.pod.priority < pod.priority]
    if not lower:
        return None
    # Most important first: higher priority, then bound earlier (dict order is bind order).
    lower.sort(key=lambda b: -b.pod.priority)
    for b in lower:
        state.unbind(b.pod.name)
    try:
        if not state.fits(pod, node):
            return None
        victims: list[Binding] = []
        for b in lower:
            state.bind(b.pod, b.node, b.gpus)
            if not state.fits(pod, node):
                state.unbind(b.pod.name)
                victims.append(b)
        return tuple(victims)
    finally:
        for b in lower:
            if b.pod.name not in state.bindings:
                state.bind(b.pod, b.node, b.gpus)


def plan_preemption(scheduler: Scheduler, pod: PodSpec) -> PreemptionPlan | None:
    """The best node and victims for ``pod``, or None when no eviction of lower-priority pods makes room."""
    state = scheduler.state
    best: PreemptionPlan | None = None
    best_key: tuple[int, int, int, int] | None = None
    for node in range(state.size):
        victims = _victims_on(state, pod, node)
        if not victims:
            continue
        plan = PreemptionPlan(node, victims)
        key = plan.key(int(scheduler.rank[node]))
        if best_key is None or key < best_key:
            best, best_key = plan, key
    return best


def preempt(scheduler: Scheduler, pod: PodSpec) -> PreemptionResult | None:
    """Evict the planned victims and bind ``pod`` on that node; None (and no change) when no plan exists."""
    plan = plan_preemption(scheduler, pod)
    if plan is None:
        return None
    for victim in plan.victims:
        scheduler.state.unbind(victim.pod.name)
    gpus = scheduler.profile.picker.pick(scheduler.state, pod, plan.node)
    scheduler.state.bind(pod, plan.node, gpus)
    return PreemptionResult(Placement(pod, plan.node, gpus, 0), plan.victims)


def schedule_with_preemption(scheduler: Scheduler, pod: PodSpec) -> tuple[Placement | None, tuple[Binding, ...]]:
    """Schedule normally; if no node fits, try preemption. Returns the placement (or None) and the victims."""
    decision = scheduler.schedule(pod)
    if isinstance(decision, Placement):
        return decision, ()
    result = preempt(scheduler, pod)
    if result is None:
        return None, ()
    return result.placement, result.victims
