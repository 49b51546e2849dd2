"""Watching kubelet.sock: inotify wakes at once, the stat poll is the fallback, the directory may come and go."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubegpu.deviceplugin.plugin import watcher
from tests.polling import eventually


def bind(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.listen()
    return sock


def logged(caplog: pytest.LogCaptureFixture, message: str) -> int:
    """How often the watcher logged ``message`` (its debug lines say when a watch is in place)."""
    return [r.getMessage() for r in caplog.records].count(message)


@pytest.fixture
async def inotify_watcher(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[watcher.KubeletSocketWatcher]:
    # A poll period far beyond the test deadlines: only inotify can make these tests pass in time.
    caplog.set_level(logging.DEBUG, logger=watcher.__name__)
    w = watcher.KubeletSocketWatcher(sock_dir / "kubelet.sock", poll_interval=60.0)
    w.start()
    await eventually(lambda: logged(caplog, "watching"), within=5, what="the inotify watch in place")
    try:
        yield w
    finally:
        await w.stop()


async def test_inotify_reports_the_socket_as_soon_as_it_is_created(
    sock_dir: Path, inotify_watcher: watcher.KubeletSocketWatcher
) -> None:
    waiting = asyncio.create_task(inotify_watcher.changed(None))
    done, _ = await asyncio.wait({waiting}, timeout=0.1)
    assert not done  # no socket, no news
    sock = bind(sock_dir / "kubelet.sock")
    try:
        ident = await asyncio.wait_for(waiting, 5)
        assert ident == watcher.identity(sock_dir / "kubelet.sock")
    finally:
        sock.close()


async def test_the_same_socket_is_not_news_but_a_recreated_one_is(
    sock_dir: Path, inotify_watcher: watcher.KubeletSocketWatcher
) -> None:
    path = sock_dir / "kubelet.sock"
    first = bind(path)
    since = watcher.identity(path)
    waiting = asyncio.create_task(inotify_watcher.changed(since))
    (sock_dir / ".checkpoint-tmp").write_text("{}")  # other files in the directory change nothing
    done, _ = await asyncio.wait({waiting}, timeout=0.2)
    assert not done
    first.close()
    path.unlink()
    second = bind(path)
    try:
        ident = await asyncio.wait_for(waiting, 5)
        assert ident != since
    finally:
        second.close()


async def test_polling_alone_notices_the_socket(sock_dir: Path) -> None:
    w = watcher.KubeletSocketWatcher(sock_dir / "kubelet.sock", poll_interval=0.05, use_inotify=False)
    waiting = asyncio.create_task(w.changed(None))
    done, _ = await asyncio.wait({waiting}, timeout=0.1)
    assert not done
    sock = bind(sock_dir / "kubelet.sock")
    try:
        await asyncio.wait_for(waiting, 5)
    finally:
        sock.close()


async def test_a_directory_that_does_not_exist_yet_is_waited_for(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=watcher.__name__)
    directory = sock_dir / "device-plugins"
    w = watcher.KubeletSocketWatcher(directory / "kubelet.sock", poll_interval=0.1)
    w.start()
    try:
        waiting = asyncio.create_task(w.changed(None))
        await eventually(lambda: logged(caplog, "waiting for the directory"), within=5, what="a watch on the parent")
        directory.mkdir()
        sock = bind(directory / "kubelet.sock")
        try:
            await asyncio.wait_for(waiting, 5)
        finally:
            sock.close()
    finally:
        await w.stop()


async def test_a_recreated_directory_is_watched_again(
    sock_dir: Path, no_leaked_tasks: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=watcher.__name__)
    directory = sock_dir / "device-plugins"
    directory.mkdir()
    # a poll period far beyond the deadline: only a re-established inotify watch can answer in time
    w = watcher.KubeletSocketWatcher(directory / "kubelet.sock", poll_interval=60.0)
    w.start()
    try:
        await eventually(lambda: logged(caplog, "watching"), within=5, what="the inotify watch in place")
        shutil.rmtree(directory)
        gone = "kubelet socket directory went away"
        await eventually(lambda: logged(caplog, gone), within=5, what="the watcher seeing the directory go")
        waiting = asyncio.create_task(w.changed(None))
        directory.mkdir()
        sock = bind(directory / "kubelet.sock")
        try:
            await asyncio.wait_for(waiting, 5)
        finally:
            sock.close()
    finally:
        await w.stop()


async def test_identity_of_a_missing_path_is_none(sock_dir: Path) -> None:
    assert watcher.identity(sock_dir / "nope" / "kubelet.sock") is None
