"""RBAC checked against what a program really asks: a recording proxy in front of an API server, and the rule match.

:class:`RecordingProxy` forwards every request of a program (its kubeconfig points at the proxy) to the real API
server — the in-process one or a cluster — streaming answers, watches included, and records each request as the
authorizer sees it (:class:`Request`: API group, resource, subresource, namespace, name, verb). :func:`allows`
decides a request against RBAC PolicyRules as Kubernetes' RBAC authorizer does (groups, resources with
``resource/subresource``, verbs, resourceNames, ``*``). Must not decide anything about a particular component.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web


@dataclass(frozen=True)
class Request:
    """One API request as RBAC sees it."""

    group: str
    resource: str  # "pods" or "pods/status"
    namespace: str
    name: str
    verb: str

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        target = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{target}{where}"


def attributes(method: str, path: str, query: Mapping[str, str]) -> Request | None:
    """The RBAC attributes of an API request (None for discovery and other non-resource paths)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
    if method == "GET":
        verb = "watch" if query.get("watch") in ("1", "true") else ("get" if name else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "")
        if method == "DELETE":
            verb = "delete" if name else "deletecollection"
    return Request(group, f"{resource}/{sub}" if sub else resource, namespace, name, verb)


def allows(rules: Iterable[Mapping[str, Any]], request: Request) -> bool:
    """Whether any PolicyRule grants ``request`` (RBAC's rule match; no non-resource URLs)."""
    return any(_matches(rule, request) for rule in rules)


def _matches(rule: Mapping[str, Any], request: Request) -> bool:
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    verbs = rule.get("verbs") or []
    names = rule.get("resourceNames") or []
    return (
        ("*" in groups or request.group in groups)
        and ("*" in resources or request.resource in resources)
        and ("*" in verbs or request.verb in verbs)
        and (not names or request.name in names)
    )


def grants(rules: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) the rules grant, one per combination written in them."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }


class RecordingProxy:
    """A loopback HTTP proxy to ``upstream`` (an http:// API server) that records every resource request."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def recorded(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
                    "users": [{"name": "proxy", "user": {"token": "recorded"}}],
                    "contexts": [
                        {"name": "proxy", "context": {"cluster": "proxy", "user": "proxy", "namespace": namespace}}
                    ],
                    "current-context": "proxy",
                }
            )
        )
        return path

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        # Upstream first: that ends the watch streams being forwarded, so the handlers return.
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        seen = attributes(request.method, request.path, request.query)
        if seen is not None:
            with self._lock:
                self.requests.append(seen)
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body or None, headers=headers
        ) as upstream:
            answer = web.StreamResponse(status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in ("content-length", "transfer-encoding", "content-encoding", "connection"):
                    answer.headers[key] = value
            await answer.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await answer.write(chunk)
            except (aiohttp.ClientError, ConnectionResetError):
                return answer  # a stream cut by either side: the proxy is closing, or the client left
            await answer.write_eof()
            return answer
