"""The scheduling pipeline, shaped like kube-scheduler's framework: filter → score → select.

Owns the plugin interfaces (:class:`FilterPlugin`, :class:`ScorePlugin`,
:class:`GpuPicker`), a :class:`Profile` that names a set of them with score
weights, and :class:`Scheduler`, which runs one scheduling cycle per pod:
filter all nodes, score the feasible ones, normalise each plugin's scores,
sum them times their weights, pick the best node, choose the GPUs inside it,
and bind. Ties between equally scored nodes are broken deterministically from
the seed in one of two ways: ``"rank"`` gives every node a seeded random rank
once and the lowest rank wins (what the FGD authors' patched kube-scheduler
does: it keeps the lexicographically smallest of the randomly prefixed node
names), ``"uniform"`` draws uniformly among the tied nodes on every decision
(upstream kube-scheduler's reservoir sampling in selectHost). Must not know any particular policy, read files or
read clocks.

Plugins see the whole :class:`ClusterState` and score many nodes per call.
A score plugin whose result depends only on a node's state and a pod key may
return that key from :meth:`ScorePlugin.cache_key`; the scheduler then keeps
its scores per key and recomputes only nodes whose ``version`` moved.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubegpu.scheduling.core.cluster import BoolArray, ClusterState, IntArray
from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import PodSpec

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
TIE_BREAKS = ("rank", "uniform")


class FilterPlugin:
    """Decides which nodes can host a pod at all."""

    name = "filter"

    def filter(self, state: ClusterState, pod: PodSpec) -> BoolArray:
        """A boolean per node: True where the pod may go."""
        raise NotImplementedError


class ScorePlugin:
    """Ranks feasible nodes; higher is better."""

    name = "score"

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        """Raw integer scores for the given node indices."""
        raise NotImplementedError

    def normalize(self, scores: IntArray) -> IntArray:
        """Scores of all feasible nodes mapped to MIN..MAX_NODE_SCORE; identity unless overridden."""
        return scores

    def cache_key(self, pod: PodSpec) -> Hashable | None:
        """A key such that equal keys give equal scores on an unchanged node, or None to never cache."""
        return None


class GpuPicker:
    """Chooses which GPUs of the chosen node the pod gets."""

    name = "gpu-picker"

    def pick(self, state: ClusterState, pod: PodSpec, node: int, among: Sequence[int] | None = None) -> tuple[int, ...]:
        """The GPU indices ``pod`` gets on ``node``; a fractional pod's one GPU is taken from ``among`` when given
        (the GPUs a node lends in shares), from all of the node's GPUs otherwise."""
        raise NotImplementedError


@dataclass(frozen=True)
class Profile:
    """A named policy: filters, weighted score plugins and a GPU picker."""

    name: str
    filters: tuple[FilterPlugin, ...]
    scorers: tuple[tuple[ScorePlugin, int], ...]
    picker: GpuPicker
    description: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod went: node index, GPU indices and the winning total score."""

    pod: PodSpec
    node: int
    gpus: tuple[int, ...]
    score: int


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """A pod no node could take, with how many nodes each filter rejected."""

    pod: PodSpec
    rejected_by: dict[str, int] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        parts = [f"{count} rejected by {name}" for name, count in self.rejected_by.items() if count]
        return "no node fits: " + ("; ".join(parts) if parts else "no nodes")


Decision = Placement | Unschedulable


class _ScoreCache:
    """Scores of one plugin for one cache key, valid per node while its version is unchanged."""

    __slots__ = ("scores", "versions")

    def __init__(self, size: int) -> None:
        self.versions = np.full(size, -1, dtype=np.int64)
        self.scores = np.zeros(size, dtype=np.int64)


class Scheduler:
    """Runs scheduling cycles of one profile against one cluster state."""

    def __init__(
        self,
        state: ClusterState,
        profile: Profile,
        rng: np.random.Generator,
        tie_break: str = "rank",
        cache_entries: int = 512,
    ) -> None:
        if tie_break not in TIE_BREAKS:
            raise InvalidSpec(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
        self.state = state
        self.profile = profile
        self.rng = rng
        self.tie_break = tie_break
        # Drawn even for "uniform" so both modes consume the generator alike up to here.
        self.rank: IntArray = rng.permutation(state.size).astype(np.int64)
        self._cache_entries = cache_entries
        self._caches: list[OrderedDict[Hashable, _ScoreCache]] = [OrderedDict() for _ in profile.scorers]

    def feasible(self, pod: PodSpec) -> tuple[IntArray, dict[str, int]]:
        """Indices of the nodes every filter accepts, and how many each filter rejected."""
        mask = np.ones(self.state.size, dtype=np.bool_)
        rejected: dict[str, int] = {}
        for plugin in self.profile.filters:
            passed = plugin.filter(self.state, pod)
            rejected[plugin.name] = int((mask & ~passed).sum())
            mask &= passed
        return np.flatnonzero(mask), rejected

    def scores(self, pod: PodSpec, nodes: IntArray) -> IntArray:
        """Weighted, normalised total score of each given node."""
        total = np.zeros(len(nodes), dtype=np.int64)
        for i, (plugin, weight) in enumerate(self.profile.scorers):
            raw = self._raw_scores(i, plugin, pod, nodes)
            total += weight * plugin.normalize(raw)
        return total

    def _raw_scores(self, i: int, plugin: ScorePlugin, pod: PodSpec, nodes: IntArray) -> IntArray:
        key = plugin.cache_key(pod)
        if key is None:
            return plugin.score(self.state, pod, nodes)
        caches = self._caches[i]
        cache = caches.get(key)
        if cache is None:
            cache = caches[key] = _ScoreCache(self.state.size)
            if len(caches) > self._cache_entries:
                caches.popitem(last=False)
        else:
            caches.move_to_end(key)
        versions = self.state.version[nodes]
        stale = nodes[cache.versions[nodes] != versions]
        if len(stale):
            cache.scores[stale] = plugin.score(self.state, pod, stale)
            cache.versions[stale] = self.state.version[stale]
        result: IntArray = cache.scores[nodes]
        return result

    def select(self, pod: PodSpec, nodes: IntArray) -> tuple[int, int]:
        """Best node among ``nodes`` and its score; a uniform seeded choice among equal best."""
        if len(nodes) == 1:
            # kube-scheduler does not score when only one node is feasible.
            return int(nodes[0]), 0
        total = self.scores(pod, nodes)
        best = total.max()
        ties = np.flatnonzero(total == best)
        if len(ties) == 1:
            choice = ties[0]
        elif self.tie_break == "rank":
            choice = ties[np.argmin(self.rank[nodes[ties]])]
        else:
            choice = ties[self.rng.integers(len(ties))]
        return int(nodes[choice]), int(best)

    def decide(self, pod: PodSpec) -> Decision:
        """Run filter, score and select for ``pod`` without binding it."""
        nodes, rejected = self.feasible(pod)
        if len(nodes) == 0:
            return Unschedulable(pod, rejected)
        node, score = self.select(pod, nodes)
        return Placement(pod, node, self.profile.picker.pick(self.state, pod, node), score)

    def schedule(self, pod: PodSpec) -> Decision:
        """Decide and, when a node was found, bind the pod there."""
        decision = self.decide(pod)
        if isinstance(decision, Placement):
            self.state.bind(pod, decision.node, decision.gpus)
        return decision


def schedule_all(scheduler: Scheduler, pods: Sequence[PodSpec]) -> list[Decision]:
    """Schedule pods one at a time, in order; failures stay failed."""
    return [scheduler.schedule(p) for p in pods]
