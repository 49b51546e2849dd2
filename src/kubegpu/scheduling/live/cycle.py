"""One scheduling cycle for one pod, as kube-scheduler runs it: filter, score, select, choose GPUs.

Owns :class:`Profile` (a schedulerName with its filters, weighted score
plugins and percentageOfNodesToScore), :func:`nodes_to_find` (kube-scheduler's
adaptive sample size), :class:`Cycle` (the rotating start index and the seeded
tie-break between equal best nodes) and :class:`FitError`, whose message is
kube-scheduler's "0/N nodes are available: ..." summary with reasons counted
and sorted as it sorts them. Whole GPUs inside the chosen node: on a node
that publishes its GPUs (``kubegpu.io/gpus``) those
:func:`kubegpu.scheduling.core.exactgpus.choose` picks (a node where it finds too
few healthy free ones does not fit: :data:`NO_GPU_SET`), elsewhere the lowest
free indices. A fractional pod (``kubegpu.io/gpu-milli``) fits only a described node where one GPU published
for shares has it left (:data:`NO_GPU_SHARE`, :data:`NOT_DESCRIBED`) and gets the one GPU the profile's kubegpu
policy picks there, as the simulator picks it (best fit without one). Must not change the
cache (the caller assumes the placement) and does no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kubegpu.scheduling.live import filters, resources
from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.corepolicies import CorePolicyScore
from kubegpu.scheduling.live.objects import PodInfo
from kubegpu.scheduling.live.scoring import LiveScorePlugin, NodeResourcesFit, node_score

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_PERCENTAGE = 5
BASE_PERCENTAGE = 50
#: The filter reason of a described node where too few healthy, free GPUs are left for the pod.
NO_GPU_SET = f"Insufficient healthy {resources.GPU}"
#: The filter reason of a node where no single healthy GPU has the share a fractional pod asks left.
NO_GPU_SHARE = f"Insufficient {resources.GPU_MILLI} on any one GPU"
#: The filter reason of a node that does not publish its GPUs: the scheduler cannot choose a share's GPU there.
NOT_DESCRIBED = "node(s) didn't publish their GPUs (kubegpu.io/gpus)"


@dataclass(frozen=True)
class Profile:
    scheduler_name: str
    static_filters: tuple[str, ...] = filters.STATIC_FILTERS
    resource_filter: bool = True
    scorers: tuple[tuple[LiveScorePlugin, int], ...] = ((NodeResourcesFit(), 1),)
    #: 0 means kube-scheduler's adaptive default.
    percentage_of_nodes_to_score: int = 0


@dataclass(frozen=True, slots=True)
class Placement:
    pod: PodInfo
    node: str
    gpus: tuple[int, ...]
    score: int


@dataclass(frozen=True)
class FitError:
    """No node fits: how many nodes there are and how many each reason rejected."""

    pod: PodInfo
    nodes: int
    reasons: dict[str, int] = field(default_factory=dict)
    post_filter: str = ""

    @property
    def message(self) -> str:
        text = f"0/{self.nodes} nodes are available:"
        parts = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        if parts:
            text += f" {', '.join(parts)}."
        if self.post_filter:
            text += f" {self.post_filter}."
        return text


def nodes_to_find(percentage: int, total: int) -> int:
    """How many feasible nodes kube-scheduler looks for before scoring (numFeasibleNodesToFind)."""
    if total < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return total
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_PERCENTAGE, BASE_PERCENTAGE - total // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, total * percentage // 100)


class Cycle:
    """Scheduling cycles over one cache: the rotating start node and the tie-break generator."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.next_start = 0

    def feasible(self, cache: SchedulerCache, profile: Profile, pod: PodInfo) -> tuple[np.ndarray, dict[str, int]]:
        """Indices of every node that can take the pod, and the rejection reasons counted."""
        mask = cache.static_mask(pod, profile.static_filters)
        reasons = dict(mask.reasons)
        ok = mask.ok
        if profile.resource_filter:
            ok, short = cache.resource_fit(pod, ok)
            for reason, count in short.items():
                reasons[reason] = reasons.get(reason, 0) + count
        if pod.gpu_milli:
            ok = ok.copy()
            for i in np.flatnonzero(ok):
                node = cache.names[i]
                why: str | None = None
                if node not in cache.described:
                    why = NOT_DESCRIBED
                elif cache.share_choice(node, pod.gpu_milli) is None:
                    why = NO_GPU_SHARE
                if why is not None:
                    ok[i] = False
                    reasons[why] = reasons.get(why, 0) + 1
        if pod.gpus and cache.described:
            ok = ok.copy()
            for i in np.flatnonzero(ok):
                node = cache.names[i]
                if node in cache.described and cache.gpu_choice(node, pod.gpus) is None:
                    ok[i] = False
                    reasons[NO_GPU_SET] = reasons.get(NO_GPU_SET, 0) + 1
        return np.flatnonzero(ok), reasons

    def schedule(self, cache: SchedulerCache, profile: Profile, pod: PodInfo) -> Placement | FitError:
        total = len(cache.names)
        if total == 0:
            return FitError(pod, 0)
        feasible, reasons = self.feasible(cache, profile, pod)
        if len(feasible) == 0:
            return FitError(pod, total, reasons)
        want = nodes_to_find(profile.percentage_of_nodes_to_score, total)
        if len(feasible) > want:
            # Examine nodes from the rotating start, as kube-scheduler does, and keep the first `want` that fit.
            rotated = (feasible - self.next_start) % total
            order = np.argsort(rotated, kind="stable")
            chosen = feasible[order[:want]]
            self.next_start = (self.next_start + int(rotated[order[want - 1]]) + 1) % total
        else:
            chosen = feasible
            self.next_start = (self.next_start + total) % total
        if len(chosen) == 1:
            best, score = int(chosen[0]), 0
        else:
            scores = node_score(profile.scorers, cache, pod, chosen)
            top = int(scores.max())
            ties = np.flatnonzero(scores == top)
            best = int(chosen[ties[0] if len(ties) == 1 else ties[self.rng.integers(len(ties))]])
            score = top
        node = cache.names[best]
        return Placement(pod, node, choose_gpus(cache, node, pod, profile), score)


def choose_gpus(cache: SchedulerCache, node: str, pod: PodInfo, profile: Profile | None = None) -> tuple[int, ...]:
    """The GPU indices ``pod`` gets on ``node``: the described node's choice, else the lowest free ones.

    A fractional pod's GPU is the one the profile's kubegpu policy (``Lookahead``, ``FGD``) picks among the share
    GPUs with room, as the simulator picks it; without such a score plugin, best fit."""
    if pod.gpu_milli:
        share = cache.share_choice(node, pod.gpu_milli) if node in cache.described else None
        if share is None:
            return ()
        among = cache.share_fitting(node, pod.gpu_milli)
        for scorer, _ in profile.scorers if profile is not None else ():
            if isinstance(scorer, CorePolicyScore):
                gpu = scorer.pick_share(cache, pod, node, among)
                if gpu is not None:
                    return (gpu,)
        return share.indices
    if not pod.gpus:
        return ()
    if node in cache.described:
        choice = cache.gpu_choice(node, pod.gpus)
        return choice.indices if choice is not None else ()
    return tuple(cache.free_gpus(node)[: pod.gpus])
