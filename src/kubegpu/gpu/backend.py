"""The backend interface: what every source of GPUs (simulated, NVML) offers.

Owns the :class:`GpuBackend` protocol and the :class:`HealthEvent` value that
backends emit. A backend discovers the machine once, streams health events
(XID, ECC, lost, recovered) as an async iterator, and answers telemetry
samples. Must not contain policy: which XIDs matter and what a device's
health becomes is the device plugin's decision, not the backend's.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kubegpu.gpu.model import Machine

if TYPE_CHECKING:
    from kubegpu.gpu.telemetry import MachineSample


class HealthEventKind(enum.Enum):
    """What happened to a GPU."""

    XID = "xid"  # an XID critical error (NVML EventTypeXidCriticalError)
    ECC_SBE = "ecc-sbe"  # single-bit ECC error (corrected)
    ECC_DBE = "ecc-dbe"  # double-bit ECC error (uncorrectable)
    LOST = "lost"  # the GPU fell off the bus / stopped answering
    RECOVERED = "recovered"  # an operator or the hardware says the GPU is fine again
    WAIT_ERROR = "wait-error"  # the event wait itself failed: every device is suspect


@dataclass(frozen=True)
class HealthEvent:
    """One health event on one GPU (or on all GPUs when ``gpu_uuid`` is None).

    ``gi_id``/``ci_id`` narrow an event to one MIG device; None means the whole GPU
    (NVML reports 0xFFFFFFFF for that).
    """

    kind: HealthEventKind
    gpu_uuid: str | None
    xid: int | None = None
    gi_id: int | None = None
    ci_id: int | None = None
    message: str = ""


class GpuBackend(Protocol):
    """A source of GPUs. Implementations: ``simulated.SimulatedBackend``, ``nvml.NvmlBackend``."""

    @property
    def name(self) -> str:
        """Short description for logs, e.g. ``simulated:dgx-a100`` or ``nvml:/usr/lib/...``."""
        ...

    def discover(self) -> Machine:
        """Enumerate the machine. Raises ``errors.NvmlUnavailable`` when the hardware cannot be read."""
        ...

    def health_events(self) -> AsyncIterator[HealthEvent]:
        """Health events, starting with events for conditions present now (e.g. a lost GPU).

        The iterator runs until the consuming task is cancelled; blocking waits
        happen in a worker thread, never on the event loop.
        """
        ...

    def sample(self) -> MachineSample:
        """One telemetry sample of every GPU and MIG device. May block briefly: call it off the loop."""
        ...

    def close(self, wait: bool = True) -> None:
        """Release the backend (NVML shutdown, stop worker threads).

        ``wait=False`` when the process is about to exit: worker threads are not waited
        for; what they hold is released when they end, or with the process.
        """
        ...
