"""The health monitor: backend health events in, device health out to the resource servers.

Owns the task that consumes ``backend.health_events()``, feeds a
:class:`~.health.HealthBook`, wakes up when a quiet period ends, pushes each
attached server's Unhealthy set and then tells its listeners (the Node writer),
logs one line per device health transition
(with the XID and its meaning) and one per event the policy ignores, and
reports device health and transitions to the plugin's metrics; and holds whole
resources Unhealthy while something outside the GPUs keeps them from working
(:meth:`HealthMonitor.hold`: their MPS daemon is down). Health survives server restarts
(the kubelet coming back), because the monitor outlives the servers. Must not
hold policy (that is :mod:`.health`) or serve anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from kubegpu.api import constants
from kubegpu.deviceplugin.plugin.metrics import PluginMetrics
from kubegpu.deviceplugin.rm import health, xids
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.gpu.backend import GpuBackend, HealthEvent, HealthEventKind
from kubegpu.gpu.xid import meaning as xid_meaning

log = logging.getLogger(__name__)


class HealthSink(Protocol):
    """What the monitor drives: a resource server."""

    resource: Resource

    def set_unhealthy(self, device_ids: set[str]) -> None: ...


def _fault_fields(fault: health.Fault) -> dict[str, object]:
    fields: dict[str, object] = {"reason": fault.kind.value}
    if fault.xid is not None:
        fields["xid"] = fault.xid
        fields["meaning"] = xid_meaning(fault.xid)
    return fields


class HealthMonitor:
    """Runs the health policy for every resource of one machine.

    Parameters:
        backend: the source of health events.
        resources: every resource served (health is tracked and logged per resource device).
        book: the policy and its state.
        metrics: where device health and transitions are reported (a private set when None).
    """

    def __init__(
        self,
        backend: GpuBackend,
        resources: tuple[Resource, ...],
        book: health.HealthBook,
        metrics: PluginMetrics | None = None,
    ) -> None:
        self.backend = backend
        self.resources = resources
        self.book = book
        self.metrics = metrics if metrics is not None else PluginMetrics()
        self.metrics.advertise({r.name: [d.id for d in r.devices] for r in resources}, {})
        self._sinks: dict[str, HealthSink] = {}
        self._shown: dict[str, dict[str, health.Fault]] = {r.name: {} for r in resources}
        #: Resources whose every device is Unhealthy for a reason outside the GPUs (their MPS daemon is down).
        self._held: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.events_seen = 0
        #: Called after every health change is pushed (the Node publisher listens here).
        self.listeners: list[Callable[[], None]] = []

    def unhealthy(self, resource_name: str) -> set[str]:
        """The IDs of ``resource_name`` that are Unhealthy now (every one while the resource is held)."""
        if resource_name in self._held:
            return {d.id for r in self.resources if r.name == resource_name for d in r.devices}
        return set(self._shown.get(resource_name, {}))

    def hold(self, resource_name: str, reason: str | None) -> None:
        """Show every device of ``resource_name`` Unhealthy because of ``reason``; None shows their own health again.

        The devices' own faults are kept underneath and show again on release. Pushed at once when it changes.
        """
        if reason is None:
            if self._held.pop(resource_name, None) is None:
                return
        elif self._held.get(resource_name) == reason:
            return
        else:
            self._held[resource_name] = reason
        self._publish(None)

    def attach(self, sink: HealthSink) -> None:
        """Drive ``sink`` from now on, starting with the current health of its resource."""
        self._sinks[sink.resource.name] = sink
        sink.set_unhealthy(self.unhealthy(sink.resource.name))

    def detach(self, sink: HealthSink) -> None:
        if self._sinks.get(sink.resource.name) is sink:
            del self._sinks[sink.resource.name]

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._consume(), name="health-monitor")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _consume(self) -> None:
        try:
            async for event in self.backend.health_events():
                self.handle(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # NVIDIA keeps serving with health checks off when its event loop fails; so do we, loudly.
            log.error("health checks stopped", extra={"backend": self.backend.name, "error": str(exc)})

    def handle(self, event: HealthEvent) -> None:
        """Apply one event now and push the result."""
        self.events_seen += 1
        now = asyncio.get_running_loop().time()
        decision = self.book.decide(event)
        if decision.verdict is xids.Verdict.IGNORE:
            fields: dict[str, object] = {"gpu": event.gpu_uuid, "event": event.kind.value, "reason": decision.reason}
            if event.xid is not None:
                fields |= {"xid": event.xid, "meaning": xid_meaning(event.xid)}
            log.info("xid ignored" if event.kind is HealthEventKind.XID else "health event ignored", extra=fields)
            return
        if self.book.apply(event, now):
            self._publish("recovered" if event.kind is HealthEventKind.RECOVERED else None)
            self._schedule()

    def _expire(self) -> None:
        self._timer = None
        if self.book.expire(asyncio.get_running_loop().time()):
            self._publish("quiet period")
        self._schedule()

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.book.next_expiry()
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._expire)

    def _publish(self, healed_by: str | None) -> None:
        for resource in self.resources:
            now = self.book.unhealthy(resource.devices)
            before = self._shown[resource.name]
            for device_id, fault in now.items():
                if device_id not in before:
                    device = resource.by_id[device_id]
                    self.metrics.transition(resource.name, constants.UNHEALTHY, fault.xid)
                    log.warning(
                        "device unhealthy",
                        extra={
                            "resource": resource.name,
                            "device": device_id,
                            "gpu": device.gpu_index,
                            **_fault_fields(fault),
                        },
                    )
            for device_id, fault in before.items():
                if device_id not in now:
                    self.metrics.transition(resource.name, constants.HEALTHY, None)
                    log.info(
                        "device healthy",
                        extra={
                            "resource": resource.name,
                            "device": device_id,
                            "gpu": resource.by_id[device_id].gpu_index,
                            "healed_by": healed_by or "recovered",
                            "was": fault.describe(),
                        },
                    )
            self._shown[resource.name] = now
            shown = self.unhealthy(resource.name)
            self.metrics.set_health(resource.name, shown)
            sink = self._sinks.get(resource.name)
            if sink is not None:
                sink.set_unhealthy(shown)
        for listener in self.listeners:
            listener()
