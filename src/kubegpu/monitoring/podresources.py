"""The kubelet pod-resources client: ``v1.PodResourcesLister/List`` over a unix socket.

Owns the gRPC channel to the kubelet's pod-resources socket and flattening
its answer into :class:`~kubegpu.monitoring.attribution.ContainerDevices`
rows. Keeps one channel for the life of the exporter (gRPC reconnects it when
the kubelet restarts). Must not decide which resources matter or how labels
look: that is :mod:`kubegpu.monitoring.attribution`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.podresources.v1 import api_pb2, api_pb2_grpc
from kubegpu.monitoring.attribution import ContainerDevices
from kubegpu.monitoring.errors import MonitoringError

log = logging.getLogger(__name__)

#: dcgm-exporter's timeout for the List call.
LIST_TIMEOUT_S = 10.0


class PodResourcesUnavailable(MonitoringError):
    """The List call failed; the message names the socket and the gRPC status."""


def flatten(response: api_pb2.ListPodResourcesResponse) -> list[ContainerDevices]:
    """One row per (pod, container, resource) of a List answer."""
    rows: list[ContainerDevices] = []
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                rows.append(
                    ContainerDevices(
                        namespace=pod.namespace,
                        pod=pod.name,
                        container=container.name,
                        resource_name=devices.resource_name,
                        device_ids=tuple(devices.device_ids),
                    )
                )
    return rows


class PodResourcesClient:
    """Lists the devices held by pods, via the kubelet's pod-resources socket.

    Parameters:
        socket: path of the kubelet's pod-resources socket.
        timeout_s: deadline of one List call.
    """

    def __init__(self, socket: Path | str = constants.POD_RESOURCES_SOCKET, timeout_s: float = LIST_TIMEOUT_S) -> None:
        self.socket = Path(socket)
        self._timeout = timeout_s
        self._channel: grpc.aio.Channel | None = None
        self._stub: api_pb2_grpc.PodResourcesListerStub | None = None

    async def list(self) -> list[ContainerDevices]:
        """The devices every pod container holds now. Raises :class:`PodResourcesUnavailable`."""
        if not self.socket.exists():  # the kubelet restarting: say so plainly, without gRPC's connect error
            raise PodResourcesUnavailable(f"pod-resources socket {self.socket}: no such socket (is the kubelet up?)")
        if self._stub is None:
            self._channel = grpc.aio.insecure_channel(constants.unix_target(self.socket))
            self._stub = api_pb2_grpc.PodResourcesListerStub(self._channel)  # type: ignore[no-untyped-call]
        try:
            response = await self._stub.List(api_pb2.ListPodResourcesRequest(), timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            raise PodResourcesUnavailable(
                f"pod-resources List on {self.socket} failed: {exc.code().name}: {exc.details()}"
            ) from exc
        return flatten(response)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None
