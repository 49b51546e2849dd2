"""The NVML backend: real GPUs behind the same interface as the simulated backend.

Owns the lifecycle that ties the pieces together: NVML is started on first use
(:mod:`.library`), the machine is read by :mod:`.discovery` (again on every
``discover()``, so a restarted plugin sees MIG changes), the event watcher
(:mod:`.events`) is started once — by the first ``health_events()`` or
``sample()``, since the last XID in telemetry comes from it — and ``close()``
stops the watcher before shutting NVML down (at process exit, without waiting for it). Must not contain health policy.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from kubegpu.gpu import errors
from kubegpu.gpu.backend import HealthEvent
from kubegpu.gpu.model import Machine
from kubegpu.gpu.nvml import discovery, library
from kubegpu.gpu.nvml.events import EventWatcher

if TYPE_CHECKING:
    from kubegpu.gpu.telemetry import MachineSample

#: Environment variable naming the sysfs mount when the caller does not pass one.
SYSFS_ROOT_ENV = "KUBEGPU_SYSFS_ROOT"


class NvmlBackend:
    """GPUs as NVML reports them.

    Parameters:
        driver_root: host path of the driver installation (``--driver-root``).
        container_driver_root: where the driver root is mounted in the plugin container
            (``--container-driver-root``); searched first.
        sysfs_root: where sysfs is mounted (NUMA nodes, PCI classes, DMI product name); None means
            ``$KUBEGPU_SYSFS_ROOT`` when set (a container that mounts the host's sysfs elsewhere), else ``/sys``.
        wait_ms: how long one event wait blocks; bounds how long ``close()`` waits for the watcher.
    """

    def __init__(
        self,
        driver_root: str = "/",
        container_driver_root: str = "/driver-root",
        sysfs_root: str | None = None,
        wait_ms: int = 250,
    ) -> None:
        self.driver_root = driver_root
        self.container_driver_root = container_driver_root
        self.sysfs_root = sysfs_root if sysfs_root is not None else os.environ.get(SYSFS_ROOT_ENV) or "/sys"
        self._wait_ms = wait_ms
        self._lock = threading.RLock()
        self._session: library.Session | None = None
        self._inventory: discovery.Inventory | None = None
        self._watcher: EventWatcher | None = None

    @property
    def name(self) -> str:
        return f"nvml:{self._session.library}" if self._session else "nvml"

    @property
    def library_path(self) -> str | None:
        """The ``libnvidia-ml.so.1`` in use, once NVML has started."""
        return self._session.library if self._session else None

    def _start(self) -> library.Session:
        if self._session is None:
            self._session = library.start(self.container_driver_root, self.driver_root)
        return self._session

    def _read(self) -> discovery.Inventory:
        with self._lock:
            session = self._start()
            try:
                self._inventory = discovery.discover(session.library, Path(self.sysfs_root))
            except errors.NvmlUnavailable as exc:
                exc.searched = exc.searched or session.searched  # where the library in use was found
                raise
            return self._inventory

    def _current(self) -> discovery.Inventory:
        with self._lock:
            return self._inventory if self._inventory is not None else self._read()

    def discover(self) -> Machine:
        return self._read().machine

    def _ensure_watcher(self, inventory: discovery.Inventory) -> EventWatcher:
        with self._lock:
            if self._watcher is None:
                gpus = [(g.uuid, h) for g, h in zip(inventory.machine.gpus, inventory.gpu_handles, strict=True)]
                self._watcher = EventWatcher(gpus, wait_ms=self._wait_ms)
                self._watcher.start()
            return self._watcher

    def health_events(self) -> AsyncIterator[HealthEvent]:
        """Lasting conditions first (lost GPUs, GPUs whose events cannot be watched), then live events.

        Call it from the event loop that will consume the events. It subscribes at
        once (starting NVML and the watcher if needed), so every event NVML reports
        after this call returns reaches the iterator.
        """
        watcher = self._ensure_watcher(self._current())
        queue: asyncio.Queue[HealthEvent] = asyncio.Queue()
        initial = watcher.subscribe(asyncio.get_running_loop(), queue)
        stream = self._stream(initial, queue)
        # A stream dropped without being iterated to the end still lets go of its subscription.
        weakref.finalize(stream, watcher.unsubscribe, queue)
        return stream

    @staticmethod
    async def _stream(initial: list[HealthEvent], queue: asyncio.Queue[HealthEvent]) -> AsyncIterator[HealthEvent]:
        for event in initial:
            yield event
        while True:
            yield await queue.get()

    def sample(self) -> MachineSample:
        # Imported here: the device plugin never samples, and its start need not pay for the telemetry modules.
        from kubegpu.gpu.nvml import telemetry as nvml_telemetry
        from kubegpu.gpu.telemetry import MachineSample

        inventory = self._current()
        watcher = self._ensure_watcher(inventory)
        now = time.time()
        gpus = tuple(
            nvml_telemetry.sample_gpu(
                gpu,
                inventory.gpu_handles[gpu.index],
                inventory.mig_handles,
                inventory.nvlinks[gpu.index],
                watcher.last_xid(gpu.uuid),
            )
            for gpu in inventory.machine.gpus
        )
        return MachineSample(timestamp=now, gpus=gpus)

    def close(self, wait: bool = True) -> None:
        """Stop the event watcher and shut NVML down.

        ``wait=False`` (the process is exiting) does not wait for the watcher's current
        ``nvmlEventSetWait``: the watcher thread shuts NVML down itself once that wait
        ends (NVML must not be shut down under a thread blocked in it), or the process
        ends first and its NVML state with it. ``nvmlInit`` is counted, so a backend
        opened meanwhile is not affected.
        """
        with self._lock:
            watcher, self._watcher = self._watcher, None
            session, self._session = self._session, None
            self._inventory = None
        if watcher is not None and session is not None and not wait:
            watcher.release(library.stop)
            return
        if watcher is not None:
            watcher.stop()
        if session is not None:
            library.stop()
