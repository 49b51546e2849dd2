"""Which named config a node gets: NVIDIA config-manager's selection order, as a pure function.

The label's value names a config, which must exist; without the label, ``--default-config``; without that, the
fallback strategies in order: ``named`` (a config literally named ``default``), ``single`` (the only config there
is) and ``empty`` (no config file: the plugin's flags and defaults alone). Must do no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

#: The config name that stands for "no config file" (the link then points at /dev/null).
EMPTY = ""
FALLBACK_STRATEGIES = ("named", "single", "empty")


class SelectionError(ValueError):
    """No config can be chosen; the message says why, naming the label or the strategy."""


@dataclass(frozen=True)
class Selection:
    """The chosen config name (``EMPTY`` for none) and what chose it (``label``, ``default``, a fallback)."""

    name: str
    reason: str


def parse_fallbacks(text: str) -> tuple[str, ...]:
    """``named,single`` → ("named", "single"); an unknown strategy is a SelectionError naming it."""
    strategies = tuple(s.strip() for s in text.split(",") if s.strip())
    for strategy in strategies:
        if strategy not in FALLBACK_STRATEGIES:
            raise SelectionError(
                f"invalid fallback strategy {strategy!r} (choose from {', '.join(FALLBACK_STRATEGIES)})"
            )
    return strategies


def select(
    label_value: str | None, available: Collection[str], default: str, fallbacks: Sequence[str], label: str
) -> Selection:
    """The config for a node whose ``label`` is ``label_value`` (None: not set) among ``available`` names."""
    if label_value:
        if label_value not in available:
            raise SelectionError(
                f"the node label {label}={label_value} names a config that does not exist "
                f"(available: {', '.join(sorted(available)) or 'none'})"
            )
        return Selection(label_value, "label")
    if default:
        if default not in available:
            raise SelectionError(
                f"the default config {default!r} does not exist (available: {', '.join(sorted(available)) or 'none'})"
            )
        return Selection(default, "default")
    for strategy in fallbacks:
        if strategy == "named" and "default" in available:
            return Selection("default", "fallback named")
        if strategy == "single" and len(available) == 1:
            return Selection(next(iter(available)), "fallback single")
        if strategy == "empty":
            return Selection(EMPTY, "fallback empty")
    raise SelectionError(
        f"the node has no {label} label, no default config is set and no fallback strategy "
        f"({', '.join(fallbacks) or 'none'}) applies to the {len(available)} configs available"
    )
