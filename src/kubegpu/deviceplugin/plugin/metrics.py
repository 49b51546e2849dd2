"""The plugin's own Prometheus metrics and the HTTP endpoint that serves them (``--metrics-listen``).

Owns the names, types, labels and help texts of the plugin's series — exactly
the table in README's monitoring section, which the alert rules
(``deploy/alerts/``) and the dashboard use — and serving them on ``/metrics``
from a prometheus_client HTTP server in a daemon thread. The supervisor, the
servers and the health monitor report what happened through
:class:`PluginMetrics`; this module decides nothing. prometheus_client's
``*_created`` series are left out: they are not in the table. Without
``--metrics-listen`` the metrics are off: nothing is counted and
prometheus_client is not even imported (the plugin's memory stays small).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kubegpu.api import constants

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

#: Buckets of the RPC latency histogram (seconds), as the README lists them.
RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
HEALTHS = (constants.HEALTHY, constants.UNHEALTHY)
#: ``xid`` label of a transition that no XID caused (ECC, lost GPU, wait error, recovery, quiet period).
NO_XID = "none"


class PluginMetrics:
    """Every series of the plugin, in a registry of its own (never the process-wide default).

    ``enabled`` False (the default): every method returns at once and nothing is imported.
    """

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self._advertised: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        if enabled:
            self._create()

    def _create(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.devices = Gauge(
            "kubegpu_plugin_devices",
            "Devices advertised to the kubelet, by health (Healthy, Unhealthy).",
            ["resource", "health"],
            registry=r,
        )
        self.device_health = Gauge(
            "kubegpu_plugin_device_health",
            "1 for the health a device has now, 0 for the other; both series exist for every advertised device.",
            ["resource", "device", "health"],
            registry=r,
        )
        self.registrations = Counter(
            "kubegpu_plugin_registrations_total", "Successful registrations with the kubelet.", ["resource"], registry=r
        )
        self.registration_errors = Counter(
            "kubegpu_plugin_registration_errors_total",
            "Registration attempts that failed (kubelet unreachable or rejected).",
            ["resource"],
            registry=r,
        )
        self.allocations = Counter(
            "kubegpu_plugin_allocations_total",
            "Container allocations served (one per container request of an Allocate call).",
            ["resource"],
            registry=r,
        )
        self.allocation_errors = Counter(
            "kubegpu_plugin_allocation_errors_total",
            "Allocate calls answered with an error (unknown or unhealthy device, too many devices).",
            ["resource"],
            registry=r,
        )
        self.health_transitions = Counter(
            "kubegpu_plugin_health_transitions_total",
            "Device health changes; health is the new state, xid the XID that caused it or none.",
            ["resource", "health", "xid"],
            registry=r,
        )
        self.rpc_duration = Histogram(
            "kubegpu_plugin_rpc_duration_seconds",
            "Time to answer device-plugin RPCs.",
            ["method"],
            buckets=RPC_BUCKETS,
            registry=r,
        )

    # --- devices ---------------------------------------------------------------------------------------

    def advertise(self, devices: Mapping[str, Iterable[str]], unhealthy: Mapping[str, Iterable[str]]) -> None:
        """Replace every device series: ``devices`` is resource -> device IDs, ``unhealthy`` the Unhealthy ones.

        Resources no longer served lose their series (a SIGHUP restart may change the resources).
        """
        if not self.enabled:
            return
        with self._lock:
            for resource, ids in self._advertised.items():
                if resource not in devices:
                    for health in HEALTHS:
                        self.devices.remove(resource, health)
                    for device in ids:
                        for health in HEALTHS:
                            self.device_health.remove(resource, device, health)
            self._advertised = {r: tuple(ids) for r, ids in devices.items()}
        for resource in self._advertised:
            self.set_health(resource, set(unhealthy.get(resource, ())))

    def set_health(self, resource: str, unhealthy: set[str]) -> None:
        """The current health of ``resource``'s advertised devices."""
        if not self.enabled:
            return
        ids = self._advertised.get(resource, ())
        bad = sum(1 for d in ids if d in unhealthy)
        self.devices.labels(resource, constants.HEALTHY).set(len(ids) - bad)
        self.devices.labels(resource, constants.UNHEALTHY).set(bad)
        for device in ids:
            is_bad = device in unhealthy
            self.device_health.labels(resource, device, constants.UNHEALTHY).set(1 if is_bad else 0)
            self.device_health.labels(resource, device, constants.HEALTHY).set(0 if is_bad else 1)

    def transition(self, resource: str, health: str, xid: int | None) -> None:
        """One device changed to ``health``, because of ``xid`` (None: not an XID)."""
        if self.enabled:
            self.health_transitions.labels(resource, health, NO_XID if xid is None else str(xid)).inc()

    # --- events ----------------------------------------------------------------------------------------

    def registered(self, resource: str) -> None:
        if self.enabled:
            self.registrations.labels(resource).inc()

    def registration_failed(self, resource: str) -> None:
        if self.enabled:
            self.registration_errors.labels(resource).inc()

    def allocated(self, resource: str, containers: int) -> None:
        if self.enabled:
            self.allocations.labels(resource).inc(containers)

    def allocation_failed(self, resource: str) -> None:
        if self.enabled:
            self.allocation_errors.labels(resource).inc()

    def rpc(self, method: str, seconds: float) -> None:
        if self.enabled:
            self.rpc_duration.labels(method).observe(seconds)


class _WithoutCreated:
    """``registry``'s families without prometheus_client's ``*_created`` samples (a prometheus_client Collector)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family

    def describe(self) -> Iterable[Metric]:
        return list(self.registry.collect())


class MetricsServer:
    """``/metrics`` of ``metrics`` (which must be enabled) on ``host:port`` until :meth:`close`.

    Raises ``OSError`` when the address cannot be bound (in use, not local).
    """

    def __init__(self, metrics: PluginMetrics, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        if not metrics.enabled:
            raise ValueError("the metrics are off: create PluginMetrics(enabled=True) to serve them")
        exposed = CollectorRegistry(auto_describe=False)
        exposed.register(_WithoutCreated(metrics.registry))
        server, thread = start_http_server(port, addr=host, registry=exposed)
        self._server: Any = server
        self._thread = thread
        self.port: int = server.server_port

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._server.shutdown()
            self._server.server_close()
        self._thread.join(timeout=5)
