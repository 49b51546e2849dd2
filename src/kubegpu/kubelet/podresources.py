"""The pod-resources API v1 server (``v1.PodResourcesLister``) on its own unix socket.

Owns ``List``, ``GetAllocatableResources`` and ``Get`` as the kubelet answers
them for device-plugin resources: pods in admission order, per pod its
restartable init containers then its app containers, per container one
``ContainerDevices`` per (device, NUMA node) with that single node as
topology, or one without topology for a device the plugin gave none;
allocatable = the healthy devices. CPU and memory fields stay empty (no CPU or
memory manager here). Unknown pods in ``Get`` fail with the kubelet's text.
Must not change state.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import grpc

from kubegpu.api import constants
from kubegpu.api.podresources.v1 import api_pb2, api_pb2_grpc
from kubegpu.kubelet.devices import NO_TOPOLOGY
from kubegpu.kubelet.node import Node
from kubegpu.kubelet.pod import Pod

log = logging.getLogger(__name__)


def _container_devices(resource: str, device_id: str, numa: Iterable[int] | None) -> list[api_pb2.ContainerDevices]:
    if numa is None:
        return [api_pb2.ContainerDevices(resource_name=resource, device_ids=[device_id])]
    return [
        api_pb2.ContainerDevices(
            resource_name=resource,
            device_ids=[device_id],
            topology=api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n)]),
        )
        for n in numa
    ]


class PodResourcesServer(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, node: Node, socket_path: Path) -> None:
        self.node = node
        self.socket_path = socket_path
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        self.socket_path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        server = grpc.aio.server()
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(self, server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(constants.unix_target(self.socket_path))
        await server.start()
        self._server = server
        log.info("serving PodResourcesLister", extra={"socket": str(self.socket_path)})

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None
        self.socket_path.unlink(missing_ok=True)

    def container_resources(self, pod: Pod, container: str) -> api_pb2.ContainerResources:
        devices: list[api_pb2.ContainerDevices] = []
        for resource, alloc in self.node.manager.container_allocations(pod.uid, container).items():
            # The kubelet's getContainerDevices: a device filed under NUMA ids gets those as its
            # topology, one filed only under -1 gets none. Devices in allocation order, nodes ascending.
            for device_id in alloc.ids:
                nodes = sorted(n for n, ids in alloc.numa.items() if n != NO_TOPOLOGY and device_id in ids)
                devices.extend(_container_devices(resource, device_id, nodes or None))
        return api_pb2.ContainerResources(name=container, devices=devices)

    def pod_resources(self, pod: Pod) -> api_pb2.PodResources:
        containers = [c.name for c in pod.init_containers if c.restartable] + [c.name for c in pod.containers]
        return api_pb2.PodResources(
            name=pod.name, namespace=pod.namespace, containers=[self.container_resources(pod, c) for c in containers]
        )

    async def List(
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        return api_pb2.ListPodResourcesResponse(pod_resources=[self.pod_resources(p) for p in self.node.pods])

    async def GetAllocatableResources(
        self, request: api_pb2.AllocatableResourcesRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        devices: list[api_pb2.ContainerDevices] = []
        for resource, state in self.node.manager.resources.items():
            for device in state.all.values():
                if device.id in state.healthy:
                    devices.extend(_container_devices(resource, device.id, device.numa))
        return api_pb2.AllocatableResourcesResponse(devices=devices)

    async def Get(
        self, request: api_pb2.GetPodResourcesRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.GetPodResourcesResponse:
        pod = self.node.pods.find(request.pod_namespace, request.pod_name)
        if pod is None:
            await context.abort(
                grpc.StatusCode.UNKNOWN, f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
            )
            raise AssertionError("unreachable: abort raises")
        return api_pb2.GetPodResourcesResponse(pod_resources=self.pod_resources(pod))
