"""Health state: the faults held against GPUs now, and when devices are Healthy again.

Owns the :class:`HealthBook` — the faults currently held against GPUs (or MIG
devices, or the whole machine) and their life:

* what an event means is :func:`kubegpu.deviceplugin.rm.xids.decide`'s verdict
  under the XID policy (``DP_DISABLE_HEALTHCHECKS`` / ``DP_ENABLE_HEALTHCHECKS``);
  which advertised devices a fault covers is :func:`kubegpu.deviceplugin.rm.xids.affected`
  (every replica and MIG device of the GPU; a MIG-scoped fault only its MIG
  device and the whole-GPU device holding it);
* a failed event wait (``WAIT_ERROR``) is held against every device;
* as with NVIDIA, a fault stays until an operator acts: a ``RECOVERED`` event
  (``kubegpu fault recover``, NVML's recovery) clears the GPU's faults, a plugin
  restart starts afresh. Automatic recovery is opt-in: with a quiet period, a
  fault of a class in ``recoverable`` (XID numbers, ``ecc``, ``wait``, or every
  class) that sees no new fault for that long is dropped. A lost GPU (XID 79,
  fallen off the bus) never heals by waiting.

Pure: time is passed in (monotonic seconds), no I/O, no logging, no asyncio.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kubegpu.deviceplugin.config.flags import ECC_CLASS, WAIT_CLASS
from kubegpu.deviceplugin.rm import xids
from kubegpu.deviceplugin.rm.devices import Device
from kubegpu.gpu.backend import HealthEvent, HealthEventKind

#: The XID of a GPU that fell off the bus: never healed by a quiet period.
FALLEN_OFF_THE_BUS = 79
#: Default quiet period: none, NVIDIA's behaviour (a fault lasts until recovery or restart).
DEFAULT_QUIET_PERIOD_S = 0.0


@dataclass(frozen=True)
class Target:
    """What a fault is held against: one GPU (``gpu_uuid``), one MIG instance of it (``gi``, ``ci``), or all (None).

    A None ``ci`` with a ``gi`` means every compute instance of that GPU instance.
    """

    gpu_uuid: str | None
    gi: int | None = None
    ci: int | None = None

    def covers(self, device: Device) -> bool:
        return bool(xids.affected([device], self.gpu_uuid, self.gi, self.ci))


@dataclass(frozen=True)
class Fault:
    """Why a target is unhealthy: the latest event against it, and when faults on it began and last came."""

    kind: HealthEventKind
    xid: int | None
    since: float
    last: float

    @property
    def lasting(self) -> bool:
        """A lost GPU (or its XID 79, fallen off the bus) does not heal by waiting."""
        return self.kind is HealthEventKind.LOST or self.xid == FALLEN_OFF_THE_BUS

    def describe(self) -> str:
        return f"xid {self.xid}" if self.xid is not None else self.kind.value

    def heals_by_waiting(self, recoverable: frozenset[str] | None) -> bool:
        """Whether the quiet period may drop this fault (``recoverable`` None: every class but a lost GPU)."""
        if self.lasting:
            return False
        if recoverable is None:
            return True
        if self.kind is HealthEventKind.ECC_DBE:
            return ECC_CLASS in recoverable or "48" in recoverable
        if self.kind is HealthEventKind.WAIT_ERROR:
            return WAIT_CLASS in recoverable
        return self.xid is not None and str(self.xid) in recoverable


@dataclass
class HealthBook:
    """The faults held now, and the rules that change them.

    ``quiet_period_s``: a fault of a ``recoverable`` class with no new fault on its
    target for this long is dropped; None or 0 (the default) disables this: only
    ``RECOVERED`` heals, as with NVIDIA.
    ``recoverable``: the classes the quiet period heals (:func:`~kubegpu.deviceplugin.config.flags.recovery_classes`);
    None = all.
    ``policy``: which XIDs are fatal (:func:`kubegpu.deviceplugin.rm.xids.policy_from_env`).
    """

    quiet_period_s: float | None = DEFAULT_QUIET_PERIOD_S
    policy: xids.XidPolicy = field(default_factory=xids.XidPolicy)
    recoverable: frozenset[str] | None = None
    faults: dict[Target, Fault] = field(default_factory=dict)

    def decide(self, event: HealthEvent) -> xids.Decision:
        """What ``event`` means under this book's policy (the one decision function, :func:`xids.decide`)."""
        return xids.decide(event, self.policy)

    def apply(self, event: HealthEvent, now: float) -> bool:
        """Record ``event`` at time ``now``; True when it added, refreshed or cleared a fault."""
        verdict = self.decide(event).verdict
        if verdict is xids.Verdict.HEALTHY:
            cleared = [t for t in self.faults if event.gpu_uuid is None or t.gpu_uuid == event.gpu_uuid]
            for target in cleared:
                del self.faults[target]
            return bool(cleared)
        if verdict is xids.Verdict.IGNORE:
            return False
        whole_machine = event.kind is HealthEventKind.WAIT_ERROR or event.gpu_uuid is None
        target = Target(None, None, None) if whole_machine else Target(event.gpu_uuid, event.gi_id, event.ci_id)
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
        period = self.quiet_period_s
        gone = [t for t, f in self.faults.items() if f.heals_by_waiting(self.recoverable) and f.last + period <= now]
        for target in gone:
            del self.faults[target]
        return gone

    def next_expiry(self) -> float | None:
        """When :meth:`expire` will next drop something, or None."""
        if not self.quiet_period_s:
            return None
        times = [f.last + self.quiet_period_s for f in self.faults.values() if f.heals_by_waiting(self.recoverable)]
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
