"""The NVML backend for real NVIDIA GPUs, on NVIDIA's official binding nvidia-ml-py (``pynvml``).

This package is the only place in kubegpu that imports ``pynvml``. Modules:
``decode`` (pure: NVML values to model values), ``library`` (finding and
starting ``libnvidia-ml.so.1``), ``discovery`` (the machine), ``events`` (the
health-event thread), ``telemetry`` (samples) and ``backend`` (:class:`NvmlBackend`,
the :class:`~kubegpu.gpu.backend.GpuBackend` implementation).
"""

from __future__ import annotations

from kubegpu.gpu.nvml.backend import NvmlBackend

__all__ = ["NvmlBackend"]
