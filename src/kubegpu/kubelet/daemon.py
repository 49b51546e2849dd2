"""The emulator process: start-up order, the servers, the capacity sweep, clean shutdown.

Owns the life of ``kubegpu kubelet``: create the socket dir (0750), refuse to
start if another emulator serves it, clean it (plugins learn the kubelet
restarted), restore the checkpoint and pod store, then serve the pod-resources
API, the control API and finally ``Registration`` on ``kubelet.sock`` (its
creation is the plugins' cue, so everything else is ready first), and last
the node agent when one is given (``--kubeconfig``). While running it sweeps
capacity the way node-status updates call ``GetCapacity``. SIGTERM/SIGINT:
stop the agent, disconnect every plugin, stop serving, remove the sockets.
Must not contain device-manager logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kubegpu.api import constants
from kubegpu.kubelet import errors, files
from kubegpu.kubelet.control import ControlServer
from kubegpu.kubelet.node import Node
from kubegpu.kubelet.podresources import PodResourcesServer
from kubegpu.kubelet.registration import RegistrationServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    socket_dir: Path = Path(constants.DEVICE_PLUGIN_PATH)
    grace_period: float = constants.ENDPOINT_STOP_GRACE_PERIOD_S
    reregistration_race: bool = False
    #: None: ``<socket dir>/../pod-resources/kubelet.sock``.
    pod_resources_socket: Path | None = None
    serve_pod_resources: bool = True
    dial_timeout: float = constants.DIAL_TIMEOUT_S
    pre_start_timeout: float = constants.PRE_START_CONTAINER_TIMEOUT_S
    topology_policy: str = "none"

    @property
    def pod_resources_path(self) -> Path:
        return self.pod_resources_socket or files.default_pod_resources_socket(self.socket_dir)


def socket_answers(path: Path) -> bool:
    """True when something accepts connections on the unix socket ``path``."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


class Agent(Protocol):
    """What plays this node on an API server (:class:`kubegpu.kubelet.agent.agent.NodeAgent`)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> dict[str, object]: ...


class Daemon:
    def __init__(self, options: Options, agent: Callable[[Node], Agent] | None = None) -> None:
        """``agent`` builds the node agent (``--kubeconfig``); without it the emulator has no API side."""
        self.options = options
        self._agent_factory = agent
        self.agent: Agent | None = None
        self.socket_dir = options.socket_dir.absolute()
        self.node = Node(
            self.socket_dir,
            grace_period=options.grace_period,
            pre_start_timeout=options.pre_start_timeout,
            topology_policy=options.topology_policy,
        )
        self.registration = RegistrationServer(
            self.node.manager, self.socket_dir, race=options.reregistration_race, dial_timeout=options.dial_timeout
        )
        self.control = ControlServer(self.node, files.control_socket(self.socket_dir))
        self.pod_resources = (
            PodResourcesServer(self.node, options.pod_resources_path.absolute())
            if options.serve_pod_resources
            else None
        )
        self._sweeper: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        """Bring the node up; raises :class:`~kubegpu.kubelet.errors.KubeletError` when it cannot."""
        control_path = files.control_socket(self.socket_dir)
        try:
            self.socket_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        except OSError as exc:
            raise errors.KubeletError(f"cannot create socket dir {self.socket_dir}: {exc.strerror}") from None
        if socket_answers(control_path):
            raise errors.KubeletError(f"another kubegpu kubelet is already serving {self.socket_dir} ({control_path})")
        if self.pod_resources is not None and socket_answers(self.pod_resources.socket_path):
            raise errors.KubeletError(
                f"pod-resources socket {self.pod_resources.socket_path} is in use by another process; "
                "pass --pod-resources-socket PATH"
            )
        removed = files.clean_socket_dir(self.socket_dir)
        log.info("cleaned socket dir", extra={"socket_dir": str(self.socket_dir), "removed": removed})
        restored = self.node.restore()
        files.state_dir(self.socket_dir).mkdir(mode=0o750, exist_ok=True)
        self.node.info.update(
            pid=os.getpid(),
            started_at=time.time(),
            socket_dir=str(self.socket_dir),
            kubelet_socket=str(self.registration.socket_path),
            control_socket=str(control_path),
            pod_resources_socket=str(self.pod_resources.socket_path) if self.pod_resources else None,
            checkpoint=str(self.node.manager.checkpoint_file),
            reregistration_race=self.options.reregistration_race,
            restored=restored,
        )
        try:
            if self.pod_resources is not None:
                await self.pod_resources.start()
            await self.control.start()
            await self.registration.start()
        except (OSError, RuntimeError) as exc:
            await self.stop()
            raise errors.KubeletError(f"cannot serve: {exc}") from None
        interval = max(0.05, min(1.0, self.options.grace_period / 4))
        self._sweeper = asyncio.create_task(self._sweep(interval), name="capacity-sweep")
        if self._agent_factory is not None:
            # Last: the node is registered on the API only once its kubelet side serves.
            self.agent = self._agent_factory(self.node)
            self.node.agent_status = self.agent.status
            await self.agent.start()
        log.info(
            "kubelet emulator started",
            extra={"socket_dir": str(self.socket_dir), "pid": os.getpid(), "race": self.options.reregistration_race},
        )

    async def _sweep(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self.node.manager.sweep()
            except Exception:
                log.exception("capacity sweep failed")

    async def stop(self) -> None:
        if self.agent is not None:
            # First: no pod is admitted while the servers go away.
            await self.agent.stop()
            self.agent = None
            self.node.agent_status = None
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await self.registration.stop()
        await self.control.stop()
        if self.pod_resources is not None:
            await self.pod_resources.stop()
        self.node.events.close()
        log.info("kubelet emulator stopped", extra={"socket_dir": str(self.socket_dir)})

    def request_stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT (or :meth:`request_stop`), stop.

        The handlers go in before starting, so a signal during start is handled too. SIGHUP is logged and
        ignored: the emulator has no config file to reload (flags only), and it must not die with its sockets left.
        """
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        for sig in signals[:2]:
            loop.add_signal_handler(sig, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, lambda: log.info("SIGHUP ignored: nothing to reload"))
        try:
            await self.start()  # start() cleans up after itself when it fails
        except BaseException:
            for sig in signals:
                loop.remove_signal_handler(sig)
            raise
        try:
            await self._stopping.wait()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            await self.stop()
