"""The NVML backend for real NVIDIA GPUs, through kubegpu's own ctypes binding to ``libnvidia-ml.so.1``.

This package is the only place in kubegpu that calls NVML. Modules:
``binding`` (the C calls and struct layouts), ``decode`` (pure: NVML values to model values), ``library`` (finding and
starting ``libnvidia-ml.so.1``), ``discovery`` (the machine), ``events`` (the
health-event thread), ``telemetry`` (samples) and ``backend`` (:class:`NvmlBackend`,
the :class:`~kubegpu.gpu.backend.GpuBackend` implementation).
"""

from __future__ import annotations

from kubegpu.gpu.nvml.backend import NvmlBackend

__all__ = ["NvmlBackend"]
