"""The ``v1beta1.Registration`` server on ``kubelet.sock`` and the plugin clients it keeps.

Owns what the kubelet's device-plugin ``server`` owns: validating a
``Register`` call (version, extended resource name; the kubelet's texts, gRPC
code UNKNOWN), joining the endpoint under the socket dir, dialing the plugin
and asking ``GetDevicePluginOptions`` *inside* Register (the options in the
request are ignored), running each client's ListAndWatch in the background,
and what happens when a stream ends.

Two behaviours when a resource re-registers while its old client lives:

* default, like the fixed upstream (kubernetes#135437): clients are kept per
  registration; when a stream ends, only that client is dropped, and the
  resource is disconnected only if that client is its current endpoint;
* ``race=True``, like kubelet 1.32 (kubernetes#121994): one client per resource
  name, replaced without closing the old one; when *any* stream of the
  resource ends, the client currently registered is disconnected, so a live
  new plugin loses its devices when the old one exits. A failed registration
  also forgets the resource's working client.

Must not keep device state (that is the manager's).
"""

from __future__ import annotations

import asyncio
import json
import logging
import posixpath
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.kubelet import errors, resourcename
from kubegpu.kubelet.endpoint import PluginClient
from kubegpu.kubelet.manager import DeviceManager

log = logging.getLogger(__name__)


def go_quote(text: str) -> str:
    """Go's ``%q`` for ordinary strings."""
    return json.dumps(text, ensure_ascii=False)


def unsupported_version_message(version: str) -> str:
    supported = "[" + " ".join(go_quote(v) for v in constants.SUPPORTED_VERSIONS) + "]"
    return f"requested API version {go_quote(version)} is not supported by kubelet. Supported version is {supported}"


def invalid_resource_message(name: str) -> str:
    return f"the ResourceName {go_quote(name)} is invalid"


def endpoint_path(socket_dir: Path, endpoint: str) -> Path:
    """Go's ``filepath.Join(socketDir, endpoint)``: always under the dir, even for an absolute endpoint."""
    return Path(
        posixpath.normpath(posixpath.join(str(socket_dir), endpoint.lstrip("/")) if endpoint else str(socket_dir))
    )


class RegistrationServer(api_pb2_grpc.RegistrationServicer):
    def __init__(
        self,
        manager: DeviceManager,
        socket_dir: Path,
        *,
        race: bool = False,
        dial_timeout: float = constants.DIAL_TIMEOUT_S,
    ) -> None:
        self.manager = manager
        self.socket_dir = socket_dir
        self.socket_path = socket_dir / constants.KUBELET_SOCKET_NAME
        self.race = race
        self.dial_timeout = dial_timeout
        #: Resource -> live clients (race mode: at most one).
        self.clients: dict[str, list[PluginClient]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        server = grpc.aio.server()
        api_pb2_grpc.add_RegistrationServicer_to_server(self, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(constants.unix_target(self.socket_path))
        await server.start()
        self._server = server
        log.info("serving Registration", extra={"socket": str(self.socket_path), "race": self.race})

    async def stop(self) -> None:
        """Disconnect every client (devices unhealthy, endpoints stopped), stop serving, remove kubelet.sock."""
        for resource, clients in list(self.clients.items()):
            for client in list(clients):
                self._deregister(resource, client)
                await client.close()
                self.manager.plugin_disconnected(resource, client, only_if_current=not self.race)
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self.socket_path.unlink(missing_ok=True)

    async def Register(self, request: api_pb2.RegisterRequest, context: grpc.aio.ServicerContext) -> api_pb2.Empty:
        name = request.resource_name
        log.info(
            "got registration request from device plugin",
            extra={"resource": name, "endpoint": request.endpoint, "version": request.version},
        )
        if request.version not in constants.SUPPORTED_VERSIONS:
            message = unsupported_version_message(request.version)
        elif not resourcename.is_extended(name):
            message = invalid_resource_message(name)
        else:
            try:
                await self.connect(name, endpoint_path(self.socket_dir, request.endpoint))
                return api_pb2.Empty()
            except errors.RegistrationRejected as exc:
                message = str(exc)
        log.info("bad registration request from device plugin", extra={"resource": name, "error": message})
        await context.abort(grpc.StatusCode.UNKNOWN, message)
        raise AssertionError("unreachable: abort raises")

    async def connect(self, resource: str, socket_path: Path) -> PluginClient:
        client = PluginClient(resource, socket_path, self.dial_timeout)
        if self.race:
            # kubelet 1.32: the new client replaces the old one in the map; the old one is not closed.
            self.clients[resource] = [client]
        else:
            self.clients.setdefault(resource, []).append(client)
        try:
            await client.connect()
            options = await client.get_options()
        except errors.RegistrationRejected as exc:
            if self.race:
                self.clients.pop(resource, None)
            else:
                self._deregister(resource, client)
            await client.close()
            log.info("error connecting to device plugin client", extra={"resource": resource, "error": str(exc)})
            raise
        self.manager.plugin_connected(resource, client, options)
        task = asyncio.create_task(self._run_client(resource, client), name=f"listandwatch-{resource}-{client.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return client

    async def _run_client(self, resource: str, client: PluginClient) -> None:
        await client.run(lambda c, devices: self.manager.list_and_watch(resource, c, devices))
        if self.race:
            current = self.clients.get(resource)
            if current:
                # The 1.32 bug: whoever's stream ended, the client registered *now* is disconnected.
                victim = current[0]
                self.clients.pop(resource, None)
                await victim.close()
                self.manager.plugin_disconnected(resource, victim, only_if_current=False)
        elif client in self.clients.get(resource, []):
            self._deregister(resource, client)
            await client.close()
            self.manager.plugin_disconnected(resource, client, only_if_current=True)
        await client.close()

    def _deregister(self, resource: str, client: PluginClient) -> None:
        clients = [c for c in self.clients.get(resource, []) if c is not client]
        if clients:
            self.clients[resource] = clients
        else:
            self.clients.pop(resource, None)
