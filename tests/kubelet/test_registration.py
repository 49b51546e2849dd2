"""Register over a real kubelet.sock: validation texts, dialing, options, and re-registration in both modes."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from kubegpu.kubelet.daemon import Daemon
from kubegpu.kubelet.registration import endpoint_path
from tests.kubelet.conftest import EmulatorFactory, StubFactory, capacity
from tests.kubelet.stubplugin import devices
from tests.kubelet.test_resourcename import VERIFIED_REJECTIONS
from tests.polling import eventually


async def test_an_unsupported_version_is_refused_with_the_kubelets_text(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await start_stub(register=False)
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await stub.register(version="v1alpha1")
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert (
        exc.value.details()
        == 'requested API version "v1alpha1" is not supported by kubelet. Supported version is ["v1beta1"]'
    )
    assert stub.calls.options == 0


@pytest.mark.parametrize("name", [n for _, n in VERIFIED_REJECTIONS], ids=[i for i, _ in VERIFIED_REJECTIONS])
async def test_invalid_resource_names_are_refused_with_code_unknown(
    emulator: Daemon, start_stub: StubFactory, name: str
) -> None:
    stub = await start_stub(register=False)
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await stub.register(resource=name)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert exc.value.details() == f'the ResourceName "{name}" is invalid'
    assert emulator.node.manager.endpoints == {}


async def test_an_endpoint_nobody_serves_fails_after_the_dial_timeout(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    await start_emulator(dial_timeout=0.5)
    stub = await start_stub(register=False)
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await stub.register(endpoint="nobody.sock")
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert exc.value.details() == "failed to dial device plugin: context deadline exceeded"


async def test_options_are_asked_during_register_and_the_requests_copy_is_ignored(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await start_stub(pre_start_required=True, preferred_available=False, register=False)
    await stub.register()  # the request claims the opposite options
    # Register has returned, so GetDevicePluginOptions ran inside it.
    assert stub.calls.options == 1
    options = emulator.node.manager.endpoints["example.com/gpu"].options
    assert options is not None
    assert (options.pre_start_required, options.get_preferred_allocation_available) == (True, False)


async def test_a_failing_get_device_plugin_options_fails_register(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await start_stub(register=False)
    stub.fail_options = (grpc.StatusCode.INTERNAL, "boom")
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await stub.register()
    assert exc.value.details() == "failed to get device plugin options: rpc error: code = Internal desc = boom"
    assert "example.com/gpu" not in emulator.node.manager.endpoints


async def test_an_absolute_endpoint_is_joined_under_the_socket_dir(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await start_stub(register=False)
    await stub.register(endpoint="/" + stub.endpoint)
    assert await eventually(lambda: capacity(emulator) == (4, 4))


@pytest.mark.parametrize(
    ("endpoint", "path"),
    [
        ("p.sock", "/d/p.sock"),
        ("/p.sock", "/d/p.sock"),
        ("/abs/p.sock", "/d/abs/p.sock"),
        ("../p.sock", "/p.sock"),
        ("", "/d"),
    ],
    ids=["relative", "leading-slash", "absolute", "dot-dot-escapes-like-go", "empty"],
)
def test_endpoint_paths_follow_go_filepath_join(endpoint: str, path: str) -> None:
    assert endpoint_path(Path("/d"), endpoint) == Path(path)


async def test_the_first_snapshot_sets_devices_and_registration_alone_does_not(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await start_stub(devs=devices(3))
    assert await eventually(lambda: capacity(emulator) == (3, 3))
    assert stub.calls.list_and_watch == 1


async def reregister(emulator: Daemon, start_stub: StubFactory) -> tuple[object, object]:
    a = await start_stub(devs=devices(4, prefix="a"), endpoint="a.sock")
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    b = await start_stub(devs=devices(2, prefix="b"), endpoint="b.sock")
    assert await eventually(lambda: capacity(emulator) == (2, 2))
    return a, b


async def test_fixed_mode_an_old_plugin_exiting_leaves_the_new_registration_alone(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator = await start_emulator()
    a, b = await reregister(emulator, start_stub)
    await a.stop()  # type: ignore[attr-defined]
    await eventually(lambda: len(emulator.registration.clients["example.com/gpu"]) == 1)
    assert capacity(emulator) == (2, 2)
    assert not emulator.node.manager.endpoints["example.com/gpu"].stopped
    assert b.open_streams == 1  # type: ignore[attr-defined]


async def test_race_mode_reproduces_kubernetes_121994(start_emulator: EmulatorFactory, start_stub: StubFactory) -> None:
    # kubelet-device-manager.md §4 [verified]: A registers 4, B registers 2, A exits -> B's devices unhealthy, stopped.
    emulator = await start_emulator(reregistration_race=True)
    a, b = await reregister(emulator, start_stub)
    await a.stop()  # type: ignore[attr-defined]
    assert await eventually(lambda: capacity(emulator) == (2, 0))
    state = emulator.node.manager.resources["example.com/gpu"]
    assert state.healthy == set() and state.unhealthy == {"b-0", "b-1"}
    assert emulator.node.manager.endpoints["example.com/gpu"].stopped
    # B is alive, but the kubelet closed its connection: B's stream is gone.
    assert await eventually(lambda: b.open_streams == 0)  # type: ignore[attr-defined]


@pytest.mark.parametrize("race", [False, True], ids=["fixed", "race"])
async def test_an_old_client_still_connected_keeps_applying_its_snapshots(
    start_emulator: EmulatorFactory, start_stub: StubFactory, race: bool
) -> None:
    emulator = await start_emulator(reregistration_race=race)
    a, _ = await reregister(emulator, start_stub)
    a.set_devices(devices(3, prefix="a"))  # type: ignore[attr-defined]
    assert await eventually(lambda: capacity(emulator) == (3, 3))


@pytest.mark.parametrize(("race", "after"), [(False, (4, 0)), (True, (4, 4))], ids=["fixed", "race"])
async def test_race_mode_a_failed_registration_forgets_the_working_client(
    start_emulator: EmulatorFactory, start_stub: StubFactory, race: bool, after: tuple[int, int]
) -> None:
    emulator = await start_emulator(reregistration_race=race, dial_timeout=0.3)
    a = await start_stub(endpoint="a.sock")
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    with pytest.raises(grpc.aio.AioRpcError):
        await a.register(endpoint="nobody.sock")
    await a.stop()
    await eventually(lambda: a.open_streams == 0)
    # kubelet 1.32 lost track of A, so A's exit never stops the endpoint: its devices stay allocatable.
    assert await eventually(lambda: capacity(emulator) == after)
