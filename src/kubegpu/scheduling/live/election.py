"""Leader election on a ``coordination.k8s.io/v1`` Lease, decided as client-go's leaderelection decides.

Owns :class:`LeaseRecord` (holder, lease duration, acquire/renew times,
transitions), :func:`next_record` — given the record read from the API, when
this candidate last saw it change, and the time now, the record to write (to
acquire or renew) or None when another holder's lease is still valid — and
:class:`Leadership`, which says whether a leader may still act: only until
``renewDeadline`` after its last successful renewal, which is shorter than
the lease duration, so a leader that cannot renew stops binding before any
other candidate can take the lease. As in client-go, expiry is judged by the
candidate's own clock from when it observed the record change, never by
comparing clocks with the holder. Must not do I/O; time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str = ""
    lease_duration_s: int = 15
    acquire_time: float | None = None
    renew_time: float | None = None
    transitions: int = 0


def next_record(
    current: LeaseRecord | None, observed_at: float, now: float, identity: str, lease_duration_s: float
) -> LeaseRecord | None:
    """The record to write to hold the lease, or None when someone else still holds it."""
    duration = round(lease_duration_s)
    if current is None or not current.holder:
        transitions = current.transitions if current else 0
        return LeaseRecord(identity, duration, now, now, transitions)
    if current.holder == identity:
        return replace(current, renew_time=now, lease_duration_s=duration)
    if now < observed_at + max(current.lease_duration_s, 1):
        return None
    return LeaseRecord(identity, duration, now, now, current.transitions + 1)


@dataclass
class Leadership:
    """Whether this candidate leads and until when it may act without a renewal."""

    renew_deadline_s: float
    renewed_at: float | None = None

    def renewed(self, now: float) -> None:
        self.renewed_at = now

    def lost(self) -> None:
        self.renewed_at = None

    def may_act(self, now: float) -> bool:
        return self.renewed_at is not None and now - self.renewed_at < self.renew_deadline_s
