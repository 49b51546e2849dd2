"""The pod-resources client lists devices over a real unix socket from a real PodResourcesLister."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from kubegpu.monitoring.attribution import ContainerDevices
from kubegpu.monitoring.podresources import PodResourcesClient, PodResourcesUnavailable
from tests.monitoring.podresources_server import ListerServer, Pod
from tests.polling import eventually


async def test_list_flattens_pods_containers_and_resources(sock_dir: Path) -> None:
    async with ListerServer(sock_dir / "kubelet.sock") as lister:
        lister.pods = [
            Pod("default", "train", {"main": [("nvidia.com/gpu", ["GPU-a", "GPU-b"]), ("example.com/nic", ["n0"])]}),
            Pod("ml", "infer", {"srv": [("nvidia.com/mig-1g.10gb", ["MIG-x"])], "idle": []}),
        ]
        client = PodResourcesClient(sock_dir / "kubelet.sock")
        try:
            rows = await client.list()
        finally:
            await client.close()
    assert rows == [
        ContainerDevices("default", "train", "main", "nvidia.com/gpu", ("GPU-a", "GPU-b")),
        ContainerDevices("default", "train", "main", "example.com/nic", ("n0",)),
        ContainerDevices("ml", "infer", "srv", "nvidia.com/mig-1g.10gb", ("MIG-x",)),
    ]


async def test_a_missing_socket_is_unavailable_naming_the_socket(sock_dir: Path) -> None:
    client = PodResourcesClient(sock_dir / "absent.sock", timeout_s=5)
    try:
        # Named plainly, before any gRPC dial (whose connect error would say the same in core's words).
        with pytest.raises(PodResourcesUnavailable, match=r"absent\.sock: no such socket \(is the kubelet up\?\)"):
            await client.list()
    finally:
        await client.close()


async def test_a_kubelet_error_is_unavailable_with_its_status(sock_dir: Path) -> None:
    async with ListerServer(sock_dir / "kubelet.sock") as lister:
        lister.fail_with = grpc.StatusCode.PERMISSION_DENIED
        client = PodResourcesClient(sock_dir / "kubelet.sock")
        try:
            with pytest.raises(PodResourcesUnavailable, match="PERMISSION_DENIED: the test says no"):
                await client.list()
        finally:
            await client.close()


async def test_the_client_reconnects_after_the_kubelet_restarts(sock_dir: Path) -> None:
    path = sock_dir / "kubelet.sock"
    client = PodResourcesClient(path, timeout_s=5)
    try:
        async with ListerServer(path) as lister:
            lister.pods = [Pod("a", "p1", {"c": [("nvidia.com/gpu", ["GPU-1"])]})]
            assert [r.pod for r in await client.list()] == ["p1"]
        with pytest.raises(PodResourcesUnavailable):
            await client.list()
        async with ListerServer(path) as lister:
            lister.pods = [Pod("a", "p2", {"c": [("nvidia.com/gpu", ["GPU-1"])]})]

            async def listed() -> list[ContainerDevices] | None:
                try:
                    return await client.list()
                except PodResourcesUnavailable:
                    return None  # the channel backs off between connection attempts

            rows = await eventually(listed, within=10, what="a List answer from the new server", interval=0.2)
            assert [r.pod for r in rows] == ["p2"]
    finally:
        await client.close()
