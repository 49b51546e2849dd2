"""The live scheduler: informers feed the cache and the queue; one loop schedules; binds run concurrently.

Owns :class:`LiveScheduler`. Informers (pods, nodes, PriorityClasses,
PodGroups) keep :class:`~cache.SchedulerCache` and :class:`~queue.SchedulingQueue`
current: every pod bound to a node counts there whoever bound it, pods that
finish or are deleted give their resources back, pending pods of our profiles
are queued by their PriorityClass value (``globalDefault`` honoured). The loop
pops the most important ready pod and runs one cycle; a placement is assumed
in the cache at once and bound in a task (the node and GPUs are written on the
pod first, then ``pods/binding``); a failure records ``FailedScheduling`` and
the ``PodScheduled`` condition and may preempt; a pod whose GPU request no node
can ever satisfy (both ``nvidia.com/gpu`` and ``kubegpu.io/gpu-milli``, an
impossible share) gets that failure without a cycle; gangs are planned all
together. Only the lease holder binds, and it checks before every write.

Crash safety: the API is the only state. A pod whose assignment annotation
was written but which was not bound when the scheduler died is bound to that
node on restart if it still fits; a gang's plan is written on every member
before any member is bound, and on restart a plan is completed only when at
least ``minMember`` members carry it, so no partial gang survives a crash.
Binding an already bound pod is refused by the API (409), so no pod is bound
twice. Must not parse config files or flags (the command does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import numpy as np
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.scheduling_v1 import PriorityClass

from kubegpu.scheduling.live import apiwrites, objects, preemption
from kubegpu.scheduling.live.cache import SchedulerCache
from kubegpu.scheduling.live.config import SchedulerConfig
from kubegpu.scheduling.live.cycle import Cycle, FitError, Placement, Profile
from kubegpu.scheduling.live.gangs import GangTimers, plan_gang
from kubegpu.scheduling.live.informers import DELETED, Informer
from kubegpu.scheduling.live.leader import LeaderElector
from kubegpu.scheduling.live.objects import NEVER, PodGroupInfo, PodInfo
from kubegpu.scheduling.live.queue import SchedulingQueue
from kubegpu.scheduling.live.serving import Health, Metrics

log = logging.getLogger(__name__)

PodGroup = create_namespaced_resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")

#: Binds (annotate + bind) in flight at once.
BIND_CONCURRENCY = 32


@dataclass(frozen=True)
class _Class:
    value: int
    global_default: bool
    preemption_policy: str


class LiveScheduler:
    """Schedules the pods of ``config``'s profiles through one API client."""

    def __init__(
        self,
        client: AsyncClient,
        config: SchedulerConfig,
        identity: str,
        elector: LeaderElector | None = None,
        metrics: Metrics | None = None,
        health: Health | None = None,
        clock: Callable[[], float] = time.monotonic,
        seed: int | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.identity = identity
        self.elector = elector
        self.metrics = metrics or Metrics()
        self.health = health or Health()
        self.clock = clock
        self.cache = SchedulerCache()
        self.queue = SchedulingQueue(config.pod_initial_backoff_s, config.pod_max_backoff_s)
        self.cycle = Cycle(np.random.default_rng(seed))
        self.recorder = apiwrites.EventRecorder(client, identity)
        self.timers = GangTimers()
        self.groups: dict[str, PodGroupInfo] = {}
        self.classes: dict[str, _Class] = {}
        self.in_flight: set[str] = set()
        #: The newest version seen of every pending pod of ours, in flight or not (requeues use it).
        self.latest: dict[str, PodInfo] = {}
        self.first_seen: dict[str, float] = {}
        self.last_message: dict[str, str] = {}
        self.nominated: dict[str, str] = {}
        self.wake = asyncio.Event()
        self.bind_slots = asyncio.Semaphore(BIND_CONCURRENCY)
        self.tasks: set[asyncio.Task[None]] = set()
        self.profiles = {p.scheduler_name for p in config.profiles}
        self.informers = [
            Informer(client, Node, self.on_node),
            Informer(client, Pod, self.on_pod),
            Informer(client, PriorityClass, self.on_priority_class),
            Informer(client, PodGroup, self.on_pod_group),
        ]
        self.bound = 0

    # --- what the informers tell us ---------------------------------------------------------

    def _changed(self) -> None:
        self.queue.cluster_changed()
        self.wake.set()

    def on_node(self, kind: str, obj: Any) -> None:
        if kind == DELETED:
            self.cache.remove_node(obj.metadata.name)
        else:
            before = self.cache.description_errors.get(obj.metadata.name)
            self.cache.set_node(objects.node_info(obj))
            error = self.cache.description_errors.get(obj.metadata.name)
            if error and error != before:
                log.warning("node GPU description ignored, counting its GPUs", extra={"error": error})
        self._changed()

    def on_pod(self, kind: str, obj: Any) -> None:
        pod = objects.pod_info(obj)
        if kind == DELETED or pod.finished:
            self.queue.remove(pod.uid)
            self.in_flight.discard(pod.uid)
            self.latest.pop(pod.uid, None)
            self.first_seen.pop(pod.uid, None)
            self.last_message.pop(pod.uid, None)
            self.nominated.pop(pod.uid, None)
            self.recorder.forget(pod.uid)
            if self.cache.remove_pod(pod.uid) is not None:
                self._changed()
            return
        if pod.node_name:
            self.queue.remove(pod.uid)
            self.in_flight.discard(pod.uid)
            self.latest.pop(pod.uid, None)
            self.nominated.pop(pod.uid, None)
            old = self.cache.placed.get(pod.uid)
            gpus = old.gpus if old is not None and old.gpus else self.cache.gpu_indices_of(pod, pod.node_name)
            self.cache.add_pod(pod, pod.node_name, gpus)
            return
        if pod.scheduler_name not in self.profiles or pod.deleting:
            return
        self.latest[pod.uid] = pod
        if pod.uid in self.in_flight:
            return
        self.first_seen.setdefault(pod.uid, self.clock())
        self.queue.add(pod, self.priority(pod))
        self.wake.set()

    def on_priority_class(self, kind: str, obj: Any) -> None:
        name = obj.metadata.name
        if kind == DELETED:
            self.classes.pop(name, None)
        else:
            self.classes[name] = _Class(
                int(obj.value), bool(obj.globalDefault), obj.preemptionPolicy or objects.PREEMPT_LOWER
            )

    def on_pod_group(self, kind: str, obj: Any) -> None:
        group = objects.pod_group_info(obj)
        if kind == DELETED:
            self.groups.pop(group.key, None)
        else:
            self.groups[group.key] = group
            self._changed()

    # --- priorities -------------------------------------------------------------------------

    def _class_of(self, pod: PodInfo) -> _Class | None:
        if pod.priority_class:
            return self.classes.get(pod.priority_class)
        return next((c for c in self.classes.values() if c.global_default), None)

    def priority(self, pod: PodInfo) -> int:
        """spec.priority as admission resolved it, else the PriorityClass value (or the global default), else 0."""
        if pod.priority is not None:
            return pod.priority
        cls = self._class_of(pod)
        return cls.value if cls else 0

    def preemption_policy(self, pod: PodInfo) -> str:
        if pod.preemption_policy:
            return pod.preemption_policy
        cls = self._class_of(pod)
        return cls.preemption_policy if cls else objects.PREEMPT_LOWER

    # --- the loop -----------------------------------------------------------------------------

    def may_act(self) -> bool:
        return self.elector is None or self.elector.may_act()

    def _update_gauges(self) -> None:
        for queue, count in self.queue.counts(self.clock()).items():
            self.metrics.pending.labels(queue).set(count)
        self.metrics.leader.set(1 if self.may_act() else 0)

    async def run(self) -> None:
        """Start the informers and schedule until cancelled (or until the lease is lost)."""
        for informer in self.informers:
            self._spawn(informer.run())
        await asyncio.gather(*(i.synced.wait() for i in self.informers[:2]))
        self.health.ready, self.health.reason = True, "ok"
        while True:
            self.health.beat()
            self._update_gauges()
            if self.elector is not None and self.elector.lost.is_set():
                return
            if not self.may_act():
                await self._wait(1.0)
                continue
            now = self.clock()
            pod = self.queue.pop(now)
            if pod is None:
                ready = self.queue.next_ready(now)
                await self._wait(1.0 if ready is None else min(1.0, max(0.0, ready - now)))
                continue
            profile = self.config.profile(pod.scheduler_name)
            if profile is None:
                self.queue.remove(pod.uid)
                continue
            try:
                if pod.request_problem:
                    await self._refuse(profile, pod)
                elif pod.group:
                    await self._schedule_gang(profile, pod)
                else:
                    await self._schedule_one(profile, pod)
            except (ApiError, httpx2.HTTPError, OSError) as exc:
                log.warning("scheduling attempt failed", extra={"pod": pod.key, "error": repr(exc)})
                self.metrics.attempts.labels("error", profile.scheduler_name).inc()
                self.queue.retry_later(pod.uid, self.clock())
            # Let informers and binds run between cycles.
            await asyncio.sleep(0)

    async def _wait(self, seconds: float) -> None:
        # asyncio.timeout, not wait_for: on 3.11 wait_for returns the result when the wake and a cancel arrive
        # together, losing the cancel (SIGTERM then never stops the loop).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.wake.wait()
        self.wake.clear()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(_log_failure)

    async def stop(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    # --- one pod ------------------------------------------------------------------------------

    def _resume_fits(self, profile: Profile, pod: PodInfo) -> bool:
        """Whether a pod's recorded assignment (from before a restart) still holds on its node."""
        node = pod.assigned_node
        if node not in self.cache.index:
            return False
        row = self.cache.index[node]
        if not self.cache.static_mask(pod, profile.static_filters).ok[row]:
            return False
        only = np.zeros(len(self.cache.names), dtype=np.bool_)
        only[row] = True
        fits, _ = self.cache.resource_fit(pod, only)
        return bool(fits[row])

    async def _schedule_one(self, profile: Profile, pod: PodInfo) -> None:
        if pod.assigned_node and self._resume_fits(profile, pod):
            gpus = self.cache.gpu_indices_of(pod, pod.assigned_node)
            self._assume(pod, pod.assigned_node, gpus)
            self._spawn(self._bind(profile, pod, pod.assigned_node, gpus, annotate=False))
            return
        reserved = self._reserve_nominated(pod)
        try:
            decision = self.cycle.schedule(self.cache, profile, pod)
        finally:
            for uid in reserved:
                self.cache.remove_pod(uid)
        if isinstance(decision, Placement):
            self._assume(pod, decision.node, decision.gpus)
            self._spawn(self._bind(profile, pod, decision.node, decision.gpus))
            return
        post = await self._preempt(profile, pod, decision)
        await self._unschedulable(profile, pod, FitError(pod, decision.nodes, decision.reasons, post).message)
        self.queue.failed(pod.uid, self.clock())

    async def _refuse(self, profile: Profile, pod: PodInfo) -> None:
        """A pod whose GPU request no node can ever satisfy (both forms, an impossible share): never bound, the
        reason in its FailedScheduling event and PodScheduled condition; tried again only after backoff, as any
        unschedulable pod (a pod's resources cannot change, so in practice until it is deleted)."""
        await self._unschedulable(
            profile, pod, f"0/{len(self.cache.names)} nodes are available: {pod.request_problem}."
        )
        self.queue.failed(pod.uid, self.clock())

    def _reserve_nominated(self, pod: PodInfo) -> list[str]:
        """Count pods nominated to a node (their victims are leaving) against pods that do not outrank them.

        kube-scheduler's addNominatedPods: the room a preemption made is kept for its preemptor.
        """
        mine = self.priority(pod)
        reserved = []
        for uid, node in self.nominated.items():
            other = self.queue.get(uid)
            if uid == pod.uid or other is None or uid in self.cache.placed or node not in self.cache.index:
                continue
            if self.priority(other) >= mine:
                self.cache.add_pod(other, node, (), assumed=True)
                reserved.append(uid)
        return reserved

    def _assume(self, pod: PodInfo, node: str, gpus: tuple[int, ...]) -> None:
        self.queue.remove(pod.uid)
        self.in_flight.add(pod.uid)
        self.cache.add_pod(pod, node, gpus, assumed=True)

    def _forget(self, pod: PodInfo) -> None:
        self.in_flight.discard(pod.uid)
        placed = self.cache.placed.get(pod.uid)
        if placed is not None and placed.assumed:
            self.cache.remove_pod(pod.uid)

    def _annotations(self, pod: PodInfo, node: str, gpus: tuple[int, ...], plan: str = "") -> dict[str, str]:
        device = self.cache.share_device if pod.gpu_milli else self.cache.device_id
        devices = ",".join(device(node, i) for i in gpus) if node in self.cache.nodes else ""
        out = {objects.ASSIGNED_NODE_ANNOTATION: node, objects.GPU_DEVICES_ANNOTATION: devices}
        if pod.gpu_milli:
            out[objects.GPU_MILLI_ANNOTATION] = str(pod.gpu_milli)
        if plan:
            out[objects.GANG_PLAN_ANNOTATION] = plan
        return out

    async def _bind(
        self, profile: Profile, pod: PodInfo, node: str, gpus: tuple[int, ...], annotate: bool = True
    ) -> None:
        async with self.bind_slots:
            try:
                if annotate:
                    if not self.may_act():
                        raise _NotLeader()
                    await self._record(pod, self._annotations(pod, node, gpus))
                await self._bind_only(profile, pod, node)
            except _NotLeader:
                self._requeue(pod)
            except (_AssignmentConflict, ApiError, httpx2.HTTPError, OSError) as exc:
                self._bind_failed(profile, pod, exc)

    async def _record(self, pod: PodInfo, annotations: dict[str, str]) -> None:
        """Write the assignment on the version of the pod we decided on (409 when it changed meanwhile).

        On a 409 the pod is read again, as client-go's RetryOnConflict does: when only what does not bear on the
        decision changed (its status or annotations, e.g. our own PodScheduled condition written a moment before),
        the write is retried once on the fresh version; a pod that was bound, is being deleted or asks for something
        else stays a conflict.
        """
        try:
            await apiwrites.record_assignment(self.client, pod, annotations)
        except ApiError as exc:
            if exc.status.code != 409:
                raise
            fresh = await self._reread(pod)
            if fresh is None:
                raise _AssignmentConflict(str(exc)) from exc
            self.latest[fresh.uid] = fresh
            try:
                await apiwrites.record_assignment(self.client, fresh, annotations)
            except ApiError as again:
                if again.status.code == 409:
                    raise _AssignmentConflict(str(again)) from again
                raise

    async def _reread(self, pod: PodInfo) -> PodInfo | None:
        """The pod as the API has it now, when the decision made on ``pod`` still holds for it; else None."""
        try:
            fresh = objects.pod_info(await self.client.get(Pod, pod.name, namespace=pod.namespace))
        except (ApiError, httpx2.HTTPError, OSError):
            return None
        same = (
            fresh.uid == pod.uid
            and not fresh.node_name
            and not fresh.deleting
            and _decision_inputs(fresh) == _decision_inputs(pod)
        )
        return fresh if same else None

    async def _bind_only(self, profile: Profile, pod: PodInfo, node: str) -> None:
        if not self.may_act():
            raise _NotLeader()
        await apiwrites.bind(self.client, pod, node)
        # Stays in flight until the informer shows it bound: an older event of the still pending pod (our own
        # annotation write) must not queue it again.
        self.bound += 1
        self.metrics.attempts.labels("scheduled", profile.scheduler_name).inc()
        seen = self.first_seen.pop(pod.uid, None)
        if seen is not None:
            self.metrics.latency.labels(profile.scheduler_name).observe(self.clock() - seen)
        self.timers.done(pod.group_key)
        await self.recorder.event(
            pod, "Normal", "Scheduled", f"Successfully assigned {pod.key} to {node}", action="Binding"
        )

    def _requeue(self, pod: PodInfo) -> None:
        self._forget(pod)
        pod = self.latest.get(pod.uid, pod)
        self.queue.add(pod, self.priority(pod))
        self.queue.retry_later(pod.uid, self.clock())
        self.wake.set()

    def _bind_failed(self, profile: Profile, pod: PodInfo, exc: Exception) -> None:
        code = exc.status.code if isinstance(exc, ApiError) else None
        if isinstance(exc, _AssignmentConflict):
            # The pod changed since we read it (a stale resourceVersion): try again with the newer version.
            self._requeue(pod)
            return
        if code == 409:
            # Bound by someone else meanwhile: the informer brings the truth; until then the pod stays in flight.
            placed = self.cache.placed.get(pod.uid)
            if placed is not None and placed.assumed:
                self.cache.remove_pod(pod.uid)
            log.info("binding refused: already bound", extra={"pod": pod.key})
            return
        self._forget(pod)
        if code == 404:
            log.info("binding refused: pod gone", extra={"pod": pod.key})
            return
        log.warning("binding failed", extra={"pod": pod.key, "error": repr(exc)})
        self.metrics.attempts.labels("error", profile.scheduler_name).inc()
        self._requeue(pod)

    async def _unschedulable(self, profile: Profile, pod: PodInfo, message: str, nominated: str | None = None) -> None:
        self.metrics.attempts.labels("unschedulable", profile.scheduler_name).inc()
        if self.last_message.get(pod.uid) != message or nominated is not None:
            self.last_message[pod.uid] = message
            try:
                await apiwrites.set_unschedulable(self.client, pod, message, nominated)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
        # After the condition, so whoever sees the event also sees the condition.
        await self.recorder.event(pod, "Warning", "FailedScheduling", message)

    # --- preemption ---------------------------------------------------------------------------

    def _waiting_for_victims(self, pod: PodInfo) -> str:
        """The node this pod was nominated to if victims it evicted there are still terminating, else ""."""
        node = self.nominated.get(pod.uid, "")
        if not node:
            return ""
        mine = self.priority(pod)
        terminating = [
            p for p in self.cache.on_node.get(node, {}).values() if p.pod.deleting and self.priority(p.pod) < mine
        ]
        return node if terminating else ""

    async def _preempt(self, profile: Profile, pod: PodInfo, failure: FitError) -> str:
        """Try to make room by evicting lower-priority pods; returns kube-scheduler's post-filter text."""
        if self.preemption_policy(pod) == NEVER:
            return ""
        waiting = self._waiting_for_victims(pod)
        if waiting:
            return f"preemption: waiting for the victims on node {waiting} to terminate"
        ranked = preemption.candidates(self.cache, profile, pod, self.priority)
        nodes = failure.nodes
        if not ranked:
            unresolvable = int((~self.cache.static_mask(pod, profile.static_filters).ok).sum())
            parts = []
            if nodes - unresolvable:
                parts.append(f"{nodes - unresolvable} No preemption victims found for incoming pod")
            if unresolvable:
                parts.append(f"{unresolvable} Preemption is not helpful for scheduling")
            return f"preemption: 0/{nodes} nodes are available: {', '.join(sorted(parts))}"
        self.metrics.preemptions.inc()
        refused = 0
        for candidate in ranked:
            evicted: list[PodInfo] = []
            ok = True
            for victim in candidate.victims:
                if not await apiwrites.evict(self.client, victim.pod):
                    ok = False
                    break
                evicted.append(victim.pod)
            for victim_pod in evicted:
                await self.recorder.event(
                    victim_pod,
                    "Normal",
                    "Preempted",
                    f"Preempted by pod {pod.uid} on node {candidate.node}",
                    action="Preempting",
                )
            if ok:
                self.metrics.victims.observe(len(candidate.victims))
                self.nominated[pod.uid] = candidate.node
                await apiwrites.set_unschedulable(self.client, pod, failure.message, nominated=candidate.node)
                log.info("preempting", extra={"pod": pod.key, "node": candidate.node, "victims": len(evicted)})
                return f"preemption: evicting {len(evicted)} pod(s) on node {candidate.node}"
            refused += 1
        return f"preemption: 0/{nodes} nodes are available: {refused} eviction(s) refused by a PodDisruptionBudget"

    # --- gangs --------------------------------------------------------------------------------

    async def _schedule_gang(self, profile: Profile, pod: PodInfo) -> None:
        group = self.groups.get(pod.group_key)
        if group is None:
            await self._unschedulable(
                profile, pod, f"0/{len(self.cache.names)} nodes are available: PodGroup {pod.group_key} not found."
            )
            self.queue.failed(pod.uid, self.clock())
            return
        # Members as the informer saw them last: a queued entry can predate our own status writes (made while the
        # member was in flight, when updates only reach ``latest``), and its stale resourceVersion would make every
        # plan write a 409 Conflict.
        pending = [
            self.latest.get(p.uid, p)
            for p in self.queue.pods()
            if p.group_key == pod.group_key and p.scheduler_name == pod.scheduler_name
        ]
        if pod.uid not in {p.uid for p in pending}:
            pending.append(self.latest.get(pod.uid, pod))
        bound = [p for p in self.cache.placed.values() if p.pod.group_key == pod.group_key]
        if await self._resume_gang(profile, group, pending, bound):
            return
        need = max(0, group.min_member - len(bound))
        now = self.clock()
        if len(pending) < need:
            message = (
                f"pod group {group.key} has {len(pending) + len(bound)} pods, fewer than minMember {group.min_member}"
            )
            await self._gang_failed(profile, group, pending, message, now)
            return
        plan = plan_gang(self.cache, self.cycle, profile, group.key, pending, need)
        if not plan.admitted:
            await self._gang_failed(profile, group, pending, plan.message, now)
            return
        # Every member of the plan carries it before any member is bound (see the module docstring).
        plan_id = uuid.uuid4().hex[:12]
        for placement in plan.placements:
            self.queue.remove(placement.pod.uid)
            self.in_flight.add(placement.pod.uid)
        try:
            if not self.may_act():
                raise _NotLeader()
            await asyncio.gather(
                *(self._record(p.pod, self._annotations(p.pod, p.node, p.gpus, plan_id)) for p in plan.placements)
            )
        except (_NotLeader, _AssignmentConflict, ApiError, httpx2.HTTPError, OSError) as exc:
            log.warning("gang plan not recorded", extra={"group": group.key, "error": repr(exc)})
            for p in plan.placements:
                self._requeue(p.pod)
            return
        self.timers.done(group.key)
        self._spawn(apiwrites.set_group_phase(self.client, PodGroup, group.namespace, group.name, "Scheduled"))
        for p in plan.placements:
            self._spawn(self._bind_planned(profile, p.pod, p.node))

    async def _bind_planned(self, profile: Profile, pod: PodInfo, node: str) -> None:
        async with self.bind_slots:
            try:
                await self._bind_only(profile, pod, node)
            except _NotLeader:
                self._requeue(pod)
            except (_AssignmentConflict, ApiError, httpx2.HTTPError, OSError) as exc:
                self._bind_failed(profile, pod, exc)

    async def _resume_gang(
        self, profile: Profile, group: PodGroupInfo, pending: list[PodInfo], bound: list[Any]
    ) -> bool:
        """Complete a plan recorded before a restart, if at least minMember members carry it."""
        plans: dict[str, list[PodInfo]] = {}
        for p in pending:
            plan = p.annotations.get(objects.GANG_PLAN_ANNOTATION, "")
            if plan and p.assigned_node:
                plans.setdefault(plan, []).append(p)
        for plan, members in plans.items():
            carried = len(members) + sum(
                1 for b in bound if b.pod.annotations.get(objects.GANG_PLAN_ANNOTATION) == plan
            )
            if carried < group.min_member or not all(self._resume_fits(profile, m) for m in members):
                continue
            for m in members:
                self._assume(m, m.assigned_node, self.cache.gpu_indices_of(m, m.assigned_node))
                self._spawn(self._bind_planned(profile, m, m.assigned_node))
            log.info("gang plan resumed", extra={"group": group.key, "plan": plan, "members": len(members)})
            return True
        return False

    async def _gang_failed(
        self, profile: Profile, group: PodGroupInfo, members: list[PodInfo], message: str, now: float
    ) -> None:
        timed_out = self.timers.failed(group.key, now, group.timeout_s)
        if not timed_out:
            remaining = group.timeout_s - (now - self.timers.since[group.key])
            for m in members:
                self.queue.retry_later(m.uid, now, at_most=remaining)
            return
        self.metrics.gang_timeouts.inc()
        text = f"{message} (waited scheduleTimeoutSeconds={group.timeout_s:g})"
        for m in members:
            await self._unschedulable(profile, m, text)
            self.queue.failed(m.uid, now)


class _AssignmentConflict(Exception):
    """The assignment patch's resourceVersion precondition failed: the pod changed since it was read."""


class _NotLeader(Exception):
    """This replica does not (or no longer) hold the lease: it must not write."""


def _decision_inputs(pod: PodInfo) -> tuple[object, ...]:
    """What a placement was decided on: a pod whose other fields changed keeps its decision."""
    return (
        pod.requests,
        pod.scheduler_name,
        pod.node_selector,
        pod.affinity,
        pod.tolerations,
        pod.group,
        pod.priority,
        pod.preemption_policy,
    )


def _log_failure(task: asyncio.Future[Any]) -> None:
    """A background task (an informer, a bind) that ended with an error says so once, instead of vanishing."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("background task failed", extra={"error": f"{type(exc).__name__}: {exc}"})
