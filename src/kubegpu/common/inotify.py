"""Linux inotify as an asyncio stream of events: the one file-change watch of kubegpu.

Owns the kernel interface (``inotify_init1``/``inotify_add_watch`` through the
process's own libc, the ``struct inotify_event`` records read from the
descriptor) and waiting for them on the running loop. The simulated backend
watches its fault journal with it and the device plugin its kubelet socket.
It replaces the ``asyncinotify`` package on the plugin's start path: that one
looks libc up with ``ctypes.util.find_library``, which runs ``ldconfig -p`` as
a subprocess (~7 ms of every start). Must not decide what a change means.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import enum
import os
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any


class Mask(enum.IntFlag):
    """inotify event and watch flags (``<sys/inotify.h>``)."""

    ACCESS = 0x00000001
    MODIFY = 0x00000002
    ATTRIB = 0x00000004
    CLOSE_WRITE = 0x00000008
    CLOSE_NOWRITE = 0x00000010
    OPEN = 0x00000020
    MOVED_FROM = 0x00000040
    MOVED_TO = 0x00000080
    CREATE = 0x00000100
    DELETE = 0x00000200
    DELETE_SELF = 0x00000400
    MOVE_SELF = 0x00000800
    UNMOUNT = 0x00002000
    Q_OVERFLOW = 0x00004000
    IGNORED = 0x00008000
    ONLYDIR = 0x01000000
    DONT_FOLLOW = 0x02000000
    EXCL_UNLINK = 0x04000000
    MASK_ADD = 0x20000000
    ISDIR = 0x40000000
    ONESHOT = 0x80000000


@dataclass(frozen=True)
class Event:
    """One event: the watch it came from, what happened, and the entry's name inside a watched directory."""

    wd: int
    mask: Mask
    cookie: int
    name: Path | None


#: ``struct inotify_event`` without its name: wd, mask, cookie, len.
_HEADER = struct.Struct("iIII")
_READ_SIZE = 64 * 1024
_libc: Any = None


def _lib() -> Any:
    """The process's own libc (``dlopen(NULL)``), its two inotify calls typed."""
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_init1.restype = ctypes.c_int
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.inotify_add_watch.restype = ctypes.c_int
        _libc = lib
    return _libc


def _wake(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)


def _checked(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return int(result)


def parse(buffer: bytes) -> list[Event]:
    """The events in ``buffer`` (whole records, as one ``read`` of an inotify descriptor returns them)."""
    events = []
    offset = 0
    while offset + _HEADER.size <= len(buffer):
        wd, mask, cookie, length = _HEADER.unpack_from(buffer, offset)
        offset += _HEADER.size
        raw = buffer[offset : offset + length].split(b"\0", 1)[0]
        offset += length
        events.append(Event(wd, Mask(mask), cookie, Path(os.fsdecode(raw)) if raw else None))
    return events


class Inotify:
    """An inotify instance: ``add_watch`` paths, then ``await get()`` or ``async for`` its events.

    A context manager; the descriptor is closed on exit. Errors of the kernel calls are ``OSError``
    subclasses (``FileNotFoundError`` for a watch on a missing path).
    """

    def __init__(self) -> None:
        self._fd = _checked(_lib().inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC), "inotify_init1")
        self._pending: collections.deque[Event] = collections.deque()

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def add_watch(self, path: Path | str, mask: Mask) -> int:
        """Watch ``path`` for ``mask``; the watch descriptor."""
        return _checked(_lib().inotify_add_watch(self._fd, os.fsencode(path), int(mask)), f"inotify_add_watch {path}")

    def _read(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._pending.extend(parse(os.read(self._fd, _READ_SIZE)))

    async def get(self) -> Event:
        """The next event, waiting on the running loop until one comes."""
        while not self._pending:
            self._read()
            if self._pending:
                break
            loop, fd = asyncio.get_running_loop(), self._fd
            readable: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _wake, readable)
            try:
                await readable
            finally:
                loop.remove_reader(fd)
        return self._pending.popleft()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        while True:
            yield await self.get()
