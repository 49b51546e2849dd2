"""The free share of one GPU as the coming pods will see it: the gap tables of our policy.

Owns :class:`GapTables`, built from the target workload's per-GPU request
sizes and a horizon of ``k`` pods, and :meth:`GapTables.gain`, the change a
fractional pod makes to them. Must not know nodes, CPU, policies or the
cluster; pure arithmetic on GPU-milli.

FGD counts a GPU's free share ``g`` as a fragment for the *next* pod when that
pod cannot use it. That is myopic: a share of 530 milli left by a 0.47-GPU pod
is a fragment for most next pods, yet one of the next few pods will very
likely be another 0.47 and close it; a share of 190 milli left by a 0.81-GPU
pod looks no worse, yet almost nothing in the workload will ever fit it. The
tables look ``k`` pods ahead instead, with ``P(d ≤ g)`` the share of the
workload's pods whose per-GPU request ``d`` fits in ``g``:

* ``stranded[g] = g · (1 − P(d ≤ g))^k`` — the expected milli of a free share
  ``g`` that none of the next ``k`` pods could use. A fully free GPU is not a
  gap (whole-GPU pods take it): ``stranded[1000] = 0``.
* ``residue[g]`` — what the share's *natural partner* leaves: ``g − d`` for
  the largest request size ``d ≤ g`` that is common, i.e. at least even odds
  that one of the next ``k`` pods asks exactly ``d`` (``g`` itself when none).

:meth:`GapTables.gain` is the drop of stranded milli when a pod of ``d``
milli takes a GPU with ``g`` free. A placement that leaves no more than the
natural partner would (a 0.47 pod closing a 530 share to 60) is never
counted as a loss — it is the best the workload offers that share — so the
measure steers pods away from creating avoidable dead slivers (a 0.32 pod
turning 530 into 210) without discouraging the pairings that close GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.model import MILLI, PodSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_HORIZON = 50
COMMON_ODDS = 0.5  # a request size is "common" when one of the next k pods asks it with at least these odds


@dataclass(frozen=True)
class GapTables:
    """``stranded`` and ``residue`` indexed by a GPU's free milli, 0..1000."""

    horizon: int
    stranded: FloatArray
    residue: IntArray

    @classmethod
    def from_pods(cls, pods: Iterable[PodSpec], horizon: int = DEFAULT_HORIZON) -> GapTables:
        """Tables for a workload given as its pod list (CPU-only pods count: they fill no gap)."""
        sizes = np.zeros(MILLI + 1, dtype=np.float64)
        count = 0
        for pod in pods:
            count += 1
            if pod.num_gpu:
                sizes[pod.gpu_milli] += 1
        if not count:
            raise InvalidSpec("gap tables need at least one pod")
        return cls.from_distribution(sizes / count, horizon)

    @classmethod
    def from_distribution(cls, share: FloatArray, horizon: int = DEFAULT_HORIZON) -> GapTables:
        """Tables from ``share[d]``, the fraction of pods asking ``d`` milli per GPU (index 0 unused)."""
        if horizon < 1:
            raise InvalidSpec(f"gap horizon must be at least one pod, got {horizon}")
        share = np.asarray(share, dtype=np.float64)
        if share.shape != (MILLI + 1,) or (share < 0).any() or share.sum() > 1 + 1e-9:
            raise InvalidSpec(f"request-size shares must be {MILLI + 1} non-negative values summing to at most 1")
        share = share.copy()
        share[0] = 0.0  # CPU-only pods never use a GPU's share
        fits = np.minimum(np.cumsum(share), 1.0)  # fits[g] = P(d <= g)
        free = np.arange(MILLI + 1, dtype=np.float64)
        stranded: FloatArray = free * (1.0 - fits) ** horizon
        stranded[MILLI] = 0.0
        odds = 1.0 - (1.0 - share) ** horizon
        common = np.flatnonzero(odds >= COMMON_ODDS)
        residue: IntArray = np.arange(MILLI + 1, dtype=np.int64)
        for g in range(MILLI + 1):
            below = common[common <= g]
            if len(below):
                residue[g] = g - int(below.max())
        stranded.setflags(write=False)
        residue.setflags(write=False)
        return cls(horizon, stranded, residue)

    def gain(self, free: IntArray, milli: int) -> FloatArray:
        """Drop of stranded milli when a ``milli`` pod takes GPUs with ``free`` milli (each ``free ≥ milli``).

        Positive is good. A placement leaving no more than the natural partner
        would is clipped at zero from below: never a loss.
        """
        left = free - milli
        drop: FloatArray = self.stranded[free] - self.stranded[left]
        out: FloatArray = np.where(left <= self.residue[free], np.maximum(drop, 0.0), drop)
        return out
