"""JSON for objects on the wire and in the store: encode, decode and deep copies, with msgspec (fast; a lightkube
dependency already). Owns nothing else."""

from __future__ import annotations

from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def encode(obj: Any) -> bytes:
    return _encoder.encode(obj)


def decode(raw: bytes) -> Any:
    """Parse JSON; raises ValueError (msgspec.DecodeError is one) on bad input."""
    return _decoder.decode(raw)


def clone(obj: Any) -> Any:
    """A deep copy of a JSON-shaped value (several times faster than copy.deepcopy)."""
    return _decoder.decode(_encoder.encode(obj))
