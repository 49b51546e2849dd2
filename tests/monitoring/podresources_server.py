"""Test helper: a real PodResourcesLister (kubelet pod-resources API v1) on a unix socket, over grpc.aio.

The kubelet emulator serves the real one; these tests only need ``List`` with pods the test sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from kubegpu.api import constants
from kubegpu.api.podresources.v1 import api_pb2, api_pb2_grpc


@dataclass
class Pod:
    namespace: str
    name: str
    # container -> [(resource name, device ids)]
    containers: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)


class Lister(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self) -> None:
        self.pods: list[Pod] = []
        self.calls = 0
        self.fail_with: grpc.StatusCode | None = None

    async def List(self, request: Any, context: Any) -> api_pb2.ListPodResourcesResponse:
        self.calls += 1
        if self.fail_with is not None:
            await context.abort(self.fail_with, "the test says no")
        response = api_pb2.ListPodResourcesResponse()
        for pod in self.pods:
            resources = response.pod_resources.add(name=pod.name, namespace=pod.namespace)
            for container_name, devices in pod.containers.items():
                container = resources.containers.add(name=container_name)
                for resource, ids in devices:
                    container.devices.add(resource_name=resource, device_ids=ids)
        return response


class ListerServer:
    """``async with ListerServer(path) as lister:`` serves ``lister`` on the unix socket ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lister = Lister()
        self._server: Any = None

    async def __aenter__(self) -> Lister:
        self._server = grpc.aio.server()
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(self.lister, self._server)  # type: ignore[no-untyped-call]
        self._server.add_insecure_port(constants.unix_target(self.path))
        await self._server.start()
        return self.lister

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop(grace=None)
