"""Signals of the device plugin's blocking command loops (``kubegpu labels``, ``kubegpu mps-daemon``).

Owns turning SIGHUP into a ``hangup`` flag and SIGTERM/SIGINT into a ``stop`` flag while
a loop runs (the previous handlers come back afterwards), and a sleep that either flag
cuts short. Must not act on the flags: what a hang-up means (reload the config, restart
the daemons) is the command's. Not for asyncio programs, which use the loop's own
signal handlers (the plugin's supervisor, the exporter, the kubelet emulator).
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Iterator
from types import FrameType

HANDLED = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)


class Signals:
    """SIGHUP sets ``hangup``, SIGTERM/SIGINT set ``stop``. The handler only sets flags (no locks in a handler)."""

    def __init__(self) -> None:
        self.stop = False
        self.hangup = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            self.hangup = True
        else:
            self.stop = True

    def sleep(self, seconds: float, tick: float = 0.1) -> None:
        """Sleep ``seconds`` (forever when infinite) or until a flag is set, whichever comes first."""
        deadline = time.monotonic() + seconds
        while not (self.stop or self.hangup) and time.monotonic() < deadline:
            time.sleep(tick if math.isinf(seconds) else min(tick, max(0.0, deadline - time.monotonic())))

    @contextlib.contextmanager
    def installed(self) -> Iterator[Signals]:
        """These handlers while the block runs, the previous ones afterwards."""
        previous = {sig: signal.signal(sig, self) for sig in HANDLED}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
