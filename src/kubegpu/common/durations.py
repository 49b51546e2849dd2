"""Go's ``time.Duration`` text: parsing and printing durations as NVIDIA's flags and config files spell them.

Owns ``time.ParseDuration`` (``1h2m3.5s``, ``250ms``, ``-1.5h``; NVIDIA's error texts
``time: invalid duration "…"``, ``time: missing unit in duration "…"``), ``Duration.String()``
(``1m0s``), the canonical form of a duration given as nanoseconds, a Go string or
``infinite``, and kubegpu's own durations where a bare number means seconds. Pure;
knows no flag or key (callers name those in their errors).
"""

from __future__ import annotations

import math
import re
from typing import Any

INFINITE = "infinite"
_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9}
_UNITS_NS["h"] = 3600 * 10**9
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration_ns(text: str) -> int:
    """Parse a Go duration string (``1h30m``, ``60s``, ``1.5s``, ``250ms``, ``0``) into nanoseconds.

    Raises ``ValueError`` with Go's texts (``time: invalid duration "x"``, ``time: missing unit in duration "60"``).
    """
    original = text
    s = text.strip()
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f'time: invalid duration "{original}"')
    total = 0.0
    pos = 0
    while pos < len(s):
        match = _DURATION_PART.match(s, pos)
        if match is None or match.group(1) in ("", "."):
            if re.fullmatch(r"[0-9.]+", s[pos:]):
                raise ValueError(f'time: missing unit in duration "{original}"')
            raise ValueError(f'time: invalid duration "{original}"')
        total += float(match.group(1)) * _UNITS_NS[match.group(2)]
        pos = match.end()
    return sign * round(total)


def format_duration_ns(ns: int) -> str:
    """Go's ``time.Duration.String()``: ``1m0s``, ``1.5s``, ``250ms``, ``0s``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    hours, rest = divmod(ns, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = _trim(rest / 10**9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def normalise_duration(value: Any, *, allow_infinite: bool) -> str:
    """A file/flag duration (int nanoseconds, Go duration string, or ``infinite``) in canonical Go form."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: expected a duration string like 60s")
    if isinstance(value, int):
        return format_duration_ns(value)
    if isinstance(value, str):
        if value.strip().lower() == INFINITE:
            if not allow_infinite:
                raise ValueError(f"invalid duration {value!r}: 'infinite' is not allowed here")
            return INFINITE
        return format_duration_ns(parse_duration_ns(value))
    raise ValueError(f"invalid duration {value!r}: expected a duration string like 60s")


def normalise_seconds(value: Any) -> str:
    """kubegpu's own durations: a bare number is seconds (``300``, ``"2.5"``), else as :func:`normalise_duration`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0 or value != value or value == math.inf:
            raise ValueError(f"invalid duration {value!r}: must be a finite number of seconds >= 0")
        return format_duration_ns(round(value * 1e9))
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+(\.[0-9]*)?\s*", value):
        return format_duration_ns(round(float(value) * 1e9))
    if isinstance(value, str) and re.fullmatch(r"\s*-\s*[0-9.]+\s*", value):
        raise ValueError(f"invalid duration {value!r}: must be a finite number of seconds >= 0")
    return normalise_duration(value, allow_infinite=False)


def duration_seconds(value: str) -> float:
    """Seconds of a canonical duration; ``math.inf`` for ``infinite``."""
    if value == INFINITE:
        return math.inf
    return parse_duration_ns(value) / 1e9
