"""The HTTP endpoint: ``/metrics``, ``/health`` and a landing page ``/``, on asyncio streams.

Owns the listen address syntax (``:9400``, ``HOST:PORT``, ``[V6]:PORT``), a
small HTTP/1.1 server (GET/HEAD, keep-alive, gzip when asked), the
responses, and applying a ``--web-config-file`` (TLS, client certificates,
basic auth, extra headers; :mod:`kubegpu.monitoring.webconfig` parses it).
It serves the collector's last page and never waits on a collection, so a
scrape costs a copy. Must not collect or render metrics.

A bad request gets a 4xx answer and the connection closes; it never stops
the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass

from kubegpu.monitoring import webconfig
from kubegpu.monitoring.collector import Collector

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: An idle keep-alive connection is closed after this long (Prometheus reconnects).
IDLE_TIMEOUT_S = 120.0
_MAX_BODY = 64 * 1024

_LANDING = (
    b"<html><head><title>kubegpu exporter</title></head><body><h1>kubegpu exporter</h1>"
    b'<p><a href="/metrics">Metrics</a> &middot; <a href="/health">Health</a></p></body></html>\n'
)
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Address:
    """Where to listen; ``host`` None means every interface."""

    host: str | None
    port: int

    def __str__(self) -> str:
        host = self.host or ""
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


def parse_address(text: str) -> Address:
    """``:9400`` / ``0.0.0.0:9400`` / ``localhost:9400`` / ``[::1]:9400``; raises ValueError naming the value."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f"listen address {text!r} must look like HOST:PORT or :PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"listen address {text!r}: write an IPv6 host in brackets, e.g. [::1]:9400")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"listen address {text!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"listen address {text!r}: port {port} is out of range 0-65535")
    return Address(host=host or None, port=port)


def _response(status: int, body: bytes, content_type: str, *, head: bool, keep_alive: bool, extra: str = "") -> bytes:
    lines = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{extra}"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return lines.encode("latin-1") + (b"" if head else body)


class Endpoint:
    """Serves one :class:`Collector`'s page.

    Parameters:
        collector: the source of ``/metrics`` and ``/health``.
        address: where to listen.
        web: a loaded ``--web-config-file``, or None for plain HTTP without authentication.
        read_timeout_s: the longest wait for a request head, idle keep-alive time included (Go's
            http.Server uses ReadTimeout when no IdleTimeout is set, as in dcgm-exporter); also the TLS
            handshake's limit.
        write_timeout_s: the longest wait for a response to be taken by the client.
        sock: an already listening socket to serve instead of binding ``address`` (systemd socket activation).
    """

    def __init__(
        self,
        collector: Collector,
        address: Address,
        web: webconfig.WebConfig | None = None,
        read_timeout_s: float = IDLE_TIMEOUT_S,
        write_timeout_s: float = IDLE_TIMEOUT_S,
        sock: socket.socket | None = None,
    ) -> None:
        self._sock = sock
        self._collector = collector
        self._address = address
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._read_timeout = read_timeout_s if read_timeout_s > 0 else IDLE_TIMEOUT_S
        self._write_timeout = write_timeout_s if write_timeout_s > 0 else IDLE_TIMEOUT_S
        self._web = web or webconfig.WebConfig(source="")
        self._auth = webconfig.BasicAuth(self._web.users)
        self._ssl = webconfig.ssl_context(self._web)
        self._extra_headers = "".join(f"{k}: {v}\r\n" for k, v in self._web.headers)

    @property
    def tls(self) -> bool:
        """Whether the endpoint serves HTTPS."""
        return self._ssl is not None

    def reconfigure(self, web: webconfig.WebConfig | None) -> None:
        """Apply a reloaded web config to new connections and requests; raises WebConfigError.

        Switching TLS on or off needs a new listener, so that change is refused (restart the exporter).
        """
        web = web or webconfig.WebConfig(source="")
        context = webconfig.ssl_context(web)
        if (context is None) != (self._ssl is None):
            raise webconfig.WebConfigError(
                f"{web.source or 'web config'}: turning TLS {'on' if context else 'off'} needs a restart"
            )
        self._web = web
        self._auth = webconfig.BasicAuth(web.users)
        self._extra_headers = "".join(f"{k}: {v}\r\n" for k, v in web.headers)
        if context is not None:
            context.sni_callback = self._current_context
            self._ssl = context

    def _current_context(self, sslobj: ssl.SSLObject, _name: str | None, _old: ssl.SSLContext) -> None:
        # Called in every handshake on the listener's context: hand the connection the latest one.
        if self._ssl is not None and sslobj.context is not self._ssl:
            sslobj.context = self._ssl

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        if self._server is None or not self._server.sockets:
            return self._address.port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        """The bound address as ``HOST:PORT`` (the port resolved when 0 was asked)."""
        return str(Address(self._address.host, self.port))

    async def start(self) -> None:
        """Bind and start accepting; raises OSError when the address is taken or not ours."""
        if self._ssl is not None:
            self._ssl.sni_callback = self._current_context
        handshake = self._read_timeout if self._ssl is not None else None
        if self._sock is not None:
            self._server = await asyncio.start_server(
                self._serve, sock=self._sock, ssl=self._ssl, ssl_handshake_timeout=handshake
            )
            return
        self._server = await asyncio.start_server(
            self._serve,
            host=self._address.host,
            port=self._address.port,
            ssl=self._ssl,
            ssl_handshake_timeout=handshake,
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def _route(self, method: str, path: str, accepts_gzip: bool, keep_alive: bool) -> bytes:
        head = method == "HEAD"
        extra = self._extra_headers
        if method not in ("GET", "HEAD"):
            allow = "Allow: GET, HEAD\r\n"
            return _response(
                405, b"method not allowed\n", "text/plain", head=False, keep_alive=keep_alive, extra=allow + extra
            )
        path = path.split("?", 1)[0]
        if path == "/metrics":
            if accepts_gzip:
                gz = "Content-Encoding: gzip\r\n"
                return _response(
                    200, self._collector.page.gzipped, CONTENT_TYPE, head=head, keep_alive=keep_alive, extra=gz + extra
                )
            body = self._collector.page.body
            return _response(200, body, CONTENT_TYPE, head=head, keep_alive=keep_alive, extra=extra)
        if path == "/health":
            problem = self._collector.health_problem
            if problem is None:
                return _response(200, b"OK\n", "text/plain", head=head, keep_alive=keep_alive, extra=extra)
            why = problem.encode() + b"\n"
            return _response(503, why, "text/plain", head=head, keep_alive=keep_alive, extra=extra)
        if path == "/":
            return _response(200, _LANDING, "text/html; charset=utf-8", head=head, keep_alive=keep_alive, extra=extra)
        return _response(404, b"not found\n", "text/plain", head=head, keep_alive=keep_alive, extra=extra)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._conversation(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _conversation(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not webconfig.allowed_san(self._web, writer.get_extra_info("peercert")):
            log.warning("client certificate SAN not allowed", extra={"peer": str(writer.get_extra_info("peername"))})
            return
        while True:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=self._read_timeout)
            except (asyncio.IncompleteReadError, TimeoutError):
                return
            except asyncio.LimitOverrunError:
                await self._reject(writer, 431, "request head too large")
                return
            request = _parse_head(head)
            if request is None:
                await self._reject(writer, 400, "malformed request")
                return
            if request.content_length > _MAX_BODY:
                await self._reject(writer, 413, "request body too large")
                return
            if request.content_length:
                await reader.readexactly(request.content_length)
            if self._auth.enabled and not await asyncio.to_thread(self._auth.check, request.authorization):
                challenge = 'WWW-Authenticate: Basic realm="kubegpu exporter"\r\n' + self._extra_headers
                writer.write(
                    _response(401, b"Unauthorized\n", "text/plain", head=False, keep_alive=False, extra=challenge)
                )
                with contextlib.suppress(ConnectionError, TimeoutError):
                    await asyncio.wait_for(writer.drain(), timeout=self._write_timeout)
                return
            writer.write(self._route(request.method, request.path, request.accepts_gzip, request.keep_alive))
            try:
                await asyncio.wait_for(writer.drain(), timeout=self._write_timeout)
            except TimeoutError:
                return
            if not request.keep_alive:
                return

    async def _reject(self, writer: asyncio.StreamWriter, status: int, why: str) -> None:
        log.debug("bad http request", extra={"status": status, "reason": why})
        writer.write(_response(status, why.encode() + b"\n", "text/plain", head=False, keep_alive=False))
        with contextlib.suppress(ConnectionError):
            await writer.drain()


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    keep_alive: bool
    accepts_gzip: bool
    content_length: int
    authorization: str | None = None


def _parse_head(raw: bytes) -> _Request | None:
    """The parts of a request head we use, or None when it is not HTTP/1.x."""
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
        return None
    method, path, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return None
    if length < 0 or "transfer-encoding" in headers:  # no chunked bodies: nothing we serve takes a body
        return None
    accepts_gzip = _accepts_gzip(headers.get("accept-encoding", ""))
    return _Request(method, path, keep_alive, accepts_gzip, length, headers.get("authorization"))


def _accepts_gzip(header: str) -> bool:
    for item in header.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() == "gzip":
            return params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False
