"""MIG capability device minors: the ``/proc/driver/nvidia-caps/mig-minors`` table and the paths it gives.

A container using a MIG device needs, besides its parent's ``/dev/nvidiaN``,
the capability nodes ``/dev/nvidia-caps/nvidia-cap<minor>`` granting access to
its GPU instance and compute instance. The driver lists their minors in
``mig-minors`` (lines ``config 1``, ``monitor 2``, ``gpu0/gi1/access 12``,
``gpu0/gi1/ci0/access 13``; ``gpuN`` is the GPU's device minor, not its index).

Owns parsing that table, the driver's fixed numbering (used for simulated
machines, which have no ``/proc`` of their own), and the device paths of a MIG
device. :func:`read` is the one function that touches the file system; the rest is pure.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubegpu.deviceplugin.errors import DevicePluginError

#: Relative to the proc root (``/proc``).
MIG_MINORS = "driver/nvidia-caps/mig-minors"
CAPS_DIR = "/dev/nvidia-caps"

_GI = re.compile(r"gpu(\d+)/gi(\d+)/access\s+(\d+)")
_CI = re.compile(r"gpu(\d+)/gi(\d+)/ci(\d+)/access\s+(\d+)")
_SIMPLE = re.compile(r"(config|monitor)\s+(\d+)")

# The driver's layout: 15 GPU instances per GPU, 8 compute instances each, after config and monitor.
_GIS_PER_GPU = 15
_CIS_PER_GI = 8


class MigCapsError(DevicePluginError, ValueError):
    """A MIG device's capability minor is missing from the table."""


@dataclass(frozen=True)
class MigMinors:
    """The parsed ``mig-minors`` table."""

    config: int | None = None
    monitor: int | None = None
    gi: Mapping[tuple[int, int], int] = field(default_factory=dict)
    ci: Mapping[tuple[int, int, int], int] = field(default_factory=dict)

    def gi_access(self, gpu_minor: int, gi: int) -> int:
        try:
            return self.gi[(gpu_minor, gi)]
        except KeyError:
            raise MigCapsError(f"no MIG capability minor for gpu{gpu_minor}/gi{gi}/access") from None

    def ci_access(self, gpu_minor: int, gi: int, ci: int) -> int:
        try:
            return self.ci[(gpu_minor, gi, ci)]
        except KeyError:
            raise MigCapsError(f"no MIG capability minor for gpu{gpu_minor}/gi{gi}/ci{ci}/access") from None


def parse(text: str) -> MigMinors:
    """Parse the table; unknown lines are skipped, as NVIDIA's reader does."""
    config = monitor = None
    gi: dict[tuple[int, int], int] = {}
    ci: dict[tuple[int, int, int], int] = {}
    for line in text.splitlines():
        line = line.strip()
        if m := _CI.fullmatch(line):
            ci[(int(m[1]), int(m[2]), int(m[3]))] = int(m[4])
        elif m := _GI.fullmatch(line):
            gi[(int(m[1]), int(m[2]))] = int(m[3])
        elif m := _SIMPLE.fullmatch(line):
            if m[1] == "config":
                config = int(m[2])
            else:
                monitor = int(m[2])
    return MigMinors(config=config, monitor=monitor, gi=gi, ci=ci)


@functools.cache
def driver_layout(max_gpus: int = 32) -> MigMinors:
    """The numbering the driver uses: config 1, monitor 2, then per GPU minor and GI: the GI, then its CIs.

    Cached: the table is the same every time (and must not be mutated by callers).
    """
    gi: dict[tuple[int, int], int] = {}
    ci: dict[tuple[int, int, int], int] = {}
    minor = 3
    for gpu in range(max_gpus):
        for g in range(_GIS_PER_GPU):
            gi[(gpu, g)] = minor
            minor += 1
            for c in range(_CIS_PER_GI):
                ci[(gpu, g, c)] = minor
                minor += 1
    return MigMinors(config=1, monitor=2, gi=gi, ci=ci)


def render(minors: MigMinors) -> str:
    """The table as the driver writes it (for fixtures and simulated proc roots)."""
    lines = []
    if minors.config is not None:
        lines.append(f"config {minors.config}")
    if minors.monitor is not None:
        lines.append(f"monitor {minors.monitor}")
    cis: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for (gpu, g, c), cminor in sorted(minors.ci.items()):
        cis.setdefault((gpu, g), []).append((c, cminor))
    for (gpu, g), minor in sorted(minors.gi.items()):
        lines.append(f"gpu{gpu}/gi{g}/access {minor}")
        lines.extend(f"gpu{gpu}/gi{g}/ci{c}/access {cminor}" for c, cminor in cis.get((gpu, g), []))
    return "\n".join(lines) + "\n"


def read(proc_root: Path = Path("/proc")) -> MigMinors | None:
    """The table under ``proc_root``; None when the file does not exist (no MIG support on this host)."""
    path = proc_root / MIG_MINORS
    try:
        return parse(path.read_text())
    except FileNotFoundError:
        return None


def cap_path(minor: int) -> str:
    return f"{CAPS_DIR}/nvidia-cap{minor}"


def mig_device_paths(parent_minor: int, gi: int, ci: int, minors: MigMinors) -> tuple[str, str, str]:
    """``/dev/nvidia<parent minor>`` and the GI and CI access capability nodes of one MIG device."""
    return (
        f"/dev/nvidia{parent_minor}",
        cap_path(minors.gi_access(parent_minor, gi)),
        cap_path(minors.ci_access(parent_minor, gi, ci)),
    )
