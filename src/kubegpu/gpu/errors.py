"""Errors of the hardware layer, named by cause.

Owns the exception types that backends and profile loading raise. Callers at
the edges (CLI, plugin supervisor) turn them into one clear line or a retry.
"""

from __future__ import annotations


class GpuError(Exception):
    """Base of every error raised by :mod:`kubegpu.gpu`."""


class ProfileError(GpuError, ValueError):
    """A machine profile or topology file is missing or malformed; the message names file and key."""


class NvmlUnavailable(GpuError):
    """NVML cannot be used: library not found, driver mismatch, no permission, no GPUs.

    ``code`` is the NVML return code when NVML gave one, ``searched`` the places looked at.
    """

    def __init__(self, message: str, code: int | None = None, searched: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.searched = searched


class DeviceLost(GpuError):
    """A GPU stopped answering (fallen off the bus)."""
