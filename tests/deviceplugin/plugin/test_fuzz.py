"""A hypothesis fuzz of the plugin's RPCs over a real socket: a valid answer or INVALID_ARGUMENT, never a crash or hang.

The plugin runs in its own thread and event loop (as in the daemon); the fuzz
drives it with a blocking gRPC client and a deadline on every call, so a hang
fails as DEADLINE_EXCEEDED instead of stalling the suite.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubegpu.api import constants
from kubegpu.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubegpu.deviceplugin.plugin import server
from kubegpu.gpu import profiles
from tests.deviceplugin.fixtures.build import served

MACHINE = profiles.load("dgx1-v100")
GPUS, HANDLERS = served(MACHINE)
UUIDS = [g.uuid for g in MACHINE.gpus]
DEADLINE_S = 10.0


class _Running:
    """A PluginServer on a loop in a background thread."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.loop = asyncio.new_event_loop()
        self.plugin = server.PluginServer(GPUS, socket, HANDLERS)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> _Running:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.plugin.start(), self.loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.plugin.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture(scope="module")
def stub() -> Iterator[api_pb2_grpc.DevicePluginStub]:
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="kg-", dir="/tmp"))
    try:
        with _Running(directory / "nvidia-gpu.sock") as running:
            channel = grpc.insecure_channel(constants.unix_target(running.socket))
            yield api_pb2_grpc.DevicePluginStub(channel)  # type: ignore[no-untyped-call]
            channel.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


_id = st.one_of(st.sampled_from(UUIDS), st.sampled_from(UUIDS).map(lambda u: u + "::1"), st.text(max_size=70))
_ids = st.one_of(st.lists(_id, max_size=12), st.lists(st.sampled_from(UUIDS), max_size=200))
_size = st.one_of(st.integers(-3, 12), st.sampled_from([-(2**31), 2**31 - 1]))


def _invalid_or_raise(exc: grpc.RpcError) -> None:
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT, (exc.code(), exc.details())
    assert exc.details()


_fuzz = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_fuzz
@given(st.lists(_ids, max_size=5))
def test_allocate_fuzz_answers_one_response_per_container_or_invalid_argument(
    stub: api_pb2_grpc.DevicePluginStub, containers: list[list[str]]
) -> None:
    request = api_pb2.AllocateRequest(
        container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids) for ids in containers]
    )
    try:
        response = stub.Allocate(request, timeout=DEADLINE_S)
    except grpc.RpcError as exc:
        _invalid_or_raise(exc)
        assert any(not ids or set(ids) - set(UUIDS) for ids in containers)
        return
    assert len(response.container_responses) == len(containers)
    for ids, answer in zip(containers, response.container_responses, strict=True):
        assert answer.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(dict.fromkeys(ids))


@_fuzz
@given(st.lists(st.tuples(_ids, _ids, _size), max_size=4))
def test_preferred_allocation_fuzz_answers_a_valid_set_or_invalid_argument(
    stub: api_pb2_grpc.DevicePluginStub, containers: list[tuple[list[str], list[str], int]]
) -> None:
    request = api_pb2.PreferredAllocationRequest(
        container_requests=[
            api_pb2.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
            )
            for available, must, size in containers
        ]
    )
    try:
        response = stub.GetPreferredAllocation(request, timeout=DEADLINE_S)
    except grpc.RpcError as exc:
        _invalid_or_raise(exc)
        return
    assert len(response.container_responses) == len(containers)
    for (available, must, size), answer in zip(containers, response.container_responses, strict=True):
        chosen = list(answer.deviceIDs)
        assert len(chosen) == len(set(chosen)) == size
        assert set(must) <= set(chosen) <= set(available)


@_fuzz
@given(_ids)
def test_pre_start_and_options_always_answer(stub: api_pb2_grpc.DevicePluginStub, ids: list[str]) -> None:
    assert stub.PreStartContainer(api_pb2.PreStartContainerRequest(devices_ids=ids), timeout=DEADLINE_S) == (
        api_pb2.PreStartContainerResponse()
    )
    assert stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=DEADLINE_S).get_preferred_allocation_available


def test_the_server_still_streams_after_the_fuzz(stub: api_pb2_grpc.DevicePluginStub) -> None:
    call = stub.ListAndWatch(api_pb2.Empty(), timeout=DEADLINE_S)
    first = next(iter(call))
    assert [d.ID for d in first.devices] == UUIDS
    call.cancel()
