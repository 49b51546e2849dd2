"""The kubelet's side of one device plugin: the gRPC client and the endpoint the manager calls.

Owns dialing a plugin socket (blocking, with the kubelet's 10 s deadline and
``:authority`` ``localhost``), reading its ListAndWatch stream until it ends,
and the RPCs the device manager makes (``GetDevicePluginOptions``,
``GetPreferredAllocation``, ``Allocate``, ``PreStartContainer``) with the
kubelet's timeouts (none, except 30 s for PreStartContainer) and error texts.
An endpoint whose plugin disconnected is *stopped*: its RPCs fail with
``endpoint ... has been stopped``; an endpoint restored from the checkpoint is
stopped from the start and has no client and no options. Must not keep device
state: messages go to a callback.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.kubelet import errors
from kubegpu.kubelet.devices import Device

log = logging.getLogger(__name__)

_client_ids = iter(range(1, 1 << 62))


def go_error(exc: BaseException) -> str:
    """An RPC failure as Go's gRPC prints it: ``rpc error: code = InvalidArgument desc = ...``."""
    if isinstance(exc, grpc.aio.AioRpcError):
        code = exc.code()
        name = "OK" if code == grpc.StatusCode.OK else "".join(p.capitalize() for p in code.name.split("_"))
        details = exc.details() or ""
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            details = "context deadline exceeded"
        return f"rpc error: code = {name} desc = {details}"
    return str(exc) or type(exc).__name__


def device_from_proto(d: api_pb2.Device) -> Device:
    numa = tuple(n.ID for n in d.topology.nodes) if d.HasField("topology") else None
    return Device(id=d.ID, health=d.health, numa=numa)


class PluginClient:
    """A gRPC connection to one plugin socket and its ListAndWatch stream."""

    def __init__(self, resource: str, socket_path: Path, dial_timeout: float = constants.DIAL_TIMEOUT_S) -> None:
        self.resource = resource
        self.socket_path = socket_path
        self.dial_timeout = dial_timeout
        #: Tells clients of the same resource apart in logs and events.
        self.id = next(_client_ids)
        self._channel: grpc.aio.Channel | None = None
        self._stub: api_pb2_grpc.DevicePluginStub | None = None
        self._stream: grpc.aio.UnaryStreamCall | None = None
        self.closed = False

    def __repr__(self) -> str:
        return f"PluginClient(#{self.id} {self.resource} at {self.socket_path})"

    @property
    def stub(self) -> api_pb2_grpc.DevicePluginStub:
        if self._stub is None:
            raise errors.KubeletError(f"{self!r} is not connected")
        return self._stub

    async def connect(self) -> None:
        """Dial and wait until the channel is ready, like the kubelet's blocking dial."""
        channel = grpc.aio.insecure_channel(
            constants.unix_target(self.socket_path), options=[("grpc.default_authority", "localhost")]
        )
        try:
            await asyncio.wait_for(channel.channel_ready(), self.dial_timeout)
        except TimeoutError:
            await channel.close()
            raise errors.RegistrationRejected("failed to dial device plugin: context deadline exceeded") from None
        self._channel = channel
        self._stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]

    async def get_options(self) -> api_pb2.DevicePluginOptions:
        """GetDevicePluginOptions with no deadline, as the kubelet calls it during Register."""
        try:
            options: api_pb2.DevicePluginOptions = await self.stub.GetDevicePluginOptions(api_pb2.Empty())
        except grpc.aio.AioRpcError as exc:
            raise errors.RegistrationRejected(f"failed to get device plugin options: {go_error(exc)}") from None
        return options

    async def run(self, on_message: Callable[[PluginClient, list[Device]], None]) -> None:
        """Read ListAndWatch until it ends (EOF, error, or the connection closed); never re-dials."""
        stream = self.stub.ListAndWatch(api_pb2.Empty())
        self._stream = stream
        try:
            async for response in stream:
                try:
                    on_message(self, [device_from_proto(d) for d in response.devices])
                except Exception:
                    # A bug in handling one message must not look like the plugin going away.
                    log.exception("cannot apply ListAndWatch message", extra={"resource": self.resource})
            log.info("ListAndWatch ended", extra={"resource": self.resource, "client": self.id, "reason": "EOF"})
        except grpc.aio.AioRpcError as exc:
            log.info(
                "ListAndWatch ended unexpectedly for device plugin",
                extra={"resource": self.resource, "client": self.id, "error": go_error(exc)},
            )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # Closing our own channel cancels the stream; that is an end like any other.
            log.info("ListAndWatch ended", extra={"resource": self.resource, "client": self.id, "reason": "closed"})

    async def close(self) -> None:
        """Close the connection (ends the stream, if still open)."""
        self.closed = True
        if self._stream is not None:
            self._stream.cancel()
        if self._channel is not None:
            await self._channel.close()


class Endpoint:
    """The device manager's handle on a resource's plugin: client, cached options, stop time."""

    def __init__(
        self,
        resource: str,
        client: PluginClient | None,
        options: api_pb2.DevicePluginOptions | None,
        stopped_at: float | None = None,
    ) -> None:
        self.resource = resource
        self.client = client
        self.options = options
        #: time.monotonic() when the plugin disconnected (or the kubelet restarted); None while live.
        self.stopped_at = stopped_at
        #: Wall-clock time (time.time()) of the registration this endpoint came from; None for a restored one.
        self.registered_at: float | None = None if client is None else time.time()

    @classmethod
    def restored(cls, resource: str, now: float) -> Endpoint:
        """A stopped endpoint with no options, as the kubelet creates for checkpointed resources."""
        return cls(resource, None, None, stopped_at=now)

    @property
    def stopped(self) -> bool:
        return self.stopped_at is not None

    def stop(self, now: float) -> None:
        self.stopped_at = now

    def grace_expired(self, now: float, grace_period: float) -> bool:
        return self.stopped_at is not None and now - self.stopped_at > grace_period

    @property
    def pre_start_required(self) -> bool:
        return bool(self.options and self.options.pre_start_required)

    @property
    def preferred_allocation_available(self) -> bool:
        return bool(self.options and self.options.get_preferred_allocation_available)

    def _live_stub(self) -> api_pb2_grpc.DevicePluginStub:
        if self.stopped or self.client is None:
            raise errors.AllocationError(f"endpoint {self.resource} has been stopped")
        return self.client.stub

    async def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        """One ContainerPreferredAllocationRequest; only the first response is read. No deadline."""
        stub = self._live_stub()
        request = api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=list(available), must_include_deviceIDs=list(must_include), allocation_size=size
                )
            ]
        )
        try:
            resp: api_pb2.PreferredAllocationResponse = await stub.GetPreferredAllocation(request)
        except grpc.aio.AioRpcError as exc:
            raise errors.AllocationError(
                f"device plugin GetPreferredAllocation rpc failed with err: {go_error(exc)}"
            ) from None
        return list(resp.container_responses[0].deviceIDs) if resp.container_responses else []

    async def allocate(self, ids: Sequence[str]) -> api_pb2.AllocateResponse:
        """One Allocate call carrying one ContainerAllocateRequest with all the container's IDs. No deadline."""
        stub = self._live_stub()
        request = api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=list(ids))])
        try:
            resp: api_pb2.AllocateResponse = await stub.Allocate(request)
        except grpc.aio.AioRpcError as exc:
            raise errors.AllocationError(go_error(exc)) from None
        return resp

    async def pre_start_container(
        self, ids: Sequence[str], deadline_s: float = constants.PRE_START_CONTAINER_TIMEOUT_S
    ) -> None:
        try:
            stub = self._live_stub()
        except errors.AllocationError as exc:
            raise errors.ContainerStartError(f"device plugin PreStartContainer rpc failed with err: {exc}") from None
        try:
            await stub.PreStartContainer(api_pb2.PreStartContainerRequest(devices_ids=list(ids)), timeout=deadline_s)
        except grpc.aio.AioRpcError as exc:
            raise errors.ContainerStartError(
                f"device plugin PreStartContainer rpc failed with err: {go_error(exc)}"
            ) from None
