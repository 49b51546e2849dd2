"""The scheduling queue: order, backoff, retry on cluster change."""

from __future__ import annotations

from kubegpu.scheduling.live.queue import UNSCHEDULABLE_FLUSH_S, SchedulingQueue

from .builders import pod


def test_higher_priority_first_then_older_first() -> None:
    q = SchedulingQueue()
    q.add(pod("late-low", created="2026-01-01T00:00:03Z"), 0)
    q.add(pod("early-low", created="2026-01-01T00:00:01Z"), 0)
    q.add(pod("high", created="2026-01-01T00:00:05Z"), 1000)
    assert [q.pop(0.0).name for _ in range(3)] == ["high", "early-low", "late-low"]  # type: ignore[union-attr]
    assert q.pop(0.0) is None


def test_a_failed_pod_waits_for_a_cluster_change_and_its_backoff() -> None:
    q = SchedulingQueue(initial_backoff_s=1, max_backoff_s=10)
    q.add(pod("p"), 0)
    p = q.pop(0.0)
    assert p is not None
    assert q.failed(p.uid, 0.0) == 1.0
    assert q.pop(5.0) is None  # backoff over, but nothing changed in the cluster
    q.cluster_changed()
    assert q.pop(0.5) is None  # changed, but still backing off
    assert q.pop(1.0) is not None


def test_backoff_doubles_and_is_capped() -> None:
    q = SchedulingQueue(initial_backoff_s=1, max_backoff_s=10)
    q.add(pod("p"), 0)
    delays = []
    for _ in range(6):
        p = q.pop(1e6)
        q.cluster_changed()
        assert p is not None
        delays.append(q.failed(p.uid, 0.0))
        q.cluster_changed()
        q._entries[p.uid].backoff_until = 0.0  # make it ready for the next round
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_unschedulable_pods_are_flushed_after_five_minutes_without_a_change() -> None:
    q = SchedulingQueue()
    q.add(pod("p"), 0)
    p = q.pop(0.0)
    assert p is not None
    q.failed(p.uid, 0.0)
    assert q.next_ready(1.0) == UNSCHEDULABLE_FLUSH_S
    assert q.pop(UNSCHEDULABLE_FLUSH_S) is not None


def test_counts_say_where_each_pod_waits() -> None:
    q = SchedulingQueue()
    for name in ("a", "b", "c"):
        q.add(pod(name), 0)
    a = q.pop(0.0)
    assert a is not None
    q.failed(a.uid, 0.0)
    b = q.pop(0.0)
    assert b is not None
    q.retry_later(b.uid, 0.0)
    assert q.counts(0.0) == {"active": 1, "backoff": 1, "unschedulable": 1}


def test_removed_pods_are_never_popped() -> None:
    q = SchedulingQueue()
    q.add(pod("p"), 0)
    q.remove("uid-default-p")
    assert q.pop(0.0) is None and len(q) == 0


def test_a_cluster_change_during_the_attempt_sends_the_failed_pod_to_backoff_not_to_wait() -> None:
    q = SchedulingQueue(initial_backoff_s=1, max_backoff_s=10)
    q.add(pod("p"), 0)
    p = q.pop(0.0)
    assert p is not None
    q.cluster_changed()  # e.g. a victim was deleted while the pod was being tried
    q.failed(p.uid, 0.0)
    assert q.pop(1.0) is not None
