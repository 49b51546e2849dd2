"""The inotify stream: real kernel events on real files in a temp directory."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path

import pytest

from kubegpu.common import inotify
from kubegpu.common.inotify import Inotify, Mask

WITHIN_S = 10.0


async def next_named(watch: Inotify, name: str) -> inotify.Event:
    async with asyncio.timeout(WITHIN_S):
        async for event in watch:
            if event.name is not None and str(event.name) == name:
                return event
    raise AssertionError("the stream ended")


async def test_a_created_file_and_a_rename_into_the_directory_are_events_named_by_the_entry(tmp_path: Path) -> None:
    with Inotify() as watch:
        watch.add_watch(tmp_path, Mask.CREATE | Mask.MOVED_TO)
        (tmp_path / "kubelet.sock").write_text("")
        created = await next_named(watch, "kubelet.sock")
        assert created.mask & Mask.CREATE
        (tmp_path.parent / f"{tmp_path.name}-x").write_text("")
        os.rename(tmp_path.parent / f"{tmp_path.name}-x", tmp_path / "moved")
        assert (await next_named(watch, "moved")).mask & Mask.MOVED_TO


async def test_a_write_to_a_watched_file_is_seen_and_nothing_before_it(tmp_path: Path) -> None:
    journal = tmp_path / "faults.jsonl"
    journal.write_text("")
    with Inotify() as watch:
        watch.add_watch(tmp_path, Mask.MODIFY | Mask.CLOSE_WRITE)
        watch._read()
        assert not watch._pending  # the file was written before the watch: no event for it
        with journal.open("a") as f:
            f.write("{}\n")
        assert (await next_named(watch, "faults.jsonl")).mask & (Mask.MODIFY | Mask.CLOSE_WRITE)


async def test_removing_the_watched_directory_ends_its_watch(tmp_path: Path) -> None:
    watched = tmp_path / "device-plugins"
    watched.mkdir()
    with Inotify() as watch:
        watch.add_watch(watched, Mask.DELETE_SELF)
        watched.rmdir()
        seen = Mask(0)
        async with asyncio.timeout(WITHIN_S):
            while not seen & Mask.IGNORED:
                seen |= (await watch.get()).mask
        assert seen & Mask.DELETE_SELF


def test_a_watch_on_a_missing_path_is_file_not_found(tmp_path: Path) -> None:
    with Inotify() as watch, pytest.raises(FileNotFoundError, match="missing"):
        watch.add_watch(tmp_path / "missing", Mask.CREATE)


async def test_a_cancelled_wait_leaves_the_loop_without_a_reader_and_the_descriptor_closes(tmp_path: Path) -> None:
    with Inotify() as watch:
        watch.add_watch(tmp_path, Mask.CREATE)
        fd = watch._fd
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await watch.get()
        assert not asyncio.get_running_loop().remove_reader(fd)
    with pytest.raises(OSError):
        os.fstat(fd)


def test_records_are_parsed_with_their_padded_names() -> None:
    record = struct.pack("iIII", 1, int(Mask.CREATE), 0, 16) + b"kubelet.sock\0\0\0\0"
    bare = struct.pack("iIII", 1, int(Mask.IGNORED), 0, 0)
    events = inotify.parse(record + bare)
    assert [(e.name, e.mask) for e in events] == [(Path("kubelet.sock"), Mask.CREATE), (None, Mask.IGNORED)]
