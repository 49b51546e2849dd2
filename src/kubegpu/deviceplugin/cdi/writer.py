"""Writing CDI specs to the spec directory.

Owns the spec file names (``<vendor>-<class>.json``, e.g.
``k8s.device-plugin.nvidia.com-gpu.json``), writing them atomically (with
:mod:`kubegpu.deviceplugin.atomicfile`: a runtime never reads half a spec) and
removal of our specs that are no longer generated (gdrcopy turned off, no IMEX
channel). Must not look at the host (that is :mod:`.hostfiles`) or build specs
(that is :mod:`.generate`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from kubegpu.deviceplugin import atomicfile
from kubegpu.deviceplugin.cdi import generate
from kubegpu.deviceplugin.cdi.schema import Spec

#: Our spec classes: a file of ours whose class is not written this time is removed.
CLASSES = ("gpu", "imex-channel", "gdrcopy", "gds", "mofed")


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
