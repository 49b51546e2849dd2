"""State-change events of the emulator, fanned out to watchers.

Owns the event hub: every change of device or allocation state (a
ListAndWatch message applied, a registration, a plugin disconnect, a resource
removed after its grace period, a pod admitted or deleted) becomes one event
with a sequence number and a wall-clock timestamp taken when the change was
applied, and is queued to every subscriber. A subscriber that does not keep up
is dropped rather than slowing the emulator down. Must not know what the
events mean.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

Event = dict[str, object]


class Subscription:
    def __init__(self, hub: EventHub, limit: int) -> None:
        self._hub = hub
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(limit)

    async def get(self) -> Event | None:
        """The next event; None once the hub dropped this subscriber or shut down."""
        return await self.queue.get()

    def close(self) -> None:
        self._hub.unsubscribe(self)


class EventHub:
    def __init__(self, snapshot: Callable[[], dict[str, object]] | None = None, limit: int = 10_000) -> None:
        self._subscribers: list[Subscription] = []
        self._seq = 0
        self._limit = limit
        #: Called once per event to attach the full state (``status``) to it.
        self.snapshot = snapshot

    @property
    def seq(self) -> int:
        return self._seq

    def subscribe(self) -> Subscription:
        sub = Subscription(self, self._limit)
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    def publish(self, kind: str, **fields: object) -> Event:
        self._seq += 1
        event: Event = {"event": kind, "seq": self._seq, "ts": time.time(), **fields}
        if self._subscribers and self.snapshot is not None:
            event["status"] = self.snapshot()
        for sub in list(self._subscribers):
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                log.warning("dropping a watcher that does not keep up", extra={"queued": sub.queue.qsize()})
                self._subscribers.remove(sub)
                self._end(sub)
        return event

    def close(self) -> None:
        for sub in self._subscribers:
            self._end(sub)
        self._subscribers.clear()

    @staticmethod
    def _end(sub: Subscription) -> None:
        # Make room for the end marker so a blocked reader wakes up.
        while sub.queue.full():
            sub.queue.get_nowait()
        sub.queue.put_nowait(None)
