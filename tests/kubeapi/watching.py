"""Watch streams: ``?watch=true`` answered as kube-apiserver does, one JSON event per line.

Owns where a watch starts (no resourceVersion or "0": ADDED for what exists now, then changes; N: every
change after N from the history, or an ERROR event with 410 Expired when N was compacted), selector
filtering with the real transitions (an object that stops matching is sent as DELETED, one that starts
matching as ADDED), BOOKMARK events when ``allowWatchBookmarks=true``, and ``timeoutSeconds``. It must not
change objects; it reads the store and its subscription queue only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from .api import Api, Target
from .codec import decode, encode
from .selectors import (
    FieldRequirement,
    Requirement,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from .status import StatusError, bad_request, gone
from .store import Event, Gone, Obj


def _line(event_type: str, raw: bytes) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + raw + b"}\n"


class _Filter:
    def __init__(self, labels: list[Requirement], fields: list[FieldRequirement]) -> None:
        self.labels, self.fields = labels, fields

    def __call__(self, obj: Obj | None) -> bool:
        return obj is not None and labels_match(self.labels, obj) and fields_match(self.fields, obj)


def _translate(event: Event, matches: _Filter) -> str | None:
    """The event type this watcher sees for a write, or None when it sees nothing."""
    now_matches = matches(event.obj)
    before = matches(event.prev) if event.prev is not None else False
    if event.type == "ADDED":
        return "ADDED" if now_matches else None
    if event.type == "DELETED":
        return "DELETED" if before else None
    if now_matches and before:
        return "MODIFIED"
    if now_matches:
        return "ADDED"
    if before:
        return "DELETED"
    return None


async def serve_watch(
    request: web.Request,
    api: Api,
    target: Target,
    query: dict[str, str],
    bookmark_interval: float,
    present: Callable[[bytes], bytes] | None = None,
    present_as: str | None = None,
) -> web.StreamResponse:
    """Stream the watch. ``present`` reshapes each object for another view of the same kind (events.k8s.io/v1 of
    core/v1 Events) whose apiVersion ``present_as`` names."""
    labels = parse_label_selector(query.get("labelSelector"))
    fields = parse_field_selector(query.get("fieldSelector"), target.rtype.plural)
    matches = _Filter(labels, fields)
    rtype = target.rtype
    namespace = target.namespace if rtype.namespaced else None
    bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
    timeout = query.get("timeoutSeconds")
    try:
        deadline = time.monotonic() + float(timeout) if timeout else None
    except ValueError:
        raise bad_request(f"invalid timeoutSeconds {timeout!r}") from None
    rv_param = query.get("resourceVersion")
    # WatchList (sendInitialEvents): the current state as ADDED events, then a bookmark marking their end.
    initial_events = query.get("sendInitialEvents") in ("true", "1")
    if initial_events:
        if query.get("resourceVersionMatch") != "NotOlderThan":
            raise invalid_watch("sendInitialEvents", "resourceVersionMatch must be NotOlderThan")
        if not bookmarks:
            raise invalid_watch("allowWatchBookmarks", "sendInitialEvents requires allowWatchBookmarks=true")
        rv_param = None
    if rv_param not in (None, "", "0"):
        try:
            start_rv = int(rv_param or 0)
        except ValueError:
            raise bad_request(f"invalid resource version: {rv_param}") from None
    else:
        start_rv = None

    api_version = present_as or rtype.api_version(target.version)
    store = api.store

    def shaped(raw: bytes) -> bytes:
        return present(raw) if present is not None else _at_version(raw, rtype.custom, api_version)

    subscription = store.subscribe(rtype.key, namespace)
    backlog: list[tuple[str, bytes]] = []
    error: bytes | None = None
    if start_rv is None:
        last_rv = store.rv
        backlog = [("ADDED", raw) for obj, raw in store.items(rtype.key, namespace) if matches(obj)]
    else:
        last_rv = start_rv
        try:
            for event in store.since(rtype.key, namespace, start_rv):
                seen = _translate(event, matches)
                if seen:
                    backlog.append((seen, event.raw))
                last_rv = event.rv
        except Gone as expired:
            error = encode(gone(expired.requested, expired.oldest).body)
        last_rv = max(last_rv, store.rv) if error is None else last_rv

    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        if error is not None:
            await response.write(_line("ERROR", error))
            return response
        for event_type, raw in backlog:
            await response.write(_line(event_type, shaped(raw)))
        if initial_events:
            await response.write(_line("BOOKMARK", _bookmark(api_version, rtype.kind, last_rv, initial_end=True)))
        next_bookmark = time.monotonic() + bookmark_interval
        while True:
            now = time.monotonic()
            wait = next_bookmark - now if bookmarks else None
            if deadline is not None:
                wait = min(wait, deadline - now) if wait is not None else deadline - now
            try:
                item = await asyncio.wait_for(
                    subscription.queue.get(), timeout=max(wait, 0) if wait is not None else None
                )
            except TimeoutError:
                now = time.monotonic()
                # A change can be queued while the timeout fires (wait_for cancels the get): only with nothing
                # queued has every change up to the store's version been seen, so only then may a bookmark say so.
                caught_up = subscription.queue.empty()
                if deadline is not None and now >= deadline:
                    if bookmarks:  # as the watch cache does: the latest resourceVersion before the stream ends
                        last_rv = max(last_rv, store.rv) if caught_up else last_rv
                        await response.write(_line("BOOKMARK", _bookmark(api_version, rtype.kind, last_rv)))
                    return response
                if bookmarks:
                    last_rv = max(last_rv, store.rv) if caught_up else last_rv
                    await response.write(_line("BOOKMARK", _bookmark(api_version, rtype.kind, last_rv)))
                    next_bookmark = now + bookmark_interval
                continue
            if item is None:
                return response
            if item.rv <= last_rv:
                continue  # already sent from the history
            last_rv = item.rv
            seen = _translate(item, matches)
            if seen:
                await response.write(_line(seen, shaped(item.raw)))
    except (ConnectionResetError, asyncio.CancelledError):
        return response
    finally:
        store.unsubscribe(subscription)


def invalid_watch(field: str, why: str) -> StatusError:
    return StatusError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {field}: Forbidden: {why}')


def _bookmark(api_version: str, kind: str, rv: int, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    body: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "metadata": meta}
    return encode(body)


def _at_version(raw: bytes, custom: bool, api_version: str) -> bytes:
    if not custom:
        return raw
    obj = decode(raw)
    if obj.get("apiVersion") == api_version:
        return raw
    obj["apiVersion"] = api_version
    return encode(obj)
