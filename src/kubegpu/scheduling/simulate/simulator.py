"""The FGD paper's trace-replay protocol: one policy, one seed, one run.

Owns :func:`prepare_workload` (sort the pods by name, shuffle them with the
seed, then inflate by drawing pods with replacement from the original list
until the arrived GPU request would pass the target load — 130 % of cluster GPU
capacity — or drop random pods when the list is already above it), and
:func:`simulate`, which schedules the pods one at a time with no departures
and records after every pod the arrived GPU request, the allocated GPU-milli
and the cluster's fragmentation. :class:`RunResult` turns those records into
the paper's metrics (unallocated GPU % at an arrived load, bucketed to
integer percent exactly as the authors' analysis does) and into a series.
Gangs and preemption (optional) use the core's all-or-nothing and eviction
logic. Must not read files or clocks itself; a caller may pass a timer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kubegpu.scheduling.core.cluster import ClusterState, IntArray
from kubegpu.scheduling.core.errors import InvalidSpec
from kubegpu.scheduling.core.fragmentation import BoolArray, CompiledWorkload, FloatArray, node_fragmentation
from kubegpu.scheduling.core.framework import Placement, Scheduler
from kubegpu.scheduling.core.gang import schedule_gang
from kubegpu.scheduling.core.model import NodeSpec, PodSpec
from kubegpu.scheduling.core.policies import PolicyOptions, build_profile
from kubegpu.scheduling.core.preemption import preempt
from kubegpu.scheduling.core.workload import TargetWorkload

DEFAULT_TARGET_LOAD = 1.3
Progress = Callable[[int, int], None]
#: Called after every arrived pod with its index in the arrival order, the pod and the cluster as it now is.
Observer = Callable[[int, PodSpec, ClusterState], None]


def prepare_workload(
    pods: Sequence[PodSpec], total_gpu_milli: int, rng: np.random.Generator, target_load: float = DEFAULT_TARGET_LOAD
) -> list[PodSpec]:
    """The arrival order: shuffled original pods, then inflation pods (or fewer pods) up to the target load."""
    if not pods:
        raise InvalidSpec("no pods to simulate")
    if target_load <= 0:
        raise InvalidSpec(f"target load must be positive, got {target_load}")
    by_name = sorted(pods, key=lambda p: p.name)
    order = [by_name[i] for i in rng.permutation(len(by_name))]
    target = target_load * total_gpu_milli
    requested = sum(p.total_gpu_milli for p in order)
    if requested < target and any(p.num_gpu for p in by_name):
        extra = 0
        while True:
            pod = by_name[int(rng.integers(len(by_name)))]
            # The authors' stop test adds the per-GPU share, not the pod's total; kept for fidelity.
            if requested + pod.gpu_milli > target:
                break
            requested += pod.total_gpu_milli
            order.append(_clone(pod, f"{pod.name}-tuned-{extra}"))
            extra += 1
    elif requested > target:
        while requested > target and order:
            requested -= order.pop(int(rng.integers(len(order)))).total_gpu_milli
    return order


def _clone(pod: PodSpec, name: str) -> PodSpec:
    # An inflation copy is a pod of its own: it keeps the request and priority, not the gang membership.
    return PodSpec(name, pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli, pod.gpu_models, pod.priority)


@dataclass(frozen=True)
class SeriesPoint:
    """Metrics averaged over the pods whose arrival put the load at ``load_pct`` (rounded)."""

    load_pct: int
    unallocated_gpu_pct: float
    fragmentation_rate_pct: float
    fragmentation_amount_pct: float


@dataclass
class RunResult:
    """Everything one run recorded, one entry per arrived pod."""

    policy: str
    seed: int
    total_gpu_milli: int
    arrived_milli: IntArray
    allocated_milli: IntArray
    fragment_milli: FloatArray
    failed: int
    decision_seconds: FloatArray = field(default_factory=lambda: np.zeros(0))
    preempted: int = 0
    placed: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))

    @property
    def pods(self) -> int:
        return len(self.arrived_milli)

    @property
    def _load_bucket(self) -> FloatArray:
        # Percent of capacity, rounded half to even like the authors' pandas analysis.
        out: FloatArray = np.round(self.arrived_milli / self.total_gpu_milli * 100)
        return out

    def _bucket(self, load_pct: int) -> IntArray:
        bucket = self._load_bucket
        sel = np.flatnonzero(bucket == load_pct)
        if len(sel) == 0:
            sel = np.flatnonzero(np.abs(bucket - load_pct) <= 1)
        return sel

    def unallocated_at(self, load_pct: int) -> float:
        """Unallocated GPU % when the arrived load is ``load_pct`` % of capacity (nan if never reached)."""
        sel = self._bucket(load_pct)
        if len(sel) == 0:
            return float("nan")
        alloc = np.round(self.allocated_milli[sel] / self.total_gpu_milli * 100, 2)
        return round(100.0 - round(float(alloc.mean()), 2), 2)

    def series(self) -> list[SeriesPoint]:
        """One point per integer load percent reached."""
        points: list[SeriesPoint] = []
        if not self.pods:
            return points
        top = int(self._load_bucket.max())
        idle = self.total_gpu_milli - self.allocated_milli
        rate = np.where(idle > 0, self.fragment_milli / np.maximum(idle, 1) * 100, 0.0)
        amount = self.fragment_milli / self.total_gpu_milli * 100
        for pct in range(top + 1):
            sel = self._bucket(pct)
            if len(sel) == 0:
                continue
            points.append(
                SeriesPoint(
                    pct,
                    self.unallocated_at(pct),
                    round(float(rate[sel].mean()), 2),
                    round(float(amount[sel].mean()), 2),
                )
            )
        return points


def simulate(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policy: str,
    seed: int,
    *,
    target_load: float = DEFAULT_TARGET_LOAD,
    options: PolicyOptions | None = None,
    tie_break: str = "rank",
    preemption: bool = False,
    progress: Progress | None = None,
    timer: Callable[[], float] | None = None,
    observer: Observer | None = None,
) -> RunResult:
    """Replay ``pods`` onto ``nodes`` under ``policy`` following the FGD paper's protocol.

    Pods of a gang (same ``group``) are scheduled together, all-or-nothing, when
    the first of them arrives. With ``preemption``, a pod no node can take may
    evict lower-priority pods; evicted pods are counted and not retried (no
    departures, no requeue, as the protocol has none). ``observer`` sees the
    cluster after every pod (for analyses; it must not change it).
    """
    state = ClusterState(nodes)
    rng = np.random.default_rng(seed)
    target = TargetWorkload.from_pods(pods)
    order = prepare_workload(pods, state.total_gpu_milli, rng, target_load)
    scheduler = Scheduler(state, build_profile(policy, state, target, pods, rng, options), rng, tie_break)
    measure = CompiledWorkload(target, state.models)  # the paper's F(M), whatever the policy
    node_frag = node_fragmentation(measure, state.cpu_free, state.gpu_free, state.model_id)
    measured_version = state.version.copy()
    groups: dict[str, list[PodSpec]] = {}
    for pod in order:
        if pod.group:
            groups.setdefault(pod.group, []).append(pod)
    arrived = np.zeros(len(order), dtype=np.int64)
    allocated = np.zeros(len(order), dtype=np.int64)
    fragment = np.zeros(len(order), dtype=np.float64)
    seconds = np.zeros(len(order) if timer else 0, dtype=np.float64)
    placed = np.zeros(len(order), dtype=np.bool_)
    index = {id(pod): i for i, pod in enumerate(order)}
    arrived_so_far = 0
    failed = preempted = 0
    for i, pod in enumerate(order):
        started = timer() if timer else 0.0
        if pod.group:
            members = groups.pop(pod.group, None)
            if members is not None:  # the first member to arrive brings the gang
                gang = schedule_gang(scheduler, members)
                failed += len(gang.unplaced) if gang.admitted else len(members)
                if gang.admitted:
                    unplaced = {id(m) for m in gang.unplaced}
                    for member in members:
                        placed[index[id(member)]] = id(member) not in unplaced
        else:
            decision = scheduler.schedule(pod)
            if isinstance(decision, Placement):
                placed[i] = True
            else:
                result = preempt(scheduler, pod) if preemption else None
                if result is None:
                    failed += 1
                else:
                    placed[i] = True
                    preempted += len(result.victims)
        if timer:
            seconds[i] = timer() - started
        arrived_so_far += pod.total_gpu_milli
        changed = np.flatnonzero(state.version != measured_version)
        if len(changed):
            node_frag[changed] = node_fragmentation(
                measure, state.cpu_free[changed], state.gpu_free[changed], state.model_id[changed]
            )
            measured_version[changed] = state.version[changed]
        arrived[i] = arrived_so_far
        allocated[i] = state.allocated_gpu_milli
        fragment[i] = node_frag.sum()
        if observer:
            observer(i, pod, state)
        if progress and (i % 256 == 255 or i == len(order) - 1):
            progress(i + 1, len(order))
    return RunResult(
        policy, seed, state.total_gpu_milli, arrived, allocated, fragment, failed, seconds, preempted, placed
    )
