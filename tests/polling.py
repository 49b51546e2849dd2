"""The suite's one way to wait for a condition: poll it until it holds or a deadline passes.

Tests never sleep a fixed time and then assert; they wait here for the state they need, with a
deadline, so a slow machine makes them slower, not wrong. The sleeps inside these loops are the poll
interval, not synchronisation. This module must not grow test-specific predicates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], within: float = 20.0, what: str = "condition", interval: float = 0.02) -> T:
    """Call ``check`` until it returns something truthy (returned) or ``within`` seconds pass (AssertionError)."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {within} s (last value: {value!r})")
        time.sleep(interval)


async def eventually(
    check: Callable[[], T] | Callable[[], Awaitable[T]],
    within: float = 20.0,
    what: str = "condition",
    interval: float = 0.02,
) -> T:
    """Async ``wait_until``: ``check`` may be a plain or an async callable."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {within} s (last value: {value!r})")
        await asyncio.sleep(interval)
