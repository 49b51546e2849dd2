"""Which lower-priority pods to evict, and from which node, so a pending pod fits (kube-scheduler's DefaultPreemption).

Owns :func:`candidates`: on every node that passes the pod's static filters
(a taint or a selector is not solved by evicting anyone), take away every pod
of strictly lower priority that is not already terminating; if the pod then
fits, give back ("reprieve") as many of them as possible, most important
first, keeping as victims only those without which it does not fit. On a node
that publishes its GPUs (``kubegpu.io/gpus``) a GPU pod fits only if, besides
the resource counts, the victims free enough *healthy* GPUs for
:func:`kubegpu.scheduling.core.exactgpus.choose` to pick (a victim holding an
Unhealthy GPU frees nothing the pod can use). Nodes are
ranked as kube-scheduler ranks them: lowest highest-victim priority, then
lowest sum of victim priorities, then fewest victims, then node name. The
caller evicts the first candidate's victims and moves to the next when an
eviction is refused (a PodDisruptionBudget). A pod with ``preemptionPolicy:
Never`` gets no candidates. Must not evict or change the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kubegpu.scheduling.live.cache import IntArray, Placed, SchedulerCache
from kubegpu.scheduling.live.cycle import Profile
from kubegpu.scheduling.live.objects import NEVER, PodInfo

_PRIORITY_OFFSET = 2**31


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    victims: tuple[Placed, ...]


def _vector(cache: SchedulerCache, pod: PodInfo) -> IntArray | None:
    vec = np.zeros(len(cache.columns), dtype=np.int64)
    vec[0] = 1
    for r, v in pod.requests.items():
        col = cache.column.get(r)
        if col is None:
            return None  # no node has this resource at all
        vec[col] = v
    return vec


def _healthy_gpus_fit(cache: SchedulerCache, node: str, pod: PodInfo, removed: set[str]) -> bool:
    """Whether ``pod`` gets its GPUs on ``node`` once the pods in ``removed`` (uids) are gone.

    Only a node that publishes its GPUs can say; elsewhere (and for a pod asking none) the counts decide.
    As :meth:`SchedulerCache.gpu_choice` counts: the GPUs the remaining pods hold are in use, and as many
    more as the remaining pods whose devices are unknown (bound by another scheduler) ask, off the top.
    """
    described = cache.described.get(node)
    if described is None or not pod.gpus:
        return True
    staying = [p for uid, p in cache.on_node.get(node, {}).items() if uid not in removed]
    held = {described.ids[i] for p in staying for i in p.gpus if i < len(described.ids)}
    unknown = sum(max(0, p.pod.gpus - len(p.gpus)) for p in staying)
    free = described.free({d for d in held if d is not None})
    return len(free) - unknown >= pod.gpus


def candidates(
    cache: SchedulerCache, profile: Profile, pod: PodInfo, priority: Callable[[PodInfo], int]
) -> list[Candidate]:
    """Nodes where evicting lower-priority pods makes room, best first."""
    if pod.preemption_policy == NEVER:
        return []
    want = _vector(cache, pod)
    if want is None:
        return []
    mine = priority(pod)
    mask = cache.static_mask(pod, profile.static_filters).ok
    ranked: list[tuple[tuple[int, int, int, str], Candidate]] = []
    needed = want > 0
    for row in np.flatnonzero(mask):
        name = cache.names[row]
        lower = [p for p in cache.on_node.get(name, {}).values() if not p.pod.deleting and priority(p.pod) < mine]
        if not lower:
            continue
        free = cache.allocatable[row] - cache.requested[row]
        room = free.copy()
        for p in lower:
            room += _vector(cache, p.pod) if _vector(cache, p.pod) is not None else 0
        removed = {p.pod.uid for p in lower}
        if not np.all(room[needed] >= want[needed]) or not _healthy_gpus_fit(cache, name, pod, removed):
            continue
        lower.sort(key=lambda p: (-priority(p.pod), p.pod.created))
        victims: list[Placed] = []
        for p in lower:
            vec = _vector(cache, p.pod)
            back = room - (vec if vec is not None else 0)
            if np.all(back[needed] >= want[needed]) and _healthy_gpus_fit(cache, name, pod, removed - {p.pod.uid}):
                room = back  # reprieved: it stays
                removed.discard(p.pod.uid)
            else:
                victims.append(p)
        if not victims:
            continue
        prios = [priority(v.pod) for v in victims]
        key = (max(prios), sum(p + _PRIORITY_OFFSET for p in prios), len(prios), name)
        ranked.append((key, Candidate(name, tuple(victims))))
    ranked.sort(key=lambda kc: kc[0])
    return [c for _, c in ranked]
