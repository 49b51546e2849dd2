"""The pod-resources API v1 over its real unix socket: List, GetAllocatableResources, Get."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from kubegpu.api import constants
from kubegpu.api.podresources.v1 import api_pb2, api_pb2_grpc
from kubegpu.kubelet import pod
from kubegpu.kubelet.daemon import Daemon
from tests.kubelet.conftest import StubFactory, capacity
from tests.kubelet.stubplugin import StubDevice
from tests.polling import eventually

R = "example.com/gpu"


@pytest.fixture
async def lister(emulator: Daemon) -> AsyncIterator[api_pb2_grpc.PodResourcesListerStub]:
    assert emulator.pod_resources is not None
    async with grpc.aio.insecure_channel(constants.unix_target(emulator.pod_resources.socket_path)) as channel:
        yield api_pb2_grpc.PodResourcesListerStub(channel)


def devices_of(container: api_pb2.ContainerResources) -> list[tuple[str, list[str], list[int] | None]]:
    return [
        (d.resource_name, list(d.device_ids), [n.ID for n in d.topology.nodes] if d.HasField("topology") else None)
        for d in container.devices
    ]


async def node_with_a_pod(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await start_stub(
        devs=[StubDevice("g0", numa=(0,)), StubDevice("g1", numa=(1,)), StubDevice("g2"), StubDevice("g3", numa=(0, 1))]
    )
    await eventually(lambda: capacity(emulator) == (4, 4))
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "initContainers": [
                {"name": "setup", "resources": {"limits": {R: 1}}},
                {"name": "side", "restartPolicy": "Always", "resources": {"limits": {R: 1}}},
            ],
            "containers": [{"name": "main", "resources": {"limits": {R: 3}}}, {"name": "cpu-only"}],
        },
    }
    await emulator.node.admit(pod.parse(manifest))
    stub.set_health("g1", "Unhealthy")
    await eventually(lambda: capacity(emulator) == (4, 3))


async def test_list_reports_sidecars_and_app_containers_with_one_entry_per_device_and_numa_node(
    emulator: Daemon, start_stub: StubFactory, lister: api_pb2_grpc.PodResourcesListerStub
) -> None:
    await node_with_a_pod(emulator, start_stub)
    resp = await lister.List(api_pb2.ListPodResourcesRequest())
    (p,) = resp.pod_resources
    assert (p.name, p.namespace) == ("train", "ml")
    assert [c.name for c in p.containers] == ["side", "main", "cpu-only"]
    side, main, cpu_only = p.containers
    assert devices_of(side) == [(R, ["g0"], [0])]
    # The sidecar keeps g0; main gets the other three, g3 once per NUMA node, g2 without topology.
    assert devices_of(main) == [(R, ["g2"], None), (R, ["g3"], [0]), (R, ["g3"], [1]), (R, ["g1"], [1])]
    assert devices_of(cpu_only) == []


async def test_a_device_without_topology_is_listed_without_topology(
    emulator: Daemon, start_stub: StubFactory, lister: api_pb2_grpc.PodResourcesListerStub
) -> None:
    await start_stub(devs=[StubDevice("x")])
    await eventually(lambda: capacity(emulator) == (1, 1))
    await emulator.node.admit(
        pod.parse(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {R: 1}}}]},
            }
        )
    )
    resp = await lister.List(api_pb2.ListPodResourcesRequest())
    assert devices_of(resp.pod_resources[0].containers[0]) == [(R, ["x"], None)]


async def test_allocatable_resources_are_the_healthy_devices_with_their_topology(
    emulator: Daemon, start_stub: StubFactory, lister: api_pb2_grpc.PodResourcesListerStub
) -> None:
    await node_with_a_pod(emulator, start_stub)
    resp = await lister.GetAllocatableResources(api_pb2.AllocatableResourcesRequest())
    got = [
        (d.resource_name, list(d.device_ids), [n.ID for n in d.topology.nodes] if d.HasField("topology") else None)
        for d in resp.devices
    ]
    assert got == [(R, ["g0"], [0]), (R, ["g2"], None), (R, ["g3"], [0]), (R, ["g3"], [1])]
    assert list(resp.cpu_ids) == [] and list(resp.memory) == []


async def test_get_returns_one_pod_and_an_unknown_pod_is_the_kubelets_error(
    emulator: Daemon, start_stub: StubFactory, lister: api_pb2_grpc.PodResourcesListerStub
) -> None:
    await node_with_a_pod(emulator, start_stub)
    resp = await lister.Get(api_pb2.GetPodResourcesRequest(pod_name="train", pod_namespace="ml"))
    assert [c.name for c in resp.pod_resources.containers] == ["side", "main", "cpu-only"]
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await lister.Get(api_pb2.GetPodResourcesRequest(pod_name="train", pod_namespace="default"))
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert exc.value.details() == "pod train in namespace default not found"


async def test_a_deleted_pod_disappears_from_list(
    emulator: Daemon, start_stub: StubFactory, lister: api_pb2_grpc.PodResourcesListerStub
) -> None:
    await node_with_a_pod(emulator, start_stub)
    await emulator.node.delete("ml", "train")
    assert list((await lister.List(api_pb2.ListPodResourcesRequest())).pod_resources) == []
