"""The polling helper returns the first truthy value and fails with the last one at its deadline."""

from __future__ import annotations

import itertools

import pytest

from tests.polling import eventually, wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "ready", within=5) == "ready"


def test_wait_until_names_what_it_waited_for_at_the_deadline() -> None:
    with pytest.raises(AssertionError, match=r"the door not met within 0.05 s \(last value: 0\)"):
        wait_until(lambda: 0, within=0.05, what="the door")


async def test_eventually_awaits_async_checks() -> None:
    counter = itertools.count()

    async def check() -> int:
        return max(0, next(counter) - 2)

    assert await eventually(check, within=5) == 1


async def test_eventually_fails_at_its_deadline() -> None:
    with pytest.raises(AssertionError, match="condition not met"):
        await eventually(lambda: None, within=0.05)
