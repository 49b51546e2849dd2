"""Fault injection: answer the next N requests that match (by resource and verb) with an error status.

Owns the pending faults and matching a request against them; the server consults it before serving a
request. Thread-safe, because tests arm faults from their own thread while the server's loop reads them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .status import StatusError, internal_error, too_many_requests


@dataclass
class Fault:
    status: int
    remaining: int
    resource: str | None  # "pods", "pods/binding", "leases", ... (None: any)
    verb: str | None  # get, list, watch, create, update, patch, delete, deletecollection (None: any)


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def arm(self, count: int, status: int = 500, resource: str | None = None, verb: str | None = None) -> None:
        if status not in (429, 500):
            raise ValueError(f"fault status must be 429 or 500, not {status}")
        with self._lock:
            self._faults.append(Fault(status, count, resource, verb))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, resource: str, verb: str) -> StatusError | None:
        """The error to answer this request with, if a fault matches it (and one fewer remains)."""
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.resource in (None, resource) and fault.verb in (None, verb):
                    fault.remaining -= 1
                    self._faults = [f for f in self._faults if f.remaining > 0]
                    if fault.status == 429:
                        return too_many_requests("Too many requests, please try again later.", retry_after=1)
                    return internal_error("injected fault")
        return None
