"""Writing CDI specs to the spec directory, and finding on the host what they must mention.

Owns the spec file names (``<vendor>-<class>.json``, e.g.
``k8s.device-plugin.nvidia.com-gpu.json``), writing them atomically (with
:mod:`kubegpu.deviceplugin.atomicfile`: a runtime never reads half a spec), removal
of our specs that are no longer generated (gdrcopy turned off, no IMEX channel),
and host discovery for :class:`~kubegpu.deviceplugin.cdi.generate.HostFiles` (control
nodes under the dev root, driver libraries under the driver root, feature
device nodes). The I/O half of CDI; building specs is :mod:`kubegpu.deviceplugin.cdi.generate`.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from kubegpu.deviceplugin import atomicfile
from kubegpu.deviceplugin.cdi import generate
from kubegpu.deviceplugin.cdi.schema import Spec
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
#: Our spec classes: a file of ours whose class is not written this time is removed.
CLASSES = ("gpu", "imex-channel", "gdrcopy", "gds", "mofed")
FEATURE_NODES = {
    "gdrcopy": ("/dev/gdrdrv",),
    "gds": ("/dev/nvidia-fs*",),
    "mofed": ("/dev/infiniband/uverbs*", "/dev/infiniband/rdma_cm"),
}


def file_name(kind: str) -> str:
    """``k8s.device-plugin.nvidia.com/gpu`` -> ``k8s.device-plugin.nvidia.com-gpu.json``."""
    return kind.replace("/", "-") + ".json"


def write(spec: Spec, spec_dir: Path) -> Path:
    """Write ``spec`` atomically into ``spec_dir`` (created if missing); returns the file written."""
    target = spec_dir / file_name(spec.kind)
    atomicfile.write(target, spec.to_json())
    return target


def write_all(specs: Sequence[Spec], spec_dir: Path) -> list[Path]:
    """Write every spec, then remove the files of our classes that were not written this time."""
    written = [write(spec, spec_dir) for spec in specs]
    keep = {p.name for p in written}
    for cdi_class in CLASSES:
        stale = spec_dir / file_name(f"{generate.VENDOR}/{cdi_class}")
        if stale.name not in keep:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    return written


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
