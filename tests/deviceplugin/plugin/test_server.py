"""The DevicePlugin server of one resource over a real unix socket: every RPC, stream lifecycle, socket life."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.deviceplugin.errors import PluginServeError
from kubegpu.deviceplugin.plugin import server
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import served
from tests.polling import eventually

MACHINE = profiles.load("dgx-a100")
GPUS, HANDLERS = served(MACHINE)
UUIDS = [g.uuid for g in MACHINE.gpus]


@pytest.fixture
async def plugin(sock_dir: Path) -> AsyncIterator[server.PluginServer]:
    running = server.PluginServer(GPUS, sock_dir / "nvidia-gpu.sock", HANDLERS)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def stub(plugin: server.PluginServer) -> AsyncIterator[api_pb2_grpc.DevicePluginStub]:
    async with grpc.aio.insecure_channel(constants.unix_target(plugin.socket_path)) as channel:
        yield api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]


def allocate_request(*containers: list[str]) -> api_pb2.AllocateRequest:
    return api_pb2.AllocateRequest(
        container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids) for ids in containers]
    )


async def test_options_say_preferred_allocation_and_no_prestart(stub: api_pb2_grpc.DevicePluginStub) -> None:
    options = await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
    assert options.get_preferred_allocation_available is True
    assert options.pre_start_required is False


async def test_list_and_watch_sends_every_gpu_at_once_healthy_with_numa(stub: api_pb2_grpc.DevicePluginStub) -> None:
    call = stub.ListAndWatch(api_pb2.Empty())
    first = await asyncio.wait_for(call.read(), 5)
    assert [d.ID for d in first.devices] == UUIDS
    assert {d.health for d in first.devices} == {"Healthy"}
    assert [[n.ID for n in d.topology.nodes] for d in first.devices] == [[g.numa_node] for g in MACHINE.gpus]
    call.cancel()


async def test_a_health_change_resends_the_full_list_with_exact_strings(
    plugin: server.PluginServer, stub: api_pb2_grpc.DevicePluginStub
) -> None:
    call = stub.ListAndWatch(api_pb2.Empty())
    await asyncio.wait_for(call.read(), 5)
    plugin.set_unhealthy({UUIDS[3], UUIDS[5]})
    second = await asyncio.wait_for(call.read(), 5)
    assert len(second.devices) == 8
    assert {d.ID: d.health for d in second.devices if d.health != "Healthy"} == {
        UUIDS[3]: "Unhealthy",
        UUIDS[5]: "Unhealthy",
    }
    plugin.set_unhealthy(set())
    third = await asyncio.wait_for(call.read(), 5)
    assert {d.health for d in third.devices} == {"Healthy"}
    call.cancel()


async def test_setting_the_same_health_again_sends_nothing(
    plugin: server.PluginServer, stub: api_pb2_grpc.DevicePluginStub
) -> None:
    call = stub.ListAndWatch(api_pb2.Empty())
    await asyncio.wait_for(call.read(), 5)
    plugin.set_unhealthy(set())
    plugin.set_unhealthy({"not-a-device-of-this-resource"})
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(call.read()), 0.3)
    call.cancel()


async def test_a_cancelled_stream_ends_on_the_server_too(
    plugin: server.PluginServer, stub: api_pb2_grpc.DevicePluginStub
) -> None:
    call = stub.ListAndWatch(api_pb2.Empty())
    await asyncio.wait_for(call.read(), 5)
    assert plugin.service.streams == 1
    call.cancel()
    await eventually(lambda: plugin.service.streams == 0, within=5, what="the server's stream ended")


async def test_stopping_ends_streams_cleanly_and_removes_the_socket(sock_dir: Path, no_leaked_tasks: None) -> None:
    running = server.PluginServer(GPUS, sock_dir / "nvidia-gpu.sock", HANDLERS)
    await running.start()
    async with grpc.aio.insecure_channel(constants.unix_target(running.socket_path)) as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
        call = stub.ListAndWatch(api_pb2.Empty())
        await asyncio.wait_for(call.read(), 5)
        await running.stop()
        assert await asyncio.wait_for(call.read(), 5) is grpc.aio.EOF
        assert await call.code() is grpc.StatusCode.OK
    assert not running.socket_path.exists()
    assert running.service.streams == 0


async def test_a_stale_socket_file_is_replaced(sock_dir: Path) -> None:
    stale = sock_dir / "nvidia-gpu.sock"
    stale.write_text("left over by a previous run")
    running = server.PluginServer(GPUS, stale, HANDLERS)
    await running.start()
    try:
        assert stale.is_socket()
    finally:
        await running.stop()


async def test_a_directory_in_the_way_is_a_clear_error(sock_dir: Path) -> None:
    (sock_dir / "nvidia-gpu.sock").mkdir()
    with pytest.raises(PluginServeError, match="is a directory"):
        await server.PluginServer(GPUS, sock_dir / "nvidia-gpu.sock", HANDLERS).start()


async def test_a_socket_path_too_long_for_unix_is_a_clear_error(sock_dir: Path) -> None:
    path = sock_dir / ("d" * 100) / "nvidia-gpu.sock"
    with pytest.raises(PluginServeError, match="107 bytes"):
        await server.PluginServer(GPUS, path, HANDLERS).start()


async def test_stop_leaves_a_socket_that_is_no_longer_ours(sock_dir: Path) -> None:
    running = server.PluginServer(GPUS, sock_dir / "nvidia-gpu.sock", HANDLERS)
    await running.start()
    running.socket_path.unlink()
    running.socket_path.write_text("someone else's")
    await running.stop()
    assert running.socket_path.read_text() == "someone else's"


async def test_allocate_answers_one_response_per_container_in_order(stub: api_pb2_grpc.DevicePluginStub) -> None:
    response = await stub.Allocate(allocate_request([UUIDS[2]], [UUIDS[0], UUIDS[1], UUIDS[0]], [UUIDS[7]]), timeout=5)
    assert [dict(r.envs) for r in response.container_responses] == [
        {"NVIDIA_VISIBLE_DEVICES": UUIDS[2]},
        {"NVIDIA_VISIBLE_DEVICES": f"{UUIDS[0]},{UUIDS[1]}"},
        {"NVIDIA_VISIBLE_DEVICES": UUIDS[7]},
    ]


async def test_allocate_of_unhealthy_devices_still_answers(
    plugin: server.PluginServer, stub: api_pb2_grpc.DevicePluginStub
) -> None:
    plugin.set_unhealthy({UUIDS[0]})
    response = await stub.Allocate(allocate_request([UUIDS[0]]), timeout=5)
    assert dict(response.container_responses[0].envs) == {"NVIDIA_VISIBLE_DEVICES": UUIDS[0]}


async def test_unknown_device_id_is_invalid_argument_naming_the_id(stub: api_pb2_grpc.DevicePluginStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Allocate(allocate_request([UUIDS[0]], ["GPU-bogus"]), timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (
        'invalid allocation request for "nvidia.com/gpu": invalid request: unknown device: GPU-bogus'
    )


async def test_preferred_allocation_answers_each_container(stub: api_pb2_grpc.DevicePluginStub) -> None:
    response = await stub.GetPreferredAllocation(
        api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=UUIDS, allocation_size=4),
                api_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=UUIDS, must_include_deviceIDs=[UUIDS[6]], allocation_size=2
                ),
            ]
        ),
        timeout=5,
    )
    assert [list(r.deviceIDs) for r in response.container_responses] == [UUIDS[:4], [UUIDS[6], UUIDS[7]]]


async def test_impossible_preferred_allocation_is_invalid_argument(stub: api_pb2_grpc.DevicePluginStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetPreferredAllocation(
            api_pb2.PreferredAllocationRequest(
                container_requests=[
                    api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=UUIDS[:2], allocation_size=3)
                ]
            ),
            timeout=5,
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (
        'invalid preferred allocation request for "nvidia.com/gpu": cannot pick 3 GPUs from 2 available'
    )


async def test_pre_start_container_answers_empty(stub: api_pb2_grpc.DevicePluginStub) -> None:
    response = await stub.PreStartContainer(api_pb2.PreStartContainerRequest(devices_ids=UUIDS[:2]), timeout=5)
    assert response == api_pb2.PreStartContainerResponse()


async def test_a_bug_in_a_handler_is_internal_and_the_server_keeps_serving(sock_dir: Path) -> None:
    def broken(*args: object) -> list[str]:
        raise KeyError("boom")

    running = server.PluginServer(
        GPUS, sock_dir / "nvidia-gpu.sock", server.Handlers(allocate=HANDLERS.allocate, preferred=broken)
    )
    await running.start()
    channel = grpc.aio.insecure_channel(constants.unix_target(running.socket_path))
    stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetPreferredAllocation(
            api_pb2.PreferredAllocationRequest(
                container_requests=[
                    api_pb2.ContainerPreferredAllocationRequest(available_deviceIDs=UUIDS, allocation_size=1)
                ]
            ),
            timeout=5,
        )
    assert caught.value.code() is grpc.StatusCode.INTERNAL
    assert "KeyError" in (caught.value.details() or "") or "boom" in (caught.value.details() or "")
    assert (await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5)).get_preferred_allocation_available
    response = await stub.Allocate(allocate_request([UUIDS[1]]), timeout=5)
    assert dict(response.container_responses[0].envs) == {"NVIDIA_VISIBLE_DEVICES": UUIDS[1]}
    await channel.close()
    await running.stop()


async def test_a_missing_socket_directory_is_named_without_grpc_core_noise(
    sock_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    missing = sock_dir / "gone"
    running = server.PluginServer(GPUS, missing / "nvidia-gpu.sock", HANDLERS)
    with pytest.raises(PluginServeError, match=f"directory {missing} does not exist"):
        await running.start()
    assert "add_port" not in capfd.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {"envs": {"NVIDIA_VISIBLE_DEVICES": ""}}),
        (
            ["--device-list-strategy", "volume-mounts"],
            {"envs": {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}},
        ),
        (["--device-list-strategy", "cdi-annotations"], {}),
        (["--gds-enabled"], {"envs": {"NVIDIA_GDS": "enabled", "NVIDIA_VISIBLE_DEVICES": ""}}),
    ],
    ids=["envvar", "volume-mounts", "cdi-only", "gds"],
)
async def test_an_empty_container_request_gets_one_response_as_nvidia_builds_it(
    sock_dir: Path, argv: list[str], expected: dict[str, object]
) -> None:
    """NVIDIA's Allocate: one ContainerAllocateResponse per container request, an empty one built for no IDs."""
    from google.protobuf import json_format

    resource, handlers = served(MACHINE, argv)
    running = server.PluginServer(resource, sock_dir / "nvidia-gpu.sock", handlers)
    await running.start()
    try:
        async with grpc.aio.insecure_channel(constants.unix_target(running.socket_path)) as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
            answer = await stub.Allocate(allocate_request([], [UUIDS[2]]), timeout=5)
    finally:
        await running.stop()
    assert len(answer.container_responses) == 2
    assert json_format.MessageToDict(answer.container_responses[0], preserving_proto_field_name=True) == expected
    assert answer.container_responses[1].envs.get("NVIDIA_VISIBLE_DEVICES", UUIDS[2]) in (
        UUIDS[2],
        "/var/run/nvidia-container-devices",
    )
