"""The ``kubegpu.io/gpu-milli`` resource over a real unix socket: 8000 units listed, health resent, a share refused
when spread over two GPUs (the kubelet's UnexpectedAdmissionError), answered from one GPU otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.deviceplugin.plugin import server
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import served

MACHINE = profiles.load("dgx-a100")
UNITS, HANDLERS = served(MACHINE, ["--gpu-milli", "all"], name="kubegpu.io/gpu-milli")
UUIDS = [g.uuid for g in MACHINE.gpus]


@pytest.fixture
async def stub(sock_dir: Path) -> AsyncIterator[tuple[server.PluginServer, api_pb2_grpc.DevicePluginStub]]:
    running = server.PluginServer(UNITS, sock_dir / UNITS.socket_name, HANDLERS)
    await running.start()
    try:
        async with grpc.aio.insecure_channel(constants.unix_target(running.socket_path)) as channel:
            yield running, api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
    finally:
        await running.stop()


async def test_every_unit_is_listed_with_its_gpus_numa_node_and_health_changes_resend_the_list(
    stub: tuple[server.PluginServer, api_pb2_grpc.DevicePluginStub],
) -> None:
    plugin, client = stub
    call = client.ListAndWatch(api_pb2.Empty())
    first = await asyncio.wait_for(call.read(), 5)
    assert len(first.devices) == 8000 and {d.health for d in first.devices} == {"Healthy"}
    numa = {d.ID.partition("::")[0]: [n.ID for n in d.topology.nodes] for d in first.devices}
    assert numa == {g.uuid: [g.numa_node] for g in MACHINE.gpus}
    sick = {d.id for d in UNITS.devices if d.gpu_index == 3}
    plugin.set_unhealthy(sick)
    second = await asyncio.wait_for(call.read(), 5)
    assert {d.ID for d in second.devices if d.health == "Unhealthy"} == sick
    plugin.set_unhealthy(())
    third = await asyncio.wait_for(call.read(), 5)
    assert {d.health for d in third.devices} == {"Healthy"}
    assert {d.health for d in first.devices} == {"Healthy"}  # messages already sent are not changed afterwards
    call.cancel()


async def test_a_share_is_answered_from_one_gpu_and_refused_when_spread(
    stub: tuple[server.PluginServer, api_pb2_grpc.DevicePluginStub],
) -> None:
    _, client = stub
    available = [d.id for d in UNITS.devices if d.milli is not None and (d.gpu_index != 2 or d.milli >= 700)]
    request = api_pb2.PreferredAllocationRequest(
        container_requests=[
            api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=available, allocation_size=300)
        ]
    )
    answer = list((await client.GetPreferredAllocation(request, timeout=5)).container_responses[0].deviceIDs)
    assert {i.partition("::")[0] for i in answer} == {UUIDS[2]} and len(answer) == 300  # best fit: 300 left there
    granted = await client.Allocate(
        api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=answer)]), timeout=5
    )
    envs = granted.container_responses[0].envs
    assert envs["NVIDIA_VISIBLE_DEVICES"] == UUIDS[2] and envs["KUBEGPU_GPU_MILLI"] == "300"
    spread = [f"{UUIDS[0]}::m{k}" for k in range(100)] + [f"{UUIDS[1]}::m{k}" for k in range(100)]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.Allocate(
            api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=spread)]),
            timeout=5,
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "units spread over 2 GPUs" in (refused.value.details() or "")
