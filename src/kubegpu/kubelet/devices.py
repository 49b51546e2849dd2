"""The kubelet's device bookkeeping for one resource, rebuilt from each ListAndWatch snapshot.

Owns the three maps the device manager keeps per resource (all devices with
their topology, the healthy set, the unhealthy set), how a snapshot rebuilds
them, what a plugin disconnect does to them, and capacity/allocatable. Pure:
no gRPC, no clocks.

Kubelet rules kept here: every message is a *full* snapshot; a device is
healthy only if its health is exactly ``"Healthy"``; capacity = healthy +
unhealthy, allocatable = healthy (allocations do not reduce it). Where the
kubelet iterates a Go map (random order) we use the plugin's listing order,
so the emulator is reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubegpu.api import constants

#: NUMA id the kubelet files devices without topology under.
NO_TOPOLOGY = -1


@dataclass(frozen=True)
class Device:
    """One device as a plugin listed it.

    ``numa`` is None when the plugin sent no topology message at all, and a
    possibly empty tuple of NUMA node ids when it did; the pod-resources API
    tells the two apart.
    """

    id: str
    health: str
    numa: tuple[int, ...] | None = None

    @property
    def numa_nodes(self) -> tuple[int, ...]:
        return self.numa or ()

    @property
    def has_topology(self) -> bool:
        return bool(self.numa)


@dataclass
class ResourceDevices:
    """``allDevices``, ``healthyDevices`` and ``unhealthyDevices`` of one resource."""

    all: dict[str, Device] = field(default_factory=dict)
    healthy: set[str] = field(default_factory=set)
    unhealthy: set[str] = field(default_factory=set)

    @classmethod
    def from_snapshot(cls, devices: Iterable[Device]) -> ResourceDevices:
        """Rebuild everything from one ListAndWatch message (a full snapshot)."""
        state = cls()
        for device in devices:
            # Like the kubelet: the last entry of a duplicated ID wins in allDevices, but the
            # ID lands in every set any of its entries put it in.
            state.all[device.id] = device
            (state.healthy if device.health == constants.HEALTHY else state.unhealthy).add(device.id)
        return state

    def mark_unhealthy(self) -> None:
        """The plugin disconnected: every healthy device becomes unhealthy; capacity stays."""
        self.unhealthy |= self.healthy
        self.healthy = set()

    @property
    def capacity(self) -> int:
        return len(self.healthy) + len(self.unhealthy)

    @property
    def allocatable(self) -> int:
        return len(self.healthy)

    def ordered(self, ids: Iterable[str]) -> list[str]:
        """``ids`` in the plugin's listing order; IDs the plugin no longer lists go last, sorted."""
        position = {device_id: i for i, device_id in enumerate(self.all)}
        return sorted(set(ids), key=lambda d: (position.get(d, len(position)), d))

    def numa_of(self, device_id: str) -> tuple[int, ...]:
        """The NUMA nodes of a device (empty when unknown or without topology)."""
        device = self.all.get(device_id)
        return device.numa_nodes if device else ()

    def has_topology_alignment(self) -> bool:
        """A resource cares about NUMA alignment if any known device lists a NUMA node."""
        return any(d.has_topology for d in self.all.values())
