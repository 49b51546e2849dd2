"""Choosing a backend: a simulated machine when a profile is given, NVML otherwise.

Owns the one function daemons call to get their :class:`~kubegpu.gpu.backend.GpuBackend`,
and the one oneshot commands call to read the machine once. Imports the NVML backend
lazily so simulated runs never load the NVML binding.
"""

from __future__ import annotations

from pathlib import Path

from kubegpu.gpu.backend import GpuBackend
from kubegpu.gpu.model import Machine


def open_backend(
    machine: str | None,
    *,
    fault_file: Path | None = None,
    driver_root: str = "/",
    container_driver_root: str = "/driver-root",
    sysfs_root: str | None = None,
) -> GpuBackend:
    """A simulated backend for profile ``machine``, or the NVML backend when ``machine`` is None.

    ``sysfs_root`` None means ``$KUBEGPU_SYSFS_ROOT``, else ``/sys`` (see ``NvmlBackend``).

    Raises ``errors.ProfileError`` for an unknown profile; NVML problems surface
    from ``discover()`` as ``errors.NvmlUnavailable``.
    """
    if machine is not None:
        from kubegpu.gpu.simulated import SimulatedBackend

        return SimulatedBackend(machine, fault_file=fault_file)
    from kubegpu.gpu.nvml import NvmlBackend

    return NvmlBackend(driver_root=driver_root, container_driver_root=container_driver_root, sysfs_root=sysfs_root)


def read_machine(
    machine: str | None, *, driver_root: str = "/", container_driver_root: str = "/driver-root"
) -> Machine:
    """Profile ``machine`` as shipped, or (None) what NVML discovers under the driver roots, NVML closed again.

    Raises ``errors.ProfileError`` for an unknown profile, ``errors.NvmlUnavailable`` when NVML cannot be read.
    """
    if machine is not None:
        from kubegpu.gpu import profiles

        return profiles.load(machine)
    backend = open_backend(None, driver_root=driver_root, container_driver_root=container_driver_root)
    try:
        return backend.discover()
    finally:
        backend.close()
