"""Cluster state: what every node has left, down to the GPU-milli of each GPU.

Owns :class:`ClusterState` (per-node free CPU and memory, a per-GPU free-milli
matrix, GPU models, which pod sits where on which GPUs) and the only two ways
to change it, :meth:`ClusterState.bind` and :meth:`ClusterState.unbind`. A bind
that would over-commit a GPU, the CPU or the memory raises :class:`OverCommit`
instead of happening, so no policy bug can produce an impossible cluster.
Must not choose nodes or GPUs (that is the policies' job) and does no I/O.

The arrays are numpy so filters and scorers can work on all nodes at once.
``version[n]`` grows whenever node ``n`` changes, which lets score caches know
what is stale. GPUs beyond a node's count are padding columns with capacity 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kubegpu.scheduling.core.errors import InvalidSpec, OverCommit, UnknownPod
from kubegpu.scheduling.core.model import MILLI, NodeSpec, PodSpec

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Binding:
    """A pod placed on a node, with the GPU indices it holds (empty for a CPU-only pod)."""

    pod: PodSpec
    node: int
    gpus: tuple[int, ...]


class ClusterState:
    """Mutable cluster accounting over a fixed list of nodes."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        if not nodes:
            raise InvalidSpec("a cluster needs at least one node")
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})[0]
            raise InvalidSpec(f"node name {dup!r} appears more than once")
        self.nodes: tuple[NodeSpec, ...] = tuple(nodes)
        self.index: dict[str, int] = {name: i for i, name in enumerate(names)}
        self.size = len(nodes)
        self.max_gpus = max(1, max(n.gpus for n in nodes))
        self.models: tuple[str, ...] = tuple(sorted({n.model for n in nodes if n.gpus}))
        model_pos = {m: i for i, m in enumerate(self.models)}
        # -1 for nodes without GPUs: lookup tables get one extra all-False row at the end for it.
        self.model_id: IntArray = np.array([model_pos[n.model] if n.gpus else -1 for n in nodes], dtype=np.int64)
        self.cpu_capacity: IntArray = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory_capacity: IntArray = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.gpu_count: IntArray = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.gpu_capacity: IntArray = np.where(
            np.arange(self.max_gpus)[None, :] < self.gpu_count[:, None], MILLI, 0
        ).astype(np.int64)
        self.cpu_free: IntArray = self.cpu_capacity.copy()
        self.memory_free: IntArray = self.memory_capacity.copy()
        self.gpu_free: IntArray = self.gpu_capacity.copy()
        self.version: IntArray = np.zeros(self.size, dtype=np.int64)
        self.total_gpu_milli = int(self.gpu_capacity.sum())
        self.allocated_gpu_milli = 0
        self.bindings: dict[str, Binding] = {}
        self.pods_on_node: list[dict[str, Binding]] = [{} for _ in nodes]
        # Affinity class -> how many pods of that class each node hosts (the Clustering policy reads it).
        self.class_counts: dict[str, IntArray] = {}
        self.class_kinds: IntArray = np.zeros(self.size, dtype=np.int64)
        self._model_masks: dict[frozenset[str], BoolArray] = {}

    # --- queries -------------------------------------------------------------------------------

    def model_mask(self, models: frozenset[str]) -> BoolArray:
        """Nodes whose GPU model the pod accepts (all nodes when ``models`` is empty)."""
        mask = self._model_masks.get(models)
        if mask is None:
            if models:
                allowed = np.array([m in models for m in self.models] + [False], dtype=np.bool_)
                mask = allowed[self.model_id]
            else:
                mask = np.ones(self.size, dtype=np.bool_)
            mask.setflags(write=False)
            self._model_masks[models] = mask
        return mask

    def gpus_fitting(self, pod: PodSpec, node: int, among: Sequence[int] | None = None) -> list[int]:
        """Indices of the node's GPUs (of ``among`` when given) with at least the pod's per-GPU share free, in
        index order."""
        if pod.num_gpu == 0:
            return []
        free = self.gpu_free[node, : self.gpu_count[node]]
        fitting = [int(i) for i in np.flatnonzero(free >= pod.gpu_milli)]
        if among is None:
            return fitting
        allowed = set(among)
        return [i for i in fitting if i in allowed]

    def fits(self, pod: PodSpec, node: int) -> bool:
        """Whether the pod fits on the node at all (CPU, memory, model, enough GPUs with its share)."""
        if self.cpu_free[node] < pod.cpu_milli or self.memory_free[node] < pod.memory_mib:
            return False
        if pod.num_gpu == 0:
            return True
        if not self.model_mask(pod.gpu_models)[node]:
            return False
        return len(self.gpus_fitting(pod, node)) >= pod.num_gpu

    def used_gpus(self) -> int:
        """How many GPUs carry any allocation."""
        return int(((self.gpu_free < self.gpu_capacity) & (self.gpu_capacity > 0)).sum())

    # --- changes -------------------------------------------------------------------------------

    def bind(self, pod: PodSpec, node: int, gpus: Iterable[int] = ()) -> Binding:
        """Place ``pod`` on ``node`` holding ``gpus``; raises :class:`OverCommit` if that is impossible."""
        gpu_list = tuple(int(g) for g in gpus)
        if pod.name in self.bindings:
            raise OverCommit(f"pod {pod.name} is already bound to node {self.nodes[self.bindings[pod.name].node].name}")
        if not 0 <= node < self.size:
            raise OverCommit(f"pod {pod.name}: node index {node} out of range 0..{self.size - 1}")
        where = f"pod {pod.name} on node {self.nodes[node].name}"
        if self.cpu_free[node] < pod.cpu_milli:
            raise OverCommit(f"{where}: needs {pod.cpu_milli} CPU milli, {self.cpu_free[node]} free")
        if self.memory_free[node] < pod.memory_mib:
            raise OverCommit(f"{where}: needs {pod.memory_mib} MiB, {self.memory_free[node]} free")
        if len(gpu_list) != pod.num_gpu or len(set(gpu_list)) != len(gpu_list):
            raise OverCommit(f"{where}: needs {pod.num_gpu} distinct GPUs, was given {list(gpu_list)}")
        if pod.num_gpu and not self.model_mask(pod.gpu_models)[node]:
            raise OverCommit(f"{where}: GPU model {self.nodes[node].model!r} not in {sorted(pod.gpu_models)}")
        for g in gpu_list:
            if not 0 <= g < self.gpu_count[node]:
                raise OverCommit(f"{where}: GPU {g} does not exist (node has {self.gpu_count[node]})")
            if self.gpu_free[node, g] < pod.gpu_milli:
                raise OverCommit(f"{where}: GPU {g} has {self.gpu_free[node, g]} milli free, needs {pod.gpu_milli}")
        self.cpu_free[node] -= pod.cpu_milli
        self.memory_free[node] -= pod.memory_mib
        for g in gpu_list:
            self.gpu_free[node, g] -= pod.gpu_milli
        self.allocated_gpu_milli += pod.total_gpu_milli
        binding = Binding(pod, node, gpu_list)
        self.bindings[pod.name] = binding
        self.pods_on_node[node][pod.name] = binding
        self._count_class(pod, node, +1)
        self.version[node] += 1
        return binding

    def unbind(self, name: str) -> Binding:
        """Remove a bound pod and give its resources back."""
        binding = self.bindings.pop(name, None)
        if binding is None:
            raise UnknownPod(f"pod {name} is not bound")
        pod, node = binding.pod, binding.node
        del self.pods_on_node[node][name]
        self.cpu_free[node] += pod.cpu_milli
        self.memory_free[node] += pod.memory_mib
        for g in binding.gpus:
            self.gpu_free[node, g] += pod.gpu_milli
        self.allocated_gpu_milli -= pod.total_gpu_milli
        self._count_class(pod, node, -1)
        self.version[node] += 1
        return binding

    def _count_class(self, pod: PodSpec, node: int, step: int) -> None:
        if pod.num_gpu == 0:
            return  # CPU-only pods give a node no GPU affinity
        counts = self.class_counts.get(pod.affinity_class)
        if counts is None:
            counts = self.class_counts[pod.affinity_class] = np.zeros(self.size, dtype=np.int64)
        before = counts[node]
        counts[node] += step
        if before == 0 and step > 0:
            self.class_kinds[node] += 1
        elif counts[node] == 0 and step < 0:
            self.class_kinds[node] -= 1
