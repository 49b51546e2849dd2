"""Leader-election decisions as client-go makes them."""

from __future__ import annotations

from kubegpu.scheduling.live.election import Leadership, LeaseRecord, next_record


def test_an_empty_or_missing_lease_is_taken() -> None:
    record = next_record(None, 0.0, 10.0, "me", 15)
    assert record == LeaseRecord("me", 15, 10.0, 10.0, 0)
    released = LeaseRecord("", 1, None, None, 3)
    assert next_record(released, 0.0, 10.0, "me", 15) == LeaseRecord("me", 15, 10.0, 10.0, 3)


def test_the_holder_renews_and_keeps_its_transitions() -> None:
    mine = LeaseRecord("me", 15, 1.0, 5.0, 2)
    assert next_record(mine, 5.0, 7.0, "me", 15) == LeaseRecord("me", 15, 1.0, 7.0, 2)


def test_another_holder_is_respected_until_the_lease_duration_after_we_saw_it_change() -> None:
    theirs = LeaseRecord("them", 15, 0.0, 0.0, 0)
    assert next_record(theirs, observed_at=100.0, now=114.9, identity="me", lease_duration_s=15) is None
    taken = next_record(theirs, observed_at=100.0, now=115.0, identity="me", lease_duration_s=15)
    assert taken == LeaseRecord("me", 15, 115.0, 115.0, 1)


def test_a_leader_stops_acting_at_the_renew_deadline_before_the_lease_expires() -> None:
    leadership = Leadership(renew_deadline_s=10)
    assert not leadership.may_act(0.0)
    leadership.renewed(100.0)
    assert leadership.may_act(109.9)
    assert not leadership.may_act(110.0)
