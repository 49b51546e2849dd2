"""The NVML health watcher: one worker thread waiting on an NVML event set, feeding asyncio consumers.

Owns the event set (XID critical, double- and single-bit ECC registered on
every GPU, masked by what the GPU supports), the blocking ``nvmlEventSetWait``
loop with a short timeout so stopping is quick, and turning what NVML says into
:class:`~kubegpu.gpu.backend.HealthEvent` values handed to each subscriber's
asyncio loop with ``call_soon_threadsafe``. Conditions that last (a lost GPU, a
GPU whose events cannot be watched) are remembered and replayed to every new
subscriber first. A failed wait never ends the thread: it is reported as a
WAIT_ERROR event (every device suspect) and the wait is retried with backoff; a
lost GPU is found by probing and reported as LOST, and the event set is rebuilt
without it (a real driver answers GPU_IS_LOST to every later wait on a set that
holds a lost GPU). The replacement set is registered before the old one is freed
and before LOST is published, so every event NVML raises on a healthy GPU after a
consumer has seen LOST reaches that consumer: NVML drops events raised while no
set holds their GPU.
Must not decide health (which XIDs matter is the device plugin's business).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kubegpu.gpu.backend import HealthEvent, HealthEventKind
from kubegpu.gpu.nvml import binding, decode

log = logging.getLogger(__name__)

#: Backoff after a failed wait or a failed event-set creation, doubling up to the maximum (seconds).
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 5.0


def handle_key(handle: Any) -> int | None:
    """A device handle's address: event data carries the same pointer the handle lookup gave."""
    return ctypes.cast(handle, ctypes.c_void_p).value


class EventWatcher:
    """Watches XID and ECC events of ``gpus`` (``(uuid, handle)`` pairs) in a daemon thread.

    Parameters:
        gpus: every GPU to watch, in index order.
        wait_ms: how long one ``nvmlEventSetWait`` blocks; bounds how long :meth:`stop` takes.
    """

    def __init__(self, gpus: Sequence[tuple[str, Any]], wait_ms: int = 250) -> None:
        self._gpus = list(gpus)
        self._wait_ms = wait_ms
        self._by_handle = {handle_key(h): uuid for uuid, h in self._gpus}
        self._lock = threading.Lock()
        self._subscribers: dict[asyncio.Queue[HealthEvent], asyncio.AbstractEventLoop] = {}
        self._lost: dict[str, HealthEvent] = {}
        self._unwatched: dict[str, HealthEvent] = {}
        self._last_xid: dict[str, int] = {}
        self._stop = threading.Event()
        self._armed = threading.Event()
        self._finished = False  # the thread has freed its set and taken ``_then`` (under ``_lock``)
        self._then: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._run, name="nvml-events", daemon=True)

    # --- the asyncio side -------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> None:
        """Start the thread and wait (at most ``timeout`` seconds) until the first event set is
        registered, so that every event NVML reports after this returns is seen."""
        self._thread.start()
        self._armed.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to end and wait for it (at most ``timeout`` seconds)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def release(self, then: Callable[[], None]) -> None:
        """Ask the thread to end without waiting for it; ``then`` runs once its event set is freed.

        The thread frees its set and calls ``then`` (the NVML shutdown) when its current
        ``nvmlEventSetWait`` returns, at most ``wait_ms`` later; when the thread is not
        running, ``then`` runs here, now. A process that exits before that loses nothing:
        its NVML state ends with it. Exactly one of the two calls ``then``.
        """
        with self._lock:
            if self._thread.ident is not None and not self._finished:
                self._then = then
                self._stop.set()
                return
        then()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def subscribe(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[HealthEvent]) -> list[HealthEvent]:
        """Deliver future events to ``queue`` on ``loop``; returns the lasting conditions known now.

        Taken under the publishing lock, so a condition is either in the returned
        list or delivered later, never both and never neither.
        """
        with self._lock:
            self._subscribers[queue] = loop
            return [*self._lost.values(), *self._unwatched.values()]

    def unsubscribe(self, queue: asyncio.Queue[HealthEvent]) -> None:
        with self._lock:
            self._subscribers.pop(queue, None)

    def last_xid(self, uuid: str) -> int:
        """The last XID seen on a GPU since the watcher started (0 when none)."""
        with self._lock:
            return self._last_xid.get(uuid, 0)

    def _publish(self, event: HealthEvent) -> None:
        with self._lock:
            if event.kind is HealthEventKind.LOST and event.gpu_uuid is not None:
                self._lost[event.gpu_uuid] = event
            elif event.kind is HealthEventKind.WAIT_ERROR and event.gpu_uuid is not None:
                self._unwatched[event.gpu_uuid] = event
            elif event.kind is HealthEventKind.XID and event.gpu_uuid is not None and event.xid is not None:
                self._last_xid[event.gpu_uuid] = event.xid
            for queue, loop in list(self._subscribers.items()):
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, event)
                except RuntimeError:  # the subscriber's loop is closed: it will never read again
                    del self._subscribers[queue]
        log.info(
            "nvml health event",
            extra={"kind": event.kind.value, "gpu": event.gpu_uuid, "xid": event.xid, "detail": event.message},
        )

    # --- the worker thread ------------------------------------------------------------------

    def _is_lost(self, handle: Any) -> bool:
        """Probe a GPU with a reading that must touch the hardware."""
        try:
            binding.nvmlDeviceGetTemperature(handle, binding.TEMPERATURE_GPU)
        except binding.NvmlError as exc:
            return bool(exc.code == decode.ERROR_GPU_IS_LOST)
        return False

    def _newly_lost(self) -> list[str]:
        """GPUs that answer GPU_IS_LOST and are not known lost yet (not published here)."""
        return [uuid for uuid, handle in self._gpus if uuid not in self._lost and self._is_lost(handle)]

    @staticmethod
    def _lost_event(uuid: str) -> HealthEvent:
        return HealthEvent(HealthEventKind.LOST, uuid, message="NVML: GPU is lost")

    def _publish_lost(self, uuids: list[str]) -> None:
        for uuid in uuids:
            self._publish(self._lost_event(uuid))

    def _arm(self, skip: frozenset[str] = frozenset()) -> tuple[Any, list[HealthEvent]]:
        """A new event set with every GPU registered that is neither known lost nor in ``skip``
        (masked by supported events), and the conditions found on the way, for the caller to
        publish once the set is in use."""
        event_set = binding.nvmlEventSetCreate()
        found: list[HealthEvent] = []
        for uuid, handle in self._gpus:
            if uuid in self._lost or uuid in skip:
                continue
            try:
                supported = binding.nvmlDeviceGetSupportedEventTypes(handle)
                mask = int(supported) & decode.HEALTH_EVENTS
                if mask == 0:
                    log.warning("gpu supports no health events", extra={"gpu": uuid})
                    continue
                binding.nvmlDeviceRegisterEvents(handle, mask, event_set)
            except binding.NvmlError as exc:
                if exc.code == decode.ERROR_NOT_SUPPORTED:
                    # NVIDIA's plugin: too old to support health checking; the device stays healthy.
                    log.warning("gpu too old for health events", extra={"gpu": uuid, "error": str(exc)})
                elif exc.code == decode.ERROR_GPU_IS_LOST:
                    found.append(self._lost_event(uuid))
                elif uuid not in self._unwatched:
                    message = f"NVML: cannot watch health events: {exc} (NVML error {exc.code})"
                    found.append(HealthEvent(HealthEventKind.WAIT_ERROR, uuid, message=message))
        return event_set, found

    def _rearm_without(self, event_set: Any, lost: list[str]) -> Any:
        """Replace ``event_set`` by one without the ``lost`` GPUs, then report them.

        The order is the point: the new set is registered first, so no moment passes in
        which a healthy GPU is in no set; the old one is freed next; LOST is published
        last, so a consumer that has seen LOST is sure the new set is watching. If
        building the new set fails, nothing is published and the old set is kept: its
        next wait answers GPU_IS_LOST again and this is retried.
        """
        replacement, found = self._arm(skip=frozenset(lost))
        self._free(event_set)
        self._publish_lost(lost)
        for event in found:
            self._publish(event)
        return replacement

    def _free(self, event_set: Any) -> None:
        if event_set is None:
            return
        try:
            binding.nvmlEventSetFree(event_set)
        except binding.NvmlError as exc:
            log.debug("event set free failed", extra={"error": str(exc)})

    def _to_event(self, data: Any) -> HealthEvent | None:
        kind = decode.event_kind(int(data.eventType))
        if kind is None:
            return None
        uuid = self._by_handle.get(handle_key(data.device))
        if uuid is None:
            try:
                uuid = binding.nvmlDeviceGetUUID(data.device)
            except binding.NvmlError as exc:
                # NVIDIA's plugin: when the event's device cannot be named, every device is suspect.
                return HealthEvent(HealthEventKind.WAIT_ERROR, None, message=f"NVML: event from an unknown GPU: {exc}")
        xid = int(data.eventData) if kind is HealthEventKind.XID else None
        return HealthEvent(
            kind=kind,
            gpu_uuid=uuid,
            xid=xid,
            gi_id=decode.instance_id(int(data.gpuInstanceId)),
            ci_id=decode.instance_id(int(data.computeInstanceId)),
            message=f"NVML: XID {xid}" if xid is not None else f"NVML: {kind.value}",
        )

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        event_set: Any = None
        while not self._stop.is_set():
            try:
                if event_set is None:
                    try:
                        self._publish_lost(self._newly_lost())
                    except Exception:  # a probe failing oddly must not keep the watcher from watching
                        log.exception("nvml lost-GPU probe failed")
                    try:
                        event_set, found = self._arm()
                        for event in found:
                            self._publish(event)
                    finally:
                        self._armed.set()
                data = binding.nvmlEventSetWait(event_set, self._wait_ms)
            except binding.NvmlError as exc:
                if exc.code == decode.ERROR_TIMEOUT:
                    backoff = BACKOFF_MIN_S
                    continue
                if exc.code == decode.ERROR_GPU_IS_LOST and event_set is not None:
                    try:
                        lost = self._newly_lost()
                        if lost:
                            event_set = self._rearm_without(event_set, lost)
                            backoff = BACKOFF_MIN_S
                            continue
                    except Exception:  # the old set is kept; its next wait answers GPU_IS_LOST again
                        log.exception("nvml event set rebuild failed")
                        self._stop.wait(backoff)
                        backoff = min(backoff * 2, BACKOFF_MAX_S)
                        continue
                # Like NVIDIA's plugin: every device is suspect, and the same set is waited on again.
                message = f"NVML: waiting for events failed: {exc} (NVML error {exc.code})"
                self._publish(HealthEvent(HealthEventKind.WAIT_ERROR, None, message=message))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            except Exception:  # never let the watcher die silently; NVML is foreign code
                log.exception("nvml event watcher error")
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_MIN_S
            live = self._to_event(data)
            if live is not None:
                self._publish(live)
        self._free(event_set)
        with self._lock:
            self._finished = True
            then, self._then = self._then, None
        if then is not None:
            then()
