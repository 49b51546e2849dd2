"""Finding, loading and starting NVML (``libnvidia-ml.so.1``).

Owns where the library is looked for (the container driver root's library
directories, then the driver root's, then the default loader path, as NVIDIA's
plugin does), handing the loaded file to :mod:`.binding`, ``nvmlInitWithFlags`` and
``nvmlShutdown``, and turning every failure into one
:class:`~kubegpu.gpu.errors.NvmlUnavailable` that carries the NVML code and the
paths tried. Must not read devices (that is :mod:`.discovery`).

The binding keeps one library per process; the first successful load wins and
later sessions reuse it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from kubegpu.gpu import errors
from kubegpu.gpu.nvml import binding, decode

log = logging.getLogger(__name__)

_LOAD_LOCK = threading.Lock()
_loaded_from: str | None = None

#: How the last resort appears in ``searched``.
DEFAULT_LOADER = f"{decode.LIBRARY_NAME} on the default loader path (LD_LIBRARY_PATH, ld.so.cache)"


@dataclass(frozen=True)
class Session:
    """A started NVML: the library file in use and every place looked at to find it."""

    library: str
    searched: tuple[str, ...]


def find(container_driver_root: str, driver_root: str) -> tuple[str | None, tuple[str, ...]]:
    """The first existing candidate file and the candidates looked at up to it (None: none exists)."""
    searched: list[str] = []
    for candidate in decode.library_candidates(container_driver_root, driver_root):
        searched.append(candidate)
        if os.path.exists(candidate):
            return candidate, tuple(searched)
    return None, tuple(searched)


def _mapped_path() -> str | None:
    """Where the dynamic loader found the library, read back from this process's memory map."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and "/libnvidia-ml.so" in fields[5]:
            return fields[5].strip()
    return None


def _load(path: str | None, searched: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    global _loaded_from
    with _LOAD_LOCK:
        if binding.loaded() is not None:
            current = _loaded_from or _mapped_path() or decode.LIBRARY_NAME
            if path is not None and os.path.realpath(path) != os.path.realpath(current):
                log.warning("nvml already loaded", extra={"library": current, "ignored": path})
            return current, searched
        if path is None:
            searched = (*searched, DEFAULT_LOADER)
            try:
                library = ctypes.CDLL(decode.LIBRARY_NAME)
            except OSError:
                raise errors.NvmlUnavailable(
                    decode.not_found(searched), code=decode.ERROR_LIBRARY_NOT_FOUND, searched=searched
                ) from None
            path = _mapped_path() or decode.LIBRARY_NAME
        else:
            try:
                library = ctypes.CDLL(path)
            except OSError as exc:
                raise errors.NvmlUnavailable(
                    f"cannot load {path}: {exc}", code=decode.ERROR_LIBRARY_NOT_FOUND, searched=searched
                ) from None
        binding.load(library)
        _loaded_from = path
        return path, searched


def start(container_driver_root: str, driver_root: str) -> Session:
    """Find and load the library, then initialise NVML.

    Raises :class:`~kubegpu.gpu.errors.NvmlUnavailable`: library not found (naming
    every path tried), not loadable, or NVML init failed (driver not loaded,
    driver/library mismatch, no permission, ...), always with the NVML code.
    """
    path, searched = find(container_driver_root, driver_root)
    library, searched = _load(path, searched)
    try:
        binding.nvmlInitWithFlags(0)
    except binding.NvmlError as exc:
        raise errors.NvmlUnavailable(
            decode.init_failure(exc.code, library, str(exc)), code=exc.code, searched=searched
        ) from None
    log.info("nvml started", extra={"library": library})
    return Session(library=library, searched=searched)


def stop() -> None:
    """Shut NVML down (one ``nvmlShutdown`` per successful :func:`start`); errors are logged, not raised."""
    try:
        binding.nvmlShutdown()
    except binding.NvmlError as exc:
        log.warning("nvml shutdown failed", extra={"error": str(exc)})
