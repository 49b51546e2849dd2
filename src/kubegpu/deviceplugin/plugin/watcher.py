"""Watching for the kubelet: when does ``kubelet.sock`` appear, or appear anew?

Owns noticing that kubelet.sock exists with an identity (device, inode,
change time) other than the one the plugin registered against — which is how a
restarted kubelet announces itself, since it cleans its directory and binds a
fresh socket. inotify on the socket's directory wakes the check at once; a slow
stat poll is the fallback (inotify missing or out of watches, events lost) and
also carries the plugin over the directory being deleted and created again,
after which the inotify watch is set up anew. Must not register or restart
anything: it only answers "here is the kubelet socket now".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

#: Stat-poll period of the fallback (seconds); inotify normally answers within milliseconds.
POLL_INTERVAL_S = 2.0

Identity = tuple[int, int, int]


def identity(path: Path) -> Identity | None:
    """(device, inode, ctime ns) of ``path``, or None when it does not exist."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


class KubeletSocketWatcher:
    """Wakes waiters when the kubelet socket's directory changes; polls as a fallback.

    Parameters:
        socket_path: the kubelet socket (``.../device-plugins/kubelet.sock``).
        poll_interval: seconds between stat checks when nothing wakes us earlier.
        use_inotify: False to rely on polling alone (tests of the fallback).
    """

    def __init__(self, socket_path: Path, poll_interval: float = POLL_INTERVAL_S, use_inotify: bool = True) -> None:
        self.socket_path = socket_path
        self.poll_interval = poll_interval
        self.use_inotify = use_inotify
        self._poked = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def current(self) -> Identity | None:
        return identity(self.socket_path)

    def start(self) -> None:
        if self.use_inotify and self._task is None:
            self._task = asyncio.create_task(self._inotify_loop(), name="kubelet-socket-inotify")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _poke(self) -> None:
        poked, self._poked = self._poked, asyncio.Event()
        poked.set()

    async def changed(self, since: Identity | None) -> Identity:
        """Return the kubelet socket's identity as soon as it exists and differs from ``since``."""
        while True:
            poked = self._poked  # armed before the check, so a change during it is not missed
            now = identity(self.socket_path)
            if now is not None and now != since:
                return now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(poked.wait(), self.poll_interval)

    async def _inotify_loop(self) -> None:
        try:
            from kubegpu.common.inotify import Inotify, Mask
        except ImportError:  # pragma: no cover - ctypes is part of CPython
            log.warning("inotify unavailable, polling the kubelet socket", extra={"interval_s": self.poll_interval})
            return
        directory, name = self.socket_path.parent, self.socket_path.name
        mask = Mask.CREATE | Mask.MOVED_TO | Mask.DELETE | Mask.ATTRIB | Mask.DELETE_SELF | Mask.MOVE_SELF
        gone = Mask.DELETE_SELF | Mask.MOVE_SELF | Mask.IGNORED
        while True:
            try:
                with Inotify() as inotify:
                    inotify.add_watch(directory, mask)
                    log.debug("watching", extra={"directory": str(directory)})
                    self._poke()  # something may have changed while nobody was watching
                    async for event in inotify:
                        if event.name is not None and str(event.name) == name:
                            self._poke()
                        if event.mask & gone:
                            log.info("kubelet socket directory went away", extra={"directory": str(directory)})
                            self._poke()
                            break
                continue  # watch again at once: the directory may already be back
            except FileNotFoundError:
                # Not there (yet): wait for it to appear in its parent, then watch it again.
                if await self._await_directory(directory):
                    continue
            except OSError as exc:
                log.warning("inotify watch failed, polling", extra={"directory": str(directory), "error": str(exc)})
            await asyncio.sleep(self.poll_interval)

    async def _await_directory(self, directory: Path) -> bool:
        """Wait (at most one poll period) for ``directory`` to be created; False when its parent is missing too."""
        from kubegpu.common.inotify import Inotify, Mask

        try:
            with Inotify() as inotify:
                inotify.add_watch(directory.parent, Mask.CREATE | Mask.MOVED_TO | Mask.ONLYDIR)
                log.debug("waiting for the directory", extra={"directory": str(directory)})
                if directory.is_dir():  # noqa: ASYNC240 - one stat, nothing to gain from a thread
                    return True
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        async for event in inotify:
                            if event.name is not None and str(event.name) == directory.name:
                                break
                return True
        except OSError:
            return False
