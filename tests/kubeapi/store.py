"""The object store: every object by kind, namespace and name, one global resourceVersion, and the event
history that watches replay from.

Owns resourceVersion assignment (one counter for all kinds, bumped by every write, as etcd's revision),
the bounded history and its compaction, and fan-out of events to open watches. Objects are plain dicts
that are never mutated once stored (writers store a new dict), each kept with its JSON encoding so
reads and watch fan-out serialise once. It runs on the server's event loop only and knows nothing of
HTTP, admission or selectors.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .codec import encode

Obj = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """One write: ``type`` ADDED / MODIFIED / DELETED, the object after it, the object before it (or None)."""

    rv: int
    type: str
    key: str  # the kind's catalog key "group/plural"
    namespace: str
    obj: Obj
    raw: bytes
    prev: Obj | None


@dataclass(eq=False)
class Subscription:
    """An open watch's queue of events of one kind; ``None`` in the queue means: end the stream now."""

    key: str
    namespace: str | None
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)


class Gone(Exception):
    """The requested resourceVersion is older than the oldest the history still holds."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(requested, oldest)
        self.requested = requested
        self.oldest = oldest


class Store:
    def __init__(self, history_limit: int = 200_000) -> None:
        self.rv = 0
        #: Events with rv <= floor are no longer in the history: a watch from before it gets 410 Gone.
        self.floor = 0
        self._objects: dict[str, dict[tuple[str, str], tuple[Obj, bytes]]] = {}
        self._history: deque[Event] = deque()
        self._history_limit = history_limit
        self._subscriptions: set[Subscription] = set()

    # --- reads -------------------------------------------------------------------------------------------------

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        entry = self._objects.get(key, {}).get((namespace, name))
        return entry[0] if entry else None

    def get_raw(self, key: str, namespace: str, name: str) -> bytes | None:
        entry = self._objects.get(key, {}).get((namespace, name))
        return entry[1] if entry else None

    def items(self, key: str, namespace: str | None = None) -> list[tuple[Obj, bytes]]:
        """Objects of a kind (in one namespace, or all), ordered by namespace then name as the real server lists."""
        bucket = self._objects.get(key, {})
        keys = sorted(k for k in bucket if namespace is None or k[0] == namespace)
        return [bucket[k] for k in keys]

    def count(self, key: str) -> int:
        return len(self._objects.get(key, {}))

    # --- writes ------------------------------------------------------------------------------------------------

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def put(self, key: str, obj: Obj) -> Obj:
        """Store ``obj`` (created or replaced) at a new resourceVersion; returns the stored object."""
        meta = obj["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        bucket = self._objects.setdefault(key, {})
        prev = bucket.get((namespace, name))
        rv = self.next_rv()
        stored = {**obj, "metadata": {**meta, "resourceVersion": str(rv)}}
        raw = encode(stored)
        bucket[(namespace, name)] = (stored, raw)
        self._record(Event(rv, "MODIFIED" if prev else "ADDED", key, namespace, stored, raw, prev[0] if prev else None))
        return stored

    def remove(self, key: str, namespace: str, name: str) -> Obj | None:
        """Delete an object; its DELETED event carries the object at the deletion's resourceVersion."""
        bucket = self._objects.get(key, {})
        prev = bucket.pop((namespace, name), None)
        if prev is None:
            return None
        rv = self.next_rv()
        final = {**prev[0], "metadata": {**prev[0]["metadata"], "resourceVersion": str(rv)}}
        self._record(Event(rv, "DELETED", key, namespace, final, encode(final), prev[0]))
        return final

    def _record(self, event: Event) -> None:
        self._history.append(event)
        while len(self._history) > self._history_limit:
            self.floor = self._history.popleft().rv
        for sub in self._subscriptions:
            if sub.key == event.key and (sub.namespace is None or sub.namespace == event.namespace):
                sub.queue.put_nowait(event)

    # --- history and watches -----------------------------------------------------------------------------------

    def compact(self) -> int:
        """Forget all history up to now (as etcd compaction does); returns the new floor."""
        self._history.clear()
        self.floor = self.rv
        return self.floor

    def since(self, key: str, namespace: str | None, rv: int) -> Iterable[Event]:
        """Events of a kind after ``rv``; raises Gone when history before ``rv`` was compacted."""
        if rv < self.floor:
            raise Gone(rv, self.floor)
        return [
            e for e in self._history if e.rv > rv and e.key == key and (namespace is None or e.namespace == namespace)
        ]

    def subscribe(self, key: str, namespace: str | None) -> Subscription:
        sub = Subscription(key, namespace)
        self._subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscriptions.discard(sub)

    def close_watches(self) -> int:
        """End every open watch stream (clients see the connection end and must re-watch); returns how many."""
        subs = list(self._subscriptions)
        for sub in subs:
            sub.queue.put_nowait(None)
        self._subscriptions.clear()
        return len(subs)
