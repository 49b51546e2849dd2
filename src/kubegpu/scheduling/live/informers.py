"""Informers: list + watch of one resource kind, kept as a local store, as client-go's reflector does.

Owns :class:`Informer`: list (remembering the list's resourceVersion), then
watch from it with bookmarks; every event updates the store and reaches the
handler; a ``410 Gone`` (the version was compacted) relists and hands the
handler the difference (objects gone are delivered as DELETED); any other
error or a dropped stream reconnects from the last version seen, with
exponential backoff capped at 30 s (client-go's 800 ms → 30 s). Must not
interpret the objects (the handler does).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.core import resource as lightkube_resource

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
INITIAL_BACKOFF_S = 0.8
MAX_BACKOFF_S = 30.0

Handler = Callable[[str, Any], Awaitable[None] | None]


def _key(obj: Any) -> str:
    meta = obj.metadata
    return f"{meta.namespace or ''}/{meta.name}"


class Informer:
    """One kind's list + watch loop.

    Parameters:
        client: the lightkube async client.
        resource: the lightkube resource class (``Pod``, ``Node``, a generic resource, ...).
        handler: called with (event type, object) for every change, in order.
        fields: a field selector for list and watch (e.g. ``{"spec.schedulerName": "gpu-scheduler"}``).
    """

    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        handler: Handler,
        fields: dict[str, Any] | None = None,
        watch_timeout_s: int = 300,
    ) -> None:
        self.client = client
        self.resource = resource
        self.handler = handler
        self.fields = fields
        self.watch_timeout_s = watch_timeout_s
        self.store: dict[str, Any] = {}
        self.version: str | None = None
        self.synced = asyncio.Event()
        self.relists = 0
        self.name = getattr(resource, "__name__", str(resource))

    async def _emit(self, kind: str, obj: Any) -> None:
        result = self.handler(kind, obj)
        if result is not None:
            await result

    async def _list(self) -> None:
        if _is_namespaced(self.resource):
            listing = self.client.list(self.resource, namespace="*", fields=self.fields)
        else:
            listing = self.client.list(self.resource, fields=self.fields)
        seen: dict[str, Any] = {}
        async for obj in listing:
            seen[_key(obj)] = obj
        self.version = listing.resourceVersion
        for key, old in list(self.store.items()):
            if key not in seen:
                del self.store[key]
                await self._emit(DELETED, old)
        for key, obj in seen.items():
            kind = MODIFIED if key in self.store else ADDED
            self.store[key] = obj
            await self._emit(kind, obj)
        self.relists += 1
        self.synced.set()

    async def _watch(self) -> None:
        # lightkube's watch() has no allowWatchBookmarks parameter; its generic client takes any query parameter.
        params: dict[str, Any] = {
            "timeoutSeconds": self.watch_timeout_s,
            "resourceVersion": self.version,
            "allowWatchBookmarks": "true",
        }
        if self.fields:
            params["fieldSelector"] = ",".join(f"{k}={v}" for k, v in self.fields.items())
        generic = self.client._client
        br = generic.prepare_request(
            "list",
            res=self.resource,
            namespace="*" if _is_namespaced(self.resource) else None,
            watch=True,
            params=params,
        )
        async for kind, obj in generic.watch(br):
            self.version = obj.metadata.resourceVersion or self.version
            if kind == BOOKMARK:
                continue
            key = _key(obj)
            if kind == DELETED:
                self.store.pop(key, None)
            else:
                self.store[key] = obj
            await self._emit(kind, obj)

    async def run(self) -> None:
        """List and watch until cancelled; never returns otherwise."""
        backoff = INITIAL_BACKOFF_S
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                backoff = INITIAL_BACKOFF_S
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.status.code == 410:
                    log.info("watch version expired, relisting", extra={"resource": self.name})
                    need_list = True
                    continue
                log.warning("watch failed", extra={"resource": self.name, "code": exc.status.code, "error": str(exc)})
                need_list = need_list or self.version is None
            except (httpx2.HTTPError, OSError, ValueError) as exc:
                log.warning("watch connection lost", extra={"resource": self.name, "error": repr(exc)})
            await asyncio.sleep(backoff * (1 + random.random() * 0.2))
            backoff = min(MAX_BACKOFF_S, backoff * 2)


def _is_namespaced(resource: Any) -> bool:
    return issubclass(resource, lightkube_resource.NamespacedResource)
