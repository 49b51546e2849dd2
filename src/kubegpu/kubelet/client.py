"""Talk to a running ``kubegpu kubelet``: plain functions for tests, the demo, benchmarks and the CLI.

Owns the client side of the control API and is where the protocol is
documented. Must not import the daemon's modules (a client stays light).

Where: the control socket of an emulator started with ``--socket-dir DIR``
is ``DIR/.kubegpu-kubelet/control.sock`` (a directory survives the
emulator's start-up clean-up of DIR and plugins watching DIR never see events
inside it). :func:`control_socket` computes it.

Protocol: newline-delimited JSON over that unix socket. The client sends one
object per line with an ``op``; the emulator answers one line per request,
in order, on the same connection::

    -> {"op": "ping"}
    <- {"ok": true, "result": {"pid": 1234}}
    -> {"op": "status"}
    <- {"ok": true, "result": {"resources": {...}, "pods": [...], "node": {...}}}
    -> {"op": "admit", "pod": {<a Pod manifest as a JSON object>}}
    <- {"ok": true, "result": {"pod": {...}, "containers": {NAME: {"envs": {}, "mounts": [], "devices": [],
                                "annotations": {}, "cdi_devices": [], ...}}, "allocate_rpcs": 1}}
    -> {"op": "delete", "namespace": "default", "name": "train"}
    <- {"ok": true, "result": {"deleted": {...}, "freed": {CONTAINER: {RESOURCE: [ids]}}}}

A failure is ``{"ok": false, "error": {"reason": R, "message": M, "detail": {...}}}``
with ``reason`` one of ``BadRequest`` (the request or manifest is wrong),
``UnexpectedAdmissionError`` / ``TopologyAffinityError`` (the pod was
rejected; nothing changed; ``message`` is the kubelet's),
``CreateContainerConfigError`` (admitted, but a container could not start;
``detail`` is the admit result with an ``error`` per failed container),
``NotFound``, ``AlreadyExists``, ``InternalError``.

``{"op": "watch"}`` turns the connection into an event stream: first
``{"ok": true, "result": {"event": "snapshot", "seq": N, "status": {...}}}``,
then one object per state change, each ``{"event": KIND, "seq": N, "ts":
<unix time when the change was applied>, ..., "status": {...}}`` with KIND
``devices`` (a ListAndWatch message: ``resource``, ``healthy``,
``unhealthy``), ``registered``, ``disconnected``, ``removed``,
``admitted``, ``deleted``. The stream ends when the client closes it or the
emulator stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from kubegpu.api import constants
from kubegpu.kubelet import errors
from kubegpu.kubelet import pod as podmodel

DEFAULT_SOCKET_DIR = Path(constants.DEVICE_PLUGIN_PATH)
DEFAULT_TIMEOUT_S = 60.0

Status = dict[str, Any]


def control_socket(socket_dir: str | Path = DEFAULT_SOCKET_DIR) -> Path:
    return Path(socket_dir) / ".kubegpu-kubelet" / "control.sock"


def load_manifest(path: str | Path) -> dict[str, Any]:
    """Read a Pod manifest file (YAML or JSON); errors name the file and the problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise errors.PodManifestError(f"{path}: not a Pod manifest (not UTF-8 text)") from None
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise errors.PodManifestError(f"{path}: cannot read: {why}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise errors.PodManifestError(f"{path}: malformed YAML: {exc}".replace("\n", " ")) from None
    if len(docs) != 1:
        raise errors.PodManifestError(f"{path}: expected one Pod document, found {len(docs)}")
    if not isinstance(docs[0], dict):
        raise errors.PodManifestError(f"{path}: not a Pod: the document is a {type(docs[0]).__name__}, not a mapping")
    return docs[0]


def _pod_body(pod: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    manifest = load_manifest(pod) if isinstance(pod, str | Path) else dict(pod)
    try:
        podmodel.parse(manifest)
    except errors.PodManifestError as exc:
        where = f"{pod}: " if isinstance(pod, str | Path) else ""
        raise errors.PodManifestError(f"{where}not a valid Pod: {exc}") from None
    return manifest


def _answer(line: bytes, sock: Path) -> Any:
    if not line:
        raise errors.KubeletUnavailable(f"kubegpu kubelet at {sock} closed the connection")
    reply = json.loads(line)
    if reply.get("ok"):
        return reply.get("result")
    error = reply.get("error") or {}
    raise errors.ControlError(
        str(error.get("reason", "InternalError")), str(error.get("message", "unknown error")), error.get("detail")
    )


def _connect(socket_dir: str | Path, timeout: float | None) -> socket.socket:
    path = control_socket(socket_dir)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        s.close()
        raise errors.KubeletUnavailable(
            f"no kubegpu kubelet is running for socket dir {socket_dir} (nothing answers on {path})"
        ) from None
    except OSError as exc:
        s.close()
        raise errors.KubeletUnavailable(f"cannot reach kubegpu kubelet at {path}: {exc}") from None
    return s


def request(
    message: Mapping[str, Any], socket_dir: str | Path = DEFAULT_SOCKET_DIR, timeout: float = DEFAULT_TIMEOUT_S
) -> Any:
    """Send one request and return its ``result``; raises ControlError or KubeletUnavailable."""
    with _connect(socket_dir, timeout) as s, s.makefile("rb") as f:
        try:
            s.sendall(json.dumps(message).encode() + b"\n")
            line = f.readline()
        except TimeoutError:
            raise errors.KubeletUnavailable(
                f"kubegpu kubelet at {control_socket(socket_dir)} did not answer within {timeout:g} s"
            ) from None
        return _answer(line, control_socket(socket_dir))


def ping(socket_dir: str | Path = DEFAULT_SOCKET_DIR, timeout: float = 5.0) -> dict[str, Any]:
    result: dict[str, Any] = request({"op": "ping"}, socket_dir, timeout)
    return result


def status(socket_dir: str | Path = DEFAULT_SOCKET_DIR, timeout: float = DEFAULT_TIMEOUT_S) -> Status:
    """Capacity, allocatable and devices per resource, pods with their devices, node facts."""
    result: Status = request({"op": "status"}, socket_dir, timeout)
    return result


def admit(
    pod: Mapping[str, Any] | str | Path, socket_dir: str | Path = DEFAULT_SOCKET_DIR, timeout: float = DEFAULT_TIMEOUT_S
) -> dict[str, Any]:
    """Admit a pod (a manifest dict or a path to a YAML/JSON file); returns each container's runtime options.

    Raises PodManifestError for a bad manifest (nothing sent), ControlError when the
    emulator rejects the pod or a container cannot start.
    """
    result: dict[str, Any] = request({"op": "admit", "pod": _pod_body(pod)}, socket_dir, timeout)
    return result


def delete(
    target: str, socket_dir: str | Path = DEFAULT_SOCKET_DIR, timeout: float = DEFAULT_TIMEOUT_S
) -> dict[str, Any]:
    """Delete ``NAMESPACE/NAME`` (or ``NAME`` in namespace ``default``); returns the freed devices."""
    namespace, name = split_target(target)
    result: dict[str, Any] = request({"op": "delete", "namespace": namespace, "name": name}, socket_dir, timeout)
    return result


def split_target(target: str) -> tuple[str, str]:
    namespace, sep, name = target.partition("/")
    if not sep:
        namespace, name = "default", target
    if not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/NAME, got {target!r}")
    return namespace, name


@contextlib.contextmanager
def watch(
    socket_dir: str | Path = DEFAULT_SOCKET_DIR, timeout: float | None = None
) -> Iterator[Iterator[dict[str, Any]]]:
    """A stream of events: the ``snapshot`` first, then one per state change.

    Use as ``with client.watch(dir) as events: for e in events: ...``; leaving the
    block closes the stream. ``timeout`` bounds each wait for an event
    (TimeoutError), None waits forever.
    """
    s = _connect(socket_dir, timeout)
    f = s.makefile("rb")

    def events() -> Iterator[dict[str, Any]]:
        s.sendall(b'{"op": "watch"}\n')
        yield _answer(f.readline(), control_socket(socket_dir))
        for line in f:
            yield json.loads(line)

    try:
        yield events()
    finally:
        f.close()
        s.close()


def wait_for(
    predicate: Callable[[Status], bool], socket_dir: str | Path = DEFAULT_SOCKET_DIR, timeout: float = 30.0
) -> Status:
    """Block until the emulator's status satisfies ``predicate``; returns that status.

    Raises TimeoutError (naming the last status' resources) if it does not happen in time.
    """
    deadline = time.monotonic() + timeout
    last: Status = {}
    with watch(socket_dir, timeout=timeout) as events:
        try:
            for event in events:
                last = event.get("status") or last
                if predicate(last):
                    return last
                if time.monotonic() > deadline:
                    break
        except TimeoutError:
            pass
    raise TimeoutError(f"status did not reach the expected state within {timeout:g} s; last: {_brief(last)}")


def _brief(status: Status) -> str:
    resources = status.get("resources") or {}
    return ", ".join(f"{n} {r['allocatable']}/{r['capacity']}" for n, r in resources.items()) or "no resources"


# ----- asyncio flavour, for callers that run an event loop (bound them with asyncio.timeout) ----------


async def _open(socket_dir: str | Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    path = control_socket(socket_dir)
    try:
        return await asyncio.open_unix_connection(str(path), limit=64 * 1024 * 1024)
    except (FileNotFoundError, ConnectionRefusedError):
        raise errors.KubeletUnavailable(
            f"no kubegpu kubelet is running for socket dir {socket_dir} (nothing answers on {path})"
        ) from None


async def async_request(message: Mapping[str, Any], socket_dir: str | Path = DEFAULT_SOCKET_DIR) -> Any:
    reader, writer = await _open(socket_dir)
    try:
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()
        return _answer(await reader.readline(), control_socket(socket_dir))
    finally:
        writer.close()


async def async_status(socket_dir: str | Path = DEFAULT_SOCKET_DIR) -> Status:
    result: Status = await async_request({"op": "status"}, socket_dir)
    return result


async def async_admit(
    pod: Mapping[str, Any] | str | Path, socket_dir: str | Path = DEFAULT_SOCKET_DIR
) -> dict[str, Any]:
    result: dict[str, Any] = await async_request({"op": "admit", "pod": _pod_body(pod)}, socket_dir)
    return result


async def async_delete(target: str, socket_dir: str | Path = DEFAULT_SOCKET_DIR) -> dict[str, Any]:
    namespace, name = split_target(target)
    result: dict[str, Any] = await async_request({"op": "delete", "namespace": namespace, "name": name}, socket_dir)
    return result


async def async_watch(socket_dir: str | Path = DEFAULT_SOCKET_DIR) -> AsyncGenerator[dict[str, Any], None]:
    """Async generator of events (snapshot first); close it (``aclose``) to end the stream."""
    reader, writer = await _open(socket_dir)
    try:
        writer.write(b'{"op": "watch"}\n')
        await writer.drain()
        yield _answer(await reader.readline(), control_socket(socket_dir))
        while line := await reader.readline():
            yield json.loads(line)
    finally:
        writer.close()


async def async_wait_for(
    predicate: Callable[[Status], bool], socket_dir: str | Path = DEFAULT_SOCKET_DIR, within: float = 30.0
) -> Status:
    """Like :func:`wait_for`, without blocking the event loop; gives up after ``within`` seconds."""
    last: Status = {}

    async def scan() -> Status:
        nonlocal last
        events = async_watch(socket_dir)
        try:
            async for event in events:
                last = event.get("status") or last
                if predicate(last):
                    return last
        finally:
            await events.aclose()
        raise errors.KubeletUnavailable("the emulator closed the event stream")

    try:
        async with asyncio.timeout(within):
            return await scan()
    except TimeoutError:
        raise TimeoutError(
            f"status did not reach the expected state within {within:g} s; last: {_brief(last)}"
        ) from None
