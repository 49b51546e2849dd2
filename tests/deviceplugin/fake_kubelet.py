"""A minimal kubelet for plugin tests: the Registration service, driven as the real kubelet drives plugins.

Owns, for tests only, what a 1.32 kubelet does with a device plugin (reference
kubelet-device-manager §3–§5): serve ``v1beta1.Registration`` on
``kubelet.sock``; inside ``Register`` dial the plugin's endpoint under the
socket directory and call ``GetDevicePluginOptions``; then open ListAndWatch
and keep every snapshot. It records everything in one ordered event log so
tests can assert orderings (old stream ended before the new registration). It
does no allocation bookkeeping; tests call the plugin's RPCs through
:meth:`FakeKubelet.stub`. Real grpc.aio over real unix sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc


@dataclass
class Registered:
    """One accepted registration and what the kubelet learnt from it."""

    request: api_pb2.RegisterRequest
    options: api_pb2.DevicePluginOptions
    at: float
    snapshots: list[api_pb2.ListAndWatchResponse] = field(default_factory=list)
    stream_status: grpc.StatusCode | None = None  # set when the stream ended
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def resource(self) -> str:
        return self.request.resource_name

    def health(self) -> dict[str, str]:
        """Device ID → health in the latest snapshot."""
        return {d.ID: d.health for d in self.snapshots[-1].devices} if self.snapshots else {}


class _Registration(api_pb2_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self.kubelet = kubelet

    async def Register(self, request: api_pb2.RegisterRequest, context: grpc.aio.ServicerContext) -> api_pb2.Empty:
        return await self.kubelet._register(request, context)


class FakeKubelet:
    """The Registration side of a kubelet on ``socket_dir/kubelet.sock``.

    ``reject``: when set, every Register fails with this message (gRPC UNKNOWN, as the kubelet does).
    ``dial_timeout``: how long Register waits for the plugin's socket to answer (the kubelet: 10 s).
    ``hang``: Register never answers (a wedged kubelet).
    """

    def __init__(
        self, socket_dir: Path, reject: str | None = None, dial_timeout: float = 10.0, hang: bool = False
    ) -> None:
        self.socket_dir = socket_dir
        self.dial_timeout = dial_timeout
        self.hang = hang
        self.register_calls = 0
        self.socket = socket_dir / constants.KUBELET_SOCKET_NAME
        self.reject = reject
        self.registrations: list[Registered] = []
        self.log: list[tuple[str, str]] = []  # ("register"|"stream-ended", resource), in order
        self._server: grpc.aio.Server | None = None
        self._channels: list[grpc.aio.Channel] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._registered = asyncio.Condition()

    async def start(self) -> None:
        server = grpc.aio.server()
        api_pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(constants.unix_target(self.socket))
        await server.start()
        self._server = server

    async def stop(self) -> None:
        """Stop like a dying kubelet: the Registration server goes, plugin connections are dropped."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(0)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for channel in self._channels:
            await channel.close()
        self._channels.clear()
        self.socket.unlink(missing_ok=True)

    async def rebind(self) -> None:
        """Create kubelet.sock anew while keeping the plugin connections and streams open.

        The plugin must end its old streams itself before registering again
        (the real kubelet would otherwise be left with two streams per resource).
        """
        server, self._server = self._server, None
        if server is not None:
            await server.stop(0)
        self.socket.unlink(missing_ok=True)
        await self.start()

    async def _register(self, request: api_pb2.RegisterRequest, context: grpc.aio.ServicerContext) -> api_pb2.Empty:
        self.register_calls += 1
        if self.hang:
            await asyncio.Event().wait()
        if request.version != constants.VERSION:
            await context.abort(
                grpc.StatusCode.UNKNOWN,
                f'requested API version "{request.version}" is not supported by kubelet. '
                'Supported version is ["v1beta1"]',
            )
        if self.reject is not None:
            await context.abort(grpc.StatusCode.UNKNOWN, self.reject)
        channel = grpc.aio.insecure_channel(constants.unix_target(self.socket_dir / request.endpoint))
        self._channels.append(channel)
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        try:
            options = await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=self.dial_timeout, wait_for_ready=True)
        except grpc.aio.AioRpcError as exc:
            await context.abort(grpc.StatusCode.UNKNOWN, f"failed to get device plugin options: {exc.details()}")
        entry = Registered(request=request, options=options, at=time.monotonic())
        self.log.append(("register", request.resource_name))
        self._tasks.append(asyncio.create_task(self._watch(stub, entry)))
        async with self._registered:
            self.registrations.append(entry)
            self._registered.notify_all()
        return api_pb2.Empty()

    async def _watch(self, stub: api_pb2_grpc.DevicePluginStub, entry: Registered) -> None:
        status = grpc.StatusCode.OK
        try:
            async for response in stub.ListAndWatch(api_pb2.Empty()):
                entry.snapshots.append(response)
                entry.changed.set()
                entry.changed = asyncio.Event()
        except grpc.aio.AioRpcError as exc:
            status = exc.code()
        finally:
            entry.stream_status = status
            self.log.append(("stream-ended", entry.resource))
            entry.ended.set()
            entry.changed.set()

    async def wait_registrations(self, count: int, within_s: float = 20.0) -> Registered:
        """Wait until ``count`` registrations were accepted; the latest one."""
        async with asyncio.timeout(within_s), self._registered:
            await self._registered.wait_for(lambda: len(self.registrations) >= count)
        return self.registrations[-1]

    async def wait_snapshot(
        self, entry: Registered, predicate: Callable[[dict[str, str]], bool], within_s: float = 20.0
    ) -> dict[str, str]:
        """Wait until the latest snapshot of ``entry`` satisfies ``predicate``; its ID → health map."""
        async with asyncio.timeout(within_s):
            while not (entry.snapshots and predicate(entry.health())):
                if entry.ended.is_set():
                    raise AssertionError(f"stream of {entry.resource} ended with {entry.stream_status}")
                await entry.changed.wait()
        return entry.health()

    def stub(self, entry: Registered) -> api_pb2_grpc.DevicePluginStub:
        """A client of the plugin behind ``entry``, on its own channel (closed by :meth:`stop`)."""
        channel = grpc.aio.insecure_channel(constants.unix_target(self.socket_dir / entry.request.endpoint))
        self._channels.append(channel)
        return api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
