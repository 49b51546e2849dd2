"""Resources: a name the kubelet schedules (``nvidia.com/gpu``) and the devices behind it.

Owns the :class:`Resource` value: its name, devices and sharing (strategy, replicas, MPS request limit).
Which resources a machine has under a config (MIG strategies, sharing) is
:mod:`kubegpu.deviceplugin.rm.resource_map`'s job. Every resource gets its own gRPC
server and socket, so a list of resources is what the supervisor serves.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from kubegpu.deviceplugin import naming
from kubegpu.deviceplugin.rm.devices import Device

SharingStrategy = Literal["none", "time-slicing", "mps"]


@dataclass(frozen=True)
class Resource:
    """One extended resource, its devices in advertising order, and how it is shared.

    ``sharing`` is the active strategy when the resource advertises replicas, else ``none``;
    ``replicas`` the copies per physical device (1 when not shared);
    ``fail_requests_greater_than_one`` NVIDIA's refusal of requests for several replicas.
    """

    name: str
    devices: tuple[Device, ...]
    sharing: SharingStrategy = "none"
    replicas: int = 1
    fail_requests_greater_than_one: bool = False
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
        return naming.socket_name(self.name)

    @cached_property
    def is_shared(self) -> bool:
        return any(d.replica is not None for d in self.devices)

    @cached_property
    def is_milli(self) -> bool:
        """True for ``kubegpu.io/gpu-milli``: its devices are thousandths of GPUs, a request's all from one GPU."""
        return any(d.milli is not None for d in self.devices)

    @cached_property
    def has_mig(self) -> bool:
        return any(d.mig is not None for d in self.devices)

    @cached_property
    def ids(self) -> tuple[str, ...]:
        return tuple(d.id for d in self.devices)

    def physical_ids(self) -> tuple[str, ...]:
        """The distinct physical devices (GPU or MIG UUIDs) behind the resource, in order."""
        return tuple(naming.unique_physical_ids(self.ids))
