"""The supervisor: the plugin's life from start to exit.

Owns the order of things — open the backend and discover the machine, build
its resources under the effective config (:func:`.resource_map.build`), write
the CDI specs when a CDI strategy is on, start the health monitor, wait for the
kubelet (and for the MPS daemons of MPS resources, watched from then on:
:mod:`.mpswatch`), then per resource serve the DevicePlugin socket and register
it — and every restart:

* kubelet.sock created anew (a kubelet restart): stop all servers **first**,
  which ends their ListAndWatch streams, then serve and register again; there
  is never more than one server per resource (the kubelet's re-registration
  race, kubernetes#121994, hurts plugins that overlap);
* ``SIGHUP``: full restart — the config is read again (a config that no longer
  loads is logged and the running one kept), servers, monitor and backend are
  stopped, devices discovered again, CDI specs rewritten;
* ``SIGTERM``/``SIGINT``: stop everything, remove the sockets, exit 0;
* a failed start: all resources are stopped and started again after the retry
  interval (NVIDIA: 30 s), or after 1 s when the kubelet is not answering yet
  or an MPS daemon is not ready, or at once when a new kubelet socket appears;
* no kubelet socket configured: serve without registering (NVIDIA's
  "Skipping registration with Kubelet").

Exit 1 (:class:`StartupFailed`) when the machine cannot be used: NVML cannot
start with ``--fail-on-init-error=true`` (with ``false`` the plugin waits with
no resources, as NVIDIA), NVIDIA's resource errors (an invalid ``single`` MIG
layout), a missing required IMEX channel, CDI specs that cannot be written.

Must not contain RPC handling, health policy or flag parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kubegpu.api import constants
from kubegpu.deviceplugin.config.effective import Config
from kubegpu.deviceplugin.config.flags import recovery_classes
from kubegpu.deviceplugin.config.v1 import ConfigError
from kubegpu.deviceplugin.errors import DevicePluginError, KubeletUnavailable, MpsNotReady
from kubegpu.deviceplugin.plugin import registration, server
from kubegpu.deviceplugin.plugin.host import HostError, HostView, imex_channels
from kubegpu.deviceplugin.plugin.metrics import PluginMetrics
from kubegpu.deviceplugin.plugin.monitor import HealthMonitor
from kubegpu.deviceplugin.plugin.watcher import Identity, KubeletSocketWatcher
from kubegpu.deviceplugin.rm import health, preferred, resource_map, response_options, xids
from kubegpu.deviceplugin.rm.resources import Resource
from kubegpu.gpu import errors as gpu_errors
from kubegpu.gpu.backend import GpuBackend
from kubegpu.gpu.backends import open_backend
from kubegpu.gpu.model import Machine

if TYPE_CHECKING:
    from kubegpu.deviceplugin.plugin import pods, publisher
    from kubegpu.deviceplugin.plugin.mpswatch import MpsWatch
    from kubegpu.deviceplugin.rm import mig_caps, responses

log = logging.getLogger(__name__)

#: Retry delay when kubelet.sock exists but nobody answers on it yet, or an MPS daemon is not ready yet.
SOON_RETRY_S = 1.0
#: NVIDIA's words when there is nothing to serve.
NO_DEVICES = "No devices found. Waiting indefinitely."
#: Where the driver lists MIG capability minors, under the proc root.
PROC_ROOT = Path("/proc")

Outcome = Literal["stop", "restart", "kubelet", "timeout"]


async def _in_thread(call: Callable[[], Machine]) -> Machine:
    """``call()`` in a thread of its own that ends with it (NVML's init may block the loop for seconds).

    Not ``asyncio.to_thread``: its executor's worker would stay for the life of the process for one
    discovery per start, and the executor module is not needed otherwise.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Machine] = loop.create_future()

    def run() -> None:
        deliver: Callable[[], object]
        try:
            result = call()
        except BaseException as exc:
            deliver = functools.partial(_settle, done, error=exc)
        else:
            deliver = functools.partial(_settle, done, result=result)
        with contextlib.suppress(RuntimeError):  # the loop closed first: nobody waits any more
            loop.call_soon_threadsafe(deliver)

    threading.Thread(target=run, name="discover", daemon=True).start()
    return await done


def _settle(done: asyncio.Future[Machine], result: Machine | None = None, error: BaseException | None = None) -> None:
    if done.done():  # the waiter was cancelled (a stop during a slow discovery)
        return
    if error is not None:
        done.set_exception(error)
    elif result is not None:
        done.set_result(result)


class StartupFailed(DevicePluginError):
    """The machine cannot be served under this config: the process exits 1 (NVIDIA exits too)."""


def default_backend(config: Config) -> GpuBackend:
    """The simulated machine of ``--machine``, else NVML under the configured driver roots."""
    options = config.options
    return open_backend(
        options.machine,
        fault_file=Path(options.fault_file) if options.fault_file else None,
        driver_root=config.flags.nvidia_driver_root,
        container_driver_root=config.flags.plugin.container_driver_root,
    )


def _allocate_all(
    resource: Resource,
    requests: Sequence[Sequence[str]],
    *,
    options: response_options.ResponseOptions,
    exists: Callable[[str], bool],
) -> list[responses.ContainerEdits]:
    """:func:`.responses.allocate_all`, its module loaded by the first Allocate rather than by the start."""
    from kubegpu.deviceplugin.rm import responses

    return responses.allocate_all(resource, requests, options, exists=exists)


def handlers_for(
    resource: Resource,
    machine: Machine,
    config: Config,
    options: response_options.ResponseOptions,
    view: HostView,
    picks: server.Picks | None = None,
) -> server.Handlers:
    """Allocate and GetPreferredAllocation of ``resource``, bound to the config (pure functions underneath)."""
    policy = config.flags.plugin.policy_for(shared=not preferred.places_whole_gpus(resource))
    return server.Handlers(
        allocate=functools.partial(_allocate_all, resource, options=options, exists=view.exists),
        preferred=preferred.Preferred(resource, machine.topology, policy),
        picks=picks,
    )


class Supervisor:
    """Runs the plugin until stopped; :meth:`run` returns the exit code.

    Parameters:
        config: the effective config.
        reload: reads the config again on SIGHUP (None: keep ``config``); raises ``ConfigError``.
        backend_factory: opens a backend (called again on every SIGHUP restart).
        environ: where ``DP_DISABLE_HEALTHCHECKS`` / ``DP_ENABLE_HEALTHCHECKS`` are read (default ``os.environ``).
        metrics: the plugin's metrics (a private set when None).
        watcher_poll_interval: stat-poll period of the kubelet socket watcher.
        handle_signals: install SIGHUP/SIGTERM/SIGINT handlers (off when run inside tests).
    """

    def __init__(
        self,
        config: Config,
        *,
        reload: Callable[[], Config] | None = None,
        backend_factory: Callable[[Config], GpuBackend] = default_backend,
        environ: Mapping[str, str] | None = None,
        metrics: PluginMetrics | None = None,
        watcher_poll_interval: float | None = None,
        handle_signals: bool = True,
    ) -> None:
        self.config = config
        self.reload = reload
        self.backend_factory = backend_factory
        self.xid_policy = xids.policy_from_env(os.environ if environ is None else environ)
        self.metrics = metrics if metrics is not None else PluginMetrics()
        self.handle_signals = handle_signals
        socket = config.options.kubelet_socket
        self.kubelet_socket: Path | None = Path(socket).absolute() if socket else None
        if config.options.socket_dir:
            self.socket_dir = Path(config.options.socket_dir).absolute()
        elif self.kubelet_socket is not None:
            self.socket_dir = self.kubelet_socket.parent
        else:
            self.socket_dir = Path(constants.DEVICE_PLUGIN_PATH)
        self.watcher = KubeletSocketWatcher(self.kubelet_socket or self.socket_dir / constants.KUBELET_SOCKET_NAME)
        if watcher_poll_interval is not None:
            self.watcher.poll_interval = watcher_poll_interval
        self.servers: dict[str, server.PluginServer] = {}
        self.monitor: HealthMonitor | None = None
        self.mps_watch: MpsWatch | None = None
        self.registrations = 0
        self.registered = asyncio.Event()  # set while every resource is served (and registered, with a kubelet)
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
        """Serve until stopped: 0 after a clean stop, 1 when the machine cannot be served."""
        if self.handle_signals:
            self._install_signals()
        self._log_health_policy()
        if self.kubelet_socket is not None:
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
                self._reload()
        except StartupFailed as exc:
            log.error("cannot start", extra={"error": str(exc)})
            return 1
        finally:
            await self.watcher.stop()
            if self.handle_signals:
                self._remove_signals()

    def _log_health_policy(self) -> None:
        policy = self.xid_policy
        if policy.invalid:
            log.warning("ignoring invalid XIDs", extra={"entries": list(policy.invalid)})
        if not policy.checks_enabled:
            log.warning("health checks disabled", extra={"env": xids.ENV_DISABLE})

    def _reload(self) -> None:
        if self.reload is None:
            return
        try:
            self.config = self.reload()
        except ConfigError as exc:
            # A daemon must not die on bad input: the config that runs now stays until a good one comes.
            log.error("config reload failed, keeping the running config", extra={"error": str(exc)})
            return
        log.info("running with config", extra={"config": self.config.running_config()})

    async def _discover(self, backend: GpuBackend) -> Machine | None:
        """The machine, or None when NVML cannot start and ``--fail-on-init-error=false`` says wait."""
        try:
            return await _in_thread(backend.discover)
        except gpu_errors.GpuError as exc:
            if self.config.flags.fail_on_init_error:
                hint = " (use --machine PROFILE for a simulated machine)" if self.config.options.machine is None else ""
                raise StartupFailed(f"{backend.name}: {exc}{hint}") from exc
            searched = list(getattr(exc, "searched", ()))
            log.warning(NO_DEVICES, extra={"error": str(exc), **({"searched": searched} if searched else {})})
            return None

    async def _run_machine(self) -> Literal["stop", "restart"]:
        """One discovery's worth of life: returns on SIGHUP (restart) or SIGTERM/SIGINT (stop)."""
        config = self.config
        try:
            backend = self.backend_factory(config)
        except gpu_errors.GpuError as exc:
            raise StartupFailed(str(exc)) from exc
        try:
            machine = await self._discover(backend)
            if machine is None:
                return self._signal_outcome(await self._until(None, watch=False))
            simulated = config.options.machine is not None
            minors = self._mig_minors(simulated)
            try:
                built = resource_map.build(machine, config, minors)
            except resource_map.ResourceMapError as exc:
                raise StartupFailed(str(exc)) from exc
            for warning in built.warnings:
                log.warning("resource warning", extra={"warning": warning})
            served = built.resources
            log.info(
                "discovered",
                extra={
                    "backend": backend.name,
                    "gpus": len(machine.gpus),
                    "resources": {r.name: len(r.devices) for r in served},
                },
            )
            if not served:
                log.warning(NO_DEVICES, extra={"backend": backend.name})
                return self._signal_outcome(await self._until(None, watch=False))
            view = HostView.of(config, simulated)
            try:
                channels = imex_channels(config.imex.channel_ids, config.imex.required, view)
            except HostError as exc:
                raise StartupFailed(str(exc)) from exc
            options = response_options.ResponseOptions.from_config(
                config,
                imex_channels=channels,
                cdi_features=self._write_cdi(machine, view, minors, channels),
            )
            for resource in served:
                log.info(
                    "resource",
                    extra={
                        "resource": resource.name,
                        "devices": len(resource.devices),
                        "sharing": resource.sharing,
                        "policy": config.flags.plugin.policy_for(not preferred.places_whole_gpus(resource)),
                    },
                )
            book = health.HealthBook(
                quiet_period_s=config.flags.plugin.quiet_period_s,
                policy=self.xid_policy,
                recoverable=recovery_classes(config.flags.plugin.health_recovery_xids),
            )
            self.monitor = HealthMonitor(backend, served, book, self.metrics)
            self.mps_watch = self._mps_watch(served, self.monitor)
            node = self._node_api(machine, served, self.monitor)
            node_pods = None if node is None else node[1]
            handlers = {r.name: handlers_for(r, machine, config, options, view, node_pods) for r in served}
            self.monitor.start()
            try:
                return await self._serve(served, handlers)
            finally:
                await self._stop_servers()
                if self.mps_watch is not None:
                    await self.mps_watch.stop()
                    self.mps_watch = None
                await self.monitor.stop()
                if node is not None:
                    await node[0].stop()
                    await node[1].stop()
        finally:
            # A stop ends the process: nothing to wait for (NVML's event wait ends with it).
            backend.close(wait=self._pending != "stop")

    def _node_api(
        self, machine: Machine, served: tuple[Resource, ...], monitor: HealthMonitor
    ) -> tuple[publisher.NodePublisher, pods.NodePods] | None:
        """With ``--node-name``: the started Node writer (fed now and after every health change) and pod cache."""
        node_name = self.config.options.node_name
        if not node_name:
            return None
        # Imported only here: the API client (lightkube) costs start time and ~7 MiB that a plugin without
        # --node-name need not pay; the node description needs the machine profiles' JSON forms.
        from kubegpu.deviceplugin.plugin import pods, publisher
        from kubegpu.deviceplugin.rm import nodegpus

        try:
            node = publisher.connect(node_name, self.config.options.kubeconfig)
            node_pods = pods.connect(node_name, self.config.options.kubeconfig)
        except publisher.KubeconfigError as exc:
            raise StartupFailed(str(exc)) from exc

        def publish() -> None:
            unhealthy = {r.name: monitor.unhealthy(r.name) for r in served}
            node.update(nodegpus.node_annotations(nodegpus.describe(machine, served, unhealthy)))

        monitor.listeners.append(publish)
        publish()
        node.start()
        node_pods.start()
        log.info("publishing the GPUs on the node", extra={"node": node_name, "annotation": nodegpus.GPUS_ANNOTATION})
        return node, node_pods

    def _mps_watch(self, served: tuple[Resource, ...], monitor: HealthMonitor) -> MpsWatch | None:
        """The watch of the MPS daemons when some resource is shared with MPS, else None."""
        using_mps = [r.name for r in served if r.sharing == "mps" and r.is_shared]
        if not using_mps:
            return None
        # Imported only here: plugins without MPS need neither the daemons' state nor subprocess.
        from kubegpu.deviceplugin.mps import control
        from kubegpu.deviceplugin.plugin.mpswatch import MpsWatch

        options = self.config.options
        check = control.DaemonCheck(Path(options.mps_container_root), using_mps)
        return MpsWatch(check, monitor, options.mps_check_interval_s)

    def _mig_minors(self, simulated: bool) -> mig_caps.MigMinors | None:
        """The host's MIG capability minors (NVML), or None for the driver's numbering (simulated machines)."""
        if simulated:
            return None
        from kubegpu.deviceplugin.rm import mig_caps  # not for simulated machines: they have no /proc of their own

        try:
            return mig_caps.read(PROC_ROOT)
        except OSError as exc:
            raise StartupFailed(f"cannot read {PROC_ROOT / mig_caps.MIG_MINORS}: {exc}") from exc

    def _write_cdi(
        self, machine: Machine, view: HostView, minors: mig_caps.MigMinors | None, channels: tuple[int, ...]
    ) -> tuple[str, ...]:
        """Write the CDI specs when a CDI strategy is on; the gdrcopy/gds/mofed classes that got a spec."""
        config = self.config
        if not any(s.startswith("cdi-") for s in config.flags.plugin.device_list_strategy):
            return ()
        # Imported only here: the spec models cost start time and memory that plugins without CDI need not pay.
        from kubegpu.deviceplugin.cdi import generate, writer
        from kubegpu.deviceplugin.rm import mig_caps

        spec_dir = Path(config.options.cdi_spec_dir)
        try:
            specs = generate.specs(machine, config, view.cdi_host_files(machine), minors, imex_channels=channels)
            written = writer.write_all(specs, spec_dir)
        except (OSError, mig_caps.MigCapsError) as exc:
            raise StartupFailed(f"cannot write the CDI specs to {spec_dir}: {exc}") from exc
        log.info("wrote CDI specs", extra={"files": [str(p) for p in written]})
        classes = {s.kind.rsplit("/", 1)[1] for s in specs}
        return tuple(f for f, _ in response_options.FEATURES if f in classes)

    def _signal_outcome(self, outcome: Outcome) -> Literal["stop", "restart"]:
        return "stop" if outcome == "stop" else "restart"

    async def _serve(
        self, served: tuple[Resource, ...], handlers: dict[str, server.Handlers]
    ) -> Literal["stop", "restart"]:
        registering = self.kubelet_socket is not None
        waiting_logged = False
        unanswered: Identity | None = None  # the kubelet socket we already said is not answering
        mps_waiting: str | None = None  # the MPS problem we already logged
        while True:
            kubelet: Identity | None = None
            if registering:
                kubelet = self.watcher.current()
                if kubelet is None:
                    if not waiting_logged:
                        log.info("waiting for the kubelet", extra={"socket": str(self.kubelet_socket)})
                        waiting_logged = True
                    outcome = await self._until(None, since=None)
                    if outcome in ("stop", "restart"):
                        return self._signal_outcome(outcome)
                    continue
            waiting_logged = False
            try:
                if not await self._start_unless_signalled(served, handlers):
                    return self._pending or "stop"
            except KubeletUnavailable as exc:
                await self._stop_servers()
                if unanswered != kubelet:  # once per kubelet socket, not once per second
                    log.warning("kubelet not answering", extra={"error": str(exc), "retry_s": SOON_RETRY_S})
                    unanswered = kubelet
                outcome = await self._until(SOON_RETRY_S, since=kubelet, watch=registering)
            except MpsNotReady as exc:
                await self._stop_servers()
                if mps_waiting != str(exc):
                    log.warning("waiting for the MPS daemon", extra={"reason": str(exc), "retry_s": SOON_RETRY_S})
                    mps_waiting = str(exc)
                outcome = await self._until(SOON_RETRY_S, since=kubelet, watch=registering)
            except DevicePluginError as exc:
                await self._stop_servers()
                retry = self.config.options.retry_interval_s
                log.error("start failed", extra={"error": str(exc), "retry_s": retry})
                outcome = await self._until(retry, since=kubelet, watch=registering)
            else:
                outcome = await self._until(None, since=kubelet, watch=registering)
                if outcome == "kubelet":
                    log.info("kubelet socket created again, registering again")
            if outcome in ("stop", "restart"):
                return self._signal_outcome(outcome)
            # A new kubelet or a retry: the old servers go first, so no resource is ever served twice.
            await self._stop_servers()

    async def _start_unless_signalled(self, served: tuple[Resource, ...], handlers: dict[str, server.Handlers]) -> bool:
        """Start every resource; False when a stop/restart request came first (a hung kubelet must not delay it)."""
        starting = asyncio.create_task(self._start_servers(served, handlers), name="start-servers")
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

    async def _start_servers(self, served: tuple[Resource, ...], handlers: dict[str, server.Handlers]) -> None:
        assert self.monitor is not None
        if self.mps_watch is not None:
            problem = await self.mps_watch.check()
            if problem is not None:
                raise MpsNotReady(problem)
            self.mps_watch.start()
        for resource in served:
            plugin = server.PluginServer(
                resource, self.socket_dir / resource.socket_name, handlers[resource.name], self.metrics
            )
            self.servers[resource.name] = plugin
            self.monitor.attach(plugin)
            await plugin.start()
            if self.kubelet_socket is None:
                log.info("Skipping registration with Kubelet", extra={"resource": resource.name})
                continue
            try:
                await registration.register(self.kubelet_socket, resource.name, resource.socket_name, server.OPTIONS)
            except DevicePluginError:
                self.metrics.registration_failed(resource.name)
                raise
            self.registrations += 1
            self.metrics.registered(resource.name)
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
        if watch and self.kubelet_socket is not None:
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
