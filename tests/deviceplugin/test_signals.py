"""The signal flags of the blocking command loops (``kubegpu labels``, ``kubegpu mps-daemon``)."""

from __future__ import annotations

import math
import os
import signal
import threading
import time

import pytest

from kubegpu.deviceplugin.signals import HANDLED, Signals


@pytest.mark.parametrize(
    ("signum", "hangup", "stop"),
    [(signal.SIGHUP, True, False), (signal.SIGTERM, False, True), (signal.SIGINT, False, True)],
    ids=["sighup-hangs-up", "sigterm-stops", "sigint-stops"],
)
def test_each_signal_sets_its_flag_and_only_that(signum: int, hangup: bool, stop: bool) -> None:
    signals = Signals()
    signals(signum, None)
    assert (signals.hangup, signals.stop) == (hangup, stop)


def test_a_sleep_without_a_signal_lasts_its_time_and_sets_nothing() -> None:
    signals = Signals()
    began = time.monotonic()
    signals.sleep(0.2, tick=0.05)
    assert time.monotonic() - began >= 0.2
    assert not (signals.hangup or signals.stop)


@pytest.mark.parametrize("flag", ["hangup", "stop"])
def test_a_sleep_after_a_signal_returns_at_once(flag: str) -> None:
    signals = Signals()
    setattr(signals, flag, True)
    signals.sleep(math.inf)  # would never return if the flag were not looked at first


def test_a_real_sighup_ends_an_endless_sleep_while_installed() -> None:
    with Signals().installed() as signals:
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGHUP))
        timer.start()
        try:
            signals.sleep(math.inf)
        finally:
            timer.cancel()
    assert signals.hangup and not signals.stop


def test_the_previous_handlers_come_back_after_the_block() -> None:
    before = {sig: signal.getsignal(sig) for sig in HANDLED}
    with Signals().installed() as signals:
        assert all(signal.getsignal(sig) is signals for sig in HANDLED)
    assert {sig: signal.getsignal(sig) for sig in HANDLED} == before
