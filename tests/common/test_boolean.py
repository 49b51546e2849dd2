"""The one boolean parser: exactly Go's strconv.ParseBool words."""

from __future__ import annotations

import pytest

from kubegpu.common import boolean

WORDS = [("1", True), ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
         ("0", False), ("f", False), ("F", False), ("FALSE", False), ("false", False), ("False", False)]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), WORDS, ids=[t for t, _ in WORDS])
def test_gos_words_parse(text: str, value: bool) -> None:
    assert boolean.parse_bool(text) is value


@pytest.mark.parametrize("text", ["yes", "on", "tRuE", "", " true"], ids=["yes", "on", "mixed-case", "empty", "space"])
def test_other_words_are_refused_with_gos_text(text: str) -> None:
    with pytest.raises(ValueError, match=f'could not parse "{text}" as bool value'):
        boolean.parse_bool(text)
