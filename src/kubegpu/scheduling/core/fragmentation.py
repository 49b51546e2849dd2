"""The fragmentation measure of the FGD paper, vectorised over nodes.

Owns :class:`CompiledWorkload` (a target workload as arrays for one cluster's
GPU models), :class:`ShapeStats` (the per-node, per-shape counts the measure
needs, kept current as nodes change) and the functions that compute, for many
nodes at once, how much of their free GPU-milli is a fragment for the target
workload — now, after a whole-GPU or CPU-only pod would land, and after a
fractional pod would land on a given GPU. Must not choose nodes and must not
change the cluster.

For a node and a task shape m, free GPU-milli is a fragment when m cannot use
it: every free milli counts if m is CPU-only, if the node's model is not
allowed, or if the node lacks m's CPU or GPUs; otherwise only the GPUs with
less than m's per-GPU share free count. F_n = Σ_m p_m · fragment(n, m).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubegpu.scheduling.core.cluster import ClusterState
from kubegpu.scheduling.core.workload import TargetWorkload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class CompiledWorkload:
    """A target workload as column arrays, with a model-permission table for one cluster."""

    def __init__(self, target: TargetWorkload, models: tuple[str, ...]) -> None:
        self.target = target
        shapes = target.shapes
        self.weights: FloatArray = np.array(target.weights, dtype=np.float64)
        self.cpu: IntArray = np.array([s[0] for s in shapes], dtype=np.int64)
        self.num: IntArray = np.array([s[1] for s in shapes], dtype=np.int64)
        self.milli: IntArray = np.array([s[2] for s in shapes], dtype=np.int64)
        gpu_shape = self.num > 0
        # Row per cluster model plus a final all-False row that model id -1 (no GPUs) selects.
        rows = [[bool(g) and (not s[3] or m in s[3]) for s, g in zip(shapes, gpu_shape, strict=True)] for m in models]
        rows.append([False] * len(shapes))
        self.usable: BoolArray = np.array(rows, dtype=np.bool_)

    def with_weights(self, weights: FloatArray) -> CompiledWorkload:
        """The same shapes with other weights (used by policies that weigh shapes differently)."""
        clone = object.__new__(CompiledWorkload)
        clone.__dict__.update(self.__dict__)
        clone.weights = np.asarray(weights, dtype=np.float64)
        return clone


def gpu_stats(cw: CompiledWorkload, gpu_free: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Per node and shape: GPUs with the shape's share free, milli on GPUs below it; per node: free total."""
    below = gpu_free[:, :, None] < cw.milli[None, None, :]
    fits = (~below).sum(axis=1)
    small = (gpu_free[:, :, None] * below).sum(axis=1)
    return fits, small, gpu_free.sum(axis=1)


def fragment_matrix(
    cw: CompiledWorkload,
    fits: IntArray,
    small: IntArray,
    total: IntArray,
    cpu_free: IntArray,
    model_id: IntArray,
) -> IntArray:
    """Fragment milli per node and shape (broadcasts over any leading node axes)."""
    ok = cw.usable[model_id] & (fits >= cw.num) & (cpu_free[..., None] >= cw.cpu)
    return np.where(ok, small, total[..., None])


def node_fragmentation(cw: CompiledWorkload, cpu_free: IntArray, gpu_free: IntArray, model_id: IntArray) -> FloatArray:
    """F_n for each node given its free CPU, per-GPU free milli and model id."""
    fits, small, total = gpu_stats(cw, gpu_free)
    frag: FloatArray = fragment_matrix(cw, fits, small, total, cpu_free, model_id) @ cw.weights
    return frag


class ShapeStats:
    """Per node and shape, kept current with the cluster: GPUs holding the share, milli on GPUs below it.

    Rows are recomputed only for nodes whose ``version`` moved since they were
    last read, so a scheduling cycle pays for the nodes that changed, not for
    the whole cluster.
    """

    def __init__(self, cw: CompiledWorkload, state: ClusterState) -> None:
        self.cw = cw
        self.state = state
        size, shapes = state.size, len(cw.weights)
        self.fits: IntArray = np.zeros((size, shapes), dtype=np.int64)
        self.small: IntArray = np.zeros((size, shapes), dtype=np.int64)
        self.versions: IntArray = np.full(size, -1, dtype=np.int64)

    def rows(self, nodes: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """(fits, small, total free) for the given nodes."""
        stale = nodes[self.versions[nodes] != self.state.version[nodes]]
        if len(stale):
            fits, small, _ = gpu_stats(self.cw, self.state.gpu_free[stale])
            self.fits[stale] = fits
            self.small[stale] = small
            self.versions[stale] = self.state.version[stale]
        return self.fits[nodes], self.small[nodes], self.state.gpu_free[nodes].sum(axis=1)


def fragmentation_after_whole(
    cw: CompiledWorkload,
    stats: tuple[IntArray, IntArray, IntArray],
    cpu_free: IntArray,
    model_id: IntArray,
    cpu: int,
    num_gpu: int,
) -> tuple[FloatArray, FloatArray]:
    """(F before, F after) placing a CPU-only or whole-GPU pod on each node.

    A whole-GPU pod takes fully free GPUs; each drops from 1000 free to 0, so it
    leaves every shape's count of usable GPUs ``num_gpu`` lower and adds nothing
    below any share.
    """
    fits, small, total = stats
    before: FloatArray = fragment_matrix(cw, fits, small, total, cpu_free, model_id) @ cw.weights
    after: FloatArray = (
        fragment_matrix(cw, fits - num_gpu, small, total - 1000 * num_gpu, cpu_free - cpu, model_id) @ cw.weights
    )
    return before, after


def fragmentation_after_share(
    cw: CompiledWorkload,
    stats: tuple[IntArray, IntArray, IntArray],
    cpu_free: IntArray,
    model_id: IntArray,
    gpu: IntArray,
    cpu: int,
    milli: int,
) -> FloatArray:
    """F after a fractional pod takes ``milli`` from a GPU with ``gpu`` free, one row per candidate.

    All arguments are row-aligned: row r is a node (its stats, CPU, model)
    and the free share of the GPU the pod would take there. Only that GPU
    changes, so only its contribution to each shape's counts moves.
    """
    fits, small, total = stats
    g = gpu[:, None]
    g2 = g - milli
    was_below = g < cw.milli
    now_below = g2 < cw.milli
    fits2 = fits + was_below.astype(np.int64) - now_below
    small2 = small - g * was_below + g2 * now_below
    after: FloatArray = fragment_matrix(cw, fits2, small2, total - milli, cpu_free - cpu, model_id) @ cw.weights
    return after


def share_candidates(gpu_free: IntArray, milli: int) -> tuple[IntArray, IntArray]:
    """(row, free share) of each distinct GPU state per row that can take ``milli``.

    GPUs of one node with the same free share lead to the same outcome, so
    each is evaluated once.
    """
    rows, cols = np.nonzero(gpu_free >= milli)
    keys = np.unique(rows * 2048 + gpu_free[rows, cols])
    out_rows: IntArray = (keys // 2048).astype(np.int64)
    out_free: IntArray = (keys % 2048).astype(np.int64)
    return out_rows, out_free


class ShapeStatsCache:
    """Lazily binds a :class:`ShapeStats` to the cluster a scoring plugin is first used with (rebuilt for another)."""

    def __init__(self, workload: CompiledWorkload) -> None:
        self.workload = workload
        self._stats: ShapeStats | None = None

    def of(self, state: ClusterState) -> ShapeStats:
        if self._stats is None or self._stats.state is not state:
            self._stats = ShapeStats(self.workload, state)
        return self._stats
