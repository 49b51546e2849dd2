"""Registration with a (fake) kubelet over kubelet.sock: the request, and errors named by cause."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kubegpu.deviceplugin.errors import KubeletUnavailable, RegistrationRejected
from kubegpu.deviceplugin.plugin import registration, server
from kubegpu.gpu import profiles
from tests.deviceplugin.fake_kubelet import FakeKubelet
from tests.deviceplugin.fixtures.build import served

MACHINE = profiles.load("pcie-4xt4")
GPUS, HANDLERS = served(MACHINE)


async def test_register_sends_version_endpoint_name_and_options_and_is_asked_options_during_it(
    sock_dir: Path, kubelet: FakeKubelet
) -> None:
    plugin = server.PluginServer(GPUS, sock_dir / GPUS.socket_name, HANDLERS)
    await plugin.start()
    try:
        await registration.register(kubelet.socket, GPUS.name, GPUS.socket_name, server.OPTIONS)
        entry = kubelet.registrations[0]
        assert entry.request.version == "v1beta1"
        assert entry.request.endpoint == "nvidia-gpu.sock"
        assert entry.request.resource_name == "nvidia.com/gpu"
        assert entry.request.options.get_preferred_allocation_available
        # the fake kubelet, like the real one, fetched the options from our socket inside Register
        assert entry.options.get_preferred_allocation_available and not entry.options.pre_start_required
        entry_health = await kubelet.wait_snapshot(entry, lambda h: len(h) == 4)
        assert set(entry_health.values()) == {"Healthy"}
    finally:
        await plugin.stop()


async def test_a_rejecting_kubelet_is_registration_rejected_with_its_message(sock_dir: Path) -> None:
    kubelet = FakeKubelet(sock_dir, reject='the ResourceName "nvidia.com/gpu" is invalid')
    await kubelet.start()
    try:
        with pytest.raises(RegistrationRejected, match=r'the ResourceName "nvidia\.com/gpu" is invalid'):
            await registration.register(kubelet.socket, GPUS.name, GPUS.socket_name, server.OPTIONS)
    finally:
        await kubelet.stop()


async def test_a_kubelet_that_cannot_reach_our_socket_is_registration_rejected(sock_dir: Path) -> None:
    kubelet = FakeKubelet(sock_dir, dial_timeout=0.5)
    await kubelet.start()
    try:
        with pytest.raises(RegistrationRejected, match="failed to get device plugin options"):
            await registration.register(kubelet.socket, GPUS.name, "nobody-here.sock", server.OPTIONS)
    finally:
        await kubelet.stop()


async def test_no_kubelet_socket_is_kubelet_unavailable(sock_dir: Path) -> None:
    with pytest.raises(KubeletUnavailable, match="kubelet does not answer"):
        await registration.register(sock_dir / "kubelet.sock", GPUS.name, GPUS.socket_name, server.OPTIONS)


async def test_a_dead_kubelet_socket_file_is_kubelet_unavailable(sock_dir: Path) -> None:
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(sock_dir / "kubelet.sock"))
    dead.close()  # the file stays, nobody listens
    with pytest.raises(KubeletUnavailable):
        await registration.register(sock_dir / "kubelet.sock", GPUS.name, GPUS.socket_name, server.OPTIONS)
