"""The MPS watch: the plugin's MPS resources are Unhealthy while their MPS control daemon is down.

Owns when the plugin asks :class:`~kubegpu.deviceplugin.mps.control.DaemonCheck` (before serving, then every
``--mps-check-interval`` while serving, in a worker thread) and what an answer does: a problem holds every
device of the MPS resources Unhealthy in the :class:`~.monitor.HealthMonitor` (one ListAndWatch update), the
daemon answering again releases them; each transition is logged once. NVIDIA's plugin only waits for its
daemon at start; a daemon that stops later would leave it advertising replicas no client can use. Must not
decide what ready means (that is :mod:`kubegpu.deviceplugin.mps.control`) or serve anything.
"""

from __future__ import annotations

import asyncio
import logging

from kubegpu.common.tasks import BackgroundTask
from kubegpu.deviceplugin.mps.control import DaemonCheck
from kubegpu.deviceplugin.plugin.monitor import HealthMonitor

log = logging.getLogger(__name__)


class MpsWatch:
    """Drives ``monitor`` from ``check``.

    Parameters:
        check: what is asked.
        monitor: where the MPS resources are held Unhealthy.
        interval_s: time between checks while serving.
    """

    def __init__(self, check: DaemonCheck, monitor: HealthMonitor, interval_s: float) -> None:
        self.daemon_check = check
        self.monitor = monitor
        self.interval_s = interval_s
        self.problem: str | None = None
        self._served = False  # the daemon was ready once: later problems are an outage, logged as one
        self._task = BackgroundTask("mps-watch", self._loop)

    async def check(self) -> str | None:
        """Ask now and apply the answer; the problem, or None when the daemons serve."""
        problem = await asyncio.to_thread(self.daemon_check.problem)
        self._apply(problem)
        return problem

    def _apply(self, problem: str | None) -> None:
        if problem == self.problem:
            return
        resources = list(self.daemon_check.resources)
        if problem is not None and self._served and self.problem is None:
            log.warning("MPS daemon down, devices unhealthy", extra={"resources": resources, "reason": problem})
        elif problem is None and self._served:
            log.info("MPS daemon back, devices healthy", extra={"resources": resources})
        self.problem = problem
        if problem is None:
            self._served = True
        for name in resources:
            self.monitor.hold(name, None if problem is None else f"MPS daemon: {problem}")

    def start(self) -> None:
        """Check every interval from now on (again after :meth:`stop`); idempotent."""
        self._task.start()

    async def stop(self) -> None:
        await self._task.stop()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except Exception as exc:
                # A daemon never dies on a failed check; the next one may do better.
                log.error("MPS check failed", extra={"error": str(exc)})
