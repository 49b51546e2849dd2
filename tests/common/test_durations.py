"""Go durations: parsed and printed as Go's time package does, bare numbers as seconds where kubegpu allows them."""

from __future__ import annotations

import pytest

from kubegpu.common import durations

DURATIONS = [("60s", "1m0s"), ("1h30m", "1h30m0s"), ("1.5s", "1.5s"), ("250ms", "250ms"), ("0", "0s"),
             ("infinite", "infinite"), ("Infinite", "infinite")]  # fmt: skip


@pytest.mark.parametrize(("text", "canonical"), DURATIONS, ids=[t for t, _ in DURATIONS])
def test_durations_parse_as_go_durations(text: str, canonical: str) -> None:
    assert durations.normalise_duration(text, allow_infinite=True) == canonical


BAD = [("5", 'time: missing unit in duration "5"'), ("1x", 'time: invalid duration "1x"')]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[t for t, _ in BAD])
def test_a_bad_go_duration_is_refused_with_gos_text(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        durations.normalise_duration(text, allow_infinite=False)


@pytest.mark.parametrize(
    ("value", "canonical"), [(300, "5m0s"), ("2.5", "2.5s"), ("5m", "5m0s")], ids=["int", "str", "go"]
)
def test_kubegpu_durations_take_bare_numbers_as_seconds(value: object, canonical: str) -> None:
    assert durations.normalise_seconds(value) == canonical
    assert durations.normalise_seconds(canonical) == canonical  # canonical text is a fixed point
