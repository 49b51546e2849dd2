"""Resources: a name the kubelet schedules (``nvidia.com/gpu``) and the devices behind it.

Owns the :class:`Resource` value and NVIDIA's socket naming (``nvidia-<name part>.sock``).
Which resources a machine has under a config (MIG strategies, sharing) is
:mod:`kubegpu.deviceplugin.rm.resource_map`'s job. Every resource gets its own gRPC
server and socket, so a list of resources is what the supervisor serves.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubegpu.deviceplugin.rm.devices import Device


@dataclass(frozen=True)
class Resource:
    """One extended resource and its devices, in advertising order."""

    name: str
    devices: tuple[Device, ...]
    by_id: dict[str, Device] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if "/" not in self.name:
            raise ValueError(f"resource name {self.name!r} needs a domain, e.g. nvidia.com/gpu")
        ids = [d.id for d in self.devices]
        if len(set(ids)) != len(ids):
            raise ValueError(f"resource {self.name}: device IDs are not unique")
        object.__setattr__(self, "by_id", {d.id: d for d in self.devices})

    @property
    def socket_name(self) -> str:
        """The plugin socket's file name beside kubelet.sock (what ``Register`` sends as endpoint)."""
        return socket_name(self.name)


def socket_name(resource_name: str) -> str:
    """``nvidia.com/gpu`` → ``nvidia-gpu.sock``; ``nvidia.com/mig-1g.10gb`` → ``nvidia-mig-1g.10gb.sock``."""
    return f"nvidia-{resource_name.split('/', 1)[1]}.sock"
