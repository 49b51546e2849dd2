"""The scheduler's metrics and health endpoints: ``/metrics``, ``/healthz``, ``/readyz`` over plain HTTP.

Owns :class:`Metrics` — kube-scheduler's metric names where it has one
(``scheduler_schedule_attempts_total{result,profile}``,
``scheduler_pod_scheduling_sli_duration_seconds``, ``scheduler_pending_pods{queue}``,
``scheduler_preemption_victims``, ``scheduler_preemption_attempts_total``) plus
``kubegpu_scheduler_gang_timeouts_total`` and ``kubegpu_scheduler_leader`` — in a
private registry, and :func:`serve`, a WSGI server in a daemon thread (the
same server prometheus-client's ``start_http_server`` uses) that answers
``/healthz`` (the event loop is alive) and ``/readyz`` (informers synced and,
with leader election, this replica leads or stands by correctly). Must not
schedule.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

#: The event loop counts as alive while its heartbeat is younger than this.
HEARTBEAT_STALE_S = 30.0


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Scheduling attempts by result (scheduled, unschedulable, error) and profile.",
            ["result", "profile"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "End-to-end latency from a pod entering the queue to its binding.",
            ["profile"],
            buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60, 120, 300),
            registry=self.registry,
        )
        self.pending = Gauge("scheduler_pending_pods", "Pending pods by queue.", ["queue"], registry=self.registry)
        self.victims = Histogram(
            "scheduler_preemption_victims",
            "Number of victims chosen per preemption.",
            buckets=(1, 2, 4, 8, 16, 32, 64),
            registry=self.registry,
        )
        self.preemptions = Counter("scheduler_preemption_attempts", "Preemption attempts.", registry=self.registry)
        self.gang_timeouts = Counter(
            "kubegpu_scheduler_gang_timeouts", "Pod groups that waited scheduleTimeoutSeconds.", registry=self.registry
        )
        self.leader = Gauge("kubegpu_scheduler_leader", "1 while this replica holds the lease.", registry=self.registry)
        for queue in ("active", "backoff", "unschedulable"):
            self.pending.labels(queue)


class Health:
    """What /healthz and /readyz answer; written by the event loop, read by the server thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.heartbeat = clock()
        self.ready = False
        self.reason = "informers not synced"

    def beat(self) -> None:
        self.heartbeat = self.clock()

    def alive(self) -> bool:
        return self.clock() - self.heartbeat < HEARTBEAT_STALE_S


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the scheduler logs, not the server)
        return


def app(metrics: Metrics, health: Health) -> Callable[..., Iterable[bytes]]:
    metrics_app = make_wsgi_app(metrics.registry)

    def handle(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/livez"):
            ok, text = health.alive(), "ok" if health.alive() else "event loop stalled"
        elif path == "/readyz":
            ok, text = health.ready, "ok" if health.ready else health.reason
        elif path == "/metrics":
            body: Iterable[bytes] = metrics_app(environ, start_response)
            return body
        else:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
        return [f"{text}\n".encode()]

    return handle


def serve(metrics: Metrics, health: Health, host: str, port: int) -> tuple[ThreadingWSGIServer, int]:
    """Start serving in a daemon thread; returns the server and the port it listens on (for port 0)."""
    server = make_server(host, port, app(metrics, health), ThreadingWSGIServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    return server, server.server_port
