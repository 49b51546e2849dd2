"""The target workload: which task shapes a cluster should expect, and how often.

Owns :class:`TargetWorkload`, built as the FGD paper builds it from the
original (pre-inflation) pod list: count identical shapes (CPU, GPU count,
GPU-milli, allowed models), sort by popularity, keep the smallest prefix that
covers the threshold share of pods (95 %), renormalise. Must not know nodes,
policies or files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import PodSpec, Shape


def _tie_key(shape: Shape) -> tuple[int, int, int, str]:
    # The FGD simulator orders equally popular shapes by CPU, then GPU-milli, then GPU count, then model.
    cpu, num, milli, models = shape
    return (cpu, milli, num, "|".join(sorted(models)))


@dataclass(frozen=True, slots=True)
class TargetWorkload:
    """Task shapes with their popularity; the weights sum to 1."""

    shapes: tuple[Shape, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.weights):
            raise InvalidSpec("target workload: one weight per shape")
        if not self.shapes:
            raise InvalidSpec("target workload is empty")
        if any(w < 0 for w in self.weights) or abs(sum(self.weights) - 1.0) > 1e-6:
            raise InvalidSpec("target workload weights must be non-negative and sum to 1")

    @classmethod
    def from_pods(
        cls,
        pods: Iterable[PodSpec],
        threshold: float = 0.95,
        include_cpu_only: bool = True,
        weight: Callable[[PodSpec], float] | None = None,
    ) -> TargetWorkload:
        """Most popular shapes covering ``threshold`` of the pods, renormalised.

        ``weight`` lets a caller count a pod as more than one (our policy counts
        GPU demand); the default counts pods, as FGD does.
        """
        if not 0 < threshold <= 1:
            raise InvalidSpec(f"popularity threshold must be in (0, 1], got {threshold}")
        counts: dict[Shape, float] = {}
        for pod in pods:
            if pod.num_gpu == 0 and not include_cpu_only:
                continue
            counts[pod.shape] = counts.get(pod.shape, 0.0) + (1.0 if weight is None else weight(pod))
        counts = {s: c for s, c in counts.items() if c > 0}
        if not counts:
            raise InvalidSpec("cannot build a target workload from no pods")
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda item: (item[1], _tie_key(item[0])), reverse=True)
        kept: list[tuple[Shape, float]] = []
        covered = 0.0
        for shape, count in ranked:
            if covered >= threshold * total:
                break
            kept.append((shape, count))
            covered += count
        return cls(tuple(s for s, _ in kept), tuple(c / covered for _, c in kept))
