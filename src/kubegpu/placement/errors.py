"""Errors of placement, named by cause.

Owns the one exception type that every policy raises for a request it cannot
answer. The device plugin maps it to gRPC ``INVALID_ARGUMENT``; the CLI to
exit status 2. Must not know about gRPC or the CLI.
"""

from __future__ import annotations


class PlacementError(ValueError):
    """A placement request is impossible or malformed; the message names the offending value.

    Examples: a size larger than the available list, a must-include device that
    is not available, an unknown GPU index or policy name.
    """
