"""BackgroundTask: one task while started, cancelled and awaited by stop, startable again."""

from __future__ import annotations

import asyncio

from kubegpu.common.tasks import BackgroundTask


def test_start_makes_one_task_stop_cancels_and_awaits_it_and_it_can_start_again() -> None:
    runs: list[str] = []
    started, ended = asyncio.Event(), asyncio.Event()

    async def run() -> None:
        runs.append("run")
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    async def main() -> None:
        task = BackgroundTask("probe", run)
        task.start()
        task.start()  # idempotent: still one task
        await asyncio.wait_for(started.wait(), 10)
        assert runs == ["run"] and task.running
        await task.stop()
        assert ended.is_set() and not task.running
        await task.stop()  # nothing to stop
        started.clear()
        task.start()
        await asyncio.wait_for(started.wait(), 10)
        assert runs == ["run", "run"]
        await task.stop()

    asyncio.run(main())
