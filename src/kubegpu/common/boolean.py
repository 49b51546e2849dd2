"""The one boolean parser of flags and env vars: Go's ``strconv.ParseBool``, as NVIDIA's tools and dcgm-exporter use it.

Owns the accepted words (``1 t T TRUE true True`` and ``0 f F FALSE false False``) and the
error text (``could not parse "…" as bool value``). Pure; callers decide what an empty or
unset value means and name the flag or variable in their errors.
"""

from __future__ import annotations

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: ``ValueError`` for any other word."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f'could not parse "{text}" as bool value')
