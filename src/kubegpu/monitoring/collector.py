"""The collector: sample the GPUs on an interval and keep the rendered page for scrapes.

Owns the collection loop (telemetry from the backend in a worker thread,
holders from the kubelet's pod-resources API, rendering) and the last
rendered page, so that a scrape only copies bytes and never waits on NVML or
the kubelet. Must not serve HTTP (:mod:`kubegpu.monitoring.endpoint`) and
must not contain field or label rules (:mod:`kubegpu.monitoring.render`).

A failed telemetry read keeps the previous GPU series (dcgm-exporter serves
its last values too), counts ``kubegpu_exporter_collect_errors_total`` and
makes ``/health`` answer 503 until a read succeeds. A failed pod-resources
List drops the pod labels and sets ``kubegpu_exporter_pod_resources_up`` 0.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubegpu.gpu.backend import GpuBackend
from kubegpu.gpu.model import Machine
from kubegpu.gpu.telemetry import MachineSample
from kubegpu.monitoring import attribution, devicenames, render
from kubegpu.monitoring.counters import CounterSet
from kubegpu.monitoring.podmeta import PodMeta
from kubegpu.monitoring.podresources import PodResourcesClient, PodResourcesUnavailable

log = logging.getLogger(__name__)


class PodMetaSource(Protocol):
    """Where pod UIDs and labels come from (:class:`kubegpu.monitoring.kubernetes.NodePods`): from memory."""

    def lookup(self, namespace: str, name: str) -> PodMeta | None: ...


@dataclass(frozen=True)
class Page:
    """One rendered ``/metrics`` page, plain and gzip-compressed (both made before it is served)."""

    body: bytes
    gzipped: bytes
    generation: int


class Collector:
    """Collects on demand (:meth:`collect_once`) or on an interval (:meth:`run`).

    Parameters:
        backend: the GPU backend; ``sample()`` runs in a worker thread.
        machine: what ``backend.discover()`` returned.
        counter_set: the enabled counters (from the counters file).
        options: label spellings.
        pods: pod-resources client, or None when pod attribution is off.
        extra_resources: resource names attributed besides the NVIDIA ones.
        device_names: the plugin's device IDs are device names (``nvidia3``), ``--kubernetes-gpu-id-type
            device-name``.
        clock: wall clock for the last-collection timestamp.
        pod_meta: pod UIDs and labels (from the API server), or None.
        pod_uid: add the ``pod_uid`` label (``--kubernetes-enable-pod-uid``).
        pod_labels: add the pod's labels (``--kubernetes-enable-pod-labels``).
    """

    def __init__(
        self,
        backend: GpuBackend,
        machine: Machine,
        counter_set: CounterSet,
        options: render.LabelOptions,
        pods: PodResourcesClient | None = None,
        extra_resources: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
        device_names: bool = False,
        pod_meta: PodMetaSource | None = None,
        pod_uid: bool = False,
        pod_labels: bool = False,
    ) -> None:
        self._device_names = device_names
        self._pod_meta = pod_meta
        self._pod_uid = pod_uid
        self._pod_labels = pod_labels
        self._backend = backend
        self._machine = machine
        self._options = options
        self._counters = counter_set
        self._entities = render.entities(machine, counter_set, options)
        self._index = attribution.device_index(machine)
        self._pods = pods
        self._extra = tuple(extra_resources)
        self._clock = clock
        self._dcgm_text = ""
        self._errors = 0
        self._last_ok = 0.0
        self._duration = 0.0
        self._pods_up: bool | None = None if pods is None else False
        self._unresolved: tuple[str, ...] = ()
        self._page = Page(body=b"", gzipped=gzip.compress(b""), generation=0)
        self.health_problem: str | None = "no collection yet"

    @property
    def page(self) -> Page:
        return self._page

    @property
    def counters(self) -> CounterSet:
        return self._counters

    def use_counters(self, counter_set: CounterSet) -> None:
        """Serve ``counter_set`` from the next collection on (a reloaded counters file)."""
        self._entities = render.entities(self._machine, counter_set, self._options)
        self._counters = counter_set

    async def collect_once(self) -> None:
        """Sample, attribute and render; never raises for a backend or kubelet failure."""
        started = time.monotonic()
        try:
            sample = await asyncio.to_thread(self._backend.sample)
        except Exception as exc:  # a daemon never dies on a bad read: NVML errors vary by driver
            self._errors += 1
            self.health_problem = f"telemetry read failed: {exc}"
            log.error("telemetry read failed", extra={"backend": self._backend.name, "error": str(exc)})
            await self._publish(None)
            return
        holders = attribution.EMPTY
        if self._pods is not None:
            try:
                rows = await self._pods.list()
            except PodResourcesUnavailable as exc:
                if self._pods_up is not False or self._page.generation == 0:
                    log.warning("pod attribution unavailable", extra={"error": str(exc)})
                self._pods_up = False
            else:
                if self._pods_up is False and self._page.generation > 0:
                    log.info("pod attribution available again", extra={"socket": str(self._pods.socket)})
                self._pods_up = True
                if self._device_names:
                    rows = devicenames.translate(rows, self._machine)
                holders = attribution.attribute(rows, self._index, self._extra)
                if self._pod_meta is not None:
                    holders = attribution.with_metadata(
                        holders, self._pod_meta.lookup, uid=self._pod_uid, labels=self._pod_labels
                    )
                if holders.unresolved != self._unresolved:
                    self._unresolved = holders.unresolved
                    if holders.unresolved:
                        log.warning(
                            "device IDs not on this machine", extra={"device_ids": ",".join(holders.unresolved)}
                        )
        self._duration = time.monotonic() - started
        self._last_ok = self._clock()
        self.health_problem = None
        await self._publish((sample, holders))

    async def _publish(self, fresh: tuple[MachineSample, attribution.Attribution] | None) -> None:
        """Render (when there is a fresh sample) and compress in a worker thread.

        Rendering 64 MIG devices takes milliseconds; off the event loop, scrapes keep being answered
        meanwhile from the previous page.
        """
        stats = render.ExporterStats(
            last_collect_timestamp=self._last_ok,
            collect_duration_s=round(self._duration, 6),
            collect_errors_total=self._errors,
            pod_resources_up=self._pods_up,
        )
        generation = self._page.generation + 1
        self._page = await asyncio.to_thread(self._build, fresh, stats, generation)

    def _build(
        self, fresh: tuple[MachineSample, attribution.Attribution] | None, stats: render.ExporterStats, generation: int
    ) -> Page:
        if fresh is not None:
            self._dcgm_text = render.render_sample(self._entities, self._counters, *fresh)
        body = (self._dcgm_text + render.render_stats(stats)).encode()
        return Page(body=body, gzipped=gzip.compress(body, compresslevel=1), generation=generation)

    async def run(self, interval_s: float, stop: asyncio.Event) -> None:
        """Collect every ``interval_s`` seconds (start to start) until ``stop`` is set.

        The first collection is the caller's (:meth:`collect_once` before serving), so this waits first.
        """
        loop = asyncio.get_running_loop()
        next_at = loop.time() + interval_s
        while True:
            try:
                await asyncio.wait_for(stop.wait(), timeout=max(0.0, next_at - loop.time()))
                return
            except TimeoutError:
                pass
            await self.collect_once()
            next_at += interval_s
            if next_at < loop.time():  # a slow collection: skip the missed ticks rather than bunch them up
                next_at = loop.time() + interval_s

    async def close(self) -> None:
        if self._pods is not None:
            await self._pods.close()
        await asyncio.to_thread(self._backend.close)
