"""Fixtures for the kubelet emulator's tests: an in-process emulator, stub plugins, polling.

The emulator runs in the test's event loop with its socket dir at
``<sock_dir>/device-plugins``, so the default pod-resources socket
(``<socket dir>/../pod-resources/kubelet.sock``) stays inside the test's dir.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kubegpu.kubelet.daemon import Daemon, Options
from tests.kubelet.stubplugin import StubPlugin

EmulatorFactory = Callable[..., Awaitable[Daemon]]
StubFactory = Callable[..., Awaitable[StubPlugin]]


@pytest.fixture
def socket_dir(sock_dir: Path) -> Path:
    return sock_dir / "device-plugins"


@pytest.fixture
async def start_emulator(socket_dir: Path) -> AsyncIterator[EmulatorFactory]:
    running: list[Daemon] = []

    async def start(**overrides: Any) -> Daemon:
        options = Options(**{"socket_dir": socket_dir, "dial_timeout": 3.0, **overrides})
        daemon = Daemon(options)
        await daemon.start()
        running.append(daemon)
        return daemon

    yield start
    for daemon in reversed(running):
        await daemon.stop()


@pytest.fixture
async def emulator(start_emulator: EmulatorFactory) -> Daemon:
    return await start_emulator()


@pytest.fixture
async def start_stub(socket_dir: Path) -> AsyncIterator[StubFactory]:
    stubs: list[StubPlugin] = []

    async def start(*args: Any, register: bool = True, **kwargs: Any) -> StubPlugin:
        stub = StubPlugin(socket_dir, *args, **kwargs)
        await stub.start()
        stubs.append(stub)
        if register:
            await stub.register()
        return stub

    yield start
    for stub in stubs:
        await stub.stop()


def capacity(daemon: Daemon, resource: str = "example.com/gpu") -> tuple[int, int] | None:
    """(capacity, allocatable) of a resource, None when the node does not report it."""
    state = daemon.node.manager.resource_status().get(resource)
    return None if state is None else (int(state["capacity"]), int(state["allocatable"]))  # type: ignore[call-overload]
