"""Finding on the host what the plugin's CDI specs must mention.

Owns host discovery for :class:`~kubegpu.deviceplugin.cdi.generate.HostFiles`: the
control nodes under the dev root, the driver libraries (``<lib>.<driver version>``)
and their soname links under the driver root's library directories, and the
gdrcopy/GDS/MOFED device nodes. Reads the file system only; must not write
(that is :mod:`.writer`) or build specs (that is :mod:`.generate`).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path

from kubegpu.deviceplugin.cdi import generate
from kubegpu.gpu.driver import LIBRARY_DIRS

#: Driver libraries a CUDA container needs (versioned with the driver: ``<name>.<driver version>``).
LIBRARIES = (
    "libcuda.so",
    "libnvidia-ml.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so",
    "libnvidia-opencl.so",
    "libcudadebugger.so",
)
FEATURE_NODES = {
    "gdrcopy": ("/dev/gdrdrv",),
    "gds": ("/dev/nvidia-fs*",),
    "mofed": ("/dev/infiniband/uverbs*", "/dev/infiniband/rdma_cm"),
}


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _present(root: Path, patterns: Iterable[str]) -> tuple[str, ...]:
    found: list[str] = []
    for pattern in patterns:
        matches = sorted(glob.glob(str(_under(root, pattern))))
        found += ["/" + os.path.relpath(m, root) for m in matches]
    return tuple(found)


def discover(driver_root: Path, dev_root: Path, driver_version: str) -> generate.HostFiles:
    """What exists on this host: control nodes under ``dev_root``, ``<lib>.<driver_version>`` under
    ``driver_root``'s library directories, and gdrcopy/GDS/MOFED nodes under ``dev_root``.

    Paths in the result are as seen from the host root (``/dev/nvidiactl``, ``/usr/lib64/libcuda.so.550.1``);
    the spec maps them back under the configured roots.
    """
    control = tuple(p for p in generate.CONTROL_NODES if _under(dev_root, p).exists())
    libraries: list[str] = []
    symlinks: list[tuple[str, str]] = []
    for directory in LIBRARY_DIRS:
        for lib in LIBRARIES:
            path = f"{directory}/{lib}.{driver_version}"
            if _under(driver_root, path).is_file():
                libraries.append(path)
                # The soname link a program loads (libcuda.so.1 -> libcuda.so.<version>).
                symlinks.append((f"{lib}.{driver_version}", f"{directory}/{lib}.1"))
    return generate.HostFiles(
        control_nodes=control,
        libraries=tuple(libraries),
        symlinks=tuple(symlinks),
        gdrcopy_nodes=_present(dev_root, FEATURE_NODES["gdrcopy"]),
        gds_nodes=_present(dev_root, FEATURE_NODES["gds"]),
        mofed_nodes=_present(dev_root, FEATURE_NODES["mofed"]),
    )
