"""The DevicePlugin gRPC server of one resource, on its own unix socket.

Owns serving ``v1beta1.DevicePlugin`` for one :class:`~.resources.Resource`:
the servicer (an adapter: protobuf in, one pure function of :class:`Handlers`,
protobuf out; Allocate and GetPreferredAllocation timed into the plugin's metrics), the
ListAndWatch streams (full snapshot at once and on every health change; they
end when the RPC is cancelled or the server stops), the mapping of our errors
to gRPC status codes (this module only), and the socket's life: stale socket
removed before binding, the server confirmed to answer before anyone is told
about it, the socket removed on stop. Must not register with the kubelet,
decide health or watch the kubelet (registration, monitor, supervisor do).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.deviceplugin.errors import InvalidRequest, PluginServeError
from kubegpu.deviceplugin.plugin.metrics import PluginMetrics
from kubegpu.deviceplugin.rm.resources import Resource

if TYPE_CHECKING:
    # The response model is loaded by the first Allocate (through the handler), not by a start.
    from kubegpu.deviceplugin.rm.responses import ContainerEdits

log = logging.getLogger(__name__)

#: How long our own socket may take to answer the confirming GetDevicePluginOptions (NVIDIA: 5 s dial).
CONFIRM_TIMEOUT_S = 5.0
#: Longest path a unix socket can be bound to (sun_path is 108 bytes with its terminating NUL).
MAX_SOCKET_PATH = 107
#: Grace for in-flight unary RPCs when the server stops; streams are ended before it.
STOP_GRACE_S = 1.0

OPTIONS = api_pb2.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

_Response = TypeVar("_Response")

#: Allocate: one list of device IDs per container request in, one set of edits per container out.
AllocateHandler = Callable[[Sequence[Sequence[str]]], "list[ContainerEdits]"]
#: GetPreferredAllocation for one container: (available, must-include, size) -> the chosen IDs.
PreferredHandler = Callable[[Sequence[str], Sequence[str], int], list[str]]


class Picks(Protocol):
    """The scheduler's picks (:class:`kubegpu.deviceplugin.plugin.pods.NodePods`): asked before the policy."""

    async def preferred(
        self, resource: Resource, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str] | None: ...

    def allocating(self, resource: Resource, containers: Sequence[Sequence[str]]) -> None: ...


@dataclass(frozen=True)
class Handlers:
    """The pure functions behind the RPCs of one resource (the supervisor binds them to its config).

    ``picks``: with ``--node-name``, the scheduler's picks; their answer wins over ``preferred`` and their
    refusal fails the RPC (and so the pod's admission).
    """

    allocate: AllocateHandler
    preferred: PreferredHandler
    picks: Picks | None = None


async def _answer(context: grpc.aio.ServicerContext, rpc: str, build: Callable[[], Awaitable[_Response]]) -> _Response:
    """Run ``build``; our errors become gRPC statuses here and nowhere else, and no error escapes as a crash.

    ``InvalidRequest`` → ``INVALID_ARGUMENT`` with its message; anything else is
    a bug of ours → ``INTERNAL``, logged with its traceback, and the daemon serves on.
    """
    try:
        return await build()
    except InvalidRequest as exc:
        log.warning("request refused", extra={"rpc": rpc, "reason": str(exc)})
        code, details = grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    except Exception as exc:
        log.exception("request failed", extra={"rpc": rpc})
        code, details = grpc.StatusCode.INTERNAL, f"{rpc} failed: {exc}"
    await context.abort(code, details)
    raise AssertionError("context.abort returned")  # abort always raises


def _edits_to_proto(edits: ContainerEdits) -> api_pb2.ContainerAllocateResponse:
    # Only the fields that have something: most answers are one env var, and each empty repeated field passed to
    # the constructor costs as much as a filled one.
    response = api_pb2.ContainerAllocateResponse(envs=edits.envs)
    if edits.mounts:
        response.mounts.extend(
            api_pb2.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in edits.mounts
        )
    if edits.devices:
        response.devices.extend(
            api_pb2.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in edits.devices
        )
    if edits.annotations:
        response.annotations.update(edits.annotations)
    if edits.cdi_devices:
        response.cdi_devices.extend(api_pb2.CDIDevice(name=n) for n in edits.cdi_devices)
    return response


class DevicePluginService(api_pb2_grpc.DevicePluginServicer):
    """``v1beta1.DevicePlugin`` for one resource; device health is set from outside."""

    def __init__(self, resource: Resource, handlers: Handlers, metrics: PluginMetrics | None = None) -> None:
        self.resource = resource
        self.handlers = handlers
        self.metrics = metrics if metrics is not None else PluginMetrics()
        self._unhealthy: frozenset[str] = frozenset()
        self._list: api_pb2.ListAndWatchResponse | None = None  # the full list as last sent
        self._listed_unhealthy: frozenset[str] = frozenset()  # the Unhealthy devices in it
        self._position: dict[str, int] = {}
        self._changed = asyncio.Event()
        self._stopping = False
        self.streams = 0  # open ListAndWatch streams, for tests and logs

    # --- state from outside -------------------------------------------------------------------------------

    def set_unhealthy(self, device_ids: Collection[str]) -> None:
        """Mark exactly ``device_ids`` Unhealthy (the rest Healthy); streams resend when this changes anything."""
        unhealthy = frozenset(device_ids) & self.resource.by_id.keys()
        if unhealthy != self._unhealthy:
            self._unhealthy = unhealthy
            self._notify()

    @property
    def unhealthy(self) -> frozenset[str]:
        return self._unhealthy

    def end_streams(self) -> None:
        """End every ListAndWatch stream cleanly (status OK), now and for streams opened later."""
        self._stopping = True
        self._notify()

    def _notify(self) -> None:
        # Each waiter holds the event of its generation; a fresh one is armed for the next change.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def snapshot(self) -> api_pb2.ListAndWatchResponse:
        """Every device of the resource with its health and NUMA node (a fresh message each call).

        The full list is built once and only the devices whose health changed are rewritten, then copied: a node
        advertising 8 GPUs x 1000 ``kubegpu.io/gpu-milli`` units resends in milliseconds (``bench/gpu_milli.py``).
        """
        if self._list is None:
            devices = []
            for device in self.resource.devices:
                topology = None
                if device.numa is not None:
                    topology = api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=device.numa)])
                devices.append(api_pb2.Device(ID=device.id, health=constants.HEALTHY, topology=topology))
            self._list = api_pb2.ListAndWatchResponse(devices=devices)
            self._position = {d.id: n for n, d in enumerate(self.resource.devices)}
        listed = self._list.devices
        for device_id in self._listed_unhealthy ^ self._unhealthy:
            unhealthy = device_id in self._unhealthy
            listed[self._position[device_id]].health = constants.UNHEALTHY if unhealthy else constants.HEALTHY
        self._listed_unhealthy = self._unhealthy
        fresh = api_pb2.ListAndWatchResponse()
        fresh.CopyFrom(self._list)
        return fresh

    # --- RPCs -----------------------------------------------------------------------------------------------

    async def GetDevicePluginOptions(
        self, request: api_pb2.Empty, context: grpc.aio.ServicerContext
    ) -> api_pb2.DevicePluginOptions:
        # Not timed: it answers a constant, so its latency would be a series of zeros.
        return OPTIONS

    async def ListAndWatch(
        self, request: api_pb2.Empty, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[api_pb2.ListAndWatchResponse]:
        self.streams += 1
        log.info("list-and-watch opened", extra={"resource": self.resource.name, "streams": self.streams})
        try:
            while not self._stopping:
                changed = self._changed
                yield self.snapshot()
                await changed.wait()
        finally:
            self.streams -= 1
            log.info("list-and-watch closed", extra={"resource": self.resource.name, "streams": self.streams})

    async def Allocate(
        self, request: api_pb2.AllocateRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.AllocateResponse:
        began = time.perf_counter()
        requests = [list(r.devices_ids) for r in request.container_requests]

        async def build() -> api_pb2.AllocateResponse:
            if self.handlers.picks is not None:
                self.handlers.picks.allocating(self.resource, requests)
            edits = self.handlers.allocate(requests)
            return api_pb2.AllocateResponse(container_responses=[_edits_to_proto(e) for e in edits])

        try:
            response = await _answer(context, "Allocate", build)
        except Exception:  # the abort of a refused request; a cancelled call is not an answer
            self.metrics.allocation_failed(self.resource.name)
            raise
        finally:
            self.metrics.rpc("Allocate", time.perf_counter() - began)
        self.metrics.allocated(self.resource.name, len(requests))
        # Debug: one line per Allocate costs the hot path more than the handler (the metrics count them).
        log.debug("allocated", extra={"resource": self.resource.name, "containers": requests})
        return response

    async def GetPreferredAllocation(
        self, request: api_pb2.PreferredAllocationRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.PreferredAllocationResponse:
        began = time.perf_counter()

        async def build() -> api_pb2.PreferredAllocationResponse:
            responses = []
            for r in request.container_requests:
                available, must, size = list(r.available_deviceIDs), list(r.must_include_deviceIDs), r.allocation_size
                chosen = None
                if self.handlers.picks is not None:
                    chosen = await self.handlers.picks.preferred(self.resource, available, must, size)
                if chosen is None:
                    chosen = self.handlers.preferred(available, must, size)
                responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=chosen))
            return api_pb2.PreferredAllocationResponse(container_responses=responses)

        try:
            return await _answer(context, "GetPreferredAllocation", build)
        finally:
            self.metrics.rpc("GetPreferredAllocation", time.perf_counter() - began)

    async def PreStartContainer(
        self, request: api_pb2.PreStartContainerRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.PreStartContainerResponse:
        # Not timed: an empty answer (pre_start_required is false), nothing to measure.
        return api_pb2.PreStartContainerResponse()


def _remove_stale(path: Path) -> None:
    """Remove whatever non-directory sits at ``path`` (a socket left by a previous run)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise PluginServeError(f"{path}: is a directory, cannot serve a socket there")
    path.unlink(missing_ok=True)


class PluginServer:
    """One resource served on ``socket_path``: :meth:`start` binds and confirms, :meth:`stop` ends everything.

    Parameters:
        resource: the resource and its devices.
        socket_path: where to listen (``<kubelet dir>/nvidia-gpu.sock``).
        handlers: Allocate and GetPreferredAllocation for this resource.
        metrics: where RPC latencies and allocations are counted (a private set when None).
    """

    def __init__(
        self, resource: Resource, socket_path: Path, handlers: Handlers, metrics: PluginMetrics | None = None
    ) -> None:
        self.resource = resource
        self.socket_path = socket_path
        self.service = DevicePluginService(resource, handlers, metrics)
        self._server: grpc.aio.Server | None = None
        self._inode: tuple[int, int] | None = None

    async def start(self) -> None:
        """Remove a stale socket, serve, and check that the socket answers; raises :class:`PluginServeError`."""
        if len(os.fsencode(self.socket_path.absolute())) > MAX_SOCKET_PATH:
            raise PluginServeError(f"{self.socket_path}: longer than the {MAX_SOCKET_PATH} bytes a unix socket allows")
        if not self.socket_path.parent.is_dir():  # gRPC's bind would fail with a page of core noise
            raise PluginServeError(f"{self.socket_path}: directory {self.socket_path.parent} does not exist")
        try:
            _remove_stale(self.socket_path)
        except OSError as exc:
            raise PluginServeError(f"{self.socket_path}: cannot remove stale socket: {exc}") from exc
        server = grpc.aio.server()
        api_pb2_grpc.add_DevicePluginServicer_to_server(self.service, server)  # type: ignore[no-untyped-call]
        try:
            bound = server.add_insecure_port(constants.unix_target(self.socket_path))
        except RuntimeError as exc:
            raise PluginServeError(f"{self.socket_path}: cannot listen: {exc}") from exc
        if not bound:
            raise PluginServeError(f"{self.socket_path}: cannot listen")
        await server.start()
        self._server = server
        with contextlib.suppress(OSError):
            st = self.socket_path.stat()
            self._inode = (st.st_dev, st.st_ino)
        try:
            await self._confirm()
        except Exception:
            await self.stop()
            raise
        log.info("serving", extra={"resource": self.resource.name, "socket": str(self.socket_path)})

    async def _confirm(self) -> None:
        async with grpc.aio.insecure_channel(constants.unix_target(self.socket_path)) as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
            try:
                await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=CONFIRM_TIMEOUT_S, wait_for_ready=True)
            except grpc.aio.AioRpcError as exc:
                raise PluginServeError(
                    f"{self.socket_path}: our own server does not answer: {exc.code().name} {exc.details()}"
                ) from exc

    async def stop(self, grace: float = STOP_GRACE_S) -> None:
        """End the streams, stop the server and remove the socket (only if it is still ours)."""
        self.service.end_streams()
        server, self._server = self._server, None
        if server is not None:
            # Let generators observe end_streams and close with OK before in-flight calls are cancelled.
            await asyncio.sleep(0)
            await server.stop(grace)
        self._remove_own_socket()

    def _remove_own_socket(self) -> None:
        try:
            st = self.socket_path.lstat()
        except FileNotFoundError:
            return
        if self._inode is None or (st.st_dev, st.st_ino) == self._inode:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)

    @property
    def serving(self) -> bool:
        return self._server is not None

    def set_unhealthy(self, device_ids: Collection[str]) -> None:
        self.service.set_unhealthy(device_ids)

    def __repr__(self) -> str:
        return f"PluginServer({self.resource.name!r}, {str(self.socket_path)!r})"
