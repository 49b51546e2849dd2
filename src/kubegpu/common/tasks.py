"""One named background task a component runs between its ``start`` and its ``stop``.

Owns :class:`BackgroundTask`: ``start`` creates the task once (again after ``stop``), ``stop`` cancels it and waits
for it to end. Must not decide what the task does, retry it or log for it: the component's coroutine does that.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any


class BackgroundTask:
    """The task named ``name`` that ``run()`` makes, while started."""

    def __init__(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.name = name
        self._run = run
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Create the task on the running loop; idempotent."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the task and wait until it has ended; nothing when it is not running."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
