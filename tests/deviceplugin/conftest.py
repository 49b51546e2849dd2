"""Fixtures of the plugin tests: a started fake kubelet in a short socket dir, a fault journal, a leak check."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.deviceplugin.fake_kubelet import FakeKubelet
from tests.polling import eventually


@pytest.fixture
async def kubelet(sock_dir: Path) -> AsyncIterator[FakeKubelet]:
    """A fake kubelet serving Registration on ``sock_dir/kubelet.sock``."""
    fake = FakeKubelet(sock_dir)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
def fault_file(sock_dir: Path) -> Path:
    """The simulated machine's fault journal for this test (never the shared default)."""
    return sock_dir / "faults.jsonl"


#: Accept loops of gRPC servers that other fixtures (the fake kubelet) still run: theirs, not the test's.
_LIVE_SERVER_LOOPS = ("_request_call", "_request_registered_call", "_server_main_loop")


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail the test if it leaves asyncio tasks running (streams, monitors, watchers, RPC handlers)."""
    before = asyncio.all_tasks()
    yield

    def leaked() -> set[asyncio.Task[Any]]:
        return {
            t
            for t in asyncio.all_tasks() - before
            if not t.done()
            and t is not asyncio.current_task()
            and getattr(t.get_coro(), "__name__", "") not in _LIVE_SERVER_LOOPS
        }

    # Tasks cancelled at the end of the test get a moment to finish; one that is still running then leaked.
    with contextlib.suppress(AssertionError):
        await eventually(lambda: not leaked(), within=1.0)
    assert not leaked(), f"leaked tasks: {leaked()}"
