"""A background task of the live scheduler (an informer, a bind) that fails is logged, not lost silently."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kubegpu.scheduling.live import scheduler


def test_a_failed_task_is_logged_once_with_its_error_and_a_cancelled_one_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise RuntimeError("watch stream broke")

    async def main() -> None:
        failed = asyncio.ensure_future(fail())
        failed.add_done_callback(scheduler._log_failure)
        cancelled = asyncio.ensure_future(asyncio.Event().wait())
        cancelled.add_done_callback(scheduler._log_failure)
        cancelled.cancel()
        await asyncio.gather(failed, cancelled, return_exceptions=True)

    with caplog.at_level(logging.ERROR, logger=scheduler.__name__):
        asyncio.run(main())
    records = [r for r in caplog.records if r.name == scheduler.__name__]
    assert [r.getMessage() for r in records] == ["background task failed"]
    assert records[0].__dict__["error"] == "RuntimeError: watch stream broke"
