"""Health policy: which backend events make which devices Unhealthy, and when they are Healthy again.

Owns the :class:`HealthBook` — the faults currently held against GPUs (or MIG
devices, or the whole machine) and the rules that add and clear them:

* an XID marks its GPU unhealthy unless the XID policy says it is an
  application error (:func:`default_xid_is_critical`: NVIDIA's built-in list
  13, 31, 43, 45, 68, 109 is ignored); the policy is one swappable function;
* a double-bit ECC error and a lost GPU mark it unhealthy; a single-bit ECC
  error is corrected and changes nothing;
* a failed event wait (``WAIT_ERROR``) marks every device unhealthy;
* a fault on a GPU marks **every** device on that GPU (each replica, the whole
  GPU); a fault narrowed to one MIG device marks that MIG device and the
  whole-GPU device, not its sibling MIG devices;
* unlike NVIDIA, devices return to Healthy: a ``RECOVERED`` event clears the
  GPU's faults, and an XID/ECC/wait fault that sees no new fault for the quiet
  period is dropped. A lost GPU stays lost until ``RECOVERED``.

Pure: time is passed in (monotonic seconds), no I/O, no logging, no asyncio.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from kubegpu.deviceplugin.devices import Device
from kubegpu.gpu.backend import HealthEvent, HealthEventKind

#: NVIDIA's built-in "application" XIDs: errors of a user's program, not of the GPU.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})

#: Default quiet period before a transient fault is forgotten (seconds).
DEFAULT_QUIET_PERIOD_S = 300.0

XidPolicy = Callable[[int], bool]


def default_xid_is_critical(xid: int) -> bool:
    """True when XID ``xid`` means the GPU itself is in trouble (not one of :data:`APPLICATION_XIDS`)."""
    return xid not in APPLICATION_XIDS


@dataclass(frozen=True)
class Target:
    """What a fault is held against: one GPU (``gpu_uuid``), one MIG device of it (``mig``), or all (None)."""

    gpu_uuid: str | None
    mig: tuple[int, int] | None = None

    def covers(self, device: Device) -> bool:
        if self.gpu_uuid is None:
            return True
        if self.gpu_uuid != device.gpu_uuid:
            return False
        # A whole-GPU device holds all its MIG devices; a MIG fault only hits its own MIG device.
        return self.mig is None or device.mig is None or self.mig == device.mig


@dataclass(frozen=True)
class Fault:
    """Why a target is unhealthy: the latest event against it, and when faults on it began and last came."""

    kind: HealthEventKind
    xid: int | None
    since: float
    last: float

    @property
    def lasting(self) -> bool:
        """A lost GPU does not heal by waiting."""
        return self.kind is HealthEventKind.LOST

    def describe(self) -> str:
        return f"xid {self.xid}" if self.xid is not None else self.kind.value


@dataclass
class HealthBook:
    """The faults held now, and the rules that change them.

    ``quiet_period_s``: a transient fault with no new fault on its target for
    this long is dropped; None or 0 disables this (only ``RECOVERED`` heals).
    ``xid_is_critical``: the XID policy.
    """

    quiet_period_s: float | None = DEFAULT_QUIET_PERIOD_S
    xid_is_critical: XidPolicy = default_xid_is_critical
    faults: dict[Target, Fault] = field(default_factory=dict)

    def counts(self, event: HealthEvent) -> bool:
        """Whether ``event`` makes anything unhealthy under this policy."""
        if event.kind is HealthEventKind.XID:
            return event.xid is not None and self.xid_is_critical(event.xid)
        return event.kind in (HealthEventKind.ECC_DBE, HealthEventKind.LOST, HealthEventKind.WAIT_ERROR)

    def apply(self, event: HealthEvent, now: float) -> bool:
        """Record ``event`` at time ``now``; True when it added, refreshed or cleared a fault."""
        if event.kind is HealthEventKind.RECOVERED:
            cleared = [t for t in self.faults if event.gpu_uuid is None or t.gpu_uuid == event.gpu_uuid]
            for target in cleared:
                del self.faults[target]
            return bool(cleared)
        if not self.counts(event):
            return False
        mig = None
        if event.gi_id is not None and event.ci_id is not None:
            mig = (event.gi_id, event.ci_id)
        target = Target(None if event.kind is HealthEventKind.WAIT_ERROR else event.gpu_uuid, mig)
        previous = self.faults.get(target)
        if previous is not None and previous.lasting:
            # A lost GPU that also reports XIDs is still lost: keep why, note that it is still failing.
            self.faults[target] = replace(previous, last=now)
        else:
            since = previous.since if previous is not None else now
            self.faults[target] = Fault(kind=event.kind, xid=event.xid, since=since, last=now)
        return True

    def expire(self, now: float) -> list[Target]:
        """Drop transient faults quiet since ``now - quiet_period_s``; the targets dropped."""
        if not self.quiet_period_s:
            return []
        # Same arithmetic as next_expiry, so expire(next_expiry()) always drops what it promised.
        gone = [t for t, f in self.faults.items() if not f.lasting and f.last + self.quiet_period_s <= now]
        for target in gone:
            del self.faults[target]
        return gone

    def next_expiry(self) -> float | None:
        """When :meth:`expire` will next drop something, or None."""
        if not self.quiet_period_s:
            return None
        times = [f.last + self.quiet_period_s for f in self.faults.values() if not f.lasting]
        return min(times) if times else None

    def fault_of(self, device: Device) -> Fault | None:
        """The fault that makes ``device`` unhealthy (the earliest one), or None when it is healthy."""
        held = [f for t, f in self.faults.items() if t.covers(device)]
        return min(held, key=lambda f: f.since) if held else None

    def unhealthy(self, devices: Iterable[Device]) -> dict[str, Fault]:
        """Device ID → the fault against it, for the unhealthy ones among ``devices``."""
        result = {}
        for device in devices:
            fault = self.fault_of(device)
            if fault is not None:
                result[device.id] = fault
        return result
