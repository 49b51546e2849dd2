"""NVIDIA config-manager's selection order: label, then --default-config, then the fallbacks in order."""

from __future__ import annotations

import pytest

from kubegpu.configmanager.selection import EMPTY, Selection, SelectionError, parse_fallbacks, select

LABEL = "nvidia.com/device-plugin.config"


@pytest.mark.parametrize(
    ("label", "available", "default", "fallbacks", "chosen"),
    [
        ("a100", {"a100", "default"}, "", ("named", "single"), Selection("a100", "label")),
        (None, {"a100", "t4"}, "t4", ("named",), Selection("t4", "default")),
        ("", {"a100", "default"}, "", ("named", "single"), Selection("default", "fallback named")),
        (None, {"only"}, "", ("named", "single"), Selection("only", "fallback single")),
        (None, {"only"}, "", ("single", "named"), Selection("only", "fallback single")),
        (None, {"a", "b"}, "", ("named", "single", "empty"), Selection(EMPTY, "fallback empty")),
        (None, set(), "", ("empty",), Selection(EMPTY, "fallback empty")),
    ],
    ids=["label", "default-config", "named", "single", "order", "empty", "empty-dir"],
)
def test_selection_order(
    label: str | None, available: set[str], default: str, fallbacks: tuple[str, ...], chosen: Selection
) -> None:
    assert select(label, available, default, fallbacks, LABEL) == chosen


@pytest.mark.parametrize(
    ("label", "available", "default", "fallbacks", "message"),
    [
        ("h100", {"a100"}, "", ("named",), "nvidia.com/device-plugin.config=h100 names a config that does not exist"),
        (None, {"a100"}, "t4", ("single",), "default config 't4' does not exist"),
        (None, {"a", "b"}, "", ("named", "single"), "no fallback strategy (named, single) applies to the 2 configs"),
    ],
    ids=["unknown-label-value", "unknown-default", "nothing-applies"],
)
def test_no_config_can_be_chosen(
    label: str | None, available: set[str], default: str, fallbacks: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SelectionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        select(label, available, default, fallbacks, LABEL)


def test_fallback_strategies_parse_and_reject_unknown_names() -> None:
    assert parse_fallbacks("named, single,empty") == ("named", "single", "empty")
    with pytest.raises(SelectionError, match="'first'"):
        parse_fallbacks("named,first")
