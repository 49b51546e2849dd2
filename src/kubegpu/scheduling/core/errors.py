"""Errors of the scheduling package, one type per cause.

Owns the exception hierarchy that the core, the trace reader and the simulator
raise. Every error names what was wrong (the pod, the node, the file, line and
column) so the CLI can print one clear line. Must not import anything else of
ours and must not format for a terminal.
"""

from __future__ import annotations


class SchedulingError(Exception):
    """Base class of every error this package raises on purpose."""


class InvalidSpec(SchedulingError, ValueError):
    """A node or pod description is impossible (negative CPU, a 2-GPU fractional pod, ...)."""


class OverCommit(SchedulingError):
    """Binding would give a GPU, CPU or memory more than it has: the caller chose wrongly."""


class UnknownPod(SchedulingError, KeyError):
    """A pod name that is not bound to any node."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the message as written
        return str(self.args[0]) if self.args else "unknown pod"


class UnknownPolicy(SchedulingError, ValueError):
    """A policy name that the registry does not know."""


class TraceError(SchedulingError, ValueError):
    """A trace file that cannot be read: names the file, the line and the column.

    ``line`` is 1-based and counts the header as line 1, so it matches what an
    editor shows.
    """

    def __init__(self, path: str, line: int, column: str, message: str) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.message = message
        super().__init__(f"{path}:{line}: column {column!r}: {message}")
