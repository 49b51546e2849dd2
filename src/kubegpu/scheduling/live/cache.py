"""The scheduler's cache: every node's allocatable and what the pods on it request, as numpy tables.

Owns :class:`SchedulerCache`: nodes by name; per node and per resource
allocatable and requested (plus the non-zero CPU/memory kube-scheduler scores
with); which GPUs (by index) each pod holds; pods counted on a node whether
the API says they are bound or the scheduler has only assumed them (chosen,
binding in flight); and the static-filter masks per pod constraint, kept
until a node changes. Pods on a node the cache does not know yet are kept and
counted once the node appears. For a node that publishes its GPUs
(annotation ``kubegpu.io/gpus``) it keeps the parsed description and the
GPUs :func:`kubegpu.scheduling.core.exactgpus.choose` picks for a pod of a size,
and the milli its fractional pods hold per GPU, until a pod on that node or the node changes. Must not choose
nodes and does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubegpu.scheduling.core import exactgpus
from kubegpu.scheduling.live import filters, resources
from kubegpu.scheduling.live.objects import NodeInfo, PodInfo
from kubegpu.scheduling.live.resources import MILLI_PER_GPU

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Columns every table has, in the order kube-scheduler's Fits checks them.
BASE_COLUMNS = (resources.PODS, resources.CPU, resources.MEMORY, "ephemeral-storage", resources.GPU)


@dataclass(frozen=True, slots=True)
class Placed:
    """A pod counted on a node: bound (the API says so) or assumed (binding in flight)."""

    pod: PodInfo
    node: str
    gpus: tuple[int, ...]
    assumed: bool


@dataclass
class StaticMask:
    ok: BoolArray
    reasons: dict[str, int]


class SchedulerCache:
    """Nodes and the pods counted on them."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.columns: list[str] = list(BASE_COLUMNS)
        self.column: dict[str, int] = {c: i for i, c in enumerate(self.columns)}
        self.allocatable: IntArray = np.zeros((0, len(self.columns)), dtype=np.int64)
        self.requested: IntArray = np.zeros((0, len(self.columns)), dtype=np.int64)
        self.non_zero: IntArray = np.zeros((0, 2), dtype=np.int64)  # cpu, memory
        self.placed: dict[str, Placed] = {}
        self.on_node: dict[str, dict[str, Placed]] = {}
        self.gpus_used: dict[str, set[int]] = {}
        #: Nodes whose ``kubegpu.io/gpus`` description reads, and why the others' does not.
        self.described: dict[str, exactgpus.NodeGpus] = {}
        self.description_errors: dict[str, str] = {}
        self._choices: dict[tuple[str, int], exactgpus.Choice | None] = {}
        self._shares: dict[str, dict[int, int]] = {}
        self.generation = 0
        self._static: dict[tuple[object, ...], StaticMask] = {}

    # --- nodes ----------------------------------------------------------------------------

    def set_node(self, node: NodeInfo) -> None:
        """Add or update a node."""
        old = self.nodes.get(node.name)
        self.nodes[node.name] = node
        self.generation += 1
        self._static.clear()
        self._describe(node)
        new_columns = [r for r in node.allocatable if r not in self.column]
        if old is None or new_columns:
            for r in new_columns:
                self.column[r] = len(self.columns)
                self.columns.append(r)
            self._rebuild()
            return
        row = self.index[node.name]
        self.allocatable[row] = self._vector(node.allocatable)

    def remove_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is None:
            return
        self.described.pop(name, None)
        self.description_errors.pop(name, None)
        self._forget_choices(name)
        self.generation += 1
        self._static.clear()
        self._rebuild()

    def _describe(self, node: NodeInfo) -> None:
        self._forget_choices(node.name)
        self.described.pop(node.name, None)
        self.description_errors.pop(node.name, None)
        if not node.gpus_text:
            return
        try:
            self.described[node.name] = exactgpus.read(node.name, node.gpus_text)
        except exactgpus.DescriptionError as exc:
            self.description_errors[node.name] = str(exc)  # counted as a node without a description

    def _forget_choices(self, node: str) -> None:
        for key in [k for k in self._choices if k[0] == node]:
            del self._choices[key]
        self._shares.pop(node, None)

    def _vector(self, values: dict[str, int]) -> IntArray:
        vec = np.zeros(len(self.columns), dtype=np.int64)
        for r, v in values.items():
            col = self.column.get(r)
            if col is not None:
                vec[col] = v
        return vec

    def _rebuild(self) -> None:
        self.names = sorted(self.nodes)
        self.index = {n: i for i, n in enumerate(self.names)}
        size, width = len(self.names), len(self.columns)
        self.allocatable = np.zeros((size, width), dtype=np.int64)
        self.requested = np.zeros((size, width), dtype=np.int64)
        self.non_zero = np.zeros((size, 2), dtype=np.int64)
        for i, name in enumerate(self.names):
            self.allocatable[i] = self._vector(self.nodes[name].allocatable)
        for placed in self.placed.values():
            self._count(placed, +1)

    # --- pods -----------------------------------------------------------------------------

    def _count(self, placed: Placed, sign: int) -> None:
        row = self.index.get(placed.node)
        if row is None:
            return  # its node is not known (yet): counted when the node appears
        pod = placed.pod
        for r, v in pod.requests.items():
            col = self.column.get(r)
            if col is None:
                self.column[r] = len(self.columns)
                self.columns.append(r)
                self._rebuild()
                return
            self.requested[row, col] += sign * v
        self.requested[row, 0] += sign  # the pod itself, against allocatable "pods"
        self.non_zero[row, 0] += sign * pod.non_zero.get(resources.CPU, resources.DEFAULT_MILLI_CPU_REQUEST)
        self.non_zero[row, 1] += sign * pod.non_zero.get(resources.MEMORY, resources.DEFAULT_MEMORY_REQUEST)

    def add_pod(self, pod: PodInfo, node: str, gpus: Iterable[int] = (), assumed: bool = False) -> None:
        """Count ``pod`` on ``node`` holding ``gpus`` (replacing what was counted for it before)."""
        self.remove_pod(pod.uid)
        placed = Placed(pod, node, tuple(gpus), assumed)
        self.placed[pod.uid] = placed
        self.on_node.setdefault(node, {})[pod.uid] = placed
        if not pod.gpu_milli:  # a share's GPU is not held whole (shares are summed in shares_used)
            self.gpus_used.setdefault(node, set()).update(placed.gpus)
        self._count(placed, +1)
        self._forget_choices(node)

    def remove_pod(self, uid: str) -> Placed | None:
        placed = self.placed.pop(uid, None)
        if placed is None:
            return None
        self.on_node.get(placed.node, {}).pop(uid, None)
        if not placed.pod.gpu_milli:
            self.gpus_used.get(placed.node, set()).difference_update(placed.gpus)
        self._count(placed, -1)
        self._forget_choices(placed.node)
        return placed

    def gpu_indices_of(self, pod: PodInfo, node: str) -> tuple[int, ...]:
        """The GPU indices a bound pod holds, from its device annotation and the node's device IDs."""
        info = self.nodes.get(node)
        if info is None or not pod.gpu_devices:
            return ()
        described = self.described.get(node)
        if described is not None and pod.gpu_milli:
            ids = {u: i for i, u in enumerate(described.uuids) if u and described.milli[i]}
            return tuple(ids[d] for d in pod.gpu_devices[:1] if d in ids)
        if described is not None:
            ids = {d: i for i, d in enumerate(described.ids) if d is not None}
        else:
            ids = {info.gpu_id(i): i for i in range(info.gpu_count)}
        return tuple(ids[d] for d in pod.gpu_devices if d in ids)

    def device_id(self, node: str, index: int) -> str:
        """The device ID of GPU ``index`` on ``node``: from its description, else its ID list, else the index."""
        described = self.described.get(node)
        if described is not None and index < len(described.ids):
            return described.ids[index] or str(index)
        info = self.nodes.get(node)
        return info.gpu_id(index) if info is not None else str(index)

    def gpu_choice(self, node: str, count: int) -> exactgpus.Choice | None:
        """The GPUs :func:`exactgpus.choose` gives a ``count``-GPU pod on a described ``node`` (None: too few).

        In use: the GPUs counted pods hold (terminating ones included), and as many more as pods whose devices
        are unknown (bound by another scheduler) request, taken off the top of the free list as
        :meth:`free_gpus` takes them. Only for nodes in :attr:`described`.
        """
        key = (node, count)
        if key in self._choices:
            return self._choices[key]
        described = self.described[node]
        used = self.gpus_used.get(node, set())
        held = {d for i, d in enumerate(described.ids) if i in used and d is not None}
        free = described.free(held)
        unknown = int(self.requested[self.index[node], self.column[resources.GPU]]) - len(used)
        if unknown > 0:
            free = free[: max(0, len(free) - unknown)]
        kept = {described.ids[i] for i in free}
        in_use = {d for d in described.ids if d is not None and d not in kept}
        choice = self._choices[key] = exactgpus.choose(described, in_use, count)
        return choice

    def shares_used(self, node: str) -> dict[int, int]:
        """Milli held per GPU index of a described ``node`` by the fractional pods counted there.

        A pod whose GPU is unknown (bound by hand or by another scheduler, no ``kubegpu.io/gpu-devices``) is put
        where the plugin's own best fit put it when it was admitted: the pods are replayed oldest first (the
        kubelet's admission order; creation times have one-second steps, and within one a known GPU goes first),
        those with a known GPU on it, the others best fit on what is used by then. A replay that over-commits a GPU
        cannot be what happened: then the known GPUs all go first.
        """
        used = self._shares.get(node)
        if used is not None:
            return used
        shares = [p for p in self.on_node.get(node, {}).values() if p.pod.gpu_milli]
        in_order = sorted(shares, key=lambda p: (p.pod.created, not p.gpus, p.pod.key))
        used = self._replay(node, in_order)
        if any(v > MILLI_PER_GPU for v in used.values()):
            used = self._replay(node, sorted(in_order, key=lambda p: not p.gpus))
        self._shares[node] = used
        return used

    def _replay(self, node: str, shares: list[Placed]) -> dict[int, int]:
        described = self.described[node]
        used: dict[int, int] = {}
        for placed in shares:
            share = placed.pod.gpu_milli
            gpu: int | None = placed.gpus[0] if placed.gpus else None
            if gpu is None and share <= MILLI_PER_GPU:
                choice = exactgpus.choose_share(described, used, share)
                gpu = choice.indices[0] if choice is not None else None
            if gpu is not None:
                used[gpu] = used.get(gpu, 0) + share
        return used

    def share_choice(self, node: str, share: int) -> exactgpus.Choice | None:
        """The one GPU :func:`exactgpus.choose_share` gives a ``share``-milli pod on a described ``node``."""
        if not 0 < share <= MILLI_PER_GPU:
            return None  # an impossible share fits nowhere (the scheduler refuses such pods before any cycle)
        return exactgpus.choose_share(self.described[node], self.shares_used(node), share)

    def share_fitting(self, node: str, share: int) -> list[int]:
        """Indices of a described ``node``'s healthy share GPUs with at least ``share`` milli left, ascending."""
        free = self.described[node].share_free(self.shares_used(node))
        return sorted(i for i, left in free.items() if left >= share)

    def share_device(self, node: str, index: int) -> str:
        """What a fractional pod's ``kubegpu.io/gpu-devices`` names for GPU ``index`` of ``node``: its UUID."""
        described = self.described.get(node)
        if described is not None and index < len(described.uuids) and described.uuids[index]:
            return described.uuids[index]
        return str(index)

    def free_gpus(self, node: str) -> list[int]:
        """Indices of the node's GPUs no counted pod holds, lowest first."""
        info = self.nodes[node]
        used = self.gpus_used.get(node, set())
        free = [i for i in range(info.gpu_count) if i not in used]
        # GPUs counted by pods whose devices are unknown (bound by another scheduler) come off the top.
        unknown = int(self.requested[self.index[node], self.column[resources.GPU]]) - len(used)
        return free[: max(0, len(free) - max(0, unknown))]

    # --- filters ------------------------------------------------------------------------------

    def static_mask(self, pod: PodInfo, enabled: tuple[str, ...] = filters.STATIC_FILTERS) -> StaticMask:
        """Which nodes pass the static filters for ``pod``, and how many each reason rejected."""
        key = (*filters.constraint_key(pod), enabled)
        mask = self._static.get(key)
        if mask is None:
            ok = np.ones(len(self.names), dtype=np.bool_)
            reasons: dict[str, int] = {}
            for i, name in enumerate(self.names):
                reason = filters.static_reason(pod, self.nodes[name], enabled)
                if reason is not None:
                    ok[i] = False
                    reasons[reason] = reasons.get(reason, 0) + 1
            mask = self._static[key] = StaticMask(ok, reasons)
        return mask

    def resource_fit(self, pod: PodInfo, candidates: BoolArray) -> tuple[BoolArray, dict[str, int]]:
        """Nodes among ``candidates`` with room for the pod's requests, and the Insufficient reasons counted.

        A node short of several resources counts once under each, as kube-scheduler's
        NodeResourcesFit reports them.
        """
        free = self.allocatable - self.requested
        fits = candidates.copy()
        reasons: dict[str, int] = {}
        short = free[:, 0] < 1
        if short.any():
            hit = int((short & candidates).sum())
            if hit:
                reasons["Too many pods"] = hit
            fits &= ~short
        for r, want in pod.requests.items():
            if want <= 0:
                continue
            col = self.column.get(r)
            short = np.ones(len(self.names), dtype=np.bool_) if col is None else free[:, col] < want
            hit = int((short & candidates).sum())
            if hit:
                reasons[f"Insufficient {r}"] = hit
            fits &= ~short
        return fits, reasons
