"""The emulator's control API: newline-delimited JSON over a local unix socket.

Owns the server side of the protocol documented in :mod:`kubegpu.kubelet.client`
(``status``, ``admit``, ``delete``, ``watch``, ``ping``): reading one JSON
request per line, answering one JSON line, and streaming events to watchers.
A bad request gets an error answer on the same connection; nothing a client
sends can stop the daemon. Must not contain admission logic (that is
:class:`~kubegpu.kubelet.node.Node`'s).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path

from kubegpu.kubelet import errors, pod
from kubegpu.kubelet.node import Node

log = logging.getLogger(__name__)

#: Largest request line accepted (a pod manifest is far smaller).
MAX_LINE = 16 * 1024 * 1024


class ControlServer:
    def __init__(self, node: Node, socket_path: Path) -> None:
        self.node = node
        self.socket_path = socket_path
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.socket_path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path), limit=MAX_LINE)
        # Admitting pods is a node-admin action: owner and group only.
        os.chmod(self.socket_path, 0o660)
        log.info("serving control API", extra={"socket": str(self.socket_path)})

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        self.socket_path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    await _send(writer, _error("BadRequest", f"request longer than {MAX_LINE} bytes"))
                    break
                if not line:
                    break
                if not line.strip():
                    continue
                request = _decode(line)
                if isinstance(request, str):
                    await _send(writer, _error("BadRequest", request))
                    continue
                if request.get("op") == "watch":
                    await self._watch(reader, writer)
                    break
                await _send(writer, await self._handle(request))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, request: dict[str, object]) -> dict[str, object]:
        op = request.get("op")
        try:
            if op == "ping":
                return {"ok": True, "result": {"pid": os.getpid()}}
            if op == "status":
                self.node.manager.sweep()
                return {"ok": True, "result": self.node.status()}
            if op == "admit":
                try:
                    parsed = pod.parse(request.get("pod"))
                except errors.PodManifestError as exc:
                    return _error("BadRequest", f"not a valid Pod: {exc}")
                return {"ok": True, "result": await self.node.admit(parsed)}
            if op == "delete":
                namespace, name = request.get("namespace"), request.get("name")
                if not isinstance(namespace, str) or not isinstance(name, str) or not namespace or not name:
                    return _error("BadRequest", "delete needs string fields namespace and name")
                return {"ok": True, "result": await self.node.delete(namespace, name)}
            return _error("BadRequest", f"unknown op {op!r} (choose from ping, status, admit, delete, watch)")
        except errors.ControlError as exc:
            return _error(exc.reason, exc.message, exc.detail)
        except Exception as exc:
            # A daemon never dies on a bad request: report, log with the traceback, carry on.
            log.exception("control request failed", extra={"op": op})
            return _error("InternalError", f"{type(exc).__name__}: {exc}")

    async def _watch(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sub = self.node.events.subscribe()
        try:
            hello = {"event": "snapshot", "seq": self.node.events.seq, "status": self.node.status()}
            await _send(writer, {"ok": True, "result": hello})
            closed = asyncio.ensure_future(reader.read())
            while True:
                getter = asyncio.ensure_future(sub.get())
                done, _ = await asyncio.wait({getter, closed}, return_when=asyncio.FIRST_COMPLETED)
                if closed in done:
                    getter.cancel()
                    break
                event = getter.result()
                if event is None:
                    break
                await _send(writer, event)
            closed.cancel()
        finally:
            sub.close()


def _decode(line: bytes) -> dict[str, object] | str:
    try:
        request = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"request is not JSON: {exc}"
    if not isinstance(request, dict):
        return "request must be a JSON object with an 'op' field"
    return request


def _error(reason: str, message: str, detail: dict[str, object] | None = None) -> dict[str, object]:
    error: dict[str, object] = {"reason": reason, "message": message}
    if detail:
        error["detail"] = detail
    return {"ok": False, "error": error}


async def _send(writer: asyncio.StreamWriter, message: dict[str, object]) -> None:
    writer.write(json.dumps(message, default=str).encode() + b"\n")
    await writer.drain()
