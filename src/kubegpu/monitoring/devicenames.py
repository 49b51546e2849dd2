"""``--kubernetes-gpu-id-type device-name``: device IDs that name the device node (``nvidia3``) instead of a UUID.

Some device plugins (GKE's among them) hand out ``nvidiaN`` IDs, with ``/vgpuK`` when a GPU is shared.
Owns translating those into the NVML index that :mod:`kubegpu.monitoring.attribution` resolves, by the
GPU's minor number (``/dev/nvidiaN``); other IDs pass unchanged. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from kubegpu.gpu.model import Machine
from kubegpu.monitoring.attribution import ContainerDevices

_NAME = re.compile(r"^nvidia(\d+)(/.*)?$")


def translate(rows: Iterable[ContainerDevices], machine: Machine) -> list[ContainerDevices]:
    """``nvidiaN[/suffix]`` -> ``<index of the GPU with minor N>[/suffix]``; unknown minors are left as they are."""
    by_minor = {g.minor: g.index for g in machine.gpus}

    def one(device_id: str) -> str:
        match = _NAME.match(device_id)
        if match is None or int(match.group(1)) not in by_minor:
            return device_id
        return f"{by_minor[int(match.group(1))]}{match.group(2) or ''}"

    return [replace(row, device_ids=tuple(one(d) for d in row.device_ids)) for row in rows]
