"""The supervisor: the plugin's life from start to exit.

Owns the order of things — discover the machine, build its resources, start the
health monitor, wait for the kubelet, then per resource serve the DevicePlugin
socket and register it — and every restart:

* kubelet.sock created anew (a kubelet restart): stop all servers **first**,
  which ends their ListAndWatch streams, then serve and register again; there
  is never more than one server per resource (the kubelet's re-registration
  race, kubernetes#121994, hurts plugins that overlap);
* ``SIGHUP``: full restart — servers, monitor and backend are stopped, devices
  are discovered again;
* ``SIGTERM``/``SIGINT``: stop everything, remove the sockets, exit 0;
* a failed start: all resources are stopped and started again after the retry
  interval (NVIDIA: 30 s), or after 1 s when the kubelet simply is not
  answering yet, or at once when a new kubelet socket appears.

Must not contain RPC handling, health policy or flag parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Literal

from kubegpu.deviceplugin import health, registration, resources, server
from kubegpu.deviceplugin.errors import DevicePluginError, KubeletUnavailable
from kubegpu.deviceplugin.monitor import HealthMonitor
from kubegpu.deviceplugin.options import PluginOptions
from kubegpu.deviceplugin.watcher import Identity, KubeletSocketWatcher
from kubegpu.gpu import errors as gpu_errors
from kubegpu.gpu.backend import GpuBackend
from kubegpu.gpu.backends import open_backend
from kubegpu.gpu.model import Machine

log = logging.getLogger(__name__)

#: Retry delay when kubelet.sock exists but nobody answers on it yet (a kubelet still starting).
KUBELET_UNAVAILABLE_RETRY_S = 1.0

Outcome = Literal["stop", "restart", "kubelet", "timeout"]


class StartupFailed(DevicePluginError):
    """The machine cannot be discovered: the process exits 1 (NVIDIA's fail-on-init-error default)."""


def default_backend(options: PluginOptions) -> GpuBackend:
    return open_backend(options.machine, fault_file=options.fault_file)


class Supervisor:
    """Runs the plugin until stopped; :meth:`run` returns the exit code.

    Parameters:
        options: what to run with.
        backend_factory: opens a backend (called again on every SIGHUP restart).
        xid_policy: which XIDs count as GPU faults (the issue-3 env rules plug in here).
        watcher_poll_interval: stat-poll period of the kubelet socket watcher.
        handle_signals: install SIGHUP/SIGTERM/SIGINT handlers (off when run inside tests).
    """

    def __init__(
        self,
        options: PluginOptions,
        backend_factory: Callable[[PluginOptions], GpuBackend] = default_backend,
        xid_policy: health.XidPolicy = health.default_xid_is_critical,
        watcher_poll_interval: float | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.options = options
        self.backend_factory = backend_factory
        self.xid_policy = xid_policy
        self.handle_signals = handle_signals
        self.watcher = KubeletSocketWatcher(options.kubelet_socket)
        if watcher_poll_interval is not None:
            self.watcher.poll_interval = watcher_poll_interval
        self.servers: dict[str, server.PluginServer] = {}
        self.monitor: HealthMonitor | None = None
        self.registrations = 0
        self.registered = asyncio.Event()  # set while every resource is registered
        self._pending: Literal["stop", "restart"] | None = None
        self._signalled = asyncio.Event()

    # --- control ------------------------------------------------------------------------------------------

    def request(self, what: Literal["stop", "restart"]) -> None:
        """Ask for a clean stop or a full restart; a stop wins over a pending restart."""
        if what == "stop" or self._pending is None:
            self._pending = what
        self._signalled.set()

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, self._on_signal, signal.SIGHUP)
        loop.add_signal_handler(signal.SIGTERM, self._on_signal, signal.SIGTERM)
        loop.add_signal_handler(signal.SIGINT, self._on_signal, signal.SIGINT)

    def _remove_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("signal received", extra={"signal": sig.name})
        self.request("restart" if sig is signal.SIGHUP else "stop")

    # --- the life ------------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Serve until stopped: 0 after a clean stop, 1 when the machine cannot be discovered."""
        if self.handle_signals:
            self._install_signals()
        self.watcher.start()
        try:
            while True:
                outcome = await self._run_machine()
                if outcome == "stop":
                    log.info("stopped")
                    return 0
                log.info("restarting", extra={"reason": "SIGHUP"})
                self._pending = None
                self._signalled.clear()
        except StartupFailed as exc:
            hint = "use --machine PROFILE for a simulated machine" if self.options.machine is None else None
            log.error("cannot start", extra={"error": str(exc), **({"hint": hint} if hint else {})})
            return 1
        finally:
            await self.watcher.stop()
            if self.handle_signals:
                self._remove_signals()

    async def _discover(self, backend: GpuBackend) -> Machine:
        try:
            return await asyncio.to_thread(backend.discover)
        except gpu_errors.GpuError as exc:
            raise StartupFailed(f"{backend.name}: {exc}") from exc

    async def _run_machine(self) -> Literal["stop", "restart"]:
        """One discovery's worth of life: returns on SIGHUP (restart) or SIGTERM/SIGINT (stop)."""
        try:
            backend = self.backend_factory(self.options)
        except gpu_errors.GpuError as exc:
            raise StartupFailed(str(exc)) from exc
        try:
            machine = await self._discover(backend)
            served = resources.build(machine)
            log.info(
                "discovered",
                extra={"backend": backend.name, "gpus": len(machine.gpus), "resources": [r.name for r in served]},
            )
            if not served:
                log.warning("no devices found, waiting indefinitely", extra={"backend": backend.name})
                return self._signal_outcome(await self._until(None, watch=False))
            book = health.HealthBook(quiet_period_s=self.options.quiet_period_s, xid_is_critical=self.xid_policy)
            self.monitor = HealthMonitor(backend, served, book)
            self.monitor.start()
            try:
                return await self._serve(machine, served)
            finally:
                await self._stop_servers()
                await self.monitor.stop()
        finally:
            backend.close()

    def _signal_outcome(self, outcome: Outcome) -> Literal["stop", "restart"]:
        return "stop" if outcome == "stop" else "restart"

    async def _serve(self, machine: Machine, served: tuple[resources.Resource, ...]) -> Literal["stop", "restart"]:
        waiting_logged = False
        unanswered: Identity | None = None  # the kubelet socket we already said is not answering
        while True:
            kubelet = self.watcher.current()
            if kubelet is None:
                if not waiting_logged:
                    log.info("waiting for the kubelet", extra={"socket": str(self.options.kubelet_socket)})
                    waiting_logged = True
                outcome = await self._until(None, since=None)
                if outcome in ("stop", "restart"):
                    return self._signal_outcome(outcome)
                continue
            waiting_logged = False
            try:
                if not await self._start_unless_signalled(machine, served):
                    return self._pending or "stop"
            except KubeletUnavailable as exc:
                await self._stop_servers()
                if unanswered != kubelet:  # once per kubelet socket, not once per second
                    log.warning(
                        "kubelet not answering", extra={"error": str(exc), "retry_s": KUBELET_UNAVAILABLE_RETRY_S}
                    )
                    unanswered = kubelet
                outcome = await self._until(KUBELET_UNAVAILABLE_RETRY_S, since=kubelet)
            except DevicePluginError as exc:
                await self._stop_servers()
                log.error("start failed", extra={"error": str(exc), "retry_s": self.options.retry_interval_s})
                outcome = await self._until(self.options.retry_interval_s, since=kubelet)
            else:
                outcome = await self._until(None, since=kubelet)
                if outcome == "kubelet":
                    log.info("kubelet socket created again, registering again")
            if outcome in ("stop", "restart"):
                return self._signal_outcome(outcome)
            # A new kubelet or a retry: the old servers go first, so no resource is ever served twice.
            await self._stop_servers()

    async def _start_unless_signalled(self, machine: Machine, served: tuple[resources.Resource, ...]) -> bool:
        """Start every resource; False when a stop/restart request came first (a hung kubelet must not delay it)."""
        starting = asyncio.create_task(self._start_servers(machine, served), name="start-servers")
        signalled = asyncio.create_task(self._signalled.wait())
        try:
            await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            signalled.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await signalled
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return False
        starting.result()  # raises what the start raised
        return True

    async def _start_servers(self, machine: Machine, served: tuple[resources.Resource, ...]) -> None:
        assert self.monitor is not None
        for resource in served:
            plugin = server.PluginServer(resource, self.options.socket_dir / resource.socket_name, machine.topology)
            self.servers[resource.name] = plugin
            self.monitor.attach(plugin)
            await plugin.start()
            await registration.register(
                self.options.kubelet_socket, resource.name, resource.socket_name, server.OPTIONS
            )
            self.registrations += 1
            log.info(
                "registered",
                extra={"resource": resource.name, "devices": len(resource.devices), "endpoint": resource.socket_name},
            )
        self.registered.set()

    async def _stop_servers(self) -> None:
        self.registered.clear()
        servers, self.servers = self.servers, {}
        for plugin in servers.values():
            if self.monitor is not None:
                self.monitor.detach(plugin)
            await plugin.stop()
            log.info("stopped serving", extra={"resource": plugin.resource.name})

    async def _until(self, delay_s: float | None, since: Identity | None = None, watch: bool = True) -> Outcome:
        """Wait for a stop/restart request, a kubelet socket other than ``since``, or ``delay_s`` seconds."""
        waits: dict[asyncio.Task[object], Outcome] = {
            asyncio.create_task(self._signalled.wait()): "stop",
        }
        if watch:
            waits[asyncio.create_task(self.watcher.changed(since))] = "kubelet"
        try:
            done, _ = await asyncio.wait(waits, timeout=delay_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            for task in waits:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._signalled.is_set() and self._pending is not None:
            return self._pending
        if any(waits[t] == "kubelet" for t in done):
            return "kubelet"
        return "timeout"
