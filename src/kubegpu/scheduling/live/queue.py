"""The scheduling queue: pending pods by priority then creation time, with capped exponential backoff.

Owns :class:`SchedulingQueue`, kube-scheduler's three queues in one object:
*active* (a heap: higher priority first, then older), *backoff* (a pod that
failed waits ``initial * 2^(attempts-1)`` seconds, at most ``maximum``) and
*unschedulable* (failed pods wait for a cluster change — a node added or
updated, a pod deleted or finished — and are then moved to backoff or
active; kube-scheduler also flushes them after five minutes, and so does this
queue). Time is passed in by the caller, so nothing here reads a clock or
sleeps. Must not schedule.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from kubegpu.scheduling.live.objects import PodInfo

#: kube-scheduler's podMaxInUnschedulablePodsDuration.
UNSCHEDULABLE_FLUSH_S = 300.0


@dataclass
class _Entry:
    pod: PodInfo
    priority: int
    attempts: int = 0
    backoff_until: float = 0.0
    unschedulable_since: float | None = None


class SchedulingQueue:
    """Pending pods of this scheduler's profiles."""

    def __init__(self, initial_backoff_s: float = 1.0, max_backoff_s: float = 10.0) -> None:
        self.initial = initial_backoff_s
        self.maximum = max_backoff_s
        self._entries: dict[str, _Entry] = {}
        self._heap: list[tuple[int, float, int, str]] = []
        self._in_heap: set[str] = set()
        self._waiting: set[str] = set()
        # kube-scheduler's moveRequestCycle: a cluster change while a pod was being tried means its failure may
        # already be out of date, so it backs off instead of waiting for the next change.
        self._moves = 0
        self._popped_at: dict[str, int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, uid: object) -> bool:
        return uid in self._entries

    def get(self, uid: str) -> PodInfo | None:
        e = self._entries.get(uid)
        return e.pod if e is not None else None

    def pods(self) -> list[PodInfo]:
        return [e.pod for e in self._entries.values()]

    def counts(self, now: float) -> dict[str, int]:
        """Pending pods per queue (active, backoff, unschedulable), as kube-scheduler's pending_pods gauge."""
        out = {"active": 0, "backoff": 0, "unschedulable": 0}
        for uid, e in self._entries.items():
            if uid in self._in_heap:
                out["active"] += 1
            elif e.unschedulable_since is not None:
                out["unschedulable"] += 1
            else:
                out["backoff"] += 1
        return out

    def _push(self, uid: str) -> None:
        e = self._entries[uid]
        if uid in self._in_heap:
            return
        heapq.heappush(self._heap, (-e.priority, e.pod.created, next(self._seq), uid))
        self._in_heap.add(uid)
        self._waiting.discard(uid)

    def add(self, pod: PodInfo, priority: int) -> None:
        """A new pending pod, or an update of one already queued (kept where it waits)."""
        e = self._entries.get(pod.uid)
        if e is None:
            self._entries[pod.uid] = _Entry(pod, priority)
            self._push(pod.uid)
            return
        e.pod = pod
        if e.priority != priority and pod.uid in self._in_heap:
            e.priority = priority
            self._in_heap.discard(pod.uid)  # the stale heap entry is skipped on pop
            self._push(pod.uid)
        e.priority = priority

    def remove(self, uid: str) -> None:
        self._entries.pop(uid, None)
        self._in_heap.discard(uid)
        self._waiting.discard(uid)
        self._popped_at.pop(uid, None)

    def pop(self, now: float) -> PodInfo | None:
        """The most important pod ready to be tried now, or None."""
        self._promote(now)
        while self._heap:
            neg, _created, _, uid = heapq.heappop(self._heap)
            e = self._entries.get(uid)
            if e is None or uid not in self._in_heap or -neg != e.priority:
                continue
            self._in_heap.discard(uid)
            self._popped_at[uid] = self._moves
            return e.pod
        return None

    def failed(self, uid: str, now: float) -> float:
        """A pod could not be placed: it waits for a cluster change; returns its backoff in seconds."""
        e = self._entries.get(uid)
        if e is None:
            return 0.0
        e.attempts += 1
        delay: float = min(self.maximum, self.initial * 2.0 ** (e.attempts - 1))
        e.backoff_until = now + delay
        e.unschedulable_since = now if self._popped_at.pop(uid, self._moves) == self._moves else None
        self._in_heap.discard(uid)
        self._waiting.add(uid)
        return delay

    def retry_later(self, uid: str, now: float, at_most: float | None = None) -> None:
        """Retry after its backoff (at most ``at_most`` s) without waiting for a cluster change.

        For attempts interrupted by an API error, and for gang members whose group's timeout is still running.
        """
        e = self._entries.get(uid)
        if e is None:
            return
        e.attempts += 1
        delay = min(self.maximum, self.initial * 2.0 ** (e.attempts - 1))
        e.backoff_until = now + (delay if at_most is None else max(0.0, min(delay, at_most)))
        e.unschedulable_since = None
        self._in_heap.discard(uid)
        self._waiting.add(uid)

    def cluster_changed(self) -> None:
        """A node was added or updated, or a pod left: every unschedulable pod may be tried again."""
        self._moves += 1
        for uid in self._waiting:
            self._entries[uid].unschedulable_since = None

    def activate(self, uids: list[str]) -> None:
        """Move these pods to active now (their gang became schedulable)."""
        for uid in uids:
            e = self._entries.get(uid)
            if e is not None:
                e.unschedulable_since = None
                e.backoff_until = 0.0
                self._push(uid)

    def _promote(self, now: float) -> None:
        for uid in list(self._waiting):
            e = self._entries[uid]
            if e.unschedulable_since is not None:
                if now - e.unschedulable_since < UNSCHEDULABLE_FLUSH_S:
                    continue
                e.unschedulable_since = None
            if e.backoff_until <= now:
                self._push(uid)

    def next_ready(self, now: float) -> float | None:
        """When the next pod becomes ready (now when one is active), None when all wait for a cluster change."""
        if self._in_heap:
            return now
        times = [
            e.backoff_until
            if e.unschedulable_since is None
            else max(e.backoff_until, e.unschedulable_since + UNSCHEDULABLE_FLUSH_S)
            for e in (self._entries[uid] for uid in self._waiting)
        ]
        return min(times) if times else None
