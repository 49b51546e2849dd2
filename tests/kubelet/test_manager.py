"""Device state over real ListAndWatch streams: snapshots, health, stream end, grace period, checkpoint writes."""

from __future__ import annotations

import json
import time

from kubegpu.api import constants
from kubegpu.kubelet.daemon import Daemon
from tests.kubelet.conftest import EmulatorFactory, StubFactory, capacity
from tests.kubelet.stubplugin import StubDevice, devices
from tests.polling import eventually


def registered_in_checkpoint(daemon: Daemon) -> dict[str, list[str]] | None:
    """The checkpoint's RegisteredDevices; None while it has not been written yet."""
    path = daemon.node.manager.checkpoint_file
    if not path.exists():
        return None
    return dict(json.loads(path.read_bytes())["Data"]["RegisteredDevices"])


async def test_every_message_replaces_the_whole_device_list(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await start_stub(devs=devices(4))
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    stub.set_devices([StubDevice("dev-1"), StubDevice("new")])
    assert await eventually(lambda: capacity(emulator) == (2, 2))
    assert list(emulator.node.manager.resources["example.com/gpu"].all) == ["dev-1", "new"]


async def test_a_device_that_is_not_exactly_healthy_is_not_allocatable(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await start_stub(devs=devices(4))
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    stub.set_health("dev-3", "Unhealthy")
    assert await eventually(lambda: capacity(emulator) == (4, 3))
    stub.set_health("dev-2", "healthy")
    assert await eventually(lambda: capacity(emulator) == (4, 2))
    listed = emulator.node.status()["resources"]["example.com/gpu"]["devices"]  # type: ignore[index]
    assert [d["health"] for d in listed] == ["Healthy", "Healthy", "Unhealthy", "Unhealthy"]


async def test_an_empty_list_keeps_the_resource_known_at_zero(emulator: Daemon, start_stub: StubFactory) -> None:
    stub = await start_stub(devs=devices(2))
    assert await eventually(lambda: capacity(emulator) == (2, 2))
    stub.set_devices([])
    assert await eventually(lambda: capacity(emulator) == (0, 0))
    assert await eventually(lambda: registered_in_checkpoint(emulator) == {"example.com/gpu": []})


async def test_the_checkpoint_is_rewritten_with_the_healthy_devices_after_each_message(
    emulator: Daemon, start_stub: StubFactory
) -> None:
    stub = await start_stub(devs=devices(3))
    assert await eventually(
        lambda: registered_in_checkpoint(emulator) == {"example.com/gpu": ["dev-0", "dev-1", "dev-2"]}
    )
    stub.set_health("dev-1", "Unhealthy")
    assert await eventually(lambda: registered_in_checkpoint(emulator) == {"example.com/gpu": ["dev-0", "dev-2"]})
    # Temp files of the atomic write never linger.
    assert not [p for p in emulator.socket_dir.iterdir() if p.name.startswith(".kubelet_internal_checkpoint")]


async def test_stream_end_makes_devices_unhealthy_then_the_grace_period_removes_the_resource(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator = await start_emulator(grace_period=0.5)
    stub = await start_stub(devs=devices(4))
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    await stub.stop()
    # kubelet-device-manager.md §4 [verified]: capacity 4, allocatable 0, stopped.
    assert await eventually(lambda: capacity(emulator) == (4, 0))
    assert emulator.node.manager.endpoints["example.com/gpu"].stopped
    assert await eventually(lambda: emulator.node.status()["resources"]["example.com/gpu"]["removed"])  # type: ignore[index]
    assert capacity(emulator) == (0, 0)
    assert registered_in_checkpoint(emulator) == {}


async def test_registering_again_within_the_grace_period_restores_the_devices(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator = await start_emulator(grace_period=1.0)
    first = await start_stub(devs=devices(4), endpoint="one.sock")
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    await first.stop()
    assert await eventually(lambda: capacity(emulator) == (4, 0))
    await start_stub(devs=devices(4), endpoint="two.sock")
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    # Run the grace period out on the manager's clock (it takes one) instead of sleeping through it:
    # a sweep 1.5 s "later" must keep the resource the second plugin registered.
    manager = emulator.node.manager
    now = manager._clock
    manager._clock = lambda: now() + 1.5
    assert manager.sweep() == []
    assert capacity(emulator) == (4, 4)
    assert not emulator.node.status()["resources"]["example.com/gpu"]["removed"]  # type: ignore[index]


async def test_a_removed_resource_comes_back_when_its_plugin_registers(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator = await start_emulator(grace_period=0.2)
    first = await start_stub(devs=devices(2), endpoint="one.sock")
    assert await eventually(lambda: capacity(emulator) == (2, 2))
    await first.stop()
    assert await eventually(lambda: emulator.node.status()["resources"]["example.com/gpu"]["removed"])  # type: ignore[index]
    await start_stub(devs=devices(2), endpoint="two.sock")
    assert await eventually(lambda: capacity(emulator) == (2, 2))
    assert emulator.node.status()["resources"]["example.com/gpu"]["registrations"] == 2  # type: ignore[index]


async def test_the_endpoint_reports_when_its_plugin_registered(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator = await start_emulator()
    before = time.time()
    await start_stub(devs=devices(2))
    assert await eventually(lambda: capacity(emulator) == (2, 2))
    endpoint = emulator.node.status()["resources"]["example.com/gpu"]["endpoint"]  # type: ignore[index]
    assert before <= endpoint["registered_at"] <= time.time()  # type: ignore[index]


async def test_shutdown_disconnects_plugins_and_removes_every_socket(
    start_emulator: EmulatorFactory, start_stub: StubFactory
) -> None:
    emulator = await start_emulator()
    stub = await start_stub()
    assert await eventually(lambda: capacity(emulator) == (4, 4))
    sockets = [
        emulator.socket_dir / constants.KUBELET_SOCKET_NAME,
        emulator.control.socket_path,
        emulator.pod_resources.socket_path,  # type: ignore[union-attr]
    ]
    assert all(p.exists() for p in sockets)
    await emulator.stop()
    assert not any(p.exists() for p in sockets)
    assert capacity(emulator) == (4, 0)
    assert await eventually(lambda: stub.open_streams == 0)
