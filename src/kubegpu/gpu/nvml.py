"""The NVML backend (placeholder until the NVML issue lands): every call says NVML is not available yet."""

from __future__ import annotations

from collections.abc import AsyncIterator

from kubegpu.gpu import errors
from kubegpu.gpu.backend import HealthEvent
from kubegpu.gpu.model import Machine
from kubegpu.gpu.telemetry import MachineSample


class NvmlBackend:
    def __init__(self, driver_root: str = "/", container_driver_root: str = "/driver-root", sysfs_root: str = "/sys"):
        self.driver_root = driver_root
        self.container_driver_root = container_driver_root
        self.sysfs_root = sysfs_root

    @property
    def name(self) -> str:
        return "nvml"

    def discover(self) -> Machine:
        raise errors.NvmlUnavailable("the NVML backend is not implemented yet; use --machine PROFILE")

    async def health_events(self) -> AsyncIterator[HealthEvent]:
        raise errors.NvmlUnavailable("the NVML backend is not implemented yet")
        yield  # pragma: no cover - makes this an async generator

    def sample(self) -> MachineSample:
        raise errors.NvmlUnavailable("the NVML backend is not implemented yet")

    def close(self) -> None:
        return None
