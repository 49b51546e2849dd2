"""What XID numbers mean: the NVIDIA driver's error catalogue, abridged, for log lines and CLI output.

Owns the table of XID meanings only. Whether an XID makes a device unhealthy is
policy and lives in the device plugin (:mod:`kubegpu.deviceplugin.rm.xids`).
"""

from __future__ import annotations

from collections.abc import Mapping

#: Short meanings (NVIDIA's XID catalogue, abridged).
XID_MEANINGS: Mapping[int, str] = {
    8: "GPU stopped responding (timeout)",
    13: "graphics engine exception",
    31: "GPU memory page fault",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing",
    45: "preemptive cleanup, due to previous errors",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapper failure",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    140: "ECC unrecovered error",
}


def meaning(xid: int) -> str:
    """A short meaning of ``xid`` (``unknown XID`` when not in the table)."""
    return XID_MEANINGS.get(xid, "unknown XID")


def describe(xid: int) -> str:
    """``79 (GPU has fallen off the bus)``."""
    return f"{xid} ({meaning(xid)})"
