"""A device plugin the tests control: options, device lists, health flips, Allocate answers, errors, delays.

It speaks real ``v1beta1.DevicePlugin`` gRPC on a real unix socket and records
every call the kubelet emulator makes, so tests can assert on what the
emulator *sent*. Also runnable as a process for end-to-end tests::

    python -m tests.kubelet.stubplugin --socket-dir DIR --resource example.com/gpu --devices 4

which serves, registers, and registers again whenever ``kubelet.sock`` is
re-created (like a real plugin after a kubelet restart).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc


@dataclass
class StubDevice:
    id: str
    health: str = constants.HEALTHY
    numa: tuple[int, ...] | None = None

    def proto(self) -> api_pb2.Device:
        d = api_pb2.Device(ID=self.id, health=self.health)
        if self.numa is not None:
            d.topology.CopyFrom(api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in self.numa]))
        return d


def devices(n: int, prefix: str = "dev", numa: Sequence[int] | None = None) -> list[StubDevice]:
    """``n`` healthy devices ``dev-0`` ...; ``numa[i]`` is device i's NUMA node when given."""
    return [StubDevice(f"{prefix}-{i}", numa=None if numa is None else (numa[i],)) for i in range(n)]


def default_response(ids: Sequence[str]) -> api_pb2.ContainerAllocateResponse:
    return api_pb2.ContainerAllocateResponse(
        envs={"STUB_VISIBLE_DEVICES": ",".join(ids)},
        mounts=[api_pb2.Mount(container_path="/usr/lib/stub", host_path="/opt/stub/lib", read_only=True)],
        devices=[api_pb2.DeviceSpec(container_path=f"/dev/{d}", host_path=f"/dev/{d}", permissions="rw") for d in ids],
        annotations={"stub.example.com/devices": ",".join(ids)},
        cdi_devices=[api_pb2.CDIDevice(name=f"example.com/stub={d}") for d in ids],
    )


@dataclass
class Calls:
    options: int = 0
    list_and_watch: int = 0
    allocate: list[list[str]] = field(default_factory=list)
    preferred: list[tuple[list[str], list[str], int]] = field(default_factory=list)
    pre_start: list[list[str]] = field(default_factory=list)


class StubPlugin(api_pb2_grpc.DevicePluginServicer):
    def __init__(
        self,
        socket_dir: Path,
        resource: str = "example.com/gpu",
        devs: list[StubDevice] | None = None,
        *,
        endpoint: str = "stub.sock",
        pre_start_required: bool = False,
        preferred_available: bool = False,
    ) -> None:
        self.socket_dir = socket_dir
        self.resource = resource
        self.endpoint = endpoint
        self.devices = devs if devs is not None else devices(4)
        self.options = api_pb2.DevicePluginOptions(
            pre_start_required=pre_start_required, get_preferred_allocation_available=preferred_available
        )
        self.calls = Calls()
        #: Replace to change answers: ids -> AllocateResponse (raise grpc errors via ``fail_allocate``).
        self.respond: Callable[[list[str]], api_pb2.AllocateResponse] = lambda ids: api_pb2.AllocateResponse(
            container_responses=[default_response(ids)]
        )
        #: (available, must_include, size) -> preferred IDs.
        self.prefer: Callable[[list[str], list[str], int], list[str]] = lambda avail, must, size: (
            must + [d for d in avail if d not in must]
        )[:size]
        self.fail_allocate: tuple[grpc.StatusCode, str] | None = None
        self.fail_preferred: tuple[grpc.StatusCode, str] | None = None
        self.fail_pre_start: tuple[grpc.StatusCode, str] | None = None
        self.fail_options: tuple[grpc.StatusCode, str] | None = None
        self.delay_s = 0.0
        self._streams: list[asyncio.Queue[list[StubDevice] | None]] = []
        self._server: grpc.aio.Server | None = None

    @property
    def socket_path(self) -> Path:
        return self.socket_dir / self.endpoint

    async def start(self) -> StubPlugin:
        server = grpc.aio.server()
        api_pb2_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(constants.unix_target(self.socket_path))
        await server.start()
        self._server = server
        return self

    async def stop(self) -> None:
        """Stop serving: every open ListAndWatch stream ends."""
        self.end_streams()
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        self.socket_path.unlink(missing_ok=True)

    async def register(
        self, version: str = constants.VERSION, resource: str | None = None, endpoint: str | None = None
    ) -> None:
        async with grpc.aio.insecure_channel(
            constants.unix_target(self.socket_dir / constants.KUBELET_SOCKET_NAME)
        ) as ch:
            await api_pb2_grpc.RegistrationStub(ch).Register(
                api_pb2.RegisterRequest(
                    version=version,
                    endpoint=self.endpoint if endpoint is None else endpoint,
                    resource_name=self.resource if resource is None else resource,
                    # Deliberately the opposite of what GetDevicePluginOptions says: the kubelet must ignore it.
                    options=api_pb2.DevicePluginOptions(
                        pre_start_required=not self.options.pre_start_required,
                        get_preferred_allocation_available=not self.options.get_preferred_allocation_available,
                    ),
                ),
                timeout=30,
            )

    def set_devices(self, devs: list[StubDevice]) -> None:
        self.devices = devs
        self.push()

    def set_health(self, device_id: str, health: str) -> None:
        for d in self.devices:
            if d.id == device_id:
                d.health = health
        self.push()

    def push(self) -> None:
        """Send the full list to every open stream."""
        for q in self._streams:
            q.put_nowait(list(self.devices))

    def end_streams(self) -> None:
        for q in self._streams:
            q.put_nowait(None)

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    async def _maybe_fail(self, context: grpc.aio.ServicerContext, failure: tuple[grpc.StatusCode, str] | None) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if failure is not None:
            await context.abort(*failure)

    async def GetDevicePluginOptions(
        self, request: api_pb2.Empty, context: grpc.aio.ServicerContext
    ) -> api_pb2.DevicePluginOptions:
        self.calls.options += 1
        await self._maybe_fail(context, self.fail_options)
        return self.options

    async def ListAndWatch(
        self, request: api_pb2.Empty, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[api_pb2.ListAndWatchResponse]:
        self.calls.list_and_watch += 1
        q: asyncio.Queue[list[StubDevice] | None] = asyncio.Queue()
        q.put_nowait(list(self.devices))
        self._streams.append(q)
        try:
            while (snapshot := await q.get()) is not None:
                yield api_pb2.ListAndWatchResponse(devices=[d.proto() for d in snapshot])
        finally:
            self._streams.remove(q)

    async def GetPreferredAllocation(
        self, request: api_pb2.PreferredAllocationRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.PreferredAllocationResponse:
        responses = []
        for r in request.container_requests:
            avail, must = list(r.available_deviceIDs), list(r.must_include_deviceIDs)
            self.calls.preferred.append((avail, must, r.allocation_size))
            responses.append(
                api_pb2.ContainerPreferredAllocationResponse(deviceIDs=self.prefer(avail, must, r.allocation_size))
            )
        await self._maybe_fail(context, self.fail_preferred)
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    async def Allocate(
        self, request: api_pb2.AllocateRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.AllocateResponse:
        for r in request.container_requests:
            self.calls.allocate.append(list(r.devices_ids))
        await self._maybe_fail(context, self.fail_allocate)
        ids = [i for r in request.container_requests for i in r.devices_ids]
        return self.respond(ids)

    async def PreStartContainer(
        self, request: api_pb2.PreStartContainerRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.PreStartContainerResponse:
        self.calls.pre_start.append(list(request.devices_ids))
        await self._maybe_fail(context, self.fail_pre_start)
        return api_pb2.PreStartContainerResponse()


async def _serve_forever(args: argparse.Namespace) -> None:
    socket_dir: Path = args.socket_dir
    kubelet_sock = socket_dir / constants.KUBELET_SOCKET_NAME
    numa = [i * args.numa_nodes // args.devices for i in range(args.devices)] if args.numa_nodes else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    plugin: StubPlugin | None = None
    seen: tuple[int, float] | None = None
    generation = 0
    while not stop.is_set():
        try:
            st = kubelet_sock.stat()
            current: tuple[int, float] | None = (st.st_ino, st.st_mtime)
        except FileNotFoundError:
            current = None
        if current is not None and current != seen:
            # kubelet.sock (re)created: stop the old server first, then serve on a fresh socket and register.
            if plugin is not None:
                await plugin.stop()
            generation += 1
            plugin = StubPlugin(
                socket_dir,
                args.resource,
                devices(args.devices, prefix=args.prefix, numa=numa),
                endpoint=f"stub-{generation}.sock",
                preferred_available=args.preferred,
            )
            await plugin.start()
            try:
                await plugin.register()
                seen = current
                print(f"registered {args.resource} generation {generation}", flush=True)
            except grpc.aio.AioRpcError as exc:
                print(f"register failed: {exc.details()}", flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)
    if plugin is not None:
        await plugin.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--socket-dir", type=Path, required=True)
    parser.add_argument("--resource", default="example.com/gpu")
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--prefix", default="dev")
    parser.add_argument("--numa-nodes", type=int, default=0)
    parser.add_argument("--preferred", action="store_true")
    asyncio.run(_serve_forever(parser.parse_args()))


if __name__ == "__main__":
    main()
