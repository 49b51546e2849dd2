"""The in-process API server: plain HTTP on 127.0.0.1, its own event loop in a background thread, a kubeconfig
file that points at it, and the test hooks (compact history, close watches, inject faults).

Owns URL routing (``/api/v1/...``, ``/apis/<group>/<version>/...``, discovery, health), turning requests into
``Api`` calls and ``StatusError`` into Status answers, and the thread's lifecycle. Usable as a context
manager from tests and bench scripts alike; it must not hold API semantics itself (api.py does).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import yaml
from aiohttp import web

from . import discovery, eventviews
from .api import Api, Reply, Target
from .codec import decode, encode
from .faults import Faults
from .status import StatusError, internal_error, method_not_allowed, page_not_found
from .store import Store
from .watching import serve_watch

T = TypeVar("T")

JSON = "application/json"
EVENTS_V1 = "events.k8s.io/events"
_KNOWN_SUBRESOURCES = {"status", "binding", "eviction"}


def _answer(code: int, body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    # Content-Type exactly "application/json", as the real server sends (clients compare it verbatim).
    return web.Response(status=code, body=body, headers={"Content-Type": JSON, **(headers or {})})


def _error(error: StatusError) -> web.Response:
    return _answer(error.code, encode(error.body), error.headers)


def write_kubeconfig(path: Path, server: str, namespace: str = "default") -> Path:
    """A standard kubeconfig (kubectl, client-go, lightkube, kubernetes-python read it): one cluster, user, context."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": "kubegpu-test", "cluster": {"server": server}}],
        "users": [{"name": "kubegpu-test", "user": {"token": "kubegpu-test-token"}}],
        "contexts": [
            {
                "name": "kubegpu-test",
                "context": {"cluster": "kubegpu-test", "user": "kubegpu-test", "namespace": namespace},
            }
        ],
        "current-context": "kubegpu-test",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


class KubeApiServer:
    """An API server for tests: ``with KubeApiServer() as server: ... server.kubeconfig ...``.

    ``bookmark_interval`` is how often an idle watch that allows bookmarks gets one (the real server: about a
    minute; shorter here so tests see them quickly). ``history_limit`` bounds the watch history (older
    resourceVersions then answer 410 Gone, as after an etcd compaction). With ``node_monitor_grace_period`` (seconds;
    the real controller's default is 40-50) the node lifecycle controller's health check runs too: a Node whose
    status and kube-node-lease Lease go unrenewed that long turns Ready=Unknown and gets the unreachable taint. It is
    off by default: test nodes without an agent would otherwise turn Unknown mid-test."""

    def __init__(
        self,
        kubeconfig: Path | None = None,
        *,
        bookmark_interval: float = 1.0,
        history_limit: int = 200_000,
        node_monitor_grace_period: float | None = None,
    ) -> None:
        self.bookmark_interval = bookmark_interval
        self.node_monitor_grace_period = node_monitor_grace_period
        self._monitor: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._kubeconfig_path = kubeconfig
        self._history_limit = history_limit
        self.faults = Faults()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._tmpdir: Path | None = None
        self.api: Api | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        if self._kubeconfig_path is None:
            raise RuntimeError("the server is not started")
        return self._kubeconfig_path

    def start(self) -> KubeApiServer:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubeapi", daemon=True)
        self._thread.start()
        self._call(self._start)
        if self._kubeconfig_path is None:
            import tempfile

            self._tmpdir = Path(tempfile.mkdtemp(prefix="kubeapi-"))
            self._kubeconfig_path = self._tmpdir / "kubeconfig"
        write_kubeconfig(self._kubeconfig_path, self.url)
        return self

    async def _start(self) -> None:
        self.api = Api(Store(history_limit=self._history_limit))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        if self.node_monitor_grace_period is not None:
            self._stopping = asyncio.Event()
            self._monitor = asyncio.get_running_loop().create_task(
                self._monitor_nodes(self.node_monitor_grace_period, self._stopping)
            )

    async def _monitor_nodes(self, grace_s: float, stopping: asyncio.Event) -> None:
        assert self.api is not None
        period = min(5.0, grace_s / 4)  # node-monitor-period is 5 s on a real controller
        while True:
            try:  # one pass per period, until the server stops
                await asyncio.wait_for(stopping.wait(), timeout=period)
                return
            except TimeoutError:
                self.api.monitor_nodes(grace_s)

    def stop(self) -> None:
        if self._loop is None:
            return
        if self._monitor is not None:
            monitor = self._monitor

            async def finish_monitor() -> None:
                self._stopping.set()
                await monitor

            self._call(finish_monitor)
            self._monitor = None
        if self.api is not None:
            self._call(self.api.store.close_watches)
        if self._runner is not None:
            self._call(self._runner.cleanup)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop.close()
        self._loop = None
        if self._tmpdir is not None:
            import shutil

            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (plain or async) on the server's loop and return its result, from any thread."""
        assert self._loop is not None

        async def run() -> Any:
            result = fn()
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    # --- test hooks --------------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        return int(self._call(lambda: self._store().rv))

    def compact(self) -> int:
        """Forget the watch history: a watch from any earlier resourceVersion now gets 410 Gone. Returns the
        oldest resourceVersion still watchable."""
        return int(self._call(lambda: self._store().compact()))

    def close_watches(self) -> int:
        """End every open watch stream now (as an API server restart or a load balancer would)."""
        return int(self._call(lambda: self._store().close_watches()))

    def fail_next(self, count: int, status: int = 500, resource: str | None = None, verb: str | None = None) -> None:
        """Answer the next ``count`` requests for ``resource`` ("pods", "pods/binding", ...; None: any) with
        ``verb`` (get, list, watch, create, update, patch, delete, deletecollection; None: any) with a 429
        (Retry-After: 1) or 500 Status."""
        self.faults.arm(count, status, resource, verb)

    def _store(self) -> Any:
        assert self.api is not None
        return self.api.store

    # --- routing -----------------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except StatusError as error:
            return _error(error)
        except Exception as error:  # a bug here must answer 500, never kill the server
            return _error(internal_error(f"{type(error).__name__}: {error}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        assert self.api is not None
        parts = [p for p in request.path.split("/") if p]
        if request.path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok", content_type="text/plain")
        if parts == ["version"]:
            return _answer(200, encode(discovery.VERSION))
        if not parts or parts[0] not in ("api", "apis"):
            raise page_not_found()
        if parts[0] == "api":
            if len(parts) == 1:
                return _answer(200, encode(discovery.api_versions(f"127.0.0.1:{self.port}")))
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) == 1:
                return _answer(200, encode(discovery.api_groups(self.api.catalog)))
            if len(parts) == 2:
                doc = discovery.api_group(self.api.catalog, parts[1])
                if doc is None:
                    raise page_not_found()
                return _answer(200, encode(doc))
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            doc = discovery.resource_list(self.api.catalog, group, version)
            if doc is None:
                raise page_not_found()
            return _answer(200, encode(doc))
        target = self._target(group, version, rest)
        query = dict(request.query)
        verb = self._verb(request.method, target, query)
        resource = target.rtype.plural + (f"/{target.subresource}" if target.subresource else "")
        fault = self.faults.take(resource, verb)
        if fault is not None:
            raise fault
        body = b"" if verb == "watch" else await request.read()
        if target.rtype.key == EVENTS_V1:
            return await self._events_v1(request, verb, target, query, body)
        if verb == "watch":
            return await serve_watch(request, self.api, target, query, self.bookmark_interval)
        dry_run = query.get("dryRun") == "All"
        result: Reply
        if verb == "list":
            result = self.api.list(target, query)
        elif verb == "get":
            result = self.api.get(target)
        elif verb == "create":
            result = self.api.create(target, body, dry_run)
        elif verb == "update":
            result = self.api.update(target, body, dry_run)
        elif verb == "patch":
            result = self.api.patch(target, body, request.headers.get("Content-Type", ""), query)
        elif verb == "delete":
            result = self.api.delete(target, body, query)
        else:
            result = self.api.delete_collection(target, query)
        return _answer(result.code, result.body)

    async def _events_v1(
        self, request: web.Request, verb: str, target: Target, query: dict[str, str], body: bytes
    ) -> web.StreamResponse:
        """events.k8s.io/v1: the same stored Events as core/v1, reshaped on the way in and out (api.py)."""
        assert self.api is not None
        if verb == "watch":
            core, query = self.api.events_v1_core(target, query)

            def present(raw: bytes) -> bytes:
                return encode(eventviews.to_v1(decode(raw)))

            return await serve_watch(
                request, self.api, core, query, self.bookmark_interval, present, eventviews.API_VERSION
            )
        result = self.api.events_v1(verb, target, query, body, request.headers.get("Content-Type", ""))
        return _answer(result.code, result.body)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        assert self.api is not None
        catalog = self.api.catalog
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        rtype = catalog.find(group, version, rest[0])
        if rtype is None or len(rest) > 3:
            raise page_not_found()
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub is not None and sub not in rtype.subresources:
            raise page_not_found()
        if namespace is not None and not rtype.namespaced:
            raise page_not_found()
        if rtype.namespaced and namespace is None and name is not None:
            raise page_not_found()
        return Target(rtype, version, namespace, name, sub)

    @staticmethod
    def _verb(method: str, target: Target, query: dict[str, str]) -> str:
        collection = target.name is None
        if method == "GET":
            if not collection:
                return "get"  # as on the real server, ?watch on a single object's path is a plain get
            return "watch" if query.get("watch") in ("true", "1") else "list"
        verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
        if method not in verbs:
            raise method_not_allowed()
        if method == "DELETE" and collection:
            return "deletecollection"
        if method == "POST" and target.subresource in ("binding", "eviction"):
            return "create"
        if collection and method in ("PUT", "PATCH"):
            raise method_not_allowed()
        if not collection and method == "POST" and target.subresource is None:
            raise method_not_allowed()
        return verbs[method]
