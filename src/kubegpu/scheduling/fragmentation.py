"""The fragmentation measure of the FGD paper, vectorised over nodes.

Owns :class:`CompiledWorkload` (a target workload as arrays for one cluster's
GPU models) and the functions that compute, for many nodes at once, how much
of their free GPU-milli is a fragment for the target workload — now, after a
whole-GPU or CPU-only pod would land, and after a fractional pod would land on
each of their GPUs. Must not choose nodes and must not touch the cluster.

For a node and a task shape m, free GPU-milli is a fragment when m cannot use
it: every free milli counts if m is CPU-only, if the node's model is not
allowed, or if the node lacks m's CPU or GPUs; otherwise only the GPUs with
less than m's per-GPU share free count. F_n = Σ_m p_m · fragment(n, m).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kubegpu.scheduling.workload import TargetWorkload

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


def fragmentation_after_whole(
    cw: CompiledWorkload,
    cpu_free: IntArray,
    gpu_free: IntArray,
    model_id: IntArray,
    cpu: int,
    num_gpu: int,
) -> tuple[FloatArray, FloatArray]:
    """(F before, F after) placing a CPU-only or whole-GPU pod on each node.

    A whole-GPU pod takes fully free GPUs; each drops from 1000 free to 0, so it
    leaves every shape's count of usable GPUs ``num_gpu`` lower and adds nothing
    below any share.
    """
    fits, small, total = gpu_stats(cw, gpu_free)
    before: FloatArray = fragment_matrix(cw, fits, small, total, cpu_free, model_id) @ cw.weights
    after: FloatArray = (
        fragment_matrix(cw, fits - num_gpu, small, total - 1000 * num_gpu, cpu_free - cpu, model_id) @ cw.weights
    )
    return before, after


def fragmentation_after_fractional(
    cw: CompiledWorkload,
    cpu_free: IntArray,
    gpu_free: IntArray,
    model_id: IntArray,
    cpu: int,
    milli: int,
) -> tuple[FloatArray, FloatArray]:
    """(F before per node, F after per node and GPU) placing a fractional pod on GPU i.

    Entries for GPUs with less than ``milli`` free are meaningless; callers mask them.
    """
    fits, small, total = gpu_stats(cw, gpu_free)
    before: FloatArray = fragment_matrix(cw, fits, small, total, cpu_free, model_id) @ cw.weights
    g = gpu_free[:, :, None]
    g2 = g - milli
    share = cw.milli[None, None, :]
    was_below = g < share
    now_below = g2 < share
    fits2 = fits[:, None, :] + was_below.astype(np.int64) - now_below
    small2 = small[:, None, :] - g * was_below + g2 * now_below
    total2 = np.broadcast_to((total - milli)[:, None], gpu_free.shape)
    cpu2 = np.broadcast_to((cpu_free - cpu)[:, None], gpu_free.shape)
    ok = cw.usable[model_id][:, None, :] & (fits2 >= cw.num) & (cpu2[..., None] >= cw.cpu)
    after: FloatArray = np.where(ok, small2, total2[..., None]) @ cw.weights
    return before, after
